//! The codec benchmarks, shared by `codec.rs` (system allocator) and `codec_mimalloc.rs`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput};
use openrtb::{BidRequest, BidResponse, LossReason, MacroValues, Price, substitute};

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel),
    )
    .expect("fixture")
}

/// The `decode` and `decode-baseline` groups, their names followed by `suffix` (so that runs
/// under another allocator keep their own criterion history).
///
/// Each routine keeps its result alive with `std::hint::black_box(&value)` and returns `()`:
/// criterion 0.5 without its nightly `real_blackbox` feature passes a returned value through
/// `ptr::read_volatile`, a volatile copy of the whole 6 kB `BidRequest` that perf showed at 15%
/// of the decode figure and that no caller ever pays. Dropping the value is still timed.
pub fn decode(c: &mut Criterion, suffix: &str) {
    let mut group = c.benchmark_group(format!("decode{suffix}"));
    let mut inputs: Vec<(String, Vec<u8>)> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec-2.6"))
            .expect("fixtures dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("request-"))
            })
            .map(|p| {
                let name = p
                    .file_stem()
                    .and_then(|n| n.to_str())
                    .expect("name")
                    .to_owned();
                (name, std::fs::read(&p).expect("fixture"))
            })
            .collect();
    inputs.sort();
    inputs.push(("realistic-2.5k".to_owned(), fixture("realistic-2.5k.json")));
    for (name, bytes) in &inputs {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name.as_str(), |b| {
            b.iter(|| {
                let request = BidRequest::from_slice(black_box(bytes)).expect("decode");
                black_box(&request);
            })
        });
    }
    group.finish();

    // Reference points on the same input and machine: serde_json into its own `Value` tree
    // (allocates every node), and a validating skip that builds nothing.
    let mut group = c.benchmark_group(format!("decode-baseline{suffix}"));
    let bytes = fixture("realistic-2.5k.json");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    // The same typed, lossless decode through serde (the path the direct decoder replaced,
    // kept as its reference and fallback): the gain, measured in the same run.
    group.bench_function("serde-typed/realistic-2.5k", |b| {
        b.iter(|| {
            let request = openrtb::decode::<BidRequest>(black_box(&bytes)).expect("decode");
            black_box(&request);
        })
    });
    group.bench_function("serde_json-value/realistic-2.5k", |b| {
        b.iter(|| {
            let value = serde_json::from_slice::<serde_json::Value>(black_box(&bytes));
            black_box(&value.expect("decode"));
        })
    });
    group.bench_function("serde_json-ignored/realistic-2.5k", |b| {
        b.iter(|| {
            let value = serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&bytes));
            black_box(&value.expect("decode"));
        })
    });
    group.finish();
}

pub fn encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    let request = BidRequest::from_slice(&fixture("realistic-2.5k.json")).expect("decode");
    let request_len = request.to_vec().expect("encode").len();
    group.throughput(Throughput::Bytes(request_len as u64));
    let mut buf = Vec::with_capacity(request_len * 2);
    group.bench_function("request-realistic-2.5k", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&request).to_writer(&mut buf).expect("encode");
            black_box(buf.len())
        })
    });

    let response =
        BidResponse::from_slice(&fixture("spec-2.6/response-2-vast-inline.json")).expect("decode");
    let response_len = response.to_vec().expect("encode").len();
    group.throughput(Throughput::Bytes(response_len as u64));
    group.bench_function("response-vast-inline", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&response).to_writer(&mut buf).expect("encode");
            black_box(buf.len())
        })
    });
    group.finish();
}

pub fn macros(c: &mut Criterion) {
    let mut group = c.benchmark_group("macros");
    let nurl = "https://win.dsp.example/notice?auction=${AUCTION_ID}&imp=${AUCTION_IMP_ID}\
                &bid=${AUCTION_BID_ID}&seat=${AUCTION_SEAT_ID}&price=${AUCTION_PRICE}\
                &cur=${AUCTION_CURRENCY}&enc=${AUCTION_PRICE:B64}&ts=${AUCTION_IMP_TS}&cb=8842";
    let values = MacroValues {
        auction_id: "7f3c2a9e-5b1d-4c8e-9a61-2d4f8b0e3c17",
        bid_id: "b-0031-77",
        imp_id: "1",
        seat_id: "seat-0031",
        ad_id: "ad-42",
        price: Some(Price::from_micros(1_234_500)),
        price_token: None,
        currency: "USD",
        mbr: Some(0.82),
        loss: Some(LossReason::BID_WON),
        min_to_win: Some(Price::from_micros(1_010_000)),
        imp_ts_ms: Some(1_760_000_000_123),
    };
    group.throughput(Throughput::Bytes(nurl.len() as u64));
    group.bench_function("nurl-8-macros", |b| {
        b.iter(|| substitute(black_box(nurl), black_box(&values)).len())
    });
    let plain = "https://win.dsp.example/notice?auction=7f3c2a9e&imp=1&cb=8842&price=unknown";
    group.throughput(Throughput::Bytes(plain.len() as u64));
    group.bench_function("nurl-no-macros", |b| {
        b.iter(|| substitute(black_box(plain), black_box(&values)).len())
    });
    group.finish();
}
