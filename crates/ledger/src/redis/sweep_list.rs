//! [`SweepList`]: the campaigns a ledger handle sweeps, one per hash tag, and where the walk
//! through them stands (see `sweep.rs`). Pure bookkeeping, no I/O.

use std::collections::HashSet;

use super::keys::campaign_tag;

/// The campaigns a handle sweeps: one per hash tag, in the order their limits were first
/// written, and the position of the next sweep.
#[derive(Debug, Default)]
pub(crate) struct SweepList {
    campaigns: Vec<String>,
    tags: HashSet<String>,
    next: usize,
}

impl SweepList {
    /// Adds `campaign` unless a campaign of its tag is listed (they share one index).
    pub(crate) fn add(&mut self, campaign: &str) {
        let tag = campaign_tag(campaign);
        if !self.tags.contains(tag.as_ref()) {
            self.tags.insert(tag.into_owned());
            self.campaigns.push(campaign.to_owned());
        }
    }

    /// The next `n` campaigns from where the last sweep stopped, and whether the walk through
    /// the list is unfinished after them.
    pub(crate) fn window(&mut self, n: usize) -> (Vec<String>, bool) {
        if self.next >= self.campaigns.len() {
            self.next = 0;
        }
        let end = self.next.saturating_add(n).min(self.campaigns.len());
        let window = self
            .campaigns
            .get(self.next..end)
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        self.next = end;
        (window, end < self.campaigns.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_goes_round_the_list_one_tag_each() {
        let mut list = SweepList::default();
        for c in ["a", "b", "{", "a", "c"] {
            list.add(c);
        }
        assert_eq!(list.window(2), (vec!["a".to_owned(), "b".to_owned()], true));
        assert_eq!(
            list.window(2),
            (vec!["{".to_owned(), "c".to_owned()], false)
        );
        assert_eq!(list.window(3).0, ["a", "b", "{"]);
        assert_eq!(SweepList::default().window(3), (Vec::new(), false));
    }
}
