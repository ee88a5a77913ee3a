//! OpenRTB 2.5 <-> 2.6 conversion cost, set against a plain encode of the same request (what
//! the exchange pays per bidder anyway). Inputs: the realistic 2.5 kB request (web, moves
//! gdpr/consent/eids/schain, drops sua/gpp) and the CTV golden request of the convert tests
//! (4 kB, every moved field and most dropped ones).
//!
//! `down` and `up` mutate in place, so each runs on a fresh clone made outside the timing
//! (`iter_batched_ref`); `clone` shows what that copy costs on its own.
//!
//! `cargo bench -p openrtb --bench convert -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use openrtb::BidRequest;
use openrtb::convert::{down_to_2_5, up_from_2_5};

fn fixture(rel: &str) -> BidRequest {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel),
    )
    .expect("fixture");
    BidRequest::from_slice(&bytes).expect("decode")
}

fn convert(c: &mut Criterion) {
    for (name, rel) in [
        ("realistic-2.5k", "realistic-2.5k.json"),
        ("ctv-golden-4k", "convert/request-2.6.json"),
    ] {
        let request = fixture(rel);
        let mut as_2_5 = request.clone();
        down_to_2_5(&mut as_2_5).expect("down");
        let len = request.to_vec().expect("encode").len();
        let mut buf = Vec::with_capacity(len * 2);

        let mut group = c.benchmark_group(format!("convert/{name}"));
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function("encode", |b| {
            b.iter(|| {
                buf.clear();
                black_box(&request).to_writer(&mut buf).expect("encode");
                black_box(buf.len())
            })
        });
        group.bench_function("clone", |b| {
            b.iter(|| {
                let copy = black_box(&request).clone();
                black_box(&copy);
            })
        });
        group.bench_function("down", |b| {
            b.iter_batched_ref(
                || request.clone(),
                |r| {
                    black_box(down_to_2_5(r).expect("down"));
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function("down+encode", |b| {
            b.iter_batched_ref(
                || request.clone(),
                |r| {
                    down_to_2_5(r).expect("down");
                    buf.clear();
                    r.to_writer(&mut buf).expect("encode");
                    black_box(buf.len());
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function("up", |b| {
            b.iter_batched_ref(
                || as_2_5.clone(),
                |r| {
                    black_box(up_from_2_5(r).expect("up"));
                },
                BatchSize::SmallInput,
            )
        });
        // A 2.6 seller request: nothing to move, every ext left untouched.
        group.bench_function("up-nothing-to-move", |b| {
            b.iter_batched_ref(
                || request.clone(),
                |r| {
                    black_box(up_from_2_5(r).expect("up"));
                },
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, convert);
criterion_main!(benches);
