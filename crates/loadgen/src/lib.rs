//! Open-loop HTTP load generator for Gavel, with HdrHistogram percentiles and a seeded
//! generator of realistic OpenRTB 2.6 bid requests.
//!
//! # Open loop, no coordinated omission
//!
//! Requests are due on a fixed schedule ([`Arrivals`]: a constant rate, rate steps or a
//! ramp), request `i` at an instant computed from `i` alone (never accumulated sleeps),
//! whatever the target does. Latency is measured from that
//! *scheduled* instant to the end of the answer. When the target stalls, requests keep coming
//! due, wait for a free connection, and their waiting time is part of their latency: a stall
//! shows in the percentiles instead of being skipped by a client that politely waits (the
//! "coordinated omission" of closed-loop tools). [`Report::service_time`] keeps the naive
//! send-to-answer figure for comparison, and [`Arrivals::Closed`] runs the closed loop itself,
//! to compare with wrk.
//!
//! # Engine
//!
//! * A scheduler task waits for each due instant on a `timerfd` registered with the runtime
//!   (tens of µs precise, on the runtime's own thread; tokio's timer wheel has a 1 ms tick
//!   that would add up to 1 ms to every measurement) and pushes a job into a bounded queue;
//!   it never blocks on the workers. A full queue drops the job (counted in
//!   `status.dropped`). How late it ran is [`Report::schedule_lag`].
//! * Workers each own one keep-alive HTTP/1.1 connection (hyper, TCP_NODELAY) and take jobs
//!   from the queue one at a time. `connections` of them open before the clock starts; in open
//!   loop, a job that comes due with every connection busy opens one more, up to
//!   `max_connections`, while the generator is on schedule, the pool is below twice what
//!   rate × the p90 of service time says the answers need, and each doubling beyond the first
//!   raised the share answered (`growth.rs`: more connections only slow a saturated target).
//!   A job is never sent after its deadline: its body's `tmax` (an auction nobody waits for
//!   any more) or the timeout, after its scheduled instant; it is dropped unsent instead, so a backlog of dead requests drains at once and the run recovers
//!   as soon as connections free up. A request not answered by `scheduled + timeout` is a
//!   timeout, and its late answer is read and discarded for up to one more timeout (at least
//!   1 s) so that the connection survives (reconnecting per timeout would collapse the
//!   generator under overload).
//! * The report says when the generator itself limited the run ([`Report::limits`]): too
//!   few connections (requests starved at the cap), or too little CPU (schedule lag).
//! * One collector task receives one event per request and owns every histogram and counter,
//!   including the per-second timeline.
//! * After the schedule ends, in-flight requests get until their own deadline; the run is
//!   over by `warmup + duration + timeout` plus a little (plus up to `max(timeout, 1 s)` while
//!   late answers drain).
//! * In closed loop there is no scheduler: each worker sends its next request when the
//!   previous one ends, until the window closes.
//! * On one core, run it on a current-thread runtime (as `gavel --threads 1` does): every
//!   wake-up then stays on one thread. [`capacity`] searches for the highest sustainable rate.
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), loadgen::LoadError> {
//! use std::{sync::Arc, time::Duration};
//!
//! let url = "http://127.0.0.1:8080/openrtb2/auction";
//! let spec = loadgen::LoadSpec::new(url, 5000.0, Duration::from_secs(10));
//! let corpus = Arc::new(loadgen::Corpus::generated(1, 1000, 120));
//! let report = loadgen::run(&spec, corpus).await?;
//! print!("{}", report.render_text());
//! println!("p99 {:.2} ms", report.percentile_ms(99.0));
//! # Ok(())
//! # }
//! ```

pub mod capacity;
mod collect;
mod consent;
mod corpus;
mod error;
pub mod gate;
pub mod generate;
mod growth;
mod html;
mod http_options;
mod limits;
mod pool;
mod progress;
mod queue;
mod report;
mod schedule;
mod scheduler;
mod service_time;
mod spec;
mod stream;
mod timer;
mod worker;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

pub use corpus::Corpus;
pub use error::LoadError;
pub use html::render_html;
pub use http_options::{HttpMethod, HttpOptions, MAX_HEADER_LEN, MAX_HEADERS, parse_header};
pub use limits::{Limit, LimitKind};
pub use progress::{Progress, ProgressSnapshot};
pub use report::{
    CheckCounts, HIST_HIGH_US, HIST_LOW_US, HIST_SIGFIG, Phase, Report, Second, StatusCounts,
    new_histogram,
};
pub use schedule::{Segment, Segments};
pub use spec::{
    Arrivals, LoadSpec, MAX_CONNECTIONS, MAX_DURATION, MAX_RATE, MAX_STEPS, MAX_TIMEOUT,
    ResponseCheck,
};

use collect::{Collector, Counting};
use pool::Pool;
use queue::JobQueue;
use scheduler::Clock;
use spec::{PhasePlan, Target};
use worker::{ClosedWindow, Shared};

/// Most jobs that may wait for a free connection (about 24 MB).
const MAX_QUEUE: usize = 1 << 20;

/// Runs one load test on the caller's tokio runtime (any flavour) and reports on the
/// measured window.
///
/// Takes about `spec.warmup + spec.duration`, plus up to `spec.timeout` for the last answers,
/// plus the time to open the connections (bounded by `spec.timeout`). Dropping the future
/// stops the run.
pub async fn run(spec: &LoadSpec, corpus: Arc<Corpus>) -> Result<Report, LoadError> {
    run_with_progress(spec, corpus, Progress::new()).await
}

/// [`run`], updating `progress` as it goes (for a live display).
pub async fn run_with_progress(
    spec: &LoadSpec,
    corpus: Arc<Corpus>,
    progress: Arc<Progress>,
) -> Result<Report, LoadError> {
    spec.validate()?;
    if corpus.is_empty() {
        return Err(LoadError::EmptyCorpus {
            what: "the corpus given to the run has no request".to_owned(),
        });
    }
    let target = Target::parse(&spec.url)?;
    let tls = if target.tls {
        Some(stream::TlsTarget::new(
            &target.host,
            spec.http.ca_file.as_deref(),
        )?)
    } else {
        None
    };
    let headers = spec
        .http
        .prepared_headers()
        .map_err(|reason| LoadError::InvalidSpec {
            field: "headers",
            reason,
        })?;
    let addr = target.resolve().await?;
    let plan = spec.plan();
    let max_connections = match plan {
        Some(_) => spec.max_connections_for(fd_budget()),
        None => spec.connections,
    };

    // Room for every request that can be waiting at once: a timeout's worth at the peak rate.
    let peak = spec.arrivals.peak_rate().unwrap_or(0.0);
    let backlog = (peak * spec.timeout.as_secs_f64()).ceil() as usize;
    let queue = Arc::new(JobQueue::new(
        backlog.saturating_add(max_connections).min(MAX_QUEUE),
    ));
    let (finished_tx, finished) = watch::channel(false);
    let shared = Arc::new(Shared {
        target,
        addr,
        tls,
        method: spec.http.method.to_http(),
        headers,
        corpus,
        queue: Arc::clone(&queue),
        timeout: spec.timeout,
        check: spec.check,
        authorization: spec
            .authorization
            .as_deref()
            .and_then(|a| http::HeaderValue::from_str(a).ok()),
        progress: Arc::clone(&progress),
        finished,
        opened: AtomicU64::new(0),
        service: service_time::ServiceTime::default(),
    });
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (window_tx, window_rx) = watch::channel(None);
    let seq = Arc::new(AtomicU64::new(0));

    // Workers open their connections first; the clock starts when all have tried.
    let mut workers = JoinSet::new();
    let (ready_tx, mut ready_rx) = mpsc::channel(spec.connections);
    for _ in 0..spec.connections {
        let (shared, events, ready) = (Arc::clone(&shared), events_tx.clone(), ready_tx.clone());
        if plan.is_some() {
            workers.spawn(worker::worker(shared, events, Some(ready)));
        } else {
            let (window, seq) = (window_rx.clone(), Arc::clone(&seq));
            workers.spawn(worker::closed_worker(shared, events, ready, window, seq));
        }
    }
    drop(ready_tx);
    while ready_rx.recv().await.is_some() {}

    let start = Instant::now();
    let measure_start = start + spec.warmup;
    let seconds = (spec.duration.as_secs_f64().ceil() as u32).max(1);
    let (scheduler, counting, phases) = match plan {
        Some((segments, phases)) => {
            let clock = Clock {
                start,
                warmup: spec.warmup,
                seconds,
            };
            let pool = Pool::new(
                Arc::clone(&shared),
                events_tx.clone(),
                spec.connections,
                max_connections,
                peak,
                start,
            );
            let handle = tokio::spawn(scheduler::drive(
                Segments::new(segments),
                clock,
                Arc::clone(&shared),
                pool,
                events_tx.clone(),
            ));
            (Some(AbortOnDrop(handle)), Counting::Scheduled, phases)
        }
        None => {
            queue.close();
            let _ = window_tx.send(Some(ClosedWindow {
                start,
                measure_start,
                end: measure_start + spec.duration,
                seconds,
            }));
            (None, Counting::Ended, Vec::<PhasePlan>::new())
        }
    };
    drop(events_tx);
    drop(window_tx);

    let collector = Collector::new(
        spec.timeout,
        counting,
        measure_start,
        &phases,
        Arc::clone(&progress),
    );
    let collected = collector.run(events_rx).await;
    // Every request has ended: the workers may close their connections now.
    let _ = finished_tx.send(true);

    let (schedule_lag, pool) = match scheduler {
        Some(mut scheduler) => (&mut scheduler.0)
            .await
            .map_err(|e| LoadError::Internal(format!("scheduler: {e}")))?
            .map_err(|e| LoadError::Internal(format!("scheduler timer: {e}")))?,
        None => (
            new_histogram(),
            pool::PoolEnd {
                grown: Vec::new(),
                peak: spec.connections,
                starved: 0,
                starved_late: 0,
            },
        ),
    };
    let worker_failed = |e| LoadError::Internal(format!("connection worker: {e}"));
    while let Some(res) = workers.join_next().await {
        res.map_err(worker_failed)?;
    }
    for grown in pool.grown {
        grown.await.map_err(worker_failed)?;
    }
    if collected.ended != collected.sent {
        return Err(LoadError::Internal(format!(
            "{} requests scheduled but {} accounted for",
            collected.sent, collected.ended
        )));
    }

    let completed = collected.status.answered();
    let elapsed = collected.last_end.map_or(spec.duration, |t| {
        t.saturating_duration_since(measure_start)
    });
    let secs = spec.duration.as_secs_f64();
    Ok(Report {
        arrivals: spec.arrivals,
        connections: spec.connections,
        max_connections,
        peak_connections: pool.peak,
        connections_opened: shared.opened.load(std::sync::atomic::Ordering::Relaxed),
        starved: pool.starved,
        starved_late: pool.starved_late,
        sent: collected.sent,
        completed,
        status: collected.status,
        elapsed,
        rate_achieved: completed as f64 / secs,
        rate_offered: (counting == Counting::Scheduled).then(|| collected.sent as f64 / secs),
        duration: spec.duration,
        timeout: spec.timeout,
        latency: collected.latency,
        service_time: collected.service_time,
        timeline: collected.timeline,
        phases: collected.phases,
        schedule_lag,
        check: (spec.check != ResponseCheck::None).then_some(collected.check),
    })
}

/// How many connections this process can give a run: half of what its open-file limit leaves
/// after 256 for everything else (the other half is for a server under test in the same
/// process, as in `gavel demo`). 512 where the limit cannot be read (not Linux).
fn fd_budget() -> usize {
    #[cfg(target_os = "linux")]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        match limit.current {
            Some(soft) => usize::try_from(soft.saturating_sub(256) / 2)
                .unwrap_or(MAX_CONNECTIONS)
                .max(1),
            // Unlimited.
            None => MAX_CONNECTIONS,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        512
    }
}

/// Raises this process's open-file limit to its hard limit, as Go's runtime does, so that a
/// run (or a server) can hold thousands of connections without the operator's `ulimit -n`;
/// returns the limit now in force (`None` where it cannot be read). Call it once at start.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.current < limit.maximum {
            limit.current = limit.maximum;
            let _ = setrlimit(Resource::Nofile, limit);
        }
        getrlimit(Resource::Nofile).current
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Aborts the task when dropped: stops the scheduler if the run future is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
