//! A token bucket on an injected clock: `rate` units a second, a burst of one second's worth.
//! Pure; the caller keeps buckets behind its own lock.
//!
//! A request larger than the whole burst is let through when the bucket is full and leaves it
//! in debt, so a client that sends the largest allowed request at a low rate is never locked
//! out, and its next requests wait until the debt is paid.

/// One bucket. Tokens are counted in thousandths, so that a refill every millisecond is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Thousandths of a unit; negative is debt.
    milli: i64,
    last_ms: u64,
}

impl Bucket {
    /// A full bucket at `now_ms`.
    pub fn full(rate: u64, now_ms: u64) -> Bucket {
        Bucket {
            milli: capacity(rate),
            last_ms: now_ms,
        }
    }

    fn refill(&mut self, rate: u64, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        let gained = i64::try_from(elapsed.saturating_mul(rate)).unwrap_or(i64::MAX);
        self.milli = self.milli.saturating_add(gained).min(capacity(rate));
        self.last_ms = self.last_ms.max(now_ms);
    }

    /// Whether `cost` units may be taken at `now_ms`, given what `take` would leave: `Ok` and
    /// nothing taken yet, or `Err(ms)` to wait.
    pub fn check(&mut self, rate: u64, cost: u64, now_ms: u64) -> Result<(), u64> {
        self.refill(rate, now_ms);
        let cost = i64::try_from(cost.saturating_mul(1000)).unwrap_or(i64::MAX);
        let needed = cost.min(capacity(rate));
        if self.milli >= needed {
            return Ok(());
        }
        let missing = u64::try_from(needed - self.milli).unwrap_or(u64::MAX);
        Err(missing.div_ceil(rate.max(1)))
    }

    /// Takes `cost` units (after a successful [`Bucket::check`]).
    pub fn take(&mut self, cost: u64) {
        let cost = i64::try_from(cost.saturating_mul(1000)).unwrap_or(i64::MAX);
        self.milli = self.milli.saturating_sub(cost);
    }

    /// Whether the bucket is full again at `now_ms` (no debt left): forgetting it changes
    /// nothing.
    pub fn is_full(&self, rate: u64, now_ms: u64) -> bool {
        let mut b = *self;
        b.refill(rate, now_ms);
        b.milli >= capacity(rate)
    }
}

fn capacity(rate: u64) -> i64 {
    i64::try_from(rate.saturating_mul(1000)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let mut b = Bucket::full(10, 0);
        for _ in 0..10 {
            assert_eq!(b.check(10, 1, 0), Ok(()));
            b.take(1);
        }
        assert_eq!(b.check(10, 1, 0), Err(100), "one unit every 100 ms");
        assert_eq!(b.check(10, 1, 99), Err(1));
        assert_eq!(b.check(10, 1, 100), Ok(()));
        b.take(1);
        // A second of rest fills it again, no more.
        assert_eq!(b.check(10, 10, 5_000), Ok(()));
        b.take(10);
        assert_eq!(b.check(10, 1, 5_000), Err(100));
    }

    #[test]
    fn a_request_larger_than_the_burst_passes_when_full_and_leaves_debt() {
        let mut b = Bucket::full(1_000, 0);
        assert_eq!(b.check(1_000, 5_000, 0), Ok(()));
        b.take(5_000);
        // 4,000 units of debt and 1,000 to fill: five seconds before it is full again.
        assert_eq!(b.check(1_000, 1, 0), Err(4_001));
        assert_eq!(b.check(1_000, 1_000, 4_999), Err(1));
        assert_eq!(b.check(1_000, 1_000, 5_000), Ok(()));
    }

    #[test]
    fn a_clock_that_goes_back_refills_nothing() {
        let mut b = Bucket::full(10, 1_000);
        b.take(10);
        assert!(b.check(10, 1, 500).is_err());
        assert!(b.check(10, 1, 1_099).is_err());
        assert!(!b.is_full(10, 1_999) && b.is_full(10, 2_000));
    }
}
