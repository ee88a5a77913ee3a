//! Decoding GPP strings as a request carries them: the header and the split alone
//! (`GppString::decode`), then every section a policy reads (US Privacy and each US section;
//! TCF EU v2 only handed out raw). Two strings written by IAB's encoder (the crate's fixture):
//! TCF EU v2, US Privacy, usnat and usca (127 bytes), and every section `@iabgpp/cmpapi`
//! defines (24 sections, 366 bytes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use consent::gpp::GppString;
use criterion::{Criterion, criterion_group, criterion_main};

const TYPICAL: &str = "DBACPbA~CP4cy6AP4cy6AAfKAAENCWFgANPAAAAAAAAAH0QBIAAgAEACABeYD6ALzgBAACAXmAAA.IAAA.YAAAAAAAAAAA~1YYN~CqgaAgWAEAJE.QA~BmkUooZo.YA";

/// The fixture's case `combined/everything`.
fn everything() -> String {
    let cases: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/gpp/gpp_cases.json")).unwrap();
    let case = cases
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "combined/everything")
        .expect("the fixture has combined/everything");
    case["string"].as_str().unwrap().to_owned()
}

/// Everything a policy would read from one string.
fn decode_all(s: &str) -> usize {
    let gpp = GppString::decode(s).unwrap();
    let tcf = gpp.tcf_eu_v2().map_or(0, str::len);
    let usp = usize::from(
        gpp.us_privacy()
            .is_some_and(|u| u.is_ok_and(|u| u.opted_out_of_sale())),
    );
    let us = gpp.us_sections().iter().filter(|(_, s)| s.is_ok()).count();
    tcf + usp + us
}

fn gpp(c: &mut Criterion) {
    let everything = everything();
    let mut group = c.benchmark_group("gpp");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("split/tcf+usp+usnat+usca", |b| {
        b.iter(|| GppString::decode(black_box(TYPICAL)).unwrap());
    });
    group.bench_function("all/tcf+usp+usnat+usca", |b| {
        b.iter(|| decode_all(black_box(TYPICAL)));
    });
    group.bench_function("all/24-sections", |b| {
        b.iter(|| decode_all(black_box(&everything)));
    });
    group.finish();
}

criterion_group!(benches, gpp);
criterion_main!(benches);
