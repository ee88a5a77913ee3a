//! What signed notices cost: building one bid's three signed notice URLs (three HMAC-SHA256
//! tags), checking one received notice (parse, token, price cap), the same two without
//! signing, and a signed notice whose price is a price token, side by side in one run.
//!
//! `cargo bench -p bidder --bench notice_token -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bidder::metrics::NoticeKind;
use bidder::notice::{BidNotice, Checks, check, notice_urls, parse};
use bidder::prices::PriceKeys;
use bidder::token::{NoticeKey, NoticeKeys};
use criterion::{Criterion, criterion_group, criterion_main};
use openrtb::Price;
use units::Timestamp;

const NOW: Timestamp = Timestamp(1_700_000_000_000);

fn keys() -> NoticeKeys {
    let secret = match settings::Secret::new(&[42; 32], "bench") {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    match NoticeKey::new(&secret) {
        Some(key) => NoticeKeys::new(key, None),
        None => panic!("HMAC refused a 32-byte key"),
    }
}

fn bid() -> BidNotice<'static> {
    BidNotice {
        base: "https://bidder-7.dsp.example",
        reservation: "bidder-7-5f0e2c9a41b7d3e8a6f1c0b2d4e69a17",
        auction: "gavel-18f3a2b4c5d-1f2e3d",
        campaign: "summer-sale-2026",
        imp: "1",
        max_price: Price::from_micros(2_500_000),
        expires_at_s: NOW.0 / 1000 + 90,
    }
}

fn checks<'a>(keys: Option<&'a NoticeKeys>, prices: &'a PriceKeys) -> Checks<'a> {
    Checks {
        keys,
        prices,
        currency: "USD",
    }
}

fn bench(c: &mut Criterion) {
    let keys = keys();
    let plain = PriceKeys::PLAIN;
    let mut group = c.benchmark_group("notice");
    for (label, keys) in [("signed", Some(&keys)), ("unsigned", None)] {
        group.bench_function(format!("bid_urls/{label}"), |b| {
            b.iter(|| notice_urls(black_box(keys), black_box(&bid())))
        });
        let urls = notice_urls(keys, &bid());
        let received = urls.nurl.replace("${AUCTION_PRICE}", "1.87");
        let query = received.split_once('?').map_or("", |(_, q)| q).to_owned();
        group.bench_function(format!("check/{label}"), |b| {
            b.iter(|| {
                let notice = match parse(NoticeKind::Win, black_box(&query)) {
                    Ok(n) => n,
                    Err(e) => panic!("{e}"),
                };
                check(&checks(keys, &plain), &notice, NOW)
            })
        });
    }
    // A signed notice whose price is an exchange's price token (one more HMAC to check).
    let shared = price_token::PriceKey::new(&[7; 32]);
    let sealed = PriceKeys::new(vec![shared.clone()], true);
    let urls = notice_urls(Some(&keys), &bid());
    let token = shared.seal(
        Price::from_micros(1_870_000),
        &price_token::Binding {
            auction: "gavel-18f3a2b4c5d-1f2e3d",
            imp: "1",
            bid: "bidder-7-5f0e2c9a41b7d3e8a6f1c0b2d4e69a17",
            currency: "USD",
        },
        NOW.0 / 1000 + 3600,
    );
    let received = urls.nurl.replace("${AUCTION_PRICE}", &token);
    let query = received.split_once('?').map_or("", |(_, q)| q).to_owned();
    group.bench_function("check/signed+price_token", |b| {
        b.iter(|| {
            let notice = match parse(NoticeKind::Win, black_box(&query)) {
                Ok(n) => n,
                Err(e) => panic!("{e}"),
            };
            check(&checks(Some(&keys), &sealed), &notice, NOW)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
