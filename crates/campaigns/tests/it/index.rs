//! The index returns exactly what the brute-force scan returns, on seeded random campaigns and
//! requests; visiting stops where the visitor breaks; the set orders campaigns by descending
//! ceiling; synthetic data is deterministic and valid.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ops::ControlFlow;

use units::Timestamp;

use campaigns::{CampaignSet, ImpFacts, RequestFacts};
use testkit::synth::{
    NOW, Profile, synthetic, synthetic_requests, synthetic_requests_with, synthetic_with,
};

/// Compares index and scan for every impression of every request at several decision times;
/// returns (impressions checked, candidates found).
fn compare(set: &CampaignSet, requests: &[openrtb::BidRequest]) -> (usize, usize) {
    let hour = 3_600_000;
    let times = [
        NOW,
        Timestamp(NOW.0 - 7 * hour),
        Timestamp(NOW.0 + 5 * hour),
        Timestamp(NOW.0 + 40 * 24 * hour),
    ];
    let (mut imps, mut found) = (0, 0);
    let (mut indexed, mut scanned) = (Vec::new(), Vec::new());
    for (k, r) in requests.iter().enumerate() {
        let now = times[k % times.len()];
        let req = RequestFacts::from_request(r, now);
        for imp in &r.imp {
            let imp = ImpFacts::from_imp(imp);
            indexed.clear();
            scanned.clear();
            set.candidates(&req, &imp, &mut indexed);
            set.candidates_scan(&req, &imp, &mut scanned);
            assert_eq!(indexed, scanned, "request {} ({:?})", r.id, req);
            imps += 1;
            found += indexed.len();
        }
    }
    (imps, found)
}

#[test]
fn index_equals_scan_on_dense_random_sets() {
    // Small value pools: campaigns and requests collide on every dimension often.
    let mut total = 0;
    for seed in 0..12 {
        let campaigns = synthetic_with(400, seed, Profile::DENSE);
        let set = CampaignSet::from_campaigns(campaigns).expect("synthetic set");
        let requests = synthetic_requests_with(250, seed, Profile::DENSE);
        let (imps, found) = compare(&set, &requests);
        assert!(imps >= 250);
        total += found;
    }
    // Not a vacuous comparison: thousands of matches were compared.
    assert!(total > 10_000, "only {total} candidates");
}

#[test]
fn index_equals_scan_on_realistic_sets() {
    let set = CampaignSet::from_campaigns(synthetic(5_000, 42)).expect("synthetic set");
    let requests = synthetic_requests(1_000, 42);
    let (_, found) = compare(&set, &requests);
    assert!(found > 1_000, "only {found} candidates");
}

#[test]
fn index_equals_scan_on_a_large_sparse_set() {
    // 20,000 campaigns: 313 bitset words, so the sparse-list path (a tiny smallest dimension)
    // and the early stop of the intersection (few survivors) both run, not only full
    // intersections.
    let set = CampaignSet::from_campaigns(synthetic(20_000, 9)).expect("synthetic set");
    let requests = synthetic_requests(300, 9);
    let (_, found) = compare(&set, &requests);
    assert!(found > 1_000, "only {found} candidates");
}

#[test]
fn index_equals_scan_on_a_broad_set() {
    // About 7% of the campaigns match: dense postings, several chunks of the bitset, and
    // thousands of candidates per impression.
    let set = CampaignSet::from_campaigns(synthetic_with(10_000, 4, Profile::BROAD))
        .expect("synthetic set");
    let requests = synthetic_requests_with(80, 4, Profile::BROAD);
    let (imps, found) = compare(&set, &requests);
    assert!(
        found > 200 * imps,
        "only {found} candidates for {imps} impressions"
    );
}

/// Visits the candidates of every impression, breaking after `k` of them for several `k`, and
/// checks that the visitor saw exactly the first `k` candidates of the full list and was not
/// called again; returns the impressions checked.
fn check_prefixes(set: &CampaignSet, requests: &[openrtb::BidRequest]) -> usize {
    let mut imps = 0;
    let mut full = Vec::new();
    for r in requests {
        let req = RequestFacts::from_request(r, NOW);
        for imp in &r.imp {
            let imp = ImpFacts::from_imp(imp);
            full.clear();
            set.candidates(&req, &imp, &mut full);
            let len = full.len();
            for k in [1, 2, 7, len / 3, len.saturating_sub(1), len, len + 1] {
                let k = k.max(1);
                let mut seen = Vec::new();
                let flow = set.visit_candidates(&req, &imp, |c| {
                    seen.push(c);
                    if seen.len() == k {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
                assert_eq!(seen, full[..k.min(len)], "request {} k {k}", r.id);
                assert_eq!(flow.is_break(), k <= len, "request {} k {k}", r.id);
            }
            imps += 1;
        }
    }
    imps
}

#[test]
fn visiting_stops_where_the_visitor_breaks() {
    // Small sets (the sparse-list path and one chunk), a realistic 20,000 (sparse lists and
    // early-stopped intersections over several chunks) and a broad 20,000 (dense postings,
    // every chunk full of candidates).
    for seed in 0..4 {
        let set = CampaignSet::from_campaigns(synthetic_with(400, seed, Profile::DENSE))
            .expect("synthetic set");
        check_prefixes(&set, &synthetic_requests_with(100, seed, Profile::DENSE));
    }
    let set = CampaignSet::from_campaigns(synthetic(20_000, 9)).expect("synthetic set");
    check_prefixes(&set, &synthetic_requests(150, 9));
    let set = CampaignSet::from_campaigns(synthetic_with(20_000, 5, Profile::BROAD))
        .expect("synthetic set");
    assert!(check_prefixes(&set, &synthetic_requests_with(40, 5, Profile::BROAD)) >= 40);
}

#[test]
fn campaigns_are_ordered_by_descending_ceiling_then_file_order() {
    let set = CampaignSet::from_campaigns(synthetic(3_000, 11)).expect("synthetic set");
    let file_pos = |c: &campaigns::Campaign| -> usize {
        c.id()
            .strip_prefix('c')
            .and_then(|n| n.parse().ok())
            .expect("synthetic ids are c<n>")
    };
    let campaigns = set.campaigns();
    assert_eq!(campaigns.len(), 3_000);
    for pair in campaigns.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.bid().max_cpm >= b.bid().max_cpm,
            "{} before {}",
            a.id(),
            b.id()
        );
        if a.bid().max_cpm == b.bid().max_cpm {
            assert!(file_pos(a) < file_pos(b), "{} before {}", a.id(), b.id());
        }
    }
    // Not trivially sorted: the file order was not already the ceiling order.
    assert_ne!(file_pos(&campaigns[0]), 0);
    // Lookups by id follow the new order.
    for (i, c) in campaigns.iter().enumerate() {
        assert_eq!(set.position(c.id()), u32::try_from(i).ok());
        assert_eq!(set.get(c.id()).map(|g| g.id()), Some(c.id()));
    }
}

#[test]
fn index_equals_scan_with_appended_output_and_duplicated_values() {
    // Duplicate deal ids, segments and domains in one request, and a non-empty `out`: the
    // index appends sorted, deduplicated candidates after what was there.
    let campaigns = synthetic_with(300, 5, Profile::DENSE);
    let set = CampaignSet::from_campaigns(campaigns).expect("synthetic set");
    for mut r in synthetic_requests_with(200, 6, Profile::DENSE) {
        if let Some(user) = r.user.as_mut()
            && let Some(data) = user.data.as_mut()
        {
            let copy = data.clone();
            data.extend(copy);
        }
        for imp in &mut r.imp {
            if let Some(deals) = imp.pmp.as_mut().and_then(|p| p.deals.as_mut()) {
                let copy = deals.clone();
                deals.extend(copy);
            }
        }
        let req = RequestFacts::from_request(&r, NOW);
        for imp in &r.imp {
            let imp = ImpFacts::from_imp(imp);
            let sentinel = campaigns::Candidate {
                campaign: u32::MAX,
                creative: 0,
                deal: None,
            };
            let (mut indexed, mut scanned) = (vec![sentinel], vec![sentinel]);
            set.candidates(&req, &imp, &mut indexed);
            set.candidates_scan(&req, &imp, &mut scanned);
            assert_eq!(indexed, scanned);
        }
    }
}

#[test]
fn synthetic_data_is_deterministic_and_valid() {
    let a = synthetic(2_000, 7);
    assert_eq!(a.len(), 2_000, "every synthetic campaign validates");
    assert_eq!(a, synthetic(2_000, 7));
    assert_ne!(a, synthetic(2_000, 8));
    let set = CampaignSet::from_campaigns(a).expect("unique ids");
    assert_eq!(set.get("c1999").map(|c| c.id()), Some("c1999"));
    assert_eq!(synthetic_requests(50, 1), synthetic_requests(50, 1));
    let dense = synthetic_with(500, 3, Profile::DENSE);
    assert_eq!(dense.len(), 500);
}
