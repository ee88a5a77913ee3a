//! Wall-clock time in milliseconds since the Unix epoch, behind a trait so tests move it by
//! hand. Wall time rather than `Instant` because lifetimes are stored on disk and must mean
//! the same after a restart.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Starts at `ms` since the epoch.
    pub fn at(ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(ms))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(ms, Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Relaxed)
    }
}
