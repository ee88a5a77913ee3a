//! A backlog seen from the request path: how long the runtime has gone without a pause.
//!
//! A tokio worker parks only when it has nothing left to run, so while the park counters of all
//! workers stand still, every worker has been busy without a break: work is waiting for them,
//! and on a server whose handlers finish in one poll (the bidder) that work is requests unread
//! in socket buffers, which nothing else in the process can see. The adaptive bound learns of
//! such a backlog from its own tick, two 50 ms windows later at best; by then a server at
//! twice its capacity has a hundred milliseconds of requests queued, all of them answered
//! late. This check answers on the next request instead, for the price of a few atomic loads
//! and a clock read: while the runtime has been busy longer than the limit, refuse; the
//! refusals are cheap, the runtime catches up, parks, and the next request is admitted.
//!
//! CoDel's idea (act on how long a queue has stood, not on how long it is) applied to the one
//! queue a one-thread server cannot measure.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::runtime::RuntimeMetrics;

/// The decision, pure: fed the workers' summed park count and the time, says whether the
/// runtime has been busy without a pause for longer than the limit.
#[derive(Debug)]
pub struct Streak {
    limit_nanos: u64,
    /// The park count last seen, and when (nanoseconds since the detector's epoch) it was first
    /// seen: no worker has parked since then.
    parks: AtomicU64,
    since_nanos: AtomicU64,
}

impl Streak {
    /// `limit` of zero never reports a backlog.
    pub fn new(limit: Duration) -> Streak {
        Streak {
            limit_nanos: u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX),
            parks: AtomicU64::new(u64::MAX),
            since_nanos: AtomicU64::new(0),
        }
    }

    /// Whether the runtime, whose workers have parked `parks` times in all, has gone longer than
    /// the limit without a park, as of `now_nanos`.
    ///
    /// Requests on several workers may race here; the loser's store is at most one request's
    /// reading off, which moves the streak's start by that request's time.
    pub fn backlogged(&self, parks: u64, now_nanos: u64) -> bool {
        if self.limit_nanos == 0 {
            return false;
        }
        if self.parks.load(Relaxed) != parks {
            self.parks.store(parks, Relaxed);
            self.since_nanos.store(now_nanos, Relaxed);
            return false;
        }
        now_nanos.saturating_sub(self.since_nanos.load(Relaxed)) > self.limit_nanos
    }
}

/// [`Streak`] on the runtime that built it.
#[derive(Debug)]
pub struct BusyStreak {
    streak: Streak,
    epoch: Instant,
    /// `None` when built outside a tokio runtime, or with a limit of zero: never backlogged.
    runtime: Option<RuntimeMetrics>,
    /// Requests refused for a streak.
    refused: AtomicU64,
}

impl BusyStreak {
    /// Watches the current runtime, if any; `limit` of zero turns the check off.
    pub fn new(limit: Duration) -> BusyStreak {
        let runtime = if limit.is_zero() {
            None
        } else {
            tokio::runtime::Handle::try_current()
                .ok()
                .map(|h| h.metrics())
        };
        BusyStreak {
            streak: Streak::new(limit),
            epoch: Instant::now(),
            runtime,
            refused: AtomicU64::new(0),
        }
    }

    /// Whether the runtime has been busy without a pause for longer than the limit; counts a
    /// `true` as a refusal.
    pub fn refuse(&self) -> bool {
        let Some(metrics) = &self.runtime else {
            return false;
        };
        let parks = (0..metrics.num_workers())
            .map(|w| metrics.worker_park_count(w))
            .fold(0u64, u64::wrapping_add);
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let backlogged = self.streak.backlogged(parks, now);
        if backlogged {
            self.refused.fetch_add(1, Relaxed);
        }
        backlogged
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_runtime_that_parks_is_never_backlogged() {
        let s = Streak::new(Duration::from_millis(10));
        for i in 0..100 {
            // A park every 5 ms: never 10 ms without one.
            assert!(!s.backlogged(i, i * 5 * MS));
        }
    }

    #[test]
    fn no_park_for_longer_than_the_limit_is_a_backlog_until_the_next_park() {
        let s = Streak::new(Duration::from_millis(10));
        assert!(!s.backlogged(7, 0));
        assert!(!s.backlogged(7, 6 * MS));
        assert!(
            !s.backlogged(7, 10 * MS),
            "exactly the limit is not over it"
        );
        assert!(s.backlogged(7, 10 * MS + 1));
        assert!(s.backlogged(7, 40 * MS));
        // A park: the streak starts again from here.
        assert!(!s.backlogged(8, 41 * MS));
        assert!(!s.backlogged(8, 50 * MS));
        assert!(s.backlogged(8, 52 * MS));
    }

    #[test]
    fn a_zero_limit_never_refuses() {
        let s = Streak::new(Duration::ZERO);
        assert!(!s.backlogged(1, 0));
        assert!(!s.backlogged(1, u64::MAX));
    }

    #[test]
    fn outside_a_runtime_nothing_is_refused() {
        let b = BusyStreak::new(Duration::from_millis(1));
        assert!(!b.refuse());
        assert_eq!(b.refused(), 0);
    }

    /// The real runtime's counters: work that never yields is a streak, a pause ends it.
    #[test]
    fn a_runtime_kept_busy_past_the_limit_refuses_until_it_parks() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let b = BusyStreak::new(Duration::from_millis(5));
            assert!(!b.refuse(), "the first look starts the streak");
            // Busy without yielding for 20 ms: the worker cannot park.
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            assert!(b.refuse(), "20 ms without a park is over a 5 ms limit");
            assert_eq!(b.refused(), 1);
            // Nothing else to run while this sleeps: the worker parks.
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(!b.refuse(), "a park ends the streak");
        });
    }
}
