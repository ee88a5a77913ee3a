//! The service time the pool grows by: a running p90 of answered requests' time from send to
//! answer, and how many were answered, shared by the workers that feed it and the scheduler
//! that reads it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A running estimate of the 90th percentile of answered requests' service time. A quantile, not a mean: a few slow
/// answers (or a busy moment of the generator's own loop) barely move it, so a fast target
/// does not look slow for an instant and get hundreds of connections it has no use for.
///
/// Each sample moves it by a fraction of itself: up by 1/64 when above, down by 1/576 when
/// below, which balances where one sample in ten is above (the p90). Twenty answers of a
/// burst move it by 36% at most, where a mean of weight 1/16 would follow them most of the
/// way. Racy on purpose: a lost update moves an estimate, never a count.
#[derive(Debug, Default)]
pub(crate) struct ServiceTime {
    /// Microseconds, plus one so that 0 means "no answer yet".
    micros_plus_one: AtomicU64,
    /// Requests answered so far.
    answered: AtomicU64,
}

impl ServiceTime {
    pub fn record(&self, took: Duration) {
        self.answered.fetch_add(1, Relaxed);
        let sample = u64::try_from(took.as_micros()).unwrap_or(u64::MAX / 2);
        let old = self.micros_plus_one.load(Relaxed);
        let next = match old.checked_sub(1) {
            None => sample,
            Some(old) if sample > old => old + (old / 64).max(1),
            Some(old) if sample < old => old - (old / 576).max(1).min(old),
            Some(old) => old,
        };
        self.micros_plus_one.store(next.saturating_add(1), Relaxed);
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Relaxed)
    }

    /// `None` before the first answer.
    pub fn typical(&self) -> Option<Duration> {
        match self.micros_plus_one.load(Relaxed) {
            0 => None,
            n => Some(Duration::from_micros(n - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_time_estimate_settles_on_the_90th_percentile_and_shrugs_off_spikes() {
        let s = ServiceTime::default();
        assert_eq!(s.typical(), None);
        s.record(Duration::from_micros(1600));
        assert_eq!(s.typical(), Some(Duration::from_micros(1600)));
        // 1..=1000 µs, shuffled by a fixed stride: the p90 is 900 µs.
        for round in 0..40u64 {
            for i in 0..1000u64 {
                s.record(Duration::from_micros((i * 7919 + round) % 1000 + 1));
            }
        }
        let p90 = s.typical().unwrap().as_micros();
        assert!((800..=1000).contains(&p90), "{p90}");
        // A burst of 20 answers at 50 ms (a busy moment) moves it by 36% at most.
        for _ in 0..20 {
            s.record(Duration::from_millis(50));
        }
        let after = s.typical().unwrap().as_micros();
        assert!(after * 5 < p90 * 7, "{p90} -> {after}");
    }
}
