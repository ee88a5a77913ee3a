//! The auction's absolute deadline, computed once per request from the moment it was read.
//!
//! Pure: the caller passes the instant; nothing here reads a clock.

use std::time::{Duration, Instant};

/// Limits that shape a deadline (from the `[auction]` config section).
#[derive(Debug, Clone, Copy)]
pub struct DeadlinePolicy {
    pub default_tmax: Duration,
    pub max_tmax: Duration,
    pub answer_margin: Duration,
}

/// When an auction must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When the request was read: the origin of `tmax`.
    pub read_at: Instant,
    /// The end of the seller's `tmax` (capped): an answer after this is worthless.
    pub expires_at: Instant,
    /// When the exchange stops waiting for bidders and starts answering:
    /// `expires_at - answer_margin`.
    pub answer_by: Instant,
}

/// Why a request's `tmax` is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TmaxError {
    #[error("tmax must be a positive number of milliseconds, got {0}")]
    NotPositive(i64),
}

impl DeadlinePolicy {
    /// `min(tmax, max_tmax)`, or `default_tmax` when the request names none.
    pub fn deadline(&self, read_at: Instant, tmax_ms: Option<i64>) -> Result<Deadline, TmaxError> {
        let budget = match tmax_ms {
            None => self.default_tmax,
            Some(ms) if ms <= 0 => return Err(TmaxError::NotPositive(ms)),
            Some(ms) => Duration::from_millis(ms.unsigned_abs()).min(self.max_tmax),
        };
        let expires_at = read_at + budget;
        let answer_by = read_at + budget.saturating_sub(self.answer_margin);
        Ok(Deadline {
            read_at,
            expires_at,
            answer_by,
        })
    }
}

impl Deadline {
    /// Time bidders still have at `now`, the value sent to them as `tmax`.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.answer_by.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: DeadlinePolicy = DeadlinePolicy {
        default_tmax: Duration::from_millis(100),
        max_tmax: Duration::from_millis(1000),
        answer_margin: Duration::from_millis(5),
    };

    #[test]
    fn request_tmax_is_used_and_capped() {
        let t0 = Instant::now();
        let d = POLICY.deadline(t0, Some(80)).unwrap();
        assert_eq!(d.expires_at - t0, Duration::from_millis(80));
        assert_eq!(d.answer_by - t0, Duration::from_millis(75));
        let capped = POLICY.deadline(t0, Some(60_000)).unwrap();
        assert_eq!(capped.expires_at - t0, Duration::from_millis(1000));
    }

    #[test]
    fn absent_tmax_uses_the_default() {
        let t0 = Instant::now();
        let d = POLICY.deadline(t0, None).unwrap();
        assert_eq!(d.expires_at - t0, Duration::from_millis(100));
    }

    #[test]
    fn tmax_below_the_margin_leaves_no_time_for_bidders() {
        let t0 = Instant::now();
        let d = POLICY.deadline(t0, Some(3)).unwrap();
        assert_eq!(d.answer_by, t0);
        assert_eq!(d.remaining(t0), Duration::ZERO);
    }

    #[test]
    fn non_positive_tmax_is_refused() {
        let t0 = Instant::now();
        assert_eq!(POLICY.deadline(t0, Some(0)), Err(TmaxError::NotPositive(0)));
        assert_eq!(
            POLICY.deadline(t0, Some(-5)),
            Err(TmaxError::NotPositive(-5))
        );
    }

    #[test]
    fn remaining_counts_down_to_zero() {
        let t0 = Instant::now();
        let d = POLICY.deadline(t0, Some(50)).unwrap();
        assert_eq!(
            d.remaining(t0 + Duration::from_millis(40)),
            Duration::from_millis(5)
        );
        assert_eq!(d.remaining(t0 + Duration::from_millis(60)), Duration::ZERO);
    }
}
