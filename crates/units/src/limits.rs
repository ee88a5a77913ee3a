//! [`Limits`]: what a campaign may spend, in total and per UTC day. The pacer spreads spend
//! under them; the budget of record (the `ledger` crate) enforces them.

use serde::{Deserialize, Serialize};

use crate::money::Nanos;

/// A campaign's budget limits, in nanos.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Lifetime budget of the campaign.
    pub total: Nanos,
    /// Budget per UTC day, if any.
    pub daily: Option<Nanos>,
}

impl Limits {
    /// These limits, none of them above `ceiling`'s: each part the lower of the two, a missing
    /// daily budget (no daily cap) the highest of all. What a change may take without the
    /// budget writer: it can lower a budget, never raise one.
    pub fn capped_by(self, ceiling: Limits) -> Limits {
        let daily = match (self.daily, ceiling.daily) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Limits {
            total: self.total.min(ceiling.total),
            daily,
        }
    }

    /// Whether any part of these limits is above `ceiling`'s.
    pub fn raises(self, ceiling: Limits) -> bool {
        self.capped_by(ceiling) != self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: i64, daily: Option<i64>) -> Limits {
        Limits {
            total: Nanos(total),
            daily: daily.map(Nanos),
        }
    }

    #[test]
    fn capping_lowers_each_part_and_never_raises_one() {
        let stored = limits(100, Some(10));
        assert_eq!(limits(50, Some(5)).capped_by(stored), limits(50, Some(5)));
        assert_eq!(
            limits(1_000, Some(5)).capped_by(stored),
            limits(100, Some(5))
        );
        assert_eq!(
            limits(50, Some(500)).capped_by(stored),
            limits(50, Some(10))
        );
        // Dropping the daily cap would raise it: the stored cap stays.
        assert_eq!(limits(50, None).capped_by(stored), limits(50, Some(10)));
        // Adding a daily cap lowers it.
        assert_eq!(
            limits(50, Some(7)).capped_by(limits(100, None)),
            limits(50, Some(7))
        );
        assert!(limits(1_000, Some(5)).raises(stored));
        assert!(limits(50, None).raises(stored));
        assert!(!limits(100, Some(10)).raises(stored));
        assert!(!limits(1, Some(1)).raises(stored));
    }
}
