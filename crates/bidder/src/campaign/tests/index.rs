//! The index returns exactly what the brute-force scan returns, on seeded random campaigns and
//! requests; synthetic data is deterministic and valid.

use pacing::Timestamp;

use super::super::synth::{
    NOW, Profile, synthetic, synthetic_requests, synthetic_requests_with, synthetic_with,
};
use super::super::{CampaignSet, ImpFacts, RequestFacts};

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
            let sentinel = super::super::Candidate {
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
