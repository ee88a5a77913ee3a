//! Live figures of a run in progress, for a progress line: shared atomics written by the
//! engine and read by whoever displays them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters of a run while it runs. Create one with [`Progress::new`], pass it to
/// [`crate::run_with_progress`], and read [`Progress::snapshot`] from another task.
#[derive(Debug, Default)]
pub struct Progress {
    issued: AtomicU64,
    ended: AtomicU64,
    errors: AtomicU64,
    /// p99 of the measured window so far, µs; refreshed a few times a second.
    p99_us: AtomicU64,
    measuring: AtomicBool,
}

/// A consistent-enough view of [`Progress`] (each counter is read once).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressSnapshot {
    /// Requests issued so far, warm-up included.
    pub issued: u64,
    /// Requests that have ended so far (answered or not), warm-up included.
    pub ended: u64,
    /// Issued but not ended: waiting for a connection or for their answer.
    pub in_flight: u64,
    /// Measured requests that failed (no answer, or not 2xx).
    pub errors: u64,
    /// p99 latency of the measured window so far, ms; `None` before the first measured answer.
    pub p99_ms: Option<f64>,
    /// False during the warm-up.
    pub measuring: bool,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        let ended = self.ended.load(Ordering::Relaxed);
        let issued = self.issued.load(Ordering::Relaxed).max(ended);
        let p99 = self.p99_us.load(Ordering::Relaxed);
        ProgressSnapshot {
            issued,
            ended,
            in_flight: issued - ended,
            errors: self.errors.load(Ordering::Relaxed),
            p99_ms: (p99 > 0).then(|| p99 as f64 / 1000.0),
            measuring: self.measuring.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn add_issued(&self, n: u64) {
        self.issued.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add_ended(&self, n: u64, errors: u64) {
        self.ended.fetch_add(n, Ordering::Relaxed);
        if errors > 0 {
            self.errors.fetch_add(errors, Ordering::Relaxed);
        }
    }

    pub(crate) fn set_p99_us(&self, us: u64) {
        self.p99_us.store(us, Ordering::Relaxed);
    }

    pub(crate) fn set_measuring(&self) {
        self.measuring.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_derives_in_flight() {
        let p = Progress::new();
        assert_eq!(p.snapshot().p99_ms, None);
        p.add_issued(10);
        p.add_ended(7, 2);
        p.set_p99_us(2500);
        let s = p.snapshot();
        assert_eq!((s.issued, s.ended, s.in_flight, s.errors), (10, 7, 3, 2));
        assert_eq!(s.p99_ms, Some(2.5));
        assert!(!s.measuring);
    }
}
