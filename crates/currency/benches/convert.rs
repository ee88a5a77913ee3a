//! What a currency costs an auction: one bid converted by a pair's own rate and by a cross
//! rate (the 256-bit path: a cross rate's terms exceed 64 bits), a request's own small rate
//! table parsed, and the thirty-one-currency file parsed (what a reload does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use currency::{Converter, Currency, Rates, Round};

const FILE: &[u8] = include_bytes!("../testdata/currency-file.json");
const REQUEST_RATES: &[u8] = br#"{"USD":{"EUR":0.9213,"GBP":0.7862},"EUR":{"USD":1.0854}}"#;

fn convert(c: &mut Criterion) {
    let file = Rates::from_json(FILE).unwrap();
    let tables = [&file];
    let converter = Converter::new(&tables);
    let code = |text| Currency::parse(text).unwrap();
    let (usd, jpy, sek, krw) = (code("USD"), code("JPY"), code("SEK"), code("KRW"));
    let mut group = c.benchmark_group("currency");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    // A JPY bid into USD: the USD row lists JPY, so the inverse of a listed rate.
    group.bench_function("convert/direct", |b| {
        b.iter(|| {
            converter.convert(
                black_box(2_345_678_901),
                black_box(jpy),
                black_box(usd),
                Round::Down,
            )
        })
    });
    // SEK into KRW: through EUR (the first shared currency).
    group.bench_function("convert/cross", |b| {
        b.iter(|| {
            converter.convert(
                black_box(12_345_678),
                black_box(sek),
                black_box(krw),
                Round::Down,
            )
        })
    });
    group.bench_function("parse/request-rates", |b| {
        b.iter(|| Rates::from_conversions_json(black_box(REQUEST_RATES)).unwrap())
    });
    group.bench_function("parse/file-31-currencies", |b| {
        b.iter(|| Rates::from_json(black_box(FILE)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, convert);
criterion_main!(benches);
