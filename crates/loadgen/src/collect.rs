//! The collector: the only owner of histograms and counters.
//!
//! Workers and the scheduler send one [`Event::Done`] per request over an unbounded channel;
//! the collector records it. Keeping histograms here (instead of one per connection) keeps
//! memory flat at 10 000 connections, needs no lock, and lets the per-second timeline close a
//! second as soon as all of its requests have ended.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::progress::Progress;
use crate::report::{
    CheckCounts, HIST_HIGH_US, HIST_LOW_US, Outcome, Phase, Second, StatusCounts, new_histogram,
};
use crate::spec::PhasePlan;

/// How often the live p99 is recomputed (it walks the histogram).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Significant figures of the per-second histograms (20 KB each instead of 140 KB).
const SECOND_SIGFIG: u8 = 2;

#[derive(Debug)]
pub(crate) enum Event {
    /// A request ended.
    Done(Sample),
    /// The scheduler has issued every request of measured second `second`: `count` of them.
    Scheduled { second: u32, count: u64 },
}

#[derive(Debug)]
pub(crate) struct Sample {
    /// Measured second the request was scheduled in; `None` for warm-up requests.
    pub slot: Option<u32>,
    pub scheduled: Instant,
    pub ended: Instant,
    pub outcome: Outcome,
    /// Service time (from hand-over to the connection), answered requests only.
    pub service: Option<Duration>,
    /// Result of the response check, for answers that were checked.
    pub check: Option<Result<(), String>>,
}

/// Where the count of sent requests comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counting {
    /// From the scheduler's [`Event::Scheduled`] (open loop): a second closes when all of its
    /// scheduled requests have ended.
    Scheduled,
    /// One per ended request (closed loop, where nothing is scheduled ahead); seconds close at
    /// the end of the run.
    Ended,
}

#[derive(Debug)]
struct Slot {
    expected: Option<u64>,
    ended: u64,
    completed: u64,
    errors: u64,
    hist: Histogram<u64>,
}

/// What the collector has gathered once every sender is gone.
#[derive(Debug)]
pub(crate) struct Collected {
    pub sent: u64,
    pub status: StatusCounts,
    pub latency: Histogram<u64>,
    pub service_time: Histogram<u64>,
    pub timeline: Vec<Second>,
    pub last_end: Option<Instant>,
    /// Requests whose end was recorded (must equal `sent`).
    pub ended: u64,
    pub phases: Vec<Phase>,
    pub check: CheckCounts,
}

#[derive(Debug)]
pub(crate) struct Collector {
    counting: Counting,
    measure_start: Instant,
    progress: Arc<Progress>,
    next_progress: Instant,
    phases: Vec<Phase>,
    check: CheckCounts,
    timeout_us: u64,
    sent: u64,
    ended: u64,
    status: StatusCounts,
    latency: Histogram<u64>,
    service_time: Histogram<u64>,
    open: BTreeMap<u32, Slot>,
    closed: BTreeMap<u32, Second>,
    spare: Vec<Histogram<u64>>,
    last_end: Option<Instant>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Collector {
    pub fn new(
        timeout: Duration,
        counting: Counting,
        measure_start: Instant,
        phases: &[PhasePlan],
        progress: Arc<Progress>,
    ) -> Collector {
        Collector {
            counting,
            measure_start,
            progress,
            next_progress: Instant::now(),
            phases: phases
                .iter()
                .map(|p| Phase {
                    rate_offered: p.rate,
                    start: p.start,
                    length: p.length,
                    sent: 0,
                    status: StatusCounts::default(),
                    latency: new_histogram(),
                })
                .collect(),
            check: CheckCounts::default(),
            timeout_us: micros(timeout),
            sent: 0,
            ended: 0,
            status: StatusCounts::default(),
            latency: new_histogram(),
            service_time: new_histogram(),
            open: BTreeMap::new(),
            closed: BTreeMap::new(),
            spare: Vec::new(),
            last_end: None,
        }
    }

    /// Consumes events until every sender is dropped.
    pub async fn run(mut self, mut rx: UnboundedReceiver<Event>) -> Collected {
        let mut buf = Vec::with_capacity(512);
        while rx.recv_many(&mut buf, 512).await > 0 {
            let (mut ended, mut errors) = (0, 0);
            for ev in buf.drain(..) {
                if let Event::Done(s) = &ev {
                    ended += 1;
                    let measured = s.slot.is_some();
                    let ok = matches!(s.outcome, Outcome::Answered(200..=299))
                        && !matches!(s.check, Some(Err(_)));
                    errors += u64::from(measured && !ok);
                }
                self.handle(ev);
            }
            self.progress.add_ended(ended, errors);
            let now = Instant::now();
            if now >= self.next_progress && !self.latency.is_empty() {
                self.next_progress = now + PROGRESS_EVERY;
                self.progress
                    .set_p99_us(self.latency.value_at_percentile(99.0));
            }
        }
        self.finish()
    }

    fn slot(&mut self, second: u32) -> &mut Slot {
        let spare = &mut self.spare;
        self.open.entry(second).or_insert_with(|| Slot {
            expected: None,
            ended: 0,
            completed: 0,
            errors: 0,
            hist: spare.pop().unwrap_or_else(|| {
                Histogram::new_with_bounds(HIST_LOW_US, HIST_HIGH_US, SECOND_SIGFIG)
                    .expect("constant histogram bounds are valid")
            }),
        })
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Scheduled { second, count } => {
                self.sent += count;
                self.slot(second).expected = Some(count);
                self.maybe_close(second);
            }
            Event::Done(s) => {
                let Some(second) = s.slot else { return };
                self.ended += 1;
                if self.counting == Counting::Ended {
                    self.sent += 1;
                }
                self.status.record(s.outcome);
                if let Some(result) = &s.check {
                    self.check.checked += 1;
                    match result {
                        Ok(()) => self.check.valid += 1,
                        Err(why) => {
                            self.check.invalid += 1;
                            if self.check.first_error.is_none() {
                                self.check.first_error = Some(why.clone());
                            }
                        }
                    }
                }
                self.last_end = Some(self.last_end.map_or(s.ended, |t| t.max(s.ended)));
                let latency_us = match s.outcome {
                    Outcome::Answered(_) => {
                        Some(micros(s.ended.saturating_duration_since(s.scheduled)))
                    }
                    // Sent and never answered in time: its latency is at least the timeout.
                    Outcome::Timeout => Some(self.timeout_us),
                    // Never sent, so it has no latency: reported apart (`status.dropped`).
                    Outcome::Dropped | Outcome::ConnectError | Outcome::OtherError => None,
                };
                if let Some(us) = latency_us {
                    self.latency.saturating_record(us);
                }
                if let Some(service) = s.service {
                    self.service_time.saturating_record(micros(service));
                }
                if let Some(phase) = self.phase_of(s.scheduled) {
                    phase.sent += 1;
                    phase.status.record(s.outcome);
                    if let Some(us) = latency_us {
                        phase.latency.saturating_record(us);
                    }
                }
                let answered = matches!(s.outcome, Outcome::Answered(_));
                let slot = self.slot(second);
                slot.ended += 1;
                if answered {
                    slot.completed += 1;
                } else {
                    slot.errors += 1;
                }
                if let Some(us) = latency_us {
                    slot.hist.saturating_record(us);
                }
                self.maybe_close(second);
            }
        }
    }

    /// The rate step a request scheduled at `at` belongs to, if the run has steps.
    fn phase_of(&mut self, at: Instant) -> Option<&mut Phase> {
        let offset = at.saturating_duration_since(self.measure_start);
        let k = self.phases.partition_point(|p| p.start <= offset);
        self.phases.get_mut(k.checked_sub(1)?)
    }

    /// Turns a second into its timeline entry once all its requests have ended.
    fn maybe_close(&mut self, second: u32) {
        let done = self
            .open
            .get(&second)
            .is_some_and(|s| s.expected.is_some_and(|n| s.ended >= n));
        if done && let Some(slot) = self.open.remove(&second) {
            self.close(second, slot);
        }
    }

    fn close(&mut self, second: u32, mut slot: Slot) {
        let ms = |us: u64| us as f64 / 1000.0;
        let h = &slot.hist;
        let (p50, p99, max) = if h.is_empty() {
            (0.0, 0.0, 0.0)
        } else {
            (
                ms(h.value_at_percentile(50.0)),
                ms(h.value_at_percentile(99.0)),
                ms(h.max()),
            )
        };
        self.closed.insert(
            second,
            Second {
                second,
                sent: slot.expected.unwrap_or(slot.ended),
                completed: slot.completed,
                errors: slot.errors,
                p50_ms: p50,
                p99_ms: p99,
                max_ms: max,
            },
        );
        slot.hist.reset();
        self.spare.push(slot.hist);
    }

    fn finish(mut self) -> Collected {
        // Only reached with seconds still open if the run was cut short (or on a bug):
        // close them with what arrived.
        let open = std::mem::take(&mut self.open);
        for (second, slot) in open {
            self.close(second, slot);
        }
        Collected {
            sent: self.sent,
            status: self.status,
            latency: self.latency,
            service_time: self.service_time,
            timeline: self.closed.into_values().collect(),
            last_end: self.last_end,
            ended: self.ended,
            phases: self.phases,
            check: self.check,
        }
    }
}
