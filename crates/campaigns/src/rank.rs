//! The bid decision for one impression, as synchronous, deterministic code: the candidates the
//! campaign index visits, priced, filtered by budget state and pacing, ranked best first,
//! stopping as soon as no later candidate can make the top [`MAX_PROPOSALS`].
//! Reserving budget (which may wait on a store) is the caller's step, so this part is
//! testable with plain data.

use std::ops::ControlFlow;

use openrtb::Price;
use units::Timestamp;

use crate::facts::{ImpFacts, RequestFacts};
use crate::pricing::rule_price;
use crate::snapshot::Snapshot;

/// Most proposals kept per impression: when the best one's reservation is refused, the next
/// is tried, a bounded number of times.
pub const MAX_PROPOSALS: usize = 3;

/// How many candidates one ranking passed over, by reason; the caller counts them in its
/// metrics (this crate keeps none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skips {
    /// Would not pay the floor (its ceiling is below it).
    pub below_floor: u32,
    /// Known to have no budget left.
    pub exhausted: u32,
    /// Held back by its pacer's draw.
    pub paced: u32,
}

/// One impression's ranking: the best proposals, best first, and what was passed over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranking {
    pub proposals: Vec<Proposal>,
    pub skips: Skips,
}

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
/// price go to the campaign listed first in the set (highest `max_cpm`, then file order), so the
/// same input gives the same answer. One proposal per campaign: the first of its (creative,
/// deal) candidates, in the index's order, that meets its floor.
///
/// Early exit: the set lists campaigns by descending `max_cpm` and a campaign never bids above
/// its `max_cpm`, so once [`MAX_PROPOSALS`] are held and the next candidate's `max_cpm` is at
/// most the lowest price held, no later candidate can displace one (an equal price loses the
/// tie to the earlier campaign) and matching stops there. Skips (below floor, exhausted, paced)
/// are counted, and `draw` called, only for the candidates visited before the stop.
pub fn rank(
    snapshot: &Snapshot,
    req: &RequestFacts<'_>,
    imp: &ImpFacts<'_>,
    now: Timestamp,
    draw: &mut impl FnMut() -> u32,
) -> Ranking {
    let mut proposals: Vec<Proposal> = Vec::with_capacity(MAX_PROPOSALS + 1);
    let mut skips = Skips::default();
    let set = &snapshot.set;
    // The index visits candidates by campaign, so one campaign's are adjacent: once it has a
    // proposal, its other candidates are skipped by comparing with the last one.
    let mut proposed: Option<u32> = None;
    let _ = snapshot.set.visit_candidates(req, imp, |cand| {
        if proposed == Some(cand.campaign) {
            return ControlFlow::Continue(());
        }
        let (Some(rule), Some(state)) = (
            set.bid_rule(cand.campaign),
            snapshot.states.get(cand.campaign as usize),
        ) else {
            return ControlFlow::Continue(());
        };
        // Held proposals are best first, so the last is the lowest.
        if proposals.len() == MAX_PROPOSALS
            && proposals
                .last()
                .is_some_and(|lowest| rule.max_cpm <= lowest.price)
        {
            return ControlFlow::Break(());
        }
        let (floor, first_price) = imp.terms(req, cand.deal);
        let Some(price) = rule_price(&rule, floor, first_price) else {
            skips.below_floor += 1;
            return ControlFlow::Continue(());
        };
        if state.is_exhausted(now) {
            skips.exhausted += 1;
            return ControlFlow::Continue(());
        }
        if !state.admits(draw()) {
            skips.paced += 1;
            return ControlFlow::Continue(());
        }
        proposed = Some(cand.campaign);
        // Keep the best few, best first. Candidates come in campaign order, so an equal price
        // goes after those held: the tie stays with the earlier campaign.
        let at = proposals
            .iter()
            .position(|p| p.price < price)
            .unwrap_or(proposals.len());
        if at < MAX_PROPOSALS {
            proposals.insert(
                at,
                Proposal {
                    campaign: cand.campaign,
                    creative: cand.creative,
                    deal: cand.deal,
                    price,
                },
            );
            proposals.truncate(MAX_PROPOSALS);
        }
        ControlFlow::Continue(())
    });
    Ranking { proposals, skips }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    use openrtb::BidRequest;

    use super::*;
    use crate::set::CampaignSet;
    use crate::snapshot::CampaignState;

    fn state<'s>(s: &'s Snapshot, id: &str) -> &'s CampaignState {
        match s.state(id) {
            Some(state) => state,
            None => panic!("no campaign {id}"),
        }
    }

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

    /// The ranking of a one-imp request with `floor`, every draw `draw`: (campaign, price) best
    /// first, and the skips.
    fn ranked(s: &Snapshot, floor: f64, draw: u32) -> (Vec<(String, i64)>, Skips) {
        let req = request(floor);
        let now = Timestamp::now();
        let facts = RequestFacts::from_request(&req, now);
        let imp = ImpFacts::from_imp(&req.imp[0]);
        let ranking = rank(s, &facts, &imp, now, &mut || draw);
        let got = ranking
            .proposals
            .iter()
            .map(|p| {
                let id = s.set.campaigns()[p.campaign as usize].id().to_owned();
                (id, p.price.micros())
            })
            .collect();
        (got, ranking.skips)
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
        let (got, skips) = ranked(&s, 0.1, 0);
        assert_eq!(skips, Skips::default());
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
        // Floor 1.5: "a" cannot pay it.
        let (got, skips) = ranked(&s, 1.5, 0);
        assert_eq!(got.len(), 2);
        assert_eq!(
            skips,
            Skips {
                below_floor: 1,
                ..Skips::default()
            }
        );
        // "b" known to be out of budget: skipped without asking the ledger.
        state(&s, "b").mark_exhausted(Timestamp::now(), Duration::from_secs(60));
        let (got, skips) = ranked(&s, 0.1, 0);
        assert_eq!(got.first().map(|g| g.0.as_str()), Some("c"));
        assert_eq!(
            skips,
            Skips {
                exhausted: 1,
                ..Skips::default()
            }
        );
        // A pacer share of 50%: a draw below it bids, one above it does not.
        state(&s, "c").share_ppm.store(500_000, Relaxed);
        assert_eq!(ranked(&s, 0.1, 499_999).0.len(), 2);
        let (got, skips) = ranked(&s, 0.1, 500_000);
        assert_eq!(got.len(), 1);
        assert_eq!(
            skips,
            Skips {
                exhausted: 1,
                paced: 1,
                ..Skips::default()
            }
        );
    }

    #[test]
    fn the_set_puts_the_highest_ceiling_first_and_ties_keep_file_order() {
        let s = snapshot(&[
            campaign("a", 1.0),
            campaign("b", 3.0),
            campaign("c", 2.0),
            campaign("d", 3.0),
        ]);
        let ids: Vec<&str> = s.set.campaigns().iter().map(|c| c.id()).collect();
        assert_eq!(ids, ["b", "d", "c", "a"]);
        assert_eq!(s.set.position("d"), Some(1));
        assert_eq!(s.set.get("c").map(|c| c.id()), Some("c"));
        assert_eq!(state(&s, "a").id, "a");
    }

    #[test]
    fn early_exit_stops_after_the_best_when_they_have_the_highest_ceilings() {
        // 1,000 campaigns that all match, cheapest first in the file: the set puts the three
        // highest ceilings first, and once they are held the fourth cannot beat them.
        let campaigns: Vec<String> = (1..=1_000)
            .map(|i| campaign(&format!("c{i}"), f64::from(i) / 100.0))
            .collect();
        let s = snapshot(&campaigns);
        let req = request(0.5);
        let now = Timestamp::now();
        let facts = RequestFacts::from_request(&req, now);
        let imp = ImpFacts::from_imp(&req.imp[0]);
        let mut all = Vec::new();
        s.set.candidates(&facts, &imp, &mut all);
        assert_eq!(all.len(), 1_000);
        let mut draws = 0;
        let got = rank(&s, &facts, &imp, now, &mut || {
            draws += 1;
            0
        });
        let ids: Vec<&str> = got
            .proposals
            .iter()
            .map(|p| s.set.campaigns()[p.campaign as usize].id())
            .collect();
        assert_eq!(ids, ["c1000", "c999", "c998"]);
        assert_eq!(draws, 3, "three candidates visited, not 1,000");
        assert_eq!(got.skips, Skips::default());

        // A floor above the best: the candidates that cannot pay it are visited and counted,
        // then the exit comes as soon as three are held.
        let req = request(9.985);
        let facts = RequestFacts::from_request(&req, now);
        let imp = ImpFacts::from_imp(&req.imp[0]);
        let mut draws = 0;
        let got = rank(&s, &facts, &imp, now, &mut || {
            draws += 1;
            0
        });
        let ids: Vec<&str> = got
            .proposals
            .iter()
            .map(|p| s.set.campaigns()[p.campaign as usize].id())
            .collect();
        assert_eq!(ids, ["c1000", "c999"]);
        // Fewer than three can pay: every candidate is visited.
        assert_eq!(draws, 2);
        assert_eq!(got.skips.below_floor, 998);
    }
}
