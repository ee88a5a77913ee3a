//! Open-loop HTTP load generator for Gavel, with HdrHistogram percentiles and a seeded
//! generator of realistic OpenRTB 2.6 bid requests.
//!
//! # Open loop, no coordinated omission
//!
//! Requests are due on a fixed schedule, request `i` at `start + i / rate` (absolute instants,
//! never accumulated sleeps), whatever the target does. Latency is measured from that
//! *scheduled* instant to the end of the answer. When the target stalls, requests keep coming
//! due, wait for a free connection, and their waiting time is part of their latency: a stall
//! shows in the percentiles instead of being skipped by a client that politely waits (the
//! "coordinated omission" of closed-loop tools). [`Report::service_time`] keeps the naive
//! send-to-answer figure for comparison.
//!
//! # Engine
//!
//! * A scheduler on a dedicated blocking thread sleeps (with the OS timer, tens of µs
//!   precise; tokio's timer wheel has a 1 ms tick that would add up to 1 ms to every
//!   measurement) until each due instant and pushes a job into a bounded queue; it never
//!   blocks on the workers. A full queue drops the job (counted in `status.dropped`).
//! * `connections` workers each own one keep-alive HTTP/1.1 connection (hyper, TCP_NODELAY)
//!   and take jobs from the queue one at a time. A job still waiting at
//!   `scheduled + timeout` is dropped; a request not answered by then is a timeout and its
//!   connection is closed and reopened.
//! * One collector task receives one event per request and owns every histogram and counter,
//!   including the per-second timeline.
//! * After the schedule ends, in-flight requests get until their own deadline; the run is
//!   over by `warmup + duration + timeout` plus a little.
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

mod collect;
mod corpus;
mod error;
pub mod generate;
mod queue;
mod report;
mod schedule;
mod spec;
mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

pub use corpus::Corpus;
pub use error::LoadError;
pub use report::{
    HIST_HIGH_US, HIST_LOW_US, HIST_SIGFIG, Report, Second, StatusCounts, new_histogram,
};
pub use schedule::{ConstantRate, Schedule};
pub use spec::{LoadSpec, MAX_CONNECTIONS, MAX_DURATION, MAX_RATE, MAX_TIMEOUT};

use collect::{Collector, Event, Sample};
use queue::{Job, JobQueue};
use report::Outcome;
use spec::Target;
use worker::Shared;

/// Most jobs that may wait for a free connection (about 24 MB).
const MAX_QUEUE: usize = 1 << 20;

/// Runs one open-loop load test on the caller's tokio runtime (any flavour) and reports on
/// the measured window.
///
/// Takes about `spec.warmup + spec.duration`, plus up to `spec.timeout` for the last answers,
/// plus the time to open the connections (bounded by `spec.timeout`). Dropping the future
/// stops the run.
pub async fn run(spec: &LoadSpec, corpus: Arc<Corpus>) -> Result<Report, LoadError> {
    spec.validate()?;
    let schedule = ConstantRate::new(spec.rate, spec.warmup + spec.duration);
    run_schedule(spec, Box::new(schedule), corpus).await
}

/// Sets the flag when dropped: stops the scheduler thread if the run future is dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The engine behind [`run`], for any [`Schedule`]. The measured window is
/// `[spec.warmup, spec.warmup + spec.duration)` of the schedule.
async fn run_schedule(
    spec: &LoadSpec,
    schedule: Box<dyn Schedule>,
    corpus: Arc<Corpus>,
) -> Result<Report, LoadError> {
    if corpus.is_empty() {
        return Err(LoadError::EmptyCorpus {
            what: "the corpus given to the run has no request".to_owned(),
        });
    }
    let target = Target::parse(&spec.url)?;
    let addr = target.resolve().await?;

    let backlog = (spec.rate * spec.timeout.as_secs_f64()).ceil() as usize;
    let queue = Arc::new(JobQueue::new(
        backlog.saturating_add(spec.connections).min(MAX_QUEUE),
    ));
    let shared = Arc::new(Shared {
        target,
        addr,
        corpus,
        queue: Arc::clone(&queue),
        timeout: spec.timeout,
    });
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let _cancel_guard = CancelOnDrop(Arc::clone(&cancel));

    // Workers open their connections first; the clock starts when all have tried.
    let mut workers = JoinSet::new();
    let (ready_tx, mut ready_rx) = mpsc::channel(spec.connections);
    for _ in 0..spec.connections {
        workers.spawn(worker::worker(
            Arc::clone(&shared),
            events_tx.clone(),
            ready_tx.clone(),
        ));
    }
    drop(ready_tx);
    while ready_rx.recv().await.is_some() {}

    let start = Instant::now();
    let measure_start = start + spec.warmup;
    let scheduler = {
        let queue = Arc::clone(&queue);
        let events = events_tx.clone();
        let cancel = Arc::clone(&cancel);
        let warmup = spec.warmup;
        tokio::task::spawn_blocking(move || {
            drive_schedule(schedule, start, warmup, &queue, &events, &cancel);
        })
    };
    drop(events_tx);

    let collected = Collector::new(spec.timeout).run(events_rx).await;

    scheduler
        .await
        .map_err(|e| LoadError::Internal(format!("scheduler: {e}")))?;
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
    Ok(Report {
        sent: collected.sent,
        completed,
        status: collected.status,
        elapsed,
        rate_achieved: completed as f64 / spec.duration.as_secs_f64(),
        rate_offered: spec.rate,
        duration: spec.duration,
        timeout: spec.timeout,
        latency: collected.latency,
        service_time: collected.service_time,
        timeline: collected.timeline,
    })
}

/// The scheduler loop, on its own thread: wait for each due instant, enqueue, account for the
/// seconds of the measured window.
#[allow(
    clippy::disallowed_methods,
    reason = "a dedicated blocking thread, not a runtime worker: std's sleep is ~50 µs \
              precise where tokio's timer has a 1 ms tick that would bias every latency"
)]
fn drive_schedule(
    mut schedule: Box<dyn Schedule>,
    start: Instant,
    warmup: Duration,
    queue: &JobQueue,
    events: &mpsc::UnboundedSender<Event>,
    cancel: &AtomicBool,
) {
    const MAX_NAP: Duration = Duration::from_millis(50);
    let measured = schedule.length().saturating_sub(warmup);
    let seconds = (measured.as_secs_f64().ceil() as u32).max(1);
    let mut second = 0u32;
    let mut in_second = 0u64;
    let mut seq = 0u64;
    'schedule: while let Some(offset) = schedule.next_offset() {
        let due = start + offset;
        loop {
            if cancel.load(Ordering::Relaxed) {
                break 'schedule;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(MAX_NAP));
        }
        let slot = offset
            .checked_sub(warmup)
            .map(|o| (o.as_secs() as u32).min(seconds - 1));
        if let Some(s) = slot {
            while second < s {
                let _ = events.send(Event::Scheduled {
                    second,
                    count: in_second,
                });
                second += 1;
                in_second = 0;
            }
            in_second += 1;
        }
        let job = Job {
            seq,
            scheduled: due,
            slot,
        };
        seq += 1;
        if let Err(job) = queue.push(job) {
            let sample = Sample {
                slot: job.slot,
                scheduled: job.scheduled,
                ended: Instant::now(),
                outcome: Outcome::Dropped,
                service: None,
            };
            let _ = events.send(Event::Done(sample));
        }
    }
    if !cancel.load(Ordering::Relaxed) {
        while second < seconds {
            let _ = events.send(Event::Scheduled {
                second,
                count: in_second,
            });
            second += 1;
            in_second = 0;
        }
    }
    queue.close();
}
