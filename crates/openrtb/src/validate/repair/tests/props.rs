//! Properties, with fixed seeds:
//!
//! - the OpenRTB 2.6 spec example requests, the realistic request and native impressions
//!   carrying the Native 1.2 fixtures are valid, and repair leaves them byte for byte;
//! - any mix of the table's repairable faults on the test request is repaired into a valid
//!   request, and a second repair finds nothing;
//! - random repairable faults (flags, negative sizes, coordinates, codes) on the spec examples
//!   likewise;
//! - every repair's field label is its path without indices;
//! - any native-shaped JSON as a native request: repair does not panic, leaves a valid request
//!   alone, is idempotent, and what it changes is valid.

use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use serde_json::{Value, json};

use super::super::super::tests::props::native_like;
use super::super::super::tests::{base, build};
use super::super::super::{auction_currency, validate};
use super::super::repair;
use super::table::fixes;
use super::without_indices;
use crate::{BidRequest, Imp, Native};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The spec example requests and the realistic request, decoded as JSON values.
fn valid_requests() -> Vec<(String, Value)> {
    let mut paths: Vec<PathBuf> = fs::read_dir(fixtures_dir().join("spec-2.6"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("request-"))
        })
        .collect();
    paths.sort();
    assert_eq!(paths.len(), 5, "the five request examples of OpenRTB 2.6");
    paths.push(fixtures_dir().join("realistic-2.5k.json"));
    paths
        .into_iter()
        .map(|p| {
            let value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
            (p.display().to_string(), value)
        })
        .collect()
}

/// A native impression for each Native 1.2 fixture.
fn native_requests() -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = fs::read_dir(fixtures_dir().join("native-1.2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let native: Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
            let request = json!({
                "id": "n", "cur": ["USD"],
                "imp": [{"id": "1", "native": {"request": native.to_string(), "ver": "1.2"}}],
                "app": {"bundle": "com.example.feed"}
            });
            (p.display().to_string(), request)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 5);
    out
}

fn decode(value: &Value) -> BidRequest {
    BidRequest::from_slice(&serde_json::to_vec(value).unwrap()).unwrap()
}

fn check(request: &BidRequest) -> Result<(), super::super::super::InvalidRequest> {
    validate(request, auction_currency(request, "USD"))
}

#[test]
fn valid_examples_are_left_byte_for_byte() {
    for (name, value) in valid_requests().into_iter().chain(native_requests()) {
        let mut request = decode(&value);
        assert_eq!(check(&request), Ok(()), "{name}");
        let original = request.clone();
        let bytes = request.to_vec().unwrap();
        assert_eq!(repair(&mut request), [], "{name}");
        assert_eq!(request, original, "{name}");
        assert_eq!(request.to_vec().unwrap(), bytes, "{name}");
    }
}

/// A repairable fault: a value set at a pointer (when its parent is there).
#[derive(Clone, Copy, Debug)]
enum Fault {
    Flag,
    Negative,
    Latitude,
    Longitude,
    StartDelay,
    MaxExtended,
    Ssai,
}

impl Fault {
    /// A value this fault's rule refuses, chosen by `n`.
    fn value(self, n: u32) -> Value {
        let n = i64::from(n % 100_000);
        match self {
            Fault::Flag if n % 2 == 0 => json!(2 + n),
            Fault::Flag | Fault::Negative => json!(-1 - n),
            Fault::Latitude => json!(90.5 + n as f64),
            Fault::Longitude => json!(-180.5 - n as f64),
            Fault::StartDelay => json!(-3 - n),
            Fault::MaxExtended => json!(-2 - n),
            Fault::Ssai => json!(4 + n),
        }
    }
}

#[rustfmt::skip]
const FAULTS: &[(&str, Fault)] = &[
    ("/device/geo/lat", Fault::Latitude), ("/device/geo/lon", Fault::Longitude),
    ("/device/geo/accuracy", Fault::Negative), ("/user/geo/lat", Fault::Latitude),
    ("/device/js", Fault::Flag), ("/device/geofetch", Fault::Flag),
    ("/device/w", Fault::Negative), ("/device/pxratio", Fault::Negative),
    ("/device/sua/mobile", Fault::Flag),
    ("/imp/0/instl", Fault::Flag), ("/imp/0/rwdd", Fault::Flag), ("/imp/0/exp", Fault::Negative),
    ("/imp/0/ssai", Fault::Ssai),
    ("/imp/0/banner/w", Fault::Negative), ("/imp/0/banner/h", Fault::Negative),
    ("/imp/0/banner/topframe", Fault::Flag),
    ("/imp/0/video/minduration", Fault::Negative), ("/imp/0/video/w", Fault::Negative),
    ("/imp/0/video/startdelay", Fault::StartDelay), ("/imp/0/video/skip", Fault::Flag),
    ("/imp/0/video/maxextended", Fault::MaxExtended), ("/imp/0/video/boxingallowed", Fault::Flag),
    ("/imp/0/video/companionad/0/w", Fault::Negative),
    ("/imp/1/banner/w", Fault::Negative), ("/imp/1/clickbrowser", Fault::Flag),
    ("/site/mobile", Fault::Flag), ("/site/content/len", Fault::Negative),
    ("/site/content/livestream", Fault::Flag),
    ("/app/paid", Fault::Flag), ("/app/privacypolicy", Fault::Flag),
    ("/allimps", Fault::Flag), ("/source/fd", Fault::Flag),
];

/// Sets `pointer` to `value` when its parent object is there; whether it was.
fn apply(request: &mut Value, pointer: &str, value: Value) -> bool {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return false;
    };
    match request.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(key.to_owned(), value);
            true
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x7265_7061_6972),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_mix_of_the_tables_faults_is_repaired(picks in proptest::sample::subsequence(
        (0..fixes().len()).collect::<Vec<_>>(), 1..12)) {
        let fixes = fixes();
        let mut broken = base();
        let mut lists = Vec::new();
        for &i in &picks {
            let fix = &fixes[i];
            // One change per list (two could leave it no valid entry), and the rows that move
            // the site elsewhere stay out (the others expect it).
            match fix.list {
                Some("channel") => continue,
                Some(list) if lists.contains(&list) => continue,
                Some(list) => lists.push(list),
                None => {}
            }
            (fix.broken)(&mut broken);
        }
        let mut request = build(broken);
        let done = repair(&mut request);
        prop_assert_eq!(validate(&request, "USD"), Ok(()), "{:?}", done);
        for r in &done {
            prop_assert_eq!(r.field, without_indices(&r.path));
        }
        prop_assert_eq!(repair(&mut request), []);
    }

    #[test]
    fn faults_on_the_spec_examples_are_repaired(
        faults in proptest::collection::vec((0..FAULTS.len(), any::<u32>()), 1..8)
    ) {
        for (name, mut value) in valid_requests() {
            let mut applied = 0;
            for &(i, n) in &faults {
                let (pointer, fault) = FAULTS[i];
                applied += usize::from(apply(&mut value, pointer, fault.value(n)));
            }
            let mut request = decode(&value);
            let done = repair(&mut request);
            prop_assert_eq!(check(&request), Ok(()), "{}: {:?}", name, done);
            prop_assert_eq!(done.is_empty(), applied == 0, "{}", name);
            for r in &done {
                prop_assert_eq!(r.field, without_indices(&r.path));
            }
            prop_assert_eq!(repair(&mut request), [], "{}", name);
        }
    }

    #[test]
    fn any_native_shaped_request_is_repaired_or_left(value in native_like()) {
        let text = value.to_string();
        let mut request = BidRequest {
            id: "p".to_owned(),
            imp: vec![Imp {
                id: "1".to_owned(),
                native: Some(Native { request: Some(text), ..Default::default() }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let before = validate(&request, "USD");
        let original = request.clone();
        let done = repair(&mut request);
        if done.is_empty() {
            prop_assert_eq!(&request, &original);
        } else {
            prop_assert!(before.is_err());
            prop_assert_eq!(validate(&request, "USD"), Ok(()));
        }
        prop_assert_eq!(repair(&mut request), []);
    }
}
