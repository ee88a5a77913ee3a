//! Campaign matching per bid request: facts extraction plus `CampaignSet::candidates` for every
//! impression, over synthetic campaign sets of 10,000 and 100,000 campaigns, and the
//! brute-force scan at 10,000 for comparison; then the whole bid decision (matching, pricing,
//! pacing draw and ranking by `campaigns::rank`, and the reservation of the best candidate's price in
//! an in-memory `ledger::Book`). One element = one request, so criterion reports decisions per
//! second. The decision group also runs a broadly targeted set of 100,000 campaigns where about
//! 7% of the campaigns match an impression (thousands of candidates), the case the price-ordered
//! early exit of `campaigns::rank` is for.
//!
//! `cargo bench -p campaigns --bench matching -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use std::time::Duration;

use campaigns::{CampaignSet, Candidate, ImpFacts, RequestFacts, Snapshot, rank};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use ledger::Book;
use openrtb::BidRequest;
use testkit::synth::{
    NOW, synthetic, synthetic_broad, synthetic_requests, synthetic_requests_broad,
};
use units::{Limits, Nanos, Timestamp};

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

/// The whole decision for one request, against the in-memory ledger.
fn decision(c: &mut Criterion) {
    let requests = synthetic_requests(REQUESTS, 7);
    let mut group = c.benchmark_group("decision");
    group.throughput(Throughput::Elements(1));
    for n in [10_000, 100_000] {
        decide_bench(
            &mut group,
            &format!("memory-ledger/{n}"),
            build(n),
            &requests,
        );
    }
    // Broad targeting: about 7% of the campaigns match, thousands of candidates per request.
    let broad_requests = synthetic_requests_broad(REQUESTS, 7);
    let broad = match CampaignSet::from_campaigns(synthetic_broad(100_000, 42)) {
        Ok(set) => set,
        Err(e) => panic!("synthetic campaigns must index: {e}"),
    };
    eprintln!(
        "100000 broad campaigns: {:.1} candidates per request on average",
        total_candidates(&broad, &broad_requests) as f64 / REQUESTS as f64
    );
    decide_bench(
        &mut group,
        "memory-ledger-broad/100000",
        broad,
        &broad_requests,
    );
    group.finish();
}

fn decide_bench(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    set: CampaignSet,
    requests: &[BidRequest],
) {
    let snapshot = Snapshot::build(set, None, NOW, Duration::from_secs(1));
    // Budgets that never run out; resolved reservations forgotten 1 ms after they resolve.
    let mut book = Book::new(Duration::from_millis(1));
    let limits = Limits {
        total: Nanos::from_units(1e6).unwrap_or(Nanos(i64::MAX / 4)),
        daily: None,
    };
    for campaign in snapshot.set.campaigns() {
        book.set_limits(campaign.id(), limits, NOW);
    }
    // How far ranking looks before its early exit: the candidates drawn for pacing or refused
    // below their floor (printed once per set).
    let mut looked = 0usize;
    for r in requests {
        let req = RequestFacts::from_request(r, NOW);
        for imp in &r.imp {
            let imp = ImpFacts::from_imp(imp);
            let mut count = || {
                looked += 1;
                0
            };
            let ranking = rank(&snapshot, &req, &imp, NOW, &mut count);
            looked += ranking.skips.below_floor as usize;
        }
    }
    eprintln!(
        "{name}: rank looked at {:.1} candidates per request on average",
        looked as f64 / requests.len() as f64
    );
    let (mut k, mut seq, mut bids) = (0usize, 0u64, 0u64);
    let mut draw = || 0u32;
    group.bench_function(name, |b| {
        b.iter(|| {
            let r = &requests[k % requests.len()];
            k += 1;
            let now = Timestamp(NOW.millis() + k as u64 / 1024 * 1000);
            if k.is_multiple_of(1024) {
                book.expire(now);
            }
            let req = RequestFacts::from_request(black_box(r), NOW);
            for imp in &r.imp {
                let ranking = rank(&snapshot, &req, &ImpFacts::from_imp(imp), NOW, &mut draw);
                let Some(best) = ranking.proposals.first() else {
                    continue;
                };
                let campaign = &snapshot.set.campaigns()[best.campaign as usize];
                seq += 1;
                let id = format!("bench-{seq:x}");
                let amount = Nanos::of_impression(best.price);
                if book.reserve(&id, campaign.id(), amount, now, now).is_ok() {
                    bids += 1;
                }
            }
            black_box(bids)
        });
    });
}

criterion_group!(benches, matching, decision);
criterion_main!(benches);
