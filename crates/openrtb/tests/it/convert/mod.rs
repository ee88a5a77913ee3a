//! `openrtb::convert` end to end: golden bytes both ways, the "strict 2.5 bidder" check, the
//! spec examples, and a seeded property test of up(down(x)).
//!
//! `UPDATE_GOLDEN=1 cargo test -p openrtb --test it convert::` rewrites the golden files from the
//! code; review the diff before committing it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod keys_2_5;

use std::fs;
use std::path::{Path, PathBuf};

use openrtb::BidRequest;
use openrtb::convert::{Field, FieldSet, Version, down_to_2_5, for_version, up_from_2_5};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

use keys_2_5::keys_unknown_to_2_5;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fixture file's text without the one trailing newline it is stored with.
fn read(rel: &str) -> String {
    let text = fs::read_to_string(fixtures().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    text.strip_suffix('\n').unwrap_or(&text).to_owned()
}

fn decode(text: &str) -> BidRequest {
    BidRequest::from_slice(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn encode(request: &BidRequest) -> String {
    String::from_utf8(request.to_vec().unwrap()).unwrap()
}

/// `actual` must equal the golden file `rel` byte for byte (plus its trailing newline).
fn assert_golden(rel: &str, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::write(fixtures().join(rel), format!("{actual}\n")).unwrap();
    }
    assert!(actual == read(rel), "{rel} differs:\n{actual}");
}

fn set(fields: &[Field]) -> FieldSet {
    fields.iter().copied().collect()
}

/// Keys of the spec's own examples that no version defines (slips in the examples), passed
/// through like any unknown field: not 2.6 keys left behind.
const SPEC_EXAMPLE_SLIPS: &[(&str, &str)] = &[
    // `value` belongs to `Segment`, not `Data`.
    ("request-2-expandable-creative.json", "user.data[2].value"),
    // `Video` has `api`; `apis` is a `Bid` field.
    ("request-4-video.json", "imp[0].video.apis"),
];

fn assert_strict_2_5(name: &str, encoded: &str) {
    let value: Value = serde_json::from_str(encoded).unwrap();
    let mut unknown = keys_unknown_to_2_5(&value);
    unknown.retain(|key| {
        !SPEC_EXAMPLE_SLIPS
            .iter()
            .any(|(file, slip)| name.ends_with(file) && key == slip)
    });
    assert!(
        unknown.is_empty(),
        "{name}: keys unknown to 2.5: {unknown:?}"
    );
}

#[test]
fn a_2_6_bidder_gets_the_request_unchanged() {
    let input = read("convert/request-2.6.json");
    let mut request = decode(&input);
    assert!(for_version(&mut request, Version::V2_6).unwrap().is_empty());
    assert!(
        encode(&request) == input,
        "2.6 encoding differs from the input"
    );
}

#[test]
fn a_2_5_bidder_gets_the_golden_bytes() {
    let mut request = decode(&read("convert/request-2.6.json"));
    let done = down_to_2_5(&mut request).unwrap();
    let encoded = encode(&request);
    assert_golden("convert/request-as-2.5.json", &encoded);
    assert_strict_2_5("request-2.6.json", &encoded);
    assert_eq!(
        done.moved,
        set(&[
            Field::SourceSchain,
            Field::RegsGdpr,
            Field::RegsUsPrivacy,
            Field::UserConsent,
            Field::UserEids,
            Field::ImpRwdd,
        ])
    );
    // The fixture carries every droppable field but `dooh` (it has an app), `acat`, the audio
    // ones (it is video), `poddedupe` and the site ones.
    let not_in_fixture = [
        Field::Dooh,
        Field::Acat,
        Field::AudioPoddur,
        Field::AudioPodid,
        Field::AudioPodseq,
        Field::AudioRqddurs,
        Field::AudioSlotinpod,
        Field::AudioMincpmpersec,
        Field::AudioDurfloors,
        Field::VideoPoddedupe,
        Field::SiteCattax,
        Field::SiteKwarray,
        Field::SiteInventorypartnerdomain,
        Field::ContentRealtime,
        Field::ContentFirstbroadcast,
    ];
    let expected_dropped: FieldSet = Field::ALL
        .iter()
        .copied()
        .filter(|f| !done.moved.contains(*f) && !not_in_fixture.contains(f))
        .collect();
    assert_eq!(done.dropped, expected_dropped);
}

#[test]
fn a_2_5_seller_request_reads_as_the_golden_2_6() {
    let mut request = decode(&read("convert/seller-2.5.json"));
    let done = up_from_2_5(&mut request).unwrap();
    assert_golden("convert/seller-as-2.6.json", &encode(&request));
    assert_eq!(
        done.moved,
        set(&[
            Field::SourceSchain,
            Field::RegsGdpr,
            Field::RegsUsPrivacy,
            Field::UserConsent,
            Field::UserEids,
            Field::ImpRwdd,
            Field::SiteInventorypartnerdomain,
        ])
    );
    assert!(done.dropped.is_empty(), "{done}");
    // And back down for a 2.5 bidder: the 2.5 homes again, nothing unknown to 2.5.
    let down = down_to_2_5(&mut request).unwrap();
    assert_strict_2_5("seller", &encode(&request));
    assert_eq!(down.dropped, set(&[Field::SiteInventorypartnerdomain]));
}

/// The moved fields of a request, in their 2.6 places, as JSON for comparison.
fn moved_fields(r: &BidRequest) -> Value {
    json!({
        "schain": r.source.as_ref().map(|s| &s.schain),
        "gdpr": r.regs.as_ref().map(|s| s.gdpr),
        "us_privacy": r.regs.as_ref().map(|s| &s.us_privacy),
        "consent": r.user.as_ref().map(|u| &u.consent),
        "eids": r.user.as_ref().map(|u| &u.eids),
        "rwdd": r.imp.iter().map(|i| i.rwdd).collect::<Vec<_>>(),
    })
}

/// Every spec example, the realistic request and the golden one: down gives a strict 2.5
/// request that re-decodes; up brings every moved field back; up on the 2.6 original changes
/// nothing (they carry no 2.5 `ext` field) and is idempotent.
#[test]
fn spec_examples_convert_both_ways() {
    let mut inputs: Vec<(String, String)> = fs::read_dir(fixtures().join("spec-2.6"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("request-"))
        })
        .map(|p| (p.display().to_string(), fs::read_to_string(&p).unwrap()))
        .collect();
    inputs.sort();
    assert_eq!(inputs.len(), 5, "the five spec request examples");
    inputs.push(("realistic-2.5k".into(), read("realistic-2.5k.json")));
    inputs.push((
        "convert/request-2.6".into(),
        read("convert/request-2.6.json"),
    ));
    for (name, text) in &inputs {
        let original = decode(text);

        let mut up_only = original.clone();
        let done = up_from_2_5(&mut up_only).unwrap_or_else(|e| panic!("{name}: up: {e}"));
        assert!(done.is_empty(), "{name}: up on 2.6 did {done}");
        assert_eq!(encode(&up_only), encode(&original), "{name}");

        let mut request = original.clone();
        let down = down_to_2_5(&mut request).unwrap_or_else(|e| panic!("{name}: down: {e}"));
        let encoded = encode(&request);
        assert_strict_2_5(name, &encoded);
        assert_eq!(decode(&encoded), request, "{name}: re-decode");

        let up = up_from_2_5(&mut request).unwrap_or_else(|e| panic!("{name}: up: {e}"));
        assert_eq!(up.moved, down.moved, "{name}");
        assert_eq!(moved_fields(&request), moved_fields(&original), "{name}");
        assert!(
            up_from_2_5(&mut request).unwrap().is_empty(),
            "{name}: idempotent"
        );
    }
}

// Property test: generated 2.6 requests with any mix of moved fields, `ext` objects already
// holding other keys (or a stale 2.5 copy of a field that is set), and some 2.6-only fields.

/// An `ext` for an object: none, empty, or holding keys no conversion touches.
fn other_ext() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!({}))),
        (0..1000u32).prop_map(|n| Some(json!({"x_n": n, "x_o": {"gdpr": "inside, not moved"}}))),
    ]
}

/// Adds `key: value` to `ext` (creating it) when `stale` is set: a 2.5 copy the 2.6 value must
/// overwrite.
fn with_stale(ext: Option<Value>, stale: bool, key: &str, value: Value) -> Option<Value> {
    if !stale {
        return ext;
    }
    let mut ext = ext.unwrap_or_else(|| json!({}));
    ext.as_object_mut().unwrap().insert(key.to_owned(), value);
    Some(ext)
}

fn insert_opt(object: &mut Value, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        object
            .as_object_mut()
            .unwrap()
            .insert(key.to_owned(), value);
    }
}

prop_compose! {
    fn imp_json(index: usize)(
        rwdd in proptest::option::of(0..2i32),
        stale in any::<bool>(),
        ext in other_ext(),
        prebid in proptest::option::of(Just(json!({"x_bidder": {"p": 1}}))),
        pod in proptest::option::of(10..120i32),
    ) -> Value {
        let mut ext = ext;
        if let Some(prebid) = prebid {
            ext = with_stale(ext, true, "prebid", prebid);
        }
        let mut imp = json!({"id": index.to_string(), "video": {"mimes": ["video/mp4"]}});
        insert_opt(&mut imp, "rwdd", rwdd.map(Value::from));
        if let Some(pod) = pod {
            imp["video"]["poddur"] = json!(pod);
            imp["ssai"] = json!(1);
        }
        if rwdd.is_some() && stale {
            // A stale prebid.is_rewarded_inventory of the opposite value.
            let mut e = ext.unwrap_or_else(|| json!({}));
            let prebid = e.as_object_mut().unwrap().entry("prebid").or_insert(json!({}));
            prebid["is_rewarded_inventory"] = json!(1 - rwdd.unwrap_or(0));
            ext = Some(e);
        }
        insert_opt(&mut imp, "ext", ext);
        imp
    }
}

prop_compose! {
    fn request_json()(
        imps in (1..4usize).prop_flat_map(|n| (0..n).map(imp_json).collect::<Vec<_>>()),
        schain in proptest::option::of((0..2i32).prop_map(|c| json!({"complete": c, "nodes": [{"asi": "a.example", "sid": "1", "hp": 1}], "ver": "1.0"}))),
        source_ext in other_ext(),
        gdpr in proptest::option::of(0..2i32),
        us_privacy in proptest::option::of("1[YN-]{3}"),
        gpp in proptest::option::of(Just("DBABMA~x")),
        regs_ext in other_ext(),
        consent in proptest::option::of("[A-Za-z0-9_-]{0,24}"),
        eids in proptest::option::of(proptest::collection::vec("[a-z]{1,8}\\.com", 0..3)),
        user_ext in other_ext(),
        sua in any::<bool>(),
        stale in any::<bool>(),
    ) -> Value {
        let mut request = json!({"id": "r", "imp": imps});
        let source_ext = with_stale(source_ext, stale && schain.is_some(), "schain", json!({"complete": 0}));
        if schain.is_some() || source_ext.is_some() {
            let mut source = json!({"tid": "t"});
            insert_opt(&mut source, "schain", schain);
            insert_opt(&mut source, "ext", source_ext);
            request["source"] = source;
        }
        let regs_ext = with_stale(regs_ext, stale && gdpr.is_some(), "gdpr", json!(7));
        let mut regs = json!({"coppa": 0});
        insert_opt(&mut regs, "gdpr", gdpr.map(Value::from));
        insert_opt(&mut regs, "us_privacy", us_privacy.map(Value::from));
        insert_opt(&mut regs, "gpp", gpp.map(Value::from));
        insert_opt(&mut regs, "ext", regs_ext);
        request["regs"] = regs;
        let user_ext = with_stale(user_ext, stale && consent.is_some(), "consent", json!("old"));
        let mut user = json!({"id": "u"});
        insert_opt(&mut user, "consent", consent.map(Value::from));
        let eids = eids.map(|sources| {
            sources.into_iter().map(|s| json!({"source": s, "mm": 2, "uids": [{"id": "x", "atype": 1}]})).collect::<Vec<_>>()
        });
        insert_opt(&mut user, "eids", eids.map(Value::from));
        insert_opt(&mut user, "ext", user_ext);
        request["user"] = user;
        if sua {
            request["device"] = json!({"ua": "UA", "sua": {"mobile": 1}, "langb": "en-GB"});
        }
        request
    }
}

/// An object's `ext` as JSON, without the 2.5 homes, `None` and `{}` alike.
fn ext_rest(ext: Option<&openrtb::RawJson>, homes: &[&str]) -> Value {
    let mut value: Value = ext.map_or(json!({}), |e| serde_json::from_str(e.get()).unwrap());
    if let Some(object) = value.as_object_mut() {
        for home in homes {
            object.remove(*home);
        }
    }
    value
}

fn other_exts(r: &BidRequest) -> Value {
    json!({
        "source": ext_rest(r.source.as_ref().and_then(|s| s.ext.as_ref()), &["schain"]),
        "regs": ext_rest(r.regs.as_ref().and_then(|s| s.ext.as_ref()), &["gdpr", "us_privacy"]),
        "user": ext_rest(r.user.as_ref().and_then(|u| u.ext.as_ref()), &["consent", "eids"]),
        "imp": r.imp.iter().map(|i| {
            let mut ext = ext_rest(i.ext.as_ref(), &[]);
            if let Some(prebid) = ext.get_mut("prebid").and_then(Value::as_object_mut) {
                prebid.remove("is_rewarded_inventory");
                if prebid.is_empty() {
                    ext.as_object_mut().unwrap().remove("prebid");
                }
            }
            ext
        }).collect::<Vec<_>>(),
    })
}

#[test]
fn up_after_down_restores_every_moved_field() {
    let config = Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[34; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    runner
        .run(&request_json(), |json| {
            let text = json.to_string();
            let original = decode(&text);

            let mut request = original.clone();
            let down = down_to_2_5(&mut request).unwrap();
            let encoded = encode(&request);
            let unknown = keys_unknown_to_2_5(&serde_json::from_str(&encoded).unwrap());
            prop_assert!(unknown.is_empty(), "{unknown:?} in {encoded}");
            prop_assert_eq!(&decode(&encoded), &request);

            let up = up_from_2_5(&mut request).unwrap();
            prop_assert_eq!(up.moved, down.moved);
            prop_assert_eq!(moved_fields(&request), moved_fields(&original));
            prop_assert_eq!(other_exts(&request), other_exts(&original));

            let settled = encode(&request);
            prop_assert!(up_from_2_5(&mut request).unwrap().is_empty());
            prop_assert_eq!(encode(&request), settled);
            Ok(())
        })
        .unwrap();
}
