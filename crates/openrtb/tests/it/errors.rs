//! Malformed payloads are errors that say what and where; none of them crashes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use openrtb::{BidRequest, BidResponse, DecodeError};

fn request_err(json: &str) -> DecodeError {
    match BidRequest::from_slice(json.as_bytes()) {
        Ok(req) => panic!("decoded {json} as {req:?}"),
        Err(e) => e,
    }
}

fn response_err(json: &str) -> DecodeError {
    match BidResponse::from_slice(json.as_bytes()) {
        Ok(resp) => panic!("decoded {json} as {resp:?}"),
        Err(e) => e,
    }
}

#[test]
fn wrong_type_names_the_path() {
    let e = request_err(r#"{"id":"a","imp":[{"id":"1","bidfloor":"x"}]}"#);
    assert_eq!(e.path(), "imp[0].bidfloor");
    assert!(
        e.to_string()
            .starts_with(r#"imp[0].bidfloor: invalid type: string "x", expected f64"#),
        "{e}"
    );
    assert_eq!(e.category(), serde_json::error::Category::Data);

    let e = request_err(r#"{"id":"a","imp":[],"device":{"geo":{"utcoffset":1.5}}}"#);
    assert_eq!(e.path(), "device.geo.utcoffset");

    let e = request_err(r#"{"id":"a","imp":[{"id":"1","banner":{"format":[{"w":1},{"w":"2"}]}}]}"#);
    assert_eq!(e.path(), "imp[0].banner.format[1].w");

    let e = request_err(r#"{"id":"a","imp":[],"at":"first"}"#);
    assert_eq!(e.path(), "at");

    let e =
        response_err(r#"{"id":"r","seatbid":[{"bid":[{"id":"b","impid":"1","price":1e300}]}]}"#);
    assert_eq!(e.path(), "seatbid[0].bid[0].price");
    assert!(e.to_string().contains("price is beyond"), "{e}");
}

#[test]
fn error_after_unknown_fields_and_ext_still_has_a_path() {
    // The slow path re-decodes RawJson values through serde_path_to_error; make sure that works.
    let e = request_err(
        r#"{"id":"a","x":{"deep":[1,{"a":2}]},"ext":{"e":1},"imp":[{"id":"1","ext":{},"y":[],"secure":true}]}"#,
    );
    assert_eq!(e.path(), "imp[0].secure");
    assert!(
        e.to_string()
            .contains("invalid type: boolean `true`, expected i32"),
        "{e}"
    );
}

#[test]
fn duplicate_known_keys_are_refused() {
    let e = request_err(r#"{"id":"a","id":"b","imp":[]}"#);
    assert!(e.to_string().contains("duplicate field `id`"), "{e}");

    let e = request_err(r#"{"id":"a","imp":[{"id":"1","bidfloor":1,"bidfloor":2}]}"#);
    assert!(e.to_string().contains("duplicate field `bidfloor`"), "{e}");
    assert!(e.path().starts_with("imp[0]"), "{}", e.path());

    // `null` counts as an occurrence: the key is still there twice.
    let e = request_err(r#"{"id":"a","imp":[],"tmax":null,"tmax":100}"#);
    assert!(e.to_string().contains("duplicate field `tmax`"), "{e}");

    let e = request_err(r#"{"id":"a","imp":[],"ext":{},"ext":{}}"#);
    assert!(e.to_string().contains("duplicate field `ext`"), "{e}");

    let e = response_err(r#"{"id":"r","seatbid":[{"bid":[],"bid":[]}]}"#);
    assert!(e.to_string().contains("duplicate field `bid`"), "{e}");

    // A key written with an escape is the same key.
    let e = request_err(r#"{"id":"a","imp":[],"\u0069d":"b"}"#);
    assert!(e.to_string().contains("duplicate field `id`"), "{e}");
}

#[test]
fn missing_required_fields_are_named() {
    let e = request_err(r#"{"imp":[]}"#);
    assert!(e.to_string().contains("missing field `id`"), "{e}");
    let e = request_err(r#"{"id":"a"}"#);
    assert!(e.to_string().contains("missing field `imp`"), "{e}");
    let e = request_err(r#"{"id":"a","imp":[{"bidfloor":1}]}"#);
    assert_eq!(e.path(), "imp[0]");
    assert!(
        e.to_string().starts_with("imp[0]: missing field `id`"),
        "{e}"
    );

    let e = response_err(r#"{"seatbid":[]}"#);
    assert!(e.to_string().contains("missing field `id`"), "{e}");
    let e = response_err(r#"{"id":"r","seatbid":[{"seat":"s"}]}"#);
    assert!(
        e.to_string().contains("seatbid[0]: missing field `bid`"),
        "{e}"
    );
    for field in ["id", "impid", "price"] {
        let mut bid = serde_json::json!({"id": "b", "impid": "1", "price": 1.0});
        bid.as_object_mut().unwrap().remove(field);
        let json = serde_json::json!({"id": "r", "seatbid": [{"bid": [bid]}]}).to_string();
        let e = response_err(&json);
        assert!(
            e.to_string()
                .starts_with(&format!("seatbid[0].bid[0]: missing field `{field}`")),
            "{e}"
        );
    }

    // null is not a value for a required field.
    let e = request_err(r#"{"id":null,"imp":[]}"#);
    assert_eq!(e.path(), "id");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = "[".repeat(10_000);
    let deep_objects = r#"{"a":"#.repeat(10_000);
    for json in [
        deep.clone(),
        format!(r#"{{"id":"a","imp":[],"ext":{deep}"#),
        format!(
            r#"{{"id":"a","imp":[],"ext":{deep}{}}}"#,
            "]".repeat(10_000)
        ),
        format!(
            r#"{{"id":"a","imp":[],"unknown":{deep}{}}}"#,
            "]".repeat(10_000)
        ),
        format!(
            r#"{{"id":"a","imp":[],"ext":{deep_objects}1{}}}"#,
            "}".repeat(10_000)
        ),
        format!(r#"{{"id":"a","imp":[{{"id":"1","banner":{{"format":[{deep}"#),
        format!(
            r#"{{"id":"a","imp":[{{"id":"1","x":{deep}{}}}]}}"#,
            "]".repeat(10_000)
        ),
    ] {
        let e = request_err(&json);
        assert!(!e.to_string().is_empty());
    }
    let e = response_err(&format!(
        r#"{{"id":"r","ext":{}1{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    ));
    assert!(e.to_string().contains("nested deeper"), "{e}");
}

#[test]
fn other_malformed_inputs() {
    for (json, needle) in [
        ("", "EOF"),
        ("[]", "expected an OpenRTB BidRequest object"),
        ("null", "expected an OpenRTB BidRequest object"),
        (r#"{"id":"a","imp":[]} x"#, "trailing characters"),
        (r#"{"id":"a","imp":[],}"#, "trailing comma"),
        (r#"{"id":"a","imp":{}}"#, "expected a sequence"),
        (r#"{"id":"a","imp":[],"x":}"#, "expected value"),
        (
            "{\"id\":\"a\",\"imp\":[],\"x\":\"\u{1}\"}",
            "control character",
        ),
    ] {
        let e = request_err(json);
        assert!(e.to_string().contains(needle), "{json}: {e}");
    }
    let bad_utf8 = b"{\"id\":\"\xff\",\"imp\":[]}";
    assert!(BidRequest::from_slice(bad_utf8).is_err());
}
