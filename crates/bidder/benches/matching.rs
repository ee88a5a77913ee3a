//! Campaign matching per bid request: facts extraction plus `CampaignSet::candidates` for every
//! impression, over synthetic campaign sets of 10,000 and 100,000 campaigns, and the
//! brute-force scan at 10,000 for comparison. One element = one request, so criterion reports
//! decisions per second.
//!
//! `cargo bench -p bidder --bench matching -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bidder::campaign::synth::{NOW, synthetic, synthetic_requests};
use bidder::campaign::{CampaignSet, Candidate, ImpFacts, RequestFacts};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use openrtb::BidRequest;

const REQUESTS: usize = 4_096;

fn build(n: usize) -> CampaignSet {
    match CampaignSet::from_campaigns(synthetic(n, 42)) {
        Ok(set) => set,
        Err(e) => panic!("synthetic campaigns must index: {e}"),
    }
}

/// Candidates found over all requests, to show the work is real (printed once per set).
fn total_candidates(set: &CampaignSet, requests: &[BidRequest]) -> usize {
    let mut out: Vec<Candidate> = Vec::new();
    let mut total = 0;
    for r in requests {
        let req = RequestFacts::from_request(r, NOW);
        for imp in &r.imp {
            out.clear();
            set.candidates(&req, &ImpFacts::from_imp(imp), &mut out);
            total += out.len();
        }
    }
    total
}

fn matching(c: &mut Criterion) {
    let requests = synthetic_requests(REQUESTS, 7);
    let mut group = c.benchmark_group("matching");
    group.throughput(Throughput::Elements(1));
    for n in [10_000, 100_000] {
        let set = build(n);
        eprintln!(
            "{n} campaigns: {:.1} candidates per request on average",
            total_candidates(&set, &requests) as f64 / REQUESTS as f64
        );
        let mut out: Vec<Candidate> = Vec::with_capacity(1024);
        let mut k = 0;
        group.bench_function(format!("index/{n}"), |b| {
            b.iter(|| {
                let r = &requests[k % REQUESTS];
                k += 1;
                let req = RequestFacts::from_request(black_box(r), NOW);
                let mut found = 0;
                for imp in &r.imp {
                    out.clear();
                    set.candidates(&req, &ImpFacts::from_imp(imp), &mut out);
                    found += out.len();
                }
                black_box(found)
            });
        });
        if n == 10_000 {
            group.bench_function(format!("scan/{n}"), |b| {
                b.iter(|| {
                    let r = &requests[k % REQUESTS];
                    k += 1;
                    let req = RequestFacts::from_request(black_box(r), NOW);
                    let mut found = 0;
                    for imp in &r.imp {
                        out.clear();
                        set.candidates_scan(&req, &ImpFacts::from_imp(imp), &mut out);
                        found += out.len();
                    }
                    black_box(found)
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, matching);
criterion_main!(benches);
