//! Growing the connection pool of an open-loop run on demand.
//!
//! The run opens `connections` before its clock starts. After that, whenever a request comes
//! due and finds every connection busy, the scheduler opens one more (a new worker with its own
//! connection), up to `max_connections`. A run whose target answers in 100 ms at 1,000/s thus
//! ends up with about 100 connections whatever `connections` said, instead of queueing behind
//! 64 of them and reporting the generator's own limit as the target's latency. At the cap, a
//! request that finds no free connection is counted as *starved*: the report says the run was
//! short of connections when that happened to more than a few.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::collect::Event;
use crate::worker::{self, Shared};

/// The workers opened after the start, and how short of connections the run was.
#[derive(Debug)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    max: usize,
    size: usize,
    grown: Vec<JoinHandle<()>>,
    starved: u64,
}

/// What the pool did, once the schedule has ended.
#[derive(Debug)]
pub(crate) struct PoolEnd {
    /// Workers opened on demand; the run waits for them like for the first ones.
    pub grown: Vec<JoinHandle<()>>,
    /// Largest number of workers (each holds at most one connection).
    pub peak: usize,
    /// Measured requests that came due with every connection busy and the pool at its cap.
    pub starved: u64,
}

impl Pool {
    /// A pool that already has `size` workers and may grow to `max`.
    pub fn new(
        shared: Arc<Shared>,
        events: mpsc::UnboundedSender<Event>,
        size: usize,
        max: usize,
    ) -> Pool {
        Pool {
            shared,
            events,
            max: max.max(size),
            size,
            grown: Vec::new(),
            starved: 0,
        }
    }

    /// A request just came due and found no idle connection: opens one more if the cap
    /// allows, or counts the request as starved (`measured`: it belongs to the measured window).
    pub fn short_of_one(&mut self, measured: bool) {
        if self.size < self.max {
            self.size += 1;
            let (shared, events) = (Arc::clone(&self.shared), self.events.clone());
            self.grown
                .push(tokio::spawn(worker::worker(shared, events, None)));
        } else if measured {
            self.starved += 1;
        }
    }

    /// Ends growth; drops the pool's event sender so that the collector can finish.
    pub fn finish(self) -> PoolEnd {
        PoolEnd {
            grown: self.grown,
            peak: self.size,
            starved: self.starved,
        }
    }
}
