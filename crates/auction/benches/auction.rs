//! The auction on the hot path: 2, 10 and 50 bids on one impression, 50 bids over three.
//!
//! The request looks like a real one: a short `bcat` and `badv`, a `bseat`, one deal on the first
//! impression, second price. Bids are valid except for a few below the floor, a few deal bids,
//! and some exact price ties, so every stage of the auction runs.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use auction::{AuctionConfig, Candidate, DealRules, ImpRules, PriceRule, Rules, run};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use openrtb::Price;

struct Bid {
    bidder: u32,
    seat: String,
    id: String,
    imp: String,
    price: Price,
    deal: Option<String>,
    adomain: Vec<String>,
    cat: Vec<String>,
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn bids(n: usize, imps: usize) -> Vec<Bid> {
    (0..n)
        .map(|i| {
            let bidder = (i % 12) as u32;
            // 0.40 .. 3.30 CPM in 0.10 steps, every price twice in 50 bids (with 50 bids the top
            // price is an exact tie), some under the 0.50 floor.
            let cents = 40 + ((i * 37) % 30) * 10;
            Bid {
                bidder,
                seat: format!("seat-{bidder}"),
                id: format!("{:08x}-bid-{i}", i * 2_654_435_761),
                imp: format!("{}", i % imps + 1),
                price: Price::from_micros(cents as i64 * 10_000),
                deal: (i % 7 == 2).then(|| "deal-1".to_owned()),
                adomain: vec![format!("advertiser{}.com", i % 20)],
                cat: strings(&["IAB3-1"]),
            }
        })
        .collect()
}

fn candidates(bids: &[Bid]) -> Vec<Candidate<'_>> {
    bids.iter()
        .map(|b| Candidate {
            bidder: b.bidder,
            seat: &b.seat,
            bid_id: &b.id,
            imp_id: &b.imp,
            price: b.price,
            currency: "USD",
            deal_id: b.deal.as_deref(),
            adomain: &b.adomain,
            cat: &b.cat,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let bcat = strings(&["IAB25", "IAB26", "IAB7-39", "IAB8-18", "IAB9-9"]);
    let badv = strings(&[
        "blocked1.com",
        "blocked2.com",
        "advertiser19.com",
        "x.net",
        "y.org",
    ]);
    let bseat = strings(&["seat-blocked"]);
    let wseat_deal = strings(&["seat-3", "seat-10"]);
    let none: Vec<String> = Vec::new();
    let ids = ["1", "2", "3"];
    let rules = |imps: usize| Rules {
        currency: "USD",
        price_rule: PriceRule::SecondPrice,
        bcat: &bcat,
        badv: &badv,
        wseat: &none,
        bseat: &bseat,
        imps: ids[..imps]
            .iter()
            .enumerate()
            .map(|(k, id)| ImpRules {
                id,
                floor: Price::from_micros(500_000),
                private_auction: false,
                deals: if k == 0 {
                    vec![DealRules {
                        id: "deal-1",
                        floor: Price::from_micros(1_000_000),
                        price_rule: None,
                        wseat: &wseat_deal,
                        wadomain: &none,
                    }]
                } else {
                    Vec::new()
                },
            })
            .collect(),
    };
    let config = AuctionConfig::default();

    let mut group = c.benchmark_group("auction");
    for (n, imps) in [(2, 1), (10, 1), (50, 1), (50, 3)] {
        let rules = rules(imps);
        let bids = bids(n, imps);
        let candidates = candidates(&bids);
        let out = run(&rules, &candidates, &config);
        assert!(out.imps.iter().all(|i| i.winner.is_some()));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(
            BenchmarkId::new(format!("{imps}_imp"), format!("{n}_bids")),
            &candidates,
            |b, candidates| b.iter(|| run(black_box(&rules), black_box(candidates), &config)),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
