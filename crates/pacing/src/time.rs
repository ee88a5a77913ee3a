//! [`Timestamp`]: wall-clock time as the ledger and the pacer see it, passed in by the caller so
//! that tests can run simulated days in microseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const MS_PER_DAY: u64 = 86_400_000;

    /// The system clock; for servers only, never called by decision code in this crate.
    pub fn now() -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timestamp(ms)
    }

    pub const fn millis(self) -> u64 {
        self.0
    }

    pub fn saturating_add(self, d: Duration) -> Timestamp {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Days since the epoch (UTC): the key of daily budgets.
    pub const fn day(self) -> u64 {
        self.0 / Self::MS_PER_DAY
    }

    /// Start of this UTC day.
    pub const fn start_of_day(self) -> Timestamp {
        Timestamp(self.day() * Self::MS_PER_DAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc() {
        let t = Timestamp(3 * Timestamp::MS_PER_DAY + 5);
        assert_eq!(t.day(), 3);
        assert_eq!(t.start_of_day(), Timestamp(3 * Timestamp::MS_PER_DAY));
        assert_eq!(t.since(Timestamp(t.0 + 10)), Duration::ZERO);
    }
}
