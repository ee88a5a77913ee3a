//! The exchange's own work per auction, without I/O: enriching the seller's request and encoding
//! it once for the whole fan-out, and settling ten bidders' replies (auction, winner rewrite,
//! macros), reading ten bidders' answers, and the per-bidder gates of a fan-out (clock read, rate cap and breaker behind their
//! mutexes). Decoding is benchmarked in `openrtb`, the bare auction in `auction`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::time::Instant;

use auction::AuctionConfig;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use exchange::breaker::{Breaker, BreakerConfig, Health, RateCap, pass_gates};
use exchange::config::SchainConfig;
use exchange::enrich::enrich;
use exchange::outcome::BidderIx;
use exchange::reply::{Called, interpret};
use exchange::settle::{AuctionCtx, BidderView, settle};
use openrtb::BidRequest;

const REALISTIC: &[u8] = include_bytes!("../../openrtb/tests/fixtures/realistic-2.5k.json");

fn enrich_and_encode(c: &mut Criterion) {
    let request = BidRequest::from_slice(REALISTIC).unwrap();
    let schain = SchainConfig::default();
    let mut group = c.benchmark_group("fan-out");
    group.throughput(Throughput::Bytes(REALISTIC.len() as u64));
    group.bench_function("enrich+encode/realistic-2.5k", |b| {
        b.iter_batched(
            || request.clone(),
            |mut r| {
                enrich(&mut r, "gavel-1-2a".to_owned(), 90, &schain);
                r.to_vec().unwrap()
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

/// Ten bidders' answer bodies, each bidding on every imp with its own price and full markup
/// and notice URLs.
fn answers(request: &BidRequest, auction_id: &str) -> Vec<String> {
    (0..10u32)
        .map(|i| {
            let bids: Vec<_> = request
                .imp
                .iter()
                .map(|imp| {
                    serde_json::json!({
                        "id": format!("b{i}-{}", imp.id), "impid": imp.id, "price": 1.0 + f64::from(i) * 0.37,
                        "adid": "ad-1", "crid": "cr-1", "adomain": [format!("brand{i}.example")], "cat": ["IAB1"],
                        "adm": "<div><img src=\"https://cdn.example/a.png?p=${AUCTION_PRICE}\"></div>",
                        "nurl": "http://dsp.example/win?a=${AUCTION_ID}&b=${AUCTION_BID_ID}&p=${AUCTION_PRICE}",
                        "burl": "http://dsp.example/bill?a=${AUCTION_ID}&p=${AUCTION_PRICE}",
                        "lurl": "http://dsp.example/loss?a=${AUCTION_ID}&r=${AUCTION_LOSS}"
                    })
                })
                .collect();
            let body = serde_json::json!({"id": auction_id, "cur": "USD", "seatbid": [{"seat": format!("seat{i}"), "bid": bids}]});
            body.to_string()
        })
        .collect()
}

fn replies(request: &BidRequest, auction_id: &str) -> Vec<Called> {
    answers(request, auction_id)
        .iter()
        .enumerate()
        .map(|(i, body)| Called {
            bidder: BidderIx::nth(i).unwrap(),
            reply: interpret(http::StatusCode::OK, body.as_bytes(), auction_id),
            took: Some(std::time::Duration::from_millis(5)),
        })
        .collect()
}

/// Reading ten bidders' answers: decode each `BidResponse` (lossless, like the request) and
/// check it belongs to the auction.
fn interpret_ten_answers(c: &mut Criterion) {
    let request = BidRequest::from_slice(REALISTIC).unwrap();
    let auction_id = "gavel-1-2a";
    let bodies = answers(&request, auction_id);
    let bytes: usize = bodies.iter().map(String::len).sum();
    let mut group = c.benchmark_group("fan-out");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(format!("interpret/10-answers-{bytes}-bytes"), |b| {
        b.iter(|| {
            bodies
                .iter()
                .map(|body| interpret(http::StatusCode::OK, body.as_bytes(), auction_id))
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

fn settle_ten_bidders(c: &mut Criterion) {
    let request = BidRequest::from_slice(REALISTIC).unwrap();
    let auction_id = "gavel-1-2a";
    let replies = replies(&request, auction_id);
    let names: Vec<String> = (0..10).map(|i| format!("dsp{i}")).collect();
    let keys: Vec<_> = (0..10u8)
        .map(|i| price_token::PriceKey::new(&[i; 32]))
        .collect();
    let view = |i: usize, key: Option<&'static price_token::PriceKey>| BidderView {
        name: names[i].as_str(),
        markup_hosts: None,
        price_key: key,
    };
    let keys: &'static [price_token::PriceKey] = Vec::leak(keys);
    let unkeyed: Vec<BidderView<'_>> = (0..10).map(|i| view(i, None)).collect();
    // Every bidder with a price key: each winner's price sealed into a token.
    let keyed: Vec<BidderView<'_>> = (0..10).map(|i| view(i, keys.get(i))).collect();
    let config = AuctionConfig::default();
    // No rate tables: every bid is in the auction currency, as before issue 34.
    let converter = currency::Converter::new(&[]);
    let ctx = AuctionCtx {
        request: &request,
        auction_id,
        currency: "USD",
        config: &config,
        bidders: &unkeyed,
        loss_notices: true,
        price_token_ttl_s: 3600,
        now_ms: 1_700_000_000_000,
        rates: exchange::money::Rates {
            converter: &converter,
            stale: false,
        },
        record: false,
    };
    let sealed = AuctionCtx {
        bidders: &keyed,
        ..ctx
    };
    let bids = (10 * request.imp.len()) as u64;
    let mut group = c.benchmark_group("settle");
    group.throughput(Throughput::Elements(bids));
    group.bench_function(format!("10-bidders/{bids}-bids"), |b| {
        b.iter(|| settle(&ctx, &replies))
    });
    group.bench_function(format!("10-bidders/{bids}-bids/price-tokens"), |b| {
        b.iter(|| settle(&sealed, &replies))
    });
    // Every bid and winner kept for the auction record (`[records]` on).
    let recorded = AuctionCtx {
        record: true,
        ..ctx
    };
    group.bench_function(format!("10-bidders/{bids}-bids/recorded"), |b| {
        b.iter(|| settle(&recorded, &replies))
    });
    group.finish();
}

/// What `fanout::start_call` and `record_health` add per bidder besides the pool: the rate cap
/// and the breaker (`breaker::pass_gates`, at the auction's start) and a health record at the
/// call's end, each behind the mutex the auctions share (uncontended here; a one-thread runtime
/// never contends them), with the clock reads of the real path.
fn gates_ten_bidders(c: &mut Criterion) {
    let now = Instant::now();
    let bidders: Vec<_> = (0..10)
        .map(|_| {
            (
                Mutex::new(RateCap::new(1_000_000, now)),
                Mutex::new(Breaker::new(BreakerConfig::default(), now)),
            )
        })
        .collect();
    let mut group = c.benchmark_group("fan-out");
    group.throughput(Throughput::Elements(10));
    group.bench_function("gates/10-bidders", |b| {
        b.iter(|| {
            let started = Instant::now();
            let mut called = 0u32;
            for (cap, breaker) in &bidders {
                if pass_gates(Some(cap), breaker, started).is_ok() {
                    called += 1;
                    if let Ok(mut b) = breaker.lock() {
                        b.record(Health::Good, Instant::now());
                    }
                }
            }
            std::hint::black_box(called)
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    enrich_and_encode,
    interpret_ten_answers,
    settle_ten_bidders,
    gates_ten_bidders
);
criterion_main!(benches);
