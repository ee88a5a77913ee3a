//! Pure: the campaign file's limits beside the ledger's, summed up for the gauges, the admin
//! page and one warning per change: which campaigns conflict (the ledger holds other limits:
//! theirs stand) and which the ledger does not hold (no budget of record: not bid on).

use std::collections::HashMap;

use ledger::LimitsStatus;

/// Campaigns a warning names; the count says how many more.
pub(crate) const NAMED_IN_LOG: usize = 5;

/// What the last comparison found.
#[derive(Debug, Default)]
pub(crate) struct LimitsView {
    /// Per campaign of the file: its limits, and the ledger's with their version and writer.
    pub(crate) by_campaign: HashMap<String, LimitsStatus>,
    /// Campaigns whose limits in the ledger differ from the file's, sorted.
    pub(crate) conflicts: Vec<String>,
    /// Campaigns the ledger does not hold, sorted.
    pub(crate) missing: Vec<String>,
}

impl LimitsView {
    pub(crate) fn of(statuses: Vec<LimitsStatus>) -> LimitsView {
        let mut conflicts = Vec::new();
        let mut missing = Vec::new();
        for s in &statuses {
            if s.conflict() {
                conflicts.push(s.campaign.clone());
            } else if s.missing() {
                missing.push(s.campaign.clone());
            }
        }
        conflicts.sort_unstable();
        missing.sort_unstable();
        LimitsView {
            by_campaign: statuses
                .into_iter()
                .map(|s| (s.campaign.clone(), s))
                .collect(),
            conflicts,
            missing,
        }
    }

    /// Whether the campaigns in conflict or missing are others than `before`'s: warn once per
    /// change, not once per check.
    pub(crate) fn changed_from(&self, before: &LimitsView) -> bool {
        self.conflicts != before.conflicts || self.missing != before.missing
    }

    /// The first few of `names`, and how many more: for a log line of bounded size.
    pub(crate) fn named(names: &[String]) -> String {
        let shown: Vec<&str> = names
            .iter()
            .take(NAMED_IN_LOG)
            .map(String::as_str)
            .collect();
        match names.len().saturating_sub(NAMED_IN_LOG) {
            0 => shown.join(", "),
            more => format!("{} and {more} more", shown.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger::StoredLimits;
    use units::{Limits, Nanos};

    fn status(c: &str, local: i64, ledger: Option<i64>) -> LimitsStatus {
        let l = |n| Limits {
            total: Nanos(n),
            daily: None,
        };
        LimitsStatus {
            campaign: c.to_owned(),
            local: l(local),
            ledger: ledger.map(|n| StoredLimits {
                limits: l(n),
                version: 3,
                writer: "file:a".to_owned(),
            }),
        }
    }

    #[test]
    fn conflicts_and_missing_campaigns_are_told_apart_and_changes_noticed() {
        let view = LimitsView::of(vec![
            status("z", 1, Some(2)),
            status("same", 5, Some(5)),
            status("gone", 1, None),
            status("a", 7, Some(1)),
        ]);
        assert_eq!(view.conflicts, ["a", "z"]);
        assert_eq!(view.missing, ["gone"]);
        assert_eq!(view.by_campaign.len(), 4);
        assert!(view.changed_from(&LimitsView::default()));
        let again = LimitsView::of(vec![
            status("a", 8, Some(1)),
            status("z", 1, Some(3)),
            status("gone", 1, None),
        ]);
        assert!(
            !again.changed_from(&view),
            "the same campaigns: no new warning"
        );
        let resolved = LimitsView::of(vec![status("a", 1, Some(1)), status("z", 1, Some(3))]);
        assert!(resolved.changed_from(&again));
    }

    #[test]
    fn a_log_line_names_a_few_campaigns_and_counts_the_rest() {
        let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
        assert_eq!(LimitsView::named(&names), "c0, c1, c2, c3, c4 and 3 more");
        assert_eq!(LimitsView::named(&names[..2]), "c0, c1");
    }
}
