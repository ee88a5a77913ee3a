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
