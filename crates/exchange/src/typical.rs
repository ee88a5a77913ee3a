//! How long a bidder typically takes to answer: a moving average the admission reads (an
//! auction with less time left than the fastest bidder's typical answer is answered at once).
//! A control input of the auction path, not a metric: `count.rs` mirrors it into one.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long a typical answer time stays in use without a new answer.
pub const TYPICAL_FRESH_MS: u64 = 1_000;

/// Milliseconds since the process first asked: a monotonic clock cheap to keep in an atomic.
pub fn clock_ms() -> u64 {
    clock_ms_at(Instant::now())
}

/// [`clock_ms`] at an instant already read.
pub fn clock_ms_at(at: Instant) -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| at);
    u64::try_from(at.saturating_duration_since(epoch).as_millis()).unwrap_or(u64::MAX)
}

/// One bidder's typical time to a complete answer.
#[derive(Debug, Default)]
pub struct TypicalAnswer {
    /// In microseconds: a moving average (weight 1/16) over answered calls, 0 until the first.
    us: AtomicU64,
    /// When it was last updated, in milliseconds of [`clock_ms`] plus one (0: never).
    at_ms: AtomicU64,
}

impl TypicalAnswer {
    /// Records a complete answer, seen at `now_ms` ([`clock_ms`]), that took `took` from the
    /// start of the fan-out.
    pub fn answered_after(&self, took: Duration, now_ms: u64) {
        self.at_ms.store(now_ms.saturating_add(1), Relaxed);
        let sample = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        let old = self.us.load(Relaxed);
        // One writer at a time in practice (a fan-out polls its calls on one task); a lost
        // update under a race only delays the average by one sample.
        let new = if old == 0 {
            sample
        } else {
            (old - old / 16).saturating_add(sample / 16).max(1)
        };
        self.us.store(new, Relaxed);
    }

    /// The average in microseconds, fresh or not (0 before the first answer).
    pub fn micros(&self) -> u64 {
        self.us.load(Relaxed)
    }

    /// The typical answer time, if an answer came within the last [`TYPICAL_FRESH_MS`]. An
    /// older figure is not used: a bidder no auction had time for (because of that figure)
    /// gets no chance to show it has become faster, so the figure must expire by itself.
    pub fn get(&self, now_ms: u64) -> Option<Duration> {
        let at = self.at_ms.load(Relaxed);
        let us = self.us.load(Relaxed);
        (at > 0 && us > 0 && now_ms.saturating_add(1).saturating_sub(at) <= TYPICAL_FRESH_MS)
            .then(|| Duration::from_micros(us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_follows_the_answers_and_expires() {
        let m = TypicalAnswer::default();
        assert_eq!(m.get(clock_ms()), None, "no answer yet");
        m.answered_after(Duration::from_millis(32), clock_ms());
        assert_eq!(m.get(clock_ms()), Some(Duration::from_millis(32)));
        // Each answer moves it a sixteenth of the way.
        m.answered_after(Duration::from_millis(16), clock_ms());
        assert_eq!(m.micros(), 32_000 - 2_000 + 1_000);
        for _ in 0..200 {
            m.answered_after(Duration::from_millis(2), clock_ms());
        }
        let typical = m.get(clock_ms()).unwrap();
        assert!(typical < Duration::from_micros(2_100), "{typical:?}");
        // Without a fresh answer the figure is not used (and cannot lock a bidder out).
        assert_eq!(m.get(clock_ms() + TYPICAL_FRESH_MS + 1), None);
    }
}
