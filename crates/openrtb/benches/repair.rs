//! What `validate::repair` costs next to `validate`, on the same requests: the realistic 2.5 kB
//! request (two banner imps, deals, device, user; valid, so repair changes nothing), a native
//! in-app impression carrying the realistic Native 1.2 in-feed request (valid: repair parses
//! the native string once, as validate does), and the repair of a broken one (the same native
//! request without asset ids, as Prebid.js sends it, plus a device latitude of 200: ten
//! repairs; each iteration repairs a fresh clone, made and dropped outside the timing).
//!
//! `cargo bench -p openrtb --bench repair -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use openrtb::BidRequest;
use openrtb::validate::repair::repair;
use openrtb::validate::validate;
use serde_json::{Value, json};

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel),
    )
    .expect("fixture")
}

/// An in-app native impression whose request is `native`, with a device location.
fn native_request(native: &Value, lat: f64) -> BidRequest {
    let body = json!({
        "id": "5c7f6b0e-native", "at": 1, "tmax": 200, "cur": ["USD"],
        "imp": [{
            "id": "1", "tagid": "feed-native-3", "bidfloor": 1.2, "bidfloorcur": "USD", "secure": 1,
            "native": {"request": native.to_string(), "ver": "1.2", "api": [3, 5, 7]}
        }],
        "app": {"id": "app-7104", "bundle": "com.newsloop.reader", "privacypolicy": 1, "paid": 0},
        "device": {
            "ua": "Mozilla/5.0 (Linux; Android 14; Pixel 8)", "ip": "73.158.42.17", "devicetype": 4,
            "os": "Android", "w": 412, "h": 915, "pxratio": 2.625, "js": 1, "lmt": 0,
            "geo": {"lat": lat, "lon": -74.0048, "type": 1, "accuracy": 12, "country": "USA"}
        },
        "regs": {"coppa": 0, "gdpr": 0}
    });
    BidRequest::from_slice(&serde_json::to_vec(&body).expect("encode")).expect("decode")
}

fn valid(c: &mut Criterion) {
    let mut group = c.benchmark_group("repair-valid");
    let native: Value = serde_json::from_slice(&fixture("native-1.2/realistic-in-feed.json"))
        .expect("native fixture");
    let inputs = [
        (
            "realistic-2.5k",
            BidRequest::from_slice(&fixture("realistic-2.5k.json")).expect("decode"),
        ),
        ("native-in-feed", native_request(&native, 40.72)),
    ];
    for (name, request) in inputs {
        assert_eq!(validate(&request, "USD"), Ok(()), "{name}");
        let mut request = request;
        group.bench_function(format!("validate/{name}"), |b| {
            b.iter(|| black_box(validate(black_box(&request), "USD").is_ok()))
        });
        group.bench_function(format!("repair/{name}"), |b| {
            b.iter(|| black_box(repair(black_box(&mut request)).len()))
        });
    }
    group.finish();
}

fn broken(c: &mut Criterion) {
    let mut group = c.benchmark_group("repair-broken");
    let mut native: Value = serde_json::from_slice(&fixture("native-1.2/realistic-in-feed.json"))
        .expect("native fixture");
    for asset in native["assets"].as_array_mut().expect("assets") {
        asset.as_object_mut().expect("asset").remove("id");
    }
    let request = native_request(&native, 200.0);
    let mut repaired = request.clone();
    assert_eq!(repair(&mut repaired).len(), 10);
    assert_eq!(validate(&repaired, "USD"), Ok(()));
    group.bench_function("repair/native-no-ids", |b| {
        b.iter_batched_ref(
            || request.clone(),
            |r| black_box(repair(r).len()),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, valid, broken);
criterion_main!(benches);
