//! The connection pool of an open-loop run: `connections` workers open before the clock
//! starts; after that, a request that comes due with every connection busy opens one more when
//! `growth.rs` says so. A request that finds every connection busy and gets none is counted
//! as *starved*; the report ([`crate::Report::limits`]) says which side that was.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::collect::Event;
use crate::growth::{Decision, Facts, Growth};
use crate::worker::{self, Shared};

/// The workers opened after the start, and how often a request found no connection.
#[derive(Debug)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    growth: Growth,
    size: usize,
    grown: Vec<JoinHandle<()>>,
    starved: u64,
    starved_late: u64,
}

/// What the pool did, once the schedule has ended.
#[derive(Debug)]
pub(crate) struct PoolEnd {
    /// Workers opened on demand; the run waits for them like for the first ones.
    pub grown: Vec<JoinHandle<()>>,
    /// Largest number of workers (each holds at most one connection).
    pub peak: usize,
    /// Measured requests that came due with every connection busy and got no new one.
    pub starved: u64,
    /// Of those, the ones refused because the scheduler was late (the generator's CPU).
    pub starved_late: u64,
}

impl Pool {
    /// A pool that already has `size` workers and may grow to `max`.
    pub fn new(
        shared: Arc<Shared>,
        events: mpsc::UnboundedSender<Event>,
        size: usize,
        max: usize,
        peak_rate: f64,
        start: Instant,
    ) -> Pool {
        Pool {
            shared,
            events,
            growth: Growth::new(size, max.max(size), peak_rate, start),
            size,
            grown: Vec::new(),
            starved: 0,
            starved_late: 0,
        }
    }

    /// A request just came due, `late` behind its schedule (the `issued`-th, warm-up
    /// included), and found no idle connection: opens one more when `growth.rs` allows, or
    /// counts the request as starved (`measured`: it belongs to the measured window).
    pub fn short_of_one(&mut self, late: Duration, issued: u64, measured: bool) {
        let facts = Facts {
            now: Instant::now(),
            size: self.size,
            late,
            service: self.shared.service.typical(),
            issued,
            answered: self.shared.service.answered(),
        };
        match self.growth.decide(facts) {
            Decision::Grow => {
                self.size += 1;
                let (shared, events) = (Arc::clone(&self.shared), self.events.clone());
                self.grown
                    .push(tokio::spawn(worker::worker(shared, events, None)));
            }
            Decision::Late if measured => {
                self.starved += 1;
                self.starved_late += 1;
            }
            Decision::Hold if measured => self.starved += 1,
            Decision::Late | Decision::Hold => {}
        }
    }

    /// Ends growth; drops the pool's event sender so that the collector can finish.
    pub fn finish(self) -> PoolEnd {
        PoolEnd {
            grown: self.grown,
            peak: self.size,
            starved: self.starved,
            starved_late: self.starved_late,
        }
    }
}
