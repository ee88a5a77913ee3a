//! The TC string on the exchange's hot path, decoded once per bid request: decode of a
//! realistic CMP string (`fixtures/tcf/realistic.txt`, written by IAB's encoder: ~1,100 GVL
//! vendors disclosed, 300 vendor consents, 100 LI, two publisher restrictions), of its core
//! segment alone, and the legal basis of one vendor for five purposes.
//!
//! `cargo bench -p consent --bench tcf -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use consent::basis::{basis, special_feature};
use consent::gvl::VendorList;
use consent::tcf::TcString;
use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};

const REALISTIC: &str = include_str!("../fixtures/tcf/realistic.txt");
const SMALL_GVL: &str = include_str!("../fixtures/gvl/small.json");

fn decode(c: &mut Criterion) {
    let full = REALISTIC.trim();
    let core = full.split('.').next().expect("a core segment");
    let mut group = c.benchmark_group("tcf/decode");
    for (name, s) in [("realistic", full), ("realistic_core_only", core)] {
        group.throughput(Throughput::Bytes(s.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), s, |b, s| {
            b.iter(|| TcString::decode(black_box(s)).expect("decodes"))
        });
    }
    group.finish();
}

fn legal_basis(c: &mut Criterion) {
    let tc = TcString::decode(REALISTIC.trim()).expect("decodes");
    let gvl = VendorList::from_json(SMALL_GVL.as_bytes()).expect("small.json");
    // Vendor 4 (flexible, default LI) for the purposes an exchange asks about most.
    let vendor = gvl.vendor(4).expect("vendor 4");
    c.bench_function("tcf/basis/one_vendor_5_purposes", |b| {
        b.iter(|| {
            let mut n = 0u32;
            for purpose in [1, 2, 3, 4, 7] {
                n += u32::from(basis(black_box(&tc), black_box(vendor), purpose).is_some());
            }
            n + u32::from(special_feature(&tc, vendor, 1))
        })
    });
}

fn vendor_list(c: &mut Criterion) {
    c.bench_function("gvl/from_json/small", |b| {
        b.iter(|| VendorList::from_json(black_box(SMALL_GVL.as_bytes())).expect("parses"))
    });
}

criterion_group!(benches, decode, legal_basis, vendor_list);
criterion_main!(benches);
