//! When requests are due: a [`Schedule`] yields send offsets from the start of a run.
//!
//! The engine asks for offsets one by one and never accumulates sleeps: request `i` is due
//! at `start + offset_i`, whatever happened before it. Rate steps and ramps are further
//! implementations of the same trait.

use std::time::Duration;

/// A sequence of send offsets, non-decreasing, measured from the start of the run.
pub trait Schedule: Send {
    /// The offset of the next request, or `None` when the schedule is over.
    fn next_offset(&mut self) -> Option<Duration>;

    /// Total length of the schedule: no offset is at or beyond it.
    fn length(&self) -> Duration;
}

/// `rate` requests per second over `length`: request `i` is due at `i / rate` seconds, for
/// every `i` with `i / rate < length`, i.e. `ceil(rate * length)` requests.
#[derive(Debug, Clone)]
pub struct ConstantRate {
    rate: f64,
    length: Duration,
    next: u64,
}

impl ConstantRate {
    /// `rate` must be finite and positive (a [`crate::LoadSpec`] is validated before use).
    pub fn new(rate: f64, length: Duration) -> ConstantRate {
        ConstantRate {
            rate,
            length,
            next: 0,
        }
    }

    /// Offset of request `i`, computed from `i` alone.
    pub fn offset_of(&self, i: u64) -> Duration {
        Duration::from_secs_f64(i as f64 / self.rate)
    }
}

impl Schedule for ConstantRate {
    fn next_offset(&mut self) -> Option<Duration> {
        // Compare in f64 seconds so that e.g. 2000/s over 1 s gives exactly 2000 requests,
        // whatever the rounding of the Duration conversion.
        let secs = self.next as f64 / self.rate;
        if secs >= self.length.as_secs_f64() {
            return None;
        }
        let offset = self.offset_of(self.next);
        self.next += 1;
        Some(offset)
    }

    fn length(&self) -> Duration {
        self.length
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(mut s: impl Schedule) -> Vec<Duration> {
        std::iter::from_fn(|| s.next_offset()).collect()
    }

    #[test]
    fn exact_counts() {
        for (rate, secs, n) in [
            (2000.0, 1.0, 2000),
            (500.0, 2.0, 1000),
            (3.0, 1.0, 3),
            (0.5, 1.0, 1),
            (0.5, 3.0, 2),
            (1.0 / 3.0, 3.0, 1),
            (7.0, 1.5, 11),
            (100_000.0, 0.25, 25_000),
        ] {
            let got = all(ConstantRate::new(rate, Duration::from_secs_f64(secs))).len();
            assert_eq!(got, n, "rate {rate} over {secs} s");
        }
    }

    #[test]
    fn offsets_are_absolute_and_monotone() {
        let offs = all(ConstantRate::new(3000.0, Duration::from_secs(2)));
        assert_eq!(offs[0], Duration::ZERO);
        assert!(offs.windows(2).all(|w| w[0] <= w[1]));
        // No drift: the 3000th request is due at exactly 1 s.
        assert_eq!(offs[3000], Duration::from_secs(1));
        assert!(*offs.last().unwrap_or(&Duration::MAX) < Duration::from_secs(2));
    }
}
