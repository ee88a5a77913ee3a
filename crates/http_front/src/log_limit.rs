//! Rate-limited logging for events a client can cause at will (bad requests, failed accepts):
//! at most a few lines per second per call site, each saying how many were left out before it,
//! so a flood of bad input can fill neither the log nor memory. Nothing is buffered: a line that
//! is not written is only counted.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

/// A budget of `per_second` lines in each wall-clock second, for one call site.
#[derive(Debug)]
pub struct LogLimit {
    per_second: u64,
    /// The second the budget below belongs to.
    second: AtomicU64,
    used: AtomicU64,
    suppressed: AtomicU64,
}

impl LogLimit {
    pub const fn new(per_second: u64) -> LogLimit {
        LogLimit {
            per_second,
            second: AtomicU64::new(0),
            used: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written in `second`; if so, how many were suppressed before it.
    /// Pure but for the counters: the caller passes the clock.
    pub fn admit(&self, second: u64) -> Option<u64> {
        if self.second.swap(second, Relaxed) != second {
            self.used.store(0, Relaxed);
        }
        if self.used.fetch_add(1, Relaxed) < self.per_second {
            Some(self.suppressed.swap(0, Relaxed))
        } else {
            self.suppressed.fetch_add(1, Relaxed);
            None
        }
    }

    /// Whether a line may be written now.
    pub fn admit_now(&self) -> Option<u64> {
        let second = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.admit(second)
    }
}

/// One warning line per `site`, limited to 5 a second across all sites of this helper.
pub fn warn(site: &'static str, error: &dyn Display) {
    static LIMIT: LogLimit = LogLimit::new(5);
    if let Some(suppressed) = LIMIT.admit_now() {
        tracing::warn!(site, error = %error, suppressed, "edge error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_the_budget_then_reports_what_it_left_out() {
        let limit = LogLimit::new(3);
        let written: Vec<_> = (0..1_000).filter_map(|_| limit.admit(7)).collect();
        assert_eq!(written, vec![0, 0, 0]);
        // The next second: the first line says 997 were left out.
        assert_eq!(limit.admit(8), Some(997));
        assert_eq!(limit.admit(8), Some(0));
    }
}
