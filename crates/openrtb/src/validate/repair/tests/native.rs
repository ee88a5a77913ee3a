//! Native request strings as sellers send them: repaired text compared byte for byte, untouched
//! parts kept as written, the 1.0 wrapper kept, unfixable strings left alone. And a device
//! location out of range in the realistic request.

use std::path::Path;

use serde_json::json;

use super::super::super::validate;
use super::super::repair;
use super::summary;
use crate::{BidRequest, Imp, Native};

fn request(native: &str) -> BidRequest {
    BidRequest {
        id: "r".to_owned(),
        imp: vec![Imp {
            id: "1".to_owned(),
            native: Some(Native {
                request: Some(native.to_owned()),
                ver: Some("1.2".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The repaired native string and what repair reported, after checking that the result is
/// valid and a second repair finds nothing.
fn repaired(native: &str) -> (String, Vec<String>) {
    let mut r = request(native);
    let done = repair(&mut r);
    assert_eq!(validate(&r, "USD"), Ok(()), "{native}");
    assert_eq!(repair(&mut r.clone()), [], "{native}: not idempotent");
    let text = r.imp[0].native.as_ref().unwrap().request.clone().unwrap();
    (text, done.iter().map(ToString::to_string).collect())
}

/// What Prebid.js's Prebid Server adapter sends: assets without ids, which Prebid Server
/// numbers by position.
#[test]
fn assets_without_ids_are_numbered_by_position() {
    let sent = r#"{"ver":"1.2","context":1,"plcmttype":1,"eventtrackers":[{"event":1,"methods":[1]}],"assets":[{"required":1,"title":{"len":80}},{"required":1,"img":{"type":3,"wmin":300,"hmin":157,"ext":{"aspectratios":["1.91:1"]}}},{"required":0,"img":{"type":1,"w":50,"h":50}},{"required":1,"data":{"type":1}},{"required":0,"data":{"type":2,"len":140}}],"privacy":1}"#;
    let (text, done) = repaired(sent);
    assert_eq!(
        text,
        r#"{"ver":"1.2","context":1,"plcmttype":1,"eventtrackers":[{"event":1,"methods":[1]}],"assets":[{"id":0,"required":1,"title":{"len":80}},{"id":1,"required":1,"img":{"type":3,"wmin":300,"hmin":157,"ext":{"aspectratios":["1.91:1"]}}},{"id":2,"required":0,"img":{"type":1,"w":50,"h":50}},{"id":3,"required":1,"data":{"type":1}},{"id":4,"required":0,"data":{"type":2,"len":140}}],"privacy":1}"#
    );
    assert_eq!(
        done,
        (0..5)
            .map(|i| format!("imp[0].native.request.assets[{i}].id: filled"))
            .collect::<Vec<_>>()
    );
}

/// Only the objects on the way to a change are rewritten (compact); every other value keeps
/// its text, spaces and number spelling included.
#[test]
fn untouched_values_keep_their_text() {
    let sent = " {\n \"assets\": [ {\"id\": 1, \"title\": {\"len\": 25}}, {\"img\": { \"type\" : 3 }} ],\n \"ext\": {\"a\" : [1, 2.50, 1.2e3]} } ";
    let (text, done) = repaired(sent);
    assert_eq!(
        text,
        r#"{"assets":[{"id": 1, "title": {"len": 25}},{"id":0,"img":{ "type" : 3 }}],"ext":{"a" : [1, 2.50, 1.2e3]}}"#
    );
    assert_eq!(done, ["imp[0].native.request.assets[1].id: filled"]);
}

/// Native 1.0's `{"native": {...}}` wrapper stays, its other members too; paths go through it,
/// labels do not.
#[test]
fn the_native_1_0_wrapper_is_kept() {
    let sent = r#"{"native":{"ver":"1.0","layout":3,"plcmtcnt":-1,"assets":[{"title":{"len":25}},{"id":0,"img":{"type":3}}]},"x":1}"#;
    let mut r = request(sent);
    let done = repair(&mut r);
    assert_eq!(
        r.imp[0].native.as_ref().unwrap().request.as_deref(),
        Some(
            r#"{"native":{"ver":"1.0","layout":3,"assets":[{"id":1,"title":{"len":25}},{"id":0,"img":{"type":3}}]},"x":1}"#
        )
    );
    assert_eq!(
        summary(&done),
        [
            (
                "imp.native.request.plcmtcnt".to_owned(),
                "imp[0].native.request.native.plcmtcnt".to_owned(),
                "dropped"
            ),
            (
                "imp.native.request.assets.id".to_owned(),
                "imp[0].native.request.native.assets[0].id".to_owned(),
                "filled"
            ),
        ]
    );
    assert_eq!(validate(&r, "USD"), Ok(()));
}

#[test]
fn a_null_id_is_replaced_where_it_is() {
    let (text, _) =
        repaired(r#"{"assets":[{"title":{"len":5},"id":null},{"id":0,"data":{"type":1}}]}"#);
    assert_eq!(
        text,
        r#"{"assets":[{"title":{"len":5},"id":1},{"id":0,"data":{"type":1}}]}"#
    );
}

/// A rewritten object writes its member names as they came, or re-escaped when they held an
/// escape sequence (the same name).
#[test]
fn escaped_names_are_written_as_the_same_name() {
    let (text, _) = repaired(r#"{"assets":[{"title":{"len":5}}],"\u0065xt":{"k\"":1}}"#);
    assert_eq!(
        text,
        r#"{"assets":[{"id":0,"title":{"len":5}}],"ext":{"k\"":1}}"#
    );
}

/// Trackers have no count limit of their own: a bad one among many is dropped.
#[test]
fn a_bad_tracker_among_many_is_dropped() {
    let mut trackers: Vec<_> = (0..100)
        .map(|_| json!({"event": 1, "methods": [1]}))
        .collect();
    trackers[70] = json!({"event": 0, "methods": [1]});
    let sent = json!({"assets": [{"id": 1, "title": {"len": 5}}], "eventtrackers": trackers});
    let (text, done) = repaired(&sent.to_string());
    trackers.remove(70);
    let want = json!({"assets": [{"id": 1, "title": {"len": 5}}], "eventtrackers": trackers});
    assert_eq!(text, want.to_string());
    assert_eq!(done, ["imp[0].native.request.eventtrackers[70]: dropped"]);
}

/// With a fault that cannot be fixed as well, the string stays as sent and so does the refusal.
#[test]
fn a_string_that_stays_invalid_is_left_as_sent() {
    let cases = [
        // A missing id with two assets of id 1.
        r#"{"assets":[{"title":{"len":5}},{"id":1,"img":{}},{"id":1,"data":{"type":1}}]}"#,
        // A missing id with an asset of two kinds.
        r#"{"assets":[{"title":{"len":5}},{"id":1,"img":{},"data":{"type":1}}]}"#,
        // A missing id with a missing title length.
        r#"{"assets":[{"title":{}},{"id":1,"img":{"type":9}}]}"#,
        // Every tracker bad: none is left to keep.
        r#"{"assets":[{"id":1,"title":{"len":5}}],"eventtrackers":[{"event":9,"methods":[1]},{"event":1}]}"#,
        // An id of the wrong type is not replaced, a duplicate key is not chosen from.
        r#"{"assets":[{"id":"1","title":{"len":5}},{"img":{}}]}"#,
        r#"{"assets":[{"title":{"len":5}}],"context":1,"context":2}"#,
    ];
    for sent in cases {
        let mut r = request(sent);
        let before = validate(&r, "USD").expect_err(sent);
        assert_eq!(repair(&mut r), [], "{sent}");
        assert_eq!(
            r.imp[0].native.as_ref().unwrap().request.as_deref(),
            Some(sent)
        );
        assert_eq!(validate(&r, "USD"), Err(before), "{sent}");
    }
}

/// The realistic request with a device latitude of 200: the coordinates go, the place names,
/// location type and IP service stay; nothing else changes.
#[test]
fn a_latitude_of_200_loses_the_coordinates_only() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-2.5k.json");
    let mut sent: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    sent["device"]["geo"]["lat"] = json!(200.0);
    let mut request = BidRequest::from_slice(&serde_json::to_vec(&sent).unwrap()).unwrap();
    assert!(validate(&request, "USD").is_err());
    let done = repair(&mut request);
    let done: Vec<String> = done.iter().map(ToString::to_string).collect();
    assert_eq!(done, ["device.geo.lat: dropped", "device.geo.lon: dropped"]);
    assert_eq!(validate(&request, "USD"), Ok(()));
    let mut want = sent.clone();
    let geo = want["device"]["geo"].as_object_mut().unwrap();
    geo.remove("lat");
    geo.remove("lon");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&request.to_vec().unwrap()).unwrap(),
        want
    );
    assert_eq!(want["device"]["geo"]["type"], json!(2));
    assert_eq!(want["device"]["geo"]["city"], json!("Paris"));
}
