//! The bid decision for one impression, as synchronous, deterministic code: the candidates the
//! campaign index returns, priced, filtered by budget state and pacing, ranked best first.
//! Reserving budget (which may wait on a store) is the caller's step, so this part is
//! testable with plain data.

use openrtb::Price;
use pacing::Timestamp;

use crate::campaign::{Candidate, ImpFacts, RequestFacts, bid_price};
use crate::metrics::{Metrics, SkipReason};
use crate::runtime::Snapshot;

/// Most proposals kept per impression: when the best one's reservation is refused, the next
/// is tried, a bounded number of times.
pub const MAX_PROPOSALS: usize = 3;

/// A priced offer for one impression, not yet backed by a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// Index into the snapshot's campaigns (and states).
    pub campaign: u32,
    pub creative: u32,
    /// Index into `imp.pmp.deals` when bidding through a deal.
    pub deal: Option<u32>,
    pub price: Price,
}

/// Ranks the candidates of one impression, best first, at most [`MAX_PROPOSALS`].
///
/// `draw` supplies uniform draws in `0..1_000_000` for pacing (seeded by the caller). Ties in
/// price go to the campaign listed first in the file, so the same input gives the same answer.
/// Candidates are deduplicated by campaign: the first (creative, deal) the index lists for a
/// campaign is the one it bids with.
pub fn rank(
    snapshot: &Snapshot,
    req: &RequestFacts<'_>,
    imp: &ImpFacts<'_>,
    now: Timestamp,
    scratch: &mut Vec<Candidate>,
    draw: &mut impl FnMut() -> u32,
    metrics: &Metrics,
) -> Vec<Proposal> {
    scratch.clear();
    snapshot.set.candidates(req, imp, scratch);
    let mut proposals: Vec<Proposal> = Vec::new();
    let campaigns = snapshot.set.campaigns();
    for cand in scratch.iter() {
        let (Some(campaign), Some(state)) = (
            campaigns.get(cand.campaign as usize),
            snapshot.states.get(cand.campaign as usize),
        ) else {
            continue;
        };
        if proposals.iter().any(|p| p.campaign == cand.campaign) {
            continue;
        }
        let (floor, first_price) = imp.terms(req, cand.deal);
        let Some(price) = bid_price(campaign, floor, first_price) else {
            metrics.skip(SkipReason::BelowFloor);
            continue;
        };
        if state.is_exhausted(now) {
            metrics.skip(SkipReason::Exhausted);
            continue;
        }
        if !state.admits(draw()) {
            metrics.skip(SkipReason::Paced);
            continue;
        }
        proposals.push(Proposal {
            campaign: cand.campaign,
            creative: cand.creative,
            deal: cand.deal,
            price,
        });
    }
    // Stable sort: equal prices keep the index's (file) order.
    proposals.sort_by(|a, b| b.price.cmp(&a.price).then(a.campaign.cmp(&b.campaign)));
    proposals.truncate(MAX_PROPOSALS);
    proposals
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    use openrtb::BidRequest;

    use super::*;
    use crate::campaign::CampaignSet;

    fn campaign(id: &str, cpm: f64) -> String {
        format!(
            r#"{{"id": "{id}", "budget": {{"total": 1}}, "bid": {{"cpm": {cpm}}},
              "creatives": [{{"id": "cr", "w": 300, "h": 250, "adm": "x"}}]}}"#
        )
    }

    fn snapshot(campaigns: &[String]) -> Snapshot {
        let json = format!("[{}]", campaigns.join(","));
        let set = CampaignSet::from_json_bytes(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        Snapshot::build(set, None, Timestamp::now(), Duration::from_secs(1))
    }

    fn request(floor: f64) -> BidRequest {
        let json = format!(
            r#"{{"id": "r", "imp": [{{"id": "1", "banner": {{"w": 300, "h": 250}}, "bidfloor": {floor}}}]}}"#
        );
        openrtb::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn ranked(s: &Snapshot, floor: f64, draw: u32, metrics: &Metrics) -> Vec<(String, i64)> {
        let req = request(floor);
        let now = Timestamp::now();
        let facts = RequestFacts::from_request(&req, now);
        let imp = ImpFacts::from_imp(&req.imp[0]);
        let mut scratch = Vec::new();
        rank(s, &facts, &imp, now, &mut scratch, &mut || draw, metrics)
            .iter()
            .map(|p| {
                let id = s.set.campaigns()[p.campaign as usize].id().to_owned();
                (id, p.price.micros())
            })
            .collect()
    }

    #[test]
    fn best_price_first_ties_in_file_order_at_most_three() {
        let s = snapshot(&[
            campaign("a", 1.0),
            campaign("b", 3.0),
            campaign("c", 2.0),
            campaign("d", 3.0),
            campaign("e", 0.5),
        ]);
        let metrics = Metrics::default();
        let got = ranked(&s, 0.1, 0, &metrics);
        assert_eq!(
            got,
            vec![
                ("b".to_owned(), 3_000_000),
                ("d".to_owned(), 3_000_000),
                ("c".to_owned(), 2_000_000)
            ]
        );
    }

    #[test]
    fn floors_exhaustion_and_pacing_skip_and_count() {
        let s = snapshot(&[campaign("a", 1.0), campaign("b", 3.0), campaign("c", 2.0)]);
        let metrics = Metrics::default();
        // Floor 1.5: "a" cannot pay it.
        assert_eq!(ranked(&s, 1.5, 0, &metrics).len(), 2);
        assert_eq!(metrics.skip_count(SkipReason::BelowFloor), 1);
        // "b" known to be out of budget: skipped without asking the ledger.
        s.states[1].mark_exhausted(Timestamp::now(), Duration::from_secs(60));
        let got = ranked(&s, 0.1, 0, &metrics);
        assert_eq!(got.first().map(|g| g.0.as_str()), Some("c"));
        assert_eq!(metrics.skip_count(SkipReason::Exhausted), 1);
        // A pacer share of 50%: a draw below it bids, one above it does not.
        s.states[2].share_ppm.store(500_000, Relaxed);
        assert_eq!(ranked(&s, 0.1, 499_999, &metrics).len(), 2);
        assert_eq!(ranked(&s, 0.1, 500_000, &metrics).len(), 1);
        assert_eq!(metrics.skip_count(SkipReason::Paced), 1);
    }
}
