//! The absolute deadline of a request, fixed once from the moment its body was read, and the
//! `[deadline]` section both servers configure it with. One rule for both: the exchange and the
//! bidder answer the same `tmax` the same way.
//!
//! Pure: the caller passes the instant; nothing here reads a clock.
//!
//! The rule: a request's budget is its `tmax`, capped at `max_tmax_ms`, or `default_tmax_ms`
//! when it names none; a `tmax` of zero or less is bad input (a 400 naming `tmax`), never
//! silently replaced by the default. The server answers by `answer_margin_ms` before the end of
//! that budget, which is kept for the answer's trip back.

use std::time::{Duration, Instant};

use serde::Deserialize;

/// The `[deadline]` section of a server's configuration.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct DeadlineConfig {
    /// Budget of a request that carries no `tmax`, in milliseconds. Default 100.
    pub default_tmax_ms: u64,
    /// Cap on a request's `tmax`, in milliseconds. Default 1000.
    pub max_tmax_ms: u64,
    /// Time kept back from the end of the budget for the answer's trip back, in milliseconds:
    /// the server stops working (the exchange stops waiting for bidders) this long before it.
    /// Default 10.
    pub answer_margin_ms: u64,
}

impl Default for DeadlineConfig {
    fn default() -> Self {
        DeadlineConfig {
            default_tmax_ms: 100,
            max_tmax_ms: 1_000,
            answer_margin_ms: 10,
        }
    }
}

impl DeadlineConfig {
    /// Checks the values; the error names the key (under `[deadline]`) and the rule.
    pub fn validate(&self) -> Result<(), settings::Invalid> {
        settings::check_range("deadline.default_tmax_ms", self.default_tmax_ms, 1..=60_000)?;
        if self.max_tmax_ms < self.default_tmax_ms || self.max_tmax_ms > 60_000 {
            return Err(settings::Invalid::new(
                "deadline.max_tmax_ms",
                "must be at least deadline.default_tmax_ms and at most 60000",
            ));
        }
        if self.answer_margin_ms >= self.default_tmax_ms {
            return Err(settings::Invalid::new(
                "deadline.answer_margin_ms",
                "must be smaller than deadline.default_tmax_ms",
            ));
        }
        Ok(())
    }

    /// The policy these values describe.
    pub fn policy(&self) -> DeadlinePolicy {
        DeadlinePolicy {
            default_tmax: Duration::from_millis(self.default_tmax_ms),
            max_tmax: Duration::from_millis(self.max_tmax_ms),
            answer_margin: Duration::from_millis(self.answer_margin_ms),
        }
    }
}

/// Limits that shape a deadline ([`DeadlineConfig::policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlinePolicy {
    pub default_tmax: Duration,
    pub max_tmax: Duration,
    pub answer_margin: Duration,
}

/// When a request must be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When the request was read: the origin of `tmax`.
    pub read_at: Instant,
    /// The end of the request's budget: an answer after this is worthless.
    pub expires_at: Instant,
    /// When work stops and the answer is written: `expires_at - answer_margin`.
    pub answer_by: Instant,
}

/// Why a request's `tmax` is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TmaxError {
    #[error("tmax must be a positive number of milliseconds, got {0}")]
    NotPositive(i64),
}

impl DeadlinePolicy {
    /// The deadline of a request read at `read_at` whose `tmax` is `tmax_ms`:
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
    /// Time left for work at `now`; the exchange sends it to bidders as their `tmax`.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.answer_by.saturating_duration_since(now)
    }

    /// The answer margin (`answer_by` to `expires_at`), the time kept for work after the
    /// bidders' answers and for the answer's trip back.
    fn margin(&self) -> Duration {
        self.expires_at.saturating_duration_since(self.answer_by)
    }

    /// When fetching winners' markup from their `nurl` stops: half the answer margin.
    pub fn markup_by(&self) -> Instant {
        self.answer_by + self.margin() / 2
    }

    /// When storing winners' markup in the cache stops: three quarters of the answer margin,
    /// after the markup fetch's half; the rest is for encoding and sending the answer.
    pub fn cache_by(&self) -> Instant {
        self.answer_by + self.margin() * 3 / 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_shared_markup_first_then_the_cache() {
        let t0 = Instant::now();
        let d = Deadline {
            read_at: t0,
            expires_at: t0 + Duration::from_millis(100),
            answer_by: t0 + Duration::from_millis(80),
        };
        assert_eq!(d.markup_by() - t0, Duration::from_millis(90));
        assert_eq!(d.cache_by() - t0, Duration::from_millis(95));
        let none = Deadline {
            answer_by: d.expires_at,
            ..d
        };
        assert_eq!(none.markup_by(), none.expires_at);
        assert_eq!(none.cache_by(), none.expires_at);
    }

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
    fn tmax_below_the_margin_leaves_no_time_for_work() {
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

    #[test]
    fn the_section_checks_its_keys_and_gives_its_policy() {
        let c = DeadlineConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.policy().default_tmax, Duration::from_millis(100));
        assert_eq!(c.policy().answer_margin, Duration::from_millis(10));
        for (bad, key) in [
            (
                DeadlineConfig {
                    default_tmax_ms: 0,
                    ..c.clone()
                },
                "deadline.default_tmax_ms",
            ),
            (
                DeadlineConfig {
                    max_tmax_ms: 10,
                    ..c.clone()
                },
                "deadline.max_tmax_ms",
            ),
            (
                DeadlineConfig {
                    answer_margin_ms: 100,
                    ..c.clone()
                },
                "deadline.answer_margin_ms",
            ),
        ] {
            assert_eq!(bad.validate().map_err(|e| e.key), Err(key.to_owned()));
        }
    }
}
