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
//! * `connections` workers each own one keep-alive HTTP/1.1 connection (hyper, TCP_NODELAY)
//!   and take jobs from the queue one at a time. A job still waiting at
//!   `scheduled + timeout` is dropped; a request not answered by then is a timeout, and its
//!   late answer is read and discarded for up to one more timeout (at least 1 s) so that the connection
//!   survives (reconnecting per timeout would collapse the generator under overload).
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
mod corpus;
mod error;
pub mod generate;
mod html;
mod progress;
mod queue;
mod report;
mod schedule;
mod scheduler;
mod spec;
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
    let addr = target.resolve().await?;
    let plan = spec.plan();

    // Room for every request that can be waiting at once: a timeout's worth at the peak rate.
    let peak = spec.arrivals.peak_rate().unwrap_or(0.0);
    let backlog = (peak * spec.timeout.as_secs_f64()).ceil() as usize;
    let queue = Arc::new(JobQueue::new(
        backlog.saturating_add(spec.connections).min(MAX_QUEUE),
    ));
    let (finished_tx, finished) = watch::channel(false);
    let shared = Arc::new(Shared {
        target,
        addr,
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
            workers.spawn(worker::worker(shared, events, ready));
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
            let handle = tokio::spawn(scheduler::drive(
                Segments::new(segments),
                clock,
                Arc::clone(&queue),
                events_tx.clone(),
                Arc::clone(&progress),
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

    let schedule_lag = match scheduler {
        Some(mut scheduler) => (&mut scheduler.0)
            .await
            .map_err(|e| LoadError::Internal(format!("scheduler: {e}")))?
            .map_err(|e| LoadError::Internal(format!("scheduler timer: {e}")))?,
        None => new_histogram(),
    };
    while let Some(res) = workers.join_next().await {
        res.map_err(|e| LoadError::Internal(format!("connection worker: {e}")))?;
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

/// Aborts the task when dropped: stops the scheduler if the run future is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
