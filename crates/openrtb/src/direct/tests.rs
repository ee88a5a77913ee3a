//! The direct decoder agrees with the serde decoder: on every fixture it decodes (never falls
//! back), to the very value serde produces; on mutations of the fixtures it either agrees or
//! leaves the input to serde, and never accepts what serde refuses.

use std::path::Path;

use serde::de::DeserializeOwned;

use super::{Decode, decode_into};
use crate::request::BidRequest;
use crate::response::BidResponse;

fn decode<T: Decode + Default>(bytes: &[u8]) -> Option<T> {
    let mut out = T::default();
    decode_into(bytes, &mut out).then_some(out)
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = vec![(
        "realistic-2.5k".to_owned(),
        std::fs::read(root.join("realistic-2.5k.json")).expect("fixture"),
    )];
    let mut spec: Vec<_> = std::fs::read_dir(root.join("spec-2.6"))
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("?")
                .to_owned();
            (name, std::fs::read(&p).expect("fixture"))
        })
        .collect();
    spec.sort();
    out.extend(spec);
    out
}

fn is_response(name: &str) -> bool {
    name.starts_with("response-")
}

/// What serde decodes, direct decodes identically (checked through the re-encoded text too,
/// which tells `-0.0` from `0.0`); what serde refuses, direct refuses.
fn agree<
    T: Decode + Default + DeserializeOwned + PartialEq + std::fmt::Debug + serde::Serialize,
>(
    bytes: &[u8],
) -> Option<T> {
    let ours = decode::<T>(bytes);
    let theirs = serde_json::from_slice::<T>(bytes).ok();
    match (&ours, &theirs) {
        (Some(a), Some(b)) => {
            assert_eq!(a, b, "{}", String::from_utf8_lossy(bytes));
            assert_eq!(
                serde_json::to_string(a).ok(),
                serde_json::to_string(b).ok(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        (Some(a), None) => panic!(
            "direct accepted what serde refuses: {}\n{a:?}",
            String::from_utf8_lossy(bytes)
        ),
        (None, _) => {}
    }
    ours
}

fn agree_any(name: &str, bytes: &[u8]) -> bool {
    if is_response(name) {
        agree::<BidResponse>(bytes).is_some()
    } else {
        agree::<BidRequest>(bytes).is_some()
    }
}

#[test]
fn every_fixture_takes_the_direct_path_to_the_serde_value() {
    let all = fixtures();
    assert!(all.len() >= 10);
    for (name, bytes) in &all {
        assert!(agree_any(name, bytes), "{name} fell back to serde");
    }
}

#[test]
fn whitespace_escapes_nulls_and_unknowns_take_the_direct_path() {
    let request = "\r\n { \"id\" : \"a\\\"b\\u00e9\\ud83d\\ude00\" ,\t\"imp\":[ {\"id\":\"1\",\
                   \"banner\":null,\"ext\":null,\"x\":null,\"bidfloor\":-0.0,\"instl\":0}],\
                   \"ext\":{\"a\":[1,{\"b\":\"]}\"}]},\"u\":\"\\\\\",\"u\":-1e-3, \"test\" : 1 } \n";
    let decoded = agree::<BidRequest>(request.as_bytes()).expect("direct");
    assert_eq!(decoded.id, "a\"b\u{e9}\u{1f600}");
    assert_eq!(
        decoded.unknown.len(),
        2,
        "duplicate unknown keys are both kept"
    );
    assert_eq!(
        decoded.imp[0].unknown.get("x").map(|v| v.get()),
        Some("null")
    );
}

#[test]
fn shapes_serde_refuses_are_refused() {
    for json in [
        r#"{"id":"a","imp":[],"id":"b"}"#,
        r#"{"id":"a","imp":[],"ext":{},"ext":{}}"#,
        r#"{"imp":[]}"#,
        r#"{"id":null,"imp":[]}"#,
        r#"{"id":"a","imp":null}"#,
        r#"{"id":"a","imp":[],}"#,
        r#"{"id":"a","imp":[{"id":"1"},]}"#,
        r#"{"id":"a","imp":[]} x"#,
        r#"{"id":"a","imp":[],"tmax":-0}"#,
        r#"{"id":"a","imp":[],"tmax":1.0}"#,
        r#"{"id":"a","imp":[],"tmax":2147483648}"#,
        r#"{"id":"a","imp":[{"id":"1","bidfloor":1e10}]}"#,
        r#"{"id":"a","imp":[],"device":{"geo":{"lat":1e400}}}"#,
        r#"{"id":"a","imp":[],"x":1x}"#,
        "{\"id\":\"a\nb\",\"imp\":[]}",
        "[]",
        "",
    ] {
        assert!(serde_json::from_str::<BidRequest>(json).is_err(), "{json}");
        assert!(decode::<BidRequest>(json.as_bytes()).is_none(), "{json}");
    }
    assert!(decode::<BidRequest>(b"{\"id\":\"\xff\",\"imp\":[]}").is_none());
}

#[test]
fn escaped_keys_are_left_to_serde() {
    let json = r#"{"\u0069d":"a","imp":[]}"#;
    assert!(decode::<BidRequest>(json.as_bytes()).is_none());
    assert_eq!(
        BidRequest::from_slice(json.as_bytes())
            .expect("serde decodes it")
            .id,
        "a"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Cut, duplicate or overwrite a piece of a fixture: whatever comes out, the two decoders
    /// agree.
    #[test]
    fn mutated_fixtures_agree(
        pick in proptest::prelude::any::<proptest::sample::Index>(),
        at in proptest::prelude::any::<proptest::sample::Index>(),
        len in 0usize..12,
        op in 0u8..4,
        noise in proptest::collection::vec(
            proptest::sample::select(b"{}[],:\"\\ 0123456789-+.eEnulltrfasxu\xc3\xa9".to_vec()),
            0..6,
        ),
    ) {
        let all = fixtures();
        let (name, bytes) = &all[pick.index(all.len())];
        let start = at.index(bytes.len());
        let end = (start + len).min(bytes.len());
        let mut mutated = bytes[..start].to_vec();
        match op {
            0 => {} // cut
            1 => mutated.extend_from_slice(&bytes[start..end]), // keep, then repeat below
            2 => mutated.extend_from_slice(&noise), // overwrite
            _ => {
                mutated.extend_from_slice(&noise); // insert
                mutated.extend_from_slice(&bytes[start..end]);
            }
        }
        if op == 1 {
            mutated.extend_from_slice(&bytes[start..end]);
        }
        mutated.extend_from_slice(&bytes[end..]);
        agree_any(name, &mutated);
    }
}
