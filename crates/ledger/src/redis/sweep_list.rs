//! [`SweepList`]: the campaigns a ledger handle sweeps, one per hash tag, where the walk
//! through them stands, and which are due: those this handle reserved on, with the latest
//! expiry of those reservations (see `sweep.rs`). Pure bookkeeping, no I/O.

use std::collections::{HashMap, HashSet};

use super::keys::campaign_tag;

/// The campaigns a handle sweeps: one per hash tag, in the order their limits were first
/// written, and the position of the next sweep.
#[derive(Debug, Default)]
pub(crate) struct SweepList {
    campaigns: Vec<String>,
    tags: HashSet<String>,
    next: usize,
    /// Per hash tag: a campaign of it and the latest expiry (ms) of a reservation this handle
    /// made there and has not swept since.
    due: HashMap<String, (String, u64)>,
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

    /// Notes a reservation on `campaign` expiring at `at_ms`: its index is due for a sweep
    /// once that time has passed.
    pub(crate) fn note_expiry(&mut self, campaign: &str, at_ms: u64) {
        let tag = campaign_tag(campaign);
        match self.due.get_mut(tag.as_ref()) {
            Some((_, latest)) => *latest = (*latest).max(at_ms),
            None => {
                self.due
                    .insert(tag.into_owned(), (campaign.to_owned(), at_ms));
            }
        }
    }

    /// Up to `n` campaigns whose noted expiry is at or before `now_ms`, taken off the due list
    /// (in tag order, so a backlog is worked through deterministically), and whether more are
    /// due after them.
    pub(crate) fn take_due(&mut self, now_ms: u64, n: usize) -> (Vec<String>, bool) {
        let mut ready: Vec<&String> = self
            .due
            .iter()
            .filter(|(_, (_, at))| *at <= now_ms)
            .map(|(tag, _)| tag)
            .collect();
        ready.sort_unstable();
        let more = ready.len() > n;
        let tags: Vec<String> = ready.into_iter().take(n).cloned().collect();
        let campaigns = tags
            .iter()
            .filter_map(|tag| self.due.remove(tag).map(|(campaign, _)| campaign))
            .collect();
        (campaigns, more)
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

    #[test]
    fn a_campaign_is_due_once_its_latest_reservation_has_expired() {
        let mut list = SweepList::default();
        list.note_expiry("a", 100);
        list.note_expiry("a", 300);
        list.note_expiry("b", 200);
        list.note_expiry("c", 150);
        assert_eq!(list.take_due(99, 10), (Vec::new(), false));
        // `a` waits for its later reservation; the two that are due come in tag order, one at
        // a time when asked for one.
        assert_eq!(list.take_due(250, 1), (vec!["b".to_owned()], true));
        assert_eq!(list.take_due(250, 1), (vec!["c".to_owned()], false));
        assert_eq!(list.take_due(250, 1), (Vec::new(), false));
        assert_eq!(list.take_due(300, 5), (vec!["a".to_owned()], false));
        // Swept: due again only after a new reservation.
        assert_eq!(list.take_due(1_000, 5), (Vec::new(), false));
    }
}
