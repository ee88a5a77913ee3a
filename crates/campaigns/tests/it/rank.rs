//! `rank` with its price-ordered early exit returns exactly what pricing every candidate and
//! sorting returns, on seeded synthetic sets (dense ones where random campaigns and requests
//! collide often, and a broad one with thousands of candidates per impression).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use campaigns::rank::{MAX_PROPOSALS, Proposal, rank};
use campaigns::{CampaignSet, ImpFacts, RequestFacts, Snapshot, bid_price};
use openrtb::BidRequest;
use testkit::synth::{NOW, Profile, synthetic_requests_with, synthetic_with};

/// What `rank` must return when every campaign is fully paced in and none is exhausted: all
/// candidates (from the brute-force scan), each campaign's first one that meets its floor,
/// priced, sorted by price then campaign, the best [`MAX_PROPOSALS`].
fn reference(s: &Snapshot, req: &RequestFacts<'_>, imp: &ImpFacts<'_>) -> Vec<Proposal> {
    let mut all = Vec::new();
    s.set.candidates_scan(req, imp, &mut all);
    let mut priced: Vec<Proposal> = Vec::new();
    for cand in all {
        if priced.iter().any(|p| p.campaign == cand.campaign) {
            continue;
        }
        let campaign = &s.set.campaigns()[cand.campaign as usize];
        let (floor, first_price) = imp.terms(req, cand.deal);
        if let Some(price) = bid_price(campaign, floor, first_price) {
            priced.push(Proposal {
                campaign: cand.campaign,
                creative: cand.creative,
                deal: cand.deal,
                price,
            });
        }
    }
    priced.sort_by(|a, b| b.price.cmp(&a.price).then(a.campaign.cmp(&b.campaign)));
    priced.truncate(MAX_PROPOSALS);
    priced
}

/// Compares `rank` with [`reference`] on every impression of `requests`; returns (full
/// proposal lists seen, campaigns `rank` looked at, campaigns that matched).
fn rank_equals_reference(set: CampaignSet, requests: &[BidRequest]) -> (usize, usize, usize) {
    let s = Snapshot::build(set, None, NOW, Duration::from_secs(1));
    for state in &s.states {
        state.share_ppm.store(1_000_000, Relaxed);
    }
    let (mut full, mut looked, mut matched) = (0, 0, 0);
    for r in requests {
        let req = RequestFacts::from_request(r, NOW);
        for imp in &r.imp {
            let imp = ImpFacts::from_imp(imp);
            let mut draws = 0;
            let got = rank(&s, &req, &imp, NOW, &mut || {
                draws += 1;
                0
            });
            assert_eq!(got.proposals, reference(&s, &req, &imp), "request {}", r.id);
            // Fully paced in and nothing exhausted: only floors skip.
            assert_eq!((got.skips.exhausted, got.skips.paced), (0, 0));
            full += usize::from(got.proposals.len() == MAX_PROPOSALS);
            // Each campaign looked at is drawn for once, or skipped below its floor (once
            // per candidate: an upper bound).
            looked += draws + got.skips.below_floor as usize;
            let mut all = Vec::new();
            s.set.candidates(&req, &imp, &mut all);
            all.dedup_by_key(|c| c.campaign);
            matched += all.len();
        }
    }
    (full, looked, matched)
}

#[test]
fn early_exit_ranks_like_pricing_every_candidate_on_dense_random_sets() {
    let mut full = 0;
    for seed in 0..10 {
        let set = CampaignSet::from_campaigns(synthetic_with(400, seed, Profile::DENSE))
            .unwrap_or_else(|e| panic!("{e}"));
        let requests = synthetic_requests_with(200, seed, Profile::DENSE);
        full += rank_equals_reference(set, &requests).0;
    }
    // Not vacuous: the early exit had a full list to compare against many times.
    assert!(full > 1_000, "only {full} full rankings");
}

#[test]
fn early_exit_ranks_like_pricing_every_candidate_on_a_broad_set() {
    // 20,000 broadly targeted campaigns (5 chunks of the bitset), thousands of candidates
    // per impression.
    let set = CampaignSet::from_campaigns(synthetic_with(20_000, 3, Profile::BROAD))
        .unwrap_or_else(|e| panic!("{e}"));
    let requests = synthetic_requests_with(120, 3, Profile::BROAD);
    let (full, looked, matched) = rank_equals_reference(set, &requests);
    assert!(full > 100, "only {full} full rankings");
    assert!(matched > 100_000, "only {matched} matching campaigns");
    // The early exit looked at a small share of the matching campaigns.
    assert!(looked * 5 < matched, "looked at {looked} of {matched}");
}
