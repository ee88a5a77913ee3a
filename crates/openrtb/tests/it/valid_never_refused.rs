//! Valid traffic is never refused by `validate`: the OpenRTB 2.6 spec example requests, the
//! realistic 2.5 kB request, and native impressions carrying the Native 1.2 spec's example
//! requests (6.1 - 6.3, typos included), a realistic in-feed request and a Native 1.0 request in
//! its `{"native": ...}` wrapper.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use openrtb::BidRequest;
use openrtb::validate::{auction_currency, validate};
use serde_json::{Value, json};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// `(file name, contents)` of the `*.json` files in `dir` whose name starts with `prefix`.
fn fixtures(dir: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = fs::read_dir(fixtures_dir().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(prefix) && name.ends_with(".json")
        })
        .map(|p| (p.display().to_string(), fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

fn assert_valid(name: &str, bytes: &[u8]) {
    let request = BidRequest::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let currency = auction_currency(&request, "USD");
    if let Err(e) = validate(&request, currency) {
        panic!("{name} was refused: {e}");
    }
}

#[test]
fn spec_example_requests_are_valid() {
    let requests = fixtures("spec-2.6", "request-");
    assert_eq!(
        requests.len(),
        5,
        "the five request examples of OpenRTB 2.6"
    );
    for (name, bytes) in &requests {
        assert_valid(name, bytes);
    }
}

#[test]
fn the_realistic_request_is_valid() {
    let bytes = fs::read(fixtures_dir().join("realistic-2.5k.json")).unwrap();
    assert_valid("realistic-2.5k.json", &bytes);
}

/// An in-app native impression whose `request` is `native`, encoded as the JSON string OpenRTB
/// 2.x carries.
fn native_bid_request(native: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": "5c7f6b0e-native",
        "at": 1,
        "tmax": 200,
        "cur": ["USD"],
        "imp": [{
            "id": "1",
            "tagid": "feed-native-3",
            "bidfloor": 1.2,
            "bidfloorcur": "USD",
            "secure": 1,
            "native": {"request": native.to_string(), "ver": "1.2", "api": [3, 5, 7], "battr": [3, 8]}
        }],
        "app": {
            "id": "app-7104", "bundle": "com.newsloop.reader", "name": "NewsLoop",
            "storeurl": "https://play.google.com/store/apps/details?id=com.newsloop.reader",
            "cat": ["IAB12"], "privacypolicy": 1, "paid": 0,
            "publisher": {"id": "pub-app-412", "name": "Loop Media"}
        },
        "device": {
            "ua": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36",
            "ip": "73.158.42.17", "devicetype": 4, "make": "Google", "model": "Pixel 8",
            "os": "Android", "osv": "14", "w": 412, "h": 915, "pxratio": 2.625, "js": 1,
            "lmt": 0, "ifa": "3f9d5c1e-8a7b-4e02-b6c4-d9a1f0e2c7b8", "connectiontype": 6,
            "geo": {"lat": 40.7209, "lon": -74.0048, "type": 1, "accuracy": 12, "country": "USA"}
        },
        "user": {"id": "u-5d1f0a9c3e7b42d8"},
        "regs": {"coppa": 0, "gdpr": 0, "us_privacy": "1YNN"},
        "source": {"tid": "b2e8f6d4", "schain": {"complete": 1, "ver": "1.0", "nodes": [{"asi": "exchange-one.com", "sid": "7731", "hp": 1}]}}
    }))
    .unwrap()
}

#[test]
fn native_requests_are_valid() {
    let natives = fixtures("native-1.2", "");
    assert!(natives.len() >= 5, "{natives:?}");
    for (name, bytes) in &natives {
        let native: Value = serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_valid(name, &native_bid_request(&native));
    }
}

/// The spec examples in the fixture directory are the ones section 6 of Native 1.2 prints.
#[test]
fn the_native_spec_examples_are_there() {
    let names: Vec<String> = fixtures("native-1.2", "spec-")
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}
