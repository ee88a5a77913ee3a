//! The writer task: takes what is queued in batches, encodes each record to a [`Line`], hands
//! the batch to the sink, and at shutdown drains the queue under a deadline.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use records::{Record, to_line};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout_at};

use crate::metrics::{DropReason, Metrics};
use crate::sink::{Line, Sink, SinkError};

/// Most records taken from the queue per batch: enough to write in large pieces under load,
/// few enough that one batch's encoding does not hold the task for long.
pub const BATCH: usize = 256;

/// How long the writer waits for more records after the first of a batch before writing it.
/// Under a trickle of records (a few thousand auctions a second) every batch would otherwise
/// be one or two records, each costing a task wake-up and a write on the blocking pool; with
/// it, one write carries tens of records, and a record reaches the sink this much later at
/// most. Measured: records to files cost 18-23% more CPU per auction without it (BENCHMARKS.md).
pub const LINGER: Duration = Duration::from_millis(20);

/// How often a waiting writer lets the sink do timed work ([`Sink::tick`]).
pub const TICK: Duration = Duration::from_secs(1);

/// Least time between two warnings that the sink is failing.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// When the writer is dropped without [`crate::Writer::shutdown`], how long it still drains.
const DROPPED_GRACE: Duration = Duration::from_secs(10);

/// Records as lines, each stamped with its id (`records::identity`), the lines' buffers reused
/// from batch to batch.
#[derive(Debug)]
pub struct Encoder {
    /// `{node}-{random hex}`: made at start, so ids never repeat across runs.
    instance: String,
    seq: u64,
    lines: Vec<Line>,
}

impl Encoder {
    pub fn new(instance: String) -> Encoder {
        Encoder {
            instance,
            seq: 0,
            lines: Vec::new(),
        }
    }

    /// Encodes `records` in order; returns the lines and how many records could not be
    /// encoded (left out, never expected).
    pub async fn encode(&mut self, records: &[Record]) -> (&[Line], u64) {
        let mut n = 0;
        let mut failed = 0;
        for record in records {
            // Encoding a batch is CPU work on a runtime worker: let the request path in.
            tokio::task::consume_budget().await;
            if self.lines.len() == n {
                self.lines.push(Line {
                    id: String::new(),
                    bytes: Vec::new(),
                });
            }
            let Some(line) = self.lines.get_mut(n) else {
                break;
            };
            line.bytes.clear();
            if let Err(e) = to_line(record, &mut line.bytes) {
                failed += 1;
                tracing::error!(error = %e, "records: a record could not be encoded and is dropped");
                continue;
            }
            line.id.clear();
            let _ = write!(line.id, "{}-{}", self.instance, self.seq);
            // The id goes in the line too (`rid`, last): a reader counts a record it meets
            // twice (a file read twice, a copy, a replayed publish) once.
            records::identity::stamp(&mut line.bytes, &line.id);
            self.seq += 1;
            n += 1;
        }
        (self.lines.get(..n).unwrap_or_default(), failed)
    }
}

/// Whether the sink is failing, so that an episode is logged once, not per batch.
#[derive(Debug, Default)]
struct Health {
    failing: bool,
    dropped: u64,
    last_warning: Option<Instant>,
}

impl Health {
    fn failed(&mut self, e: &SinkError, n: u64) {
        self.dropped += n;
        if self.failing {
            return;
        }
        self.failing = true;
        let now = Instant::now();
        if self.last_warning.is_none_or(|at| now >= at + WARN_EVERY) {
            self.last_warning = Some(now);
            tracing::warn!(error = %e, "records: the sink failed; records are dropped (counted) until it recovers");
        }
    }

    fn succeeded(&mut self) {
        if self.failing {
            self.failing = false;
            tracing::info!(dropped = self.dropped, "records: the sink recovered");
            self.dropped = 0;
        }
    }
}

/// The writer task's state.
struct Task<S> {
    sink: S,
    encoder: Encoder,
    metrics: Arc<Metrics>,
    health: Health,
}

impl<S: Sink> Task<S> {
    /// Encodes and writes one batch; returns how many of its records were not written.
    async fn write(&mut self, batch: &[Record]) -> u64 {
        let (lines, failed) = self.encoder.encode(batch).await;
        self.metrics.dropped.add(DropReason::Encode, failed);
        if lines.is_empty() {
            return failed;
        }
        let n = lines.len() as u64;
        let bytes: usize = lines.iter().map(|l| l.bytes.len()).sum();
        match self.sink.write(lines).await {
            Ok(()) => {
                self.metrics.written.add(n);
                self.metrics.bytes.add(bytes as u64);
                self.health.succeeded();
                failed
            }
            Err(e) => {
                self.metrics.dropped.add(DropReason::SinkError, n);
                self.health.failed(&e, n);
                failed + n
            }
        }
    }

    fn sink_result(&mut self, what: &str, result: Result<(), SinkError>) {
        if let Err(e) = result {
            tracing::warn!(error = %e, "records: {what} failed");
        }
    }
}

/// The shutdown signal: `Some(deadline)` once it came. A sink that stalls (a slow disk) must
/// not hold shutdown past its deadline, so every sink call is raced against it.
struct Stop {
    signal: oneshot::Receiver<Instant>,
    deadline: Option<Instant>,
}

impl Stop {
    /// Waits for the signal (once; after it, never ready again).
    async fn came(&mut self) -> Instant {
        match self.deadline {
            Some(_) => std::future::pending().await,
            None => {
                // The writer dropped without a shutdown: drain for a while all the same.
                let d = (&mut self.signal)
                    .await
                    .unwrap_or_else(|_| Instant::now() + DROPPED_GRACE);
                self.deadline = Some(d);
                d
            }
        }
    }

    /// Runs `work`; once the shutdown signal has come, only until its deadline (`None`: the
    /// deadline passed first).
    async fn bound<F: Future>(&mut self, work: F) -> Option<F::Output> {
        let mut work = std::pin::pin!(work);
        if self.deadline.is_none() {
            tokio::select! {
                biased;
                out = &mut work => return Some(out),
                _ = self.came() => {}
            }
        }
        let deadline = self.deadline?;
        timeout_at(deadline, work).await.ok()
    }
}

/// Runs the writer until `stop` brings the shutdown deadline; returns how many records it
/// could not write at shutdown.
pub async fn run<S: Sink>(
    sink: S,
    mut queue: mpsc::Receiver<Record>,
    stop: oneshot::Receiver<Instant>,
    instance: String,
    metrics: Arc<Metrics>,
) -> u64 {
    let mut task = Task {
        sink,
        encoder: Encoder::new(instance),
        metrics,
        health: Health::default(),
    };
    let mut stop = Stop {
        signal: stop,
        deadline: None,
    };
    let mut lost = 0;
    let mut batch = Vec::with_capacity(BATCH);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let deadline = loop {
        if let Some(deadline) = stop.deadline {
            break deadline;
        }
        tokio::select! {
            biased;
            deadline = stop.came() => break deadline,
            _ = tick.tick() => {
                if let Some(r) = stop.bound(task.sink.tick()).await {
                    task.sink_result("the sink's timed work", r);
                }
            }
            n = queue.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    // Every journal handle is gone: nothing more can come.
                    break Instant::now() + DROPPED_GRACE;
                }
                let n = linger(&mut queue, &mut batch).await;
                if stop.bound(task.write(&batch)).await.is_none() {
                    // Shutdown came and the sink did not take the batch by its deadline.
                    task.metrics.dropped.add(DropReason::Shutdown, n as u64);
                    lost += n as u64;
                }
                batch.clear();
                if queue.is_empty()
                    && let Some(r) = stop.bound(task.sink.flush()).await
                {
                    task.sink_result("flushing records", r);
                }
            }
        }
    };
    lost + drain(task, queue, batch, deadline).await
}

/// Adds to `batch` what comes within [`LINGER`], up to [`BATCH`]; returns its size.
async fn linger(queue: &mut mpsc::Receiver<Record>, batch: &mut Vec<Record>) -> usize {
    let until = Instant::now() + LINGER;
    while batch.len() < BATCH {
        let room = BATCH - batch.len();
        match timeout_at(until, queue.recv_many(batch, room)).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    batch.len()
}

/// Closes the queue and writes what it holds until `deadline`; then closes the sink. Returns
/// the records not written.
async fn drain<S: Sink>(
    mut task: Task<S>,
    mut queue: mpsc::Receiver<Record>,
    mut batch: Vec<Record>,
    deadline: Instant,
) -> u64 {
    queue.close();
    let mut lost = 0;
    loop {
        batch.clear();
        let n = match timeout_at(deadline, queue.recv_many(&mut batch, BATCH)).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n as u64,
        };
        match timeout_at(deadline, task.write(&batch)).await {
            Ok(not_written) => lost += not_written,
            Err(_) => {
                // The sink did not take the batch in time.
                task.metrics.dropped.add(DropReason::Shutdown, n);
                lost += n;
                break;
            }
        }
    }
    let mut left = 0;
    while queue.try_recv().is_ok() {
        left += 1;
    }
    task.metrics.dropped.add(DropReason::Shutdown, left);
    lost += left;
    match timeout_at(deadline, task.sink.close()).await {
        Ok(r) => task.sink_result("closing the sink", r),
        Err(_) => tracing::warn!("records: the sink did not close by the shutdown deadline"),
    }
    if lost > 0 {
        tracing::warn!(lost, "records: not written at shutdown");
    }
    lost
}
