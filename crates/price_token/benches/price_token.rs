//! What an authenticated clearing price costs: sealing one (the exchange, once per winning
//! bid of a keyed bidder) beside writing the plain decimal it replaces, and opening one (the
//! bidder, once per win or billing notice) with one key and with two (during a rotation), side
//! by side in one run.
//!
//! `cargo bench -p price_token -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use openrtb::Price;
use price_token::{Binding, PriceKey, open};

const BOUND: Binding<'static> = Binding {
    auction: "gavel-18f3a2b4c5d-1f2e3d",
    imp: "1",
    bid: "bidder-7-5f0e2c9a41b7d3e8a6f1c0b2d4e69a17",
    currency: "USD",
};
const NOW: u64 = 1_764_100_000;

fn bench(c: &mut Criterion) {
    let key = PriceKey::new(&[42; 32]);
    let other = PriceKey::new(&[43; 32]);
    let price = Price::from_micros(1_873_450);
    c.bench_function("price_token/plain_decimal", |b| {
        b.iter(|| black_box(black_box(price).to_string()))
    });
    c.bench_function("price_token/seal", |b| {
        b.iter(|| black_box(key.seal(black_box(price), &BOUND, NOW + 3600)))
    });
    let token = key.seal(price, &BOUND, NOW + 3600);
    let one = [key.clone()];
    c.bench_function("price_token/open_one_key", |b| {
        b.iter(|| black_box(open(&one, black_box(&token), &BOUND, NOW)))
    });
    let two = [other, key];
    c.bench_function("price_token/open_second_of_two_keys", |b| {
        b.iter(|| black_box(open(&two, black_box(&token), &BOUND, NOW)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
