//! Fixtures decode, re-encode and decode again to the same value; unknown fields and `ext`
//! come out byte for byte as they went in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use openrtb::{
    AuctionType, BannerAdType, BidRequest, BidResponse, CreativeAttribute, DeviceType,
    IdMatchMethod, LocationType, Price, RawJson,
};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn spec_fixtures(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = fs::read_dir(fixtures_dir().join("spec-2.6"))
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

fn realistic() -> Vec<u8> {
    fs::read(fixtures_dir().join("realistic-2.5k.json")).unwrap()
}

/// decode -> encode -> decode gives an equal value, and encoding is a fixed point after one
/// normalisation.
fn assert_request_roundtrip(name: &str, bytes: &[u8]) -> BidRequest {
    let first = BidRequest::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let encoded = first.to_vec().unwrap();
    let second = BidRequest::from_slice(&encoded).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(first, second, "{name}");
    assert_eq!(
        second.to_vec().unwrap(),
        encoded,
        "{name}: encoding is not stable"
    );
    first
}

fn assert_response_roundtrip(name: &str, bytes: &[u8]) -> BidResponse {
    let first = BidResponse::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut encoded = Vec::new();
    first.to_writer(&mut encoded).unwrap();
    let second = BidResponse::from_slice(&encoded).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(first, second, "{name}");
    assert_eq!(
        second.to_vec().unwrap(),
        encoded,
        "{name}: encoding is not stable"
    );
    first
}

#[test]
fn every_spec_fixture_parses_and_roundtrips() {
    let requests = spec_fixtures("request-");
    let responses = spec_fixtures("response-");
    assert_eq!(requests.len(), 5);
    assert_eq!(responses.len(), 4);
    for (name, bytes) in &requests {
        assert_request_roundtrip(name, bytes);
    }
    for (name, bytes) in &responses {
        assert_response_roundtrip(name, bytes);
    }
}

#[test]
fn spec_fixture_values() {
    let req = BidRequest::from_slice(
        &fs::read(fixtures_dir().join("spec-2.6/request-5-pmp-direct-deal.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(req.at, Some(AuctionType::FIRST_PRICE));
    let pmp = req.imp[0].pmp.as_ref().unwrap();
    assert_eq!(pmp.private_auction, Some(1));
    let deals = pmp.deals.as_ref().unwrap();
    assert_eq!(deals[0].bidfloor, Some(Price::from_micros(2_500_000)));
    assert_eq!(deals[1].at, Some(AuctionType::SECOND_PRICE_PLUS));
    assert_eq!(req.imp[0].bidfloor, Some(Price::from_micros(30_000)));

    let mobile = BidRequest::from_slice(
        &fs::read(fixtures_dir().join("spec-2.6/request-3-mobile.json")).unwrap(),
    )
    .unwrap();
    let device = mobile.device.as_ref().unwrap();
    assert_eq!(device.devicetype, Some(DeviceType::MOBILE_TABLET));
    let banner = mobile.imp[0].banner.as_ref().unwrap();
    assert_eq!(banner.btype.as_deref(), Some(&[BannerAdType::IFRAME][..]));
    assert_eq!(
        banner.battr.as_deref(),
        Some(&[CreativeAttribute::WINDOWS_DIALOG_OR_ALERT][..])
    );

    let resp = BidResponse::from_slice(
        &fs::read(fixtures_dir().join("spec-2.6/response-1-ad-served-on-win-notice.json")).unwrap(),
    )
    .unwrap();
    let bid = &resp.seatbid.as_ref().unwrap()[0].bid[0];
    assert_eq!(bid.price, Price::from_micros(9_430_000));
    assert!(
        String::from_utf8(resp.to_vec().unwrap())
            .unwrap()
            .contains(r#""price":9.43"#)
    );
}

#[test]
fn spec_video_example_keeps_its_non_standard_field_verbatim() {
    // The 2.6 video example carries `apis`, which Video does not define (it has `api`): it must
    // survive as an unknown field, whitespace and all.
    let bytes = fs::read(fixtures_dir().join("spec-2.6/request-4-video.json")).unwrap();
    let req = assert_request_roundtrip("video", &bytes);
    let video = req.imp[0].video.as_ref().unwrap();
    let apis = video.unknown.get("apis").unwrap();
    assert_eq!(apis.get(), "[\n          1,\n          2\n        ]");
    let out = String::from_utf8(req.to_vec().unwrap()).unwrap();
    assert!(
        out.contains("\"apis\":[\n          1,\n          2\n        ]"),
        "{out}"
    );
    assert_eq!(video.companionad.as_ref().unwrap().len(), 2);
}

#[test]
fn realistic_request_roundtrips_and_reads_right() {
    let bytes = realistic();
    assert!((2_400..=3_000).contains(&bytes.len()), "{}", bytes.len());
    let req = assert_request_roundtrip("realistic", &bytes);

    assert_eq!(req.imp.len(), 2);
    let imp0 = &req.imp[0];
    assert_eq!(imp0.bidfloor, Some(Price::from_micros(850_000)));
    assert_eq!(
        imp0.banner.as_ref().unwrap().format.as_ref().unwrap().len(),
        3
    );
    let deals = imp0.pmp.as_ref().unwrap().deals.as_ref().unwrap();
    assert_eq!(deals[0].bidfloor, Some(Price::from_micros(4_500_000)));
    assert_eq!(deals[1].at, Some(AuctionType::FIXED_PRICE));
    assert_eq!(
        req.imp[1].metric.as_ref().unwrap()[0].r#type.as_deref(),
        Some("viewability")
    );

    let site = req.site.as_ref().unwrap();
    assert_eq!(site.r#ref.as_deref(), Some("https://www.search.example/"));
    let device = req.device.as_ref().unwrap();
    assert_eq!(device.geo.as_ref().unwrap().r#type, Some(LocationType::IP));
    assert_eq!(
        device
            .sua
            .as_ref()
            .unwrap()
            .platform
            .as_ref()
            .unwrap()
            .brand
            .as_deref(),
        Some("iOS")
    );
    let user = req.user.as_ref().unwrap();
    let eids = user.eids.as_ref().unwrap();
    assert_eq!(eids[0].mm, Some(IdMatchMethod::AUTHENTICATED));
    let regs = req.regs.as_ref().unwrap();
    assert_eq!(regs.gdpr, Some(1));
    assert_eq!(regs.gpp_sid.as_deref(), Some(&[2][..]));
    let schain = req.source.as_ref().unwrap().schain.as_ref().unwrap();
    assert_eq!(schain.nodes.as_ref().unwrap().len(), 2);

    // Every ext comes out byte-identical.
    let out = String::from_utf8(req.to_vec().unwrap()).unwrap();
    for ext in [
        req.ext.as_ref(),
        imp0.ext.as_ref(),
        user.ext.as_ref(),
        regs.ext.as_ref(),
        eids[1].uids.as_ref().unwrap()[0].ext.as_ref(),
    ] {
        let ext = ext.unwrap().get();
        assert!(out.contains(&format!("\"ext\":{ext}")), "{ext}");
    }
}

/// A request with unknown fields and `ext` at several depths, spelled with unusual spacing and
/// number formats so that any re-serialisation would show.
const ODD_REQUEST: &str = r#"{
  "id": "odd-1",
  "x_top": { "b" : [1, 2.50, -0.0, 1E3, "\u00e9\"\\"], "a": null },
  "imp": [
    { "id": "1",
      "x_imp": [ true , false ],
      "banner": { "w": 300, "h": 250, "x_banner": 7,
                  "format": [ { "w": 300, "h": 250, "x_fmt": "f", "ext": { "k":  1 } } ],
                  "ext": {"nested": {"deeper": [ {"deepest": 1.000} ]}} },
      "pmp": { "deals": [ { "id": "d", "bidfloor": 1.5, "x_deal": {}, "ext": [ ] } ] },
      "ext": { "gpid": "/1/a" , "prebid": {"bidder": {"x": {"p": 0.10}}} }
    }
  ],
  "site": { "publisher": { "id": "p", "x_pub": "y", "ext": {"sellers": "json"} } },
  "device": { "geo": { "lat": 1.25, "x_geo": 12345678901234567890, "ext": {"z": "q"} } },
  "user": { "eids": [ { "source": "s", "uids": [ { "id": "u", "x_uid": 0.1e-2 } ] } ] },
  "x_dup": 1,
  "x_dup": 2,
  "ext": { "top" : "level" }
}"#;

#[test]
fn unknown_fields_and_ext_survive_byte_for_byte_at_every_depth() {
    let req = assert_request_roundtrip("odd", ODD_REQUEST.as_bytes());
    let out = String::from_utf8(req.to_vec().unwrap()).unwrap();

    for fragment in [
        r#""x_top":{ "b" : [1, 2.50, -0.0, 1E3, "\u00e9\"\\"], "a": null }"#,
        r#""x_imp":[ true , false ]"#,
        r#""x_banner":7"#,
        r#""x_fmt":"f""#,
        r#""ext":{ "k":  1 }"#,
        r#""ext":{"nested": {"deeper": [ {"deepest": 1.000} ]}}"#,
        r#""x_deal":{}"#,
        r#""ext":[ ]"#,
        r#""ext":{ "gpid": "/1/a" , "prebid": {"bidder": {"x": {"p": 0.10}}} }"#,
        r#""x_pub":"y""#,
        r#""ext":{"sellers": "json"}"#,
        r#""x_geo":12345678901234567890"#,
        r#""ext":{"z": "q"}"#,
        r#""x_uid":0.1e-2"#,
        r#""x_dup":1,"x_dup":2"#,
        r#""ext":{ "top" : "level" }"#,
    ] {
        assert!(out.contains(fragment), "missing {fragment} in {out}");
    }

    let imp = &req.imp[0];
    assert_eq!(imp.unknown.get("x_imp").unwrap().get(), "[ true , false ]");
    let banner = imp.banner.as_ref().unwrap();
    assert_eq!(banner.unknown.len(), 1);
    assert_eq!(
        banner.format.as_ref().unwrap()[0]
            .ext
            .as_ref()
            .unwrap()
            .get(),
        r#"{ "k":  1 }"#
    );
    assert_eq!(req.unknown.len(), 3);
}

#[test]
fn null_means_absent() {
    let req = BidRequest::from_slice(
        br#"{"id":"n","imp":[{"id":"1","bidfloor":null,"banner":null}],"tmax":null,"ext":null}"#,
    )
    .unwrap();
    assert_eq!(req.tmax, None);
    assert_eq!(req.ext, None);
    assert_eq!(req.imp[0].bidfloor, None);
    assert_eq!(req.to_vec().unwrap(), br#"{"id":"n","imp":[{"id":"1"}]}"#);
}

#[test]
fn ext_helper_edits_an_imp_ext() {
    let mut req = BidRequest::from_slice(ODD_REQUEST.as_bytes()).unwrap();
    let imp = &mut req.imp[0];
    imp.ext = Some(RawJson::with_field(imp.ext.as_ref(), "gpid", "/2/b").unwrap());
    assert_eq!(
        imp.ext.as_ref().unwrap().get(),
        r#"{"gpid":"/2/b","prebid":{"bidder": {"x": {"p": 0.10}}}}"#
    );
    let back = BidRequest::from_slice(&req.to_vec().unwrap()).unwrap();
    assert_eq!(back, req);
}

#[test]
fn built_objects_encode_without_absent_fields() {
    let req = BidRequest {
        id: "built".into(),
        imp: vec![openrtb::Imp {
            id: "1".into(),
            bidfloor: Some(Price::from_micros(1_500_000)),
            banner: Some(openrtb::Banner {
                format: Some(vec![openrtb::Format {
                    w: Some(300),
                    h: Some(250),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }],
        at: Some(AuctionType::FIRST_PRICE),
        ..Default::default()
    };
    assert_eq!(
        String::from_utf8(req.to_vec().unwrap()).unwrap(),
        r#"{"id":"built","imp":[{"id":"1","banner":{"format":[{"w":300,"h":250}]},"bidfloor":1.5}],"at":1}"#
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            (-1e12f64..1e12).prop_map(serde_json::Value::from),
            "\\PC{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::btree_map("[a-z_]{1,6}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Whitespace JSON allows between tokens, as other encoders and people write it.
    fn ws() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just(""),
            Just(" "),
            Just("\n  "),
            Just("\t"),
            Just("\r\n"),
            Just("   ")
        ]
    }

    /// A JSON string as text, mixing plain characters, every kind of escape (including `\/`,
    /// `\u` with either case of hex, and a surrogate pair) and raw non-ASCII.
    fn string_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-zA-Z0-9 _.-]{1,4}",
            Just(r#"\""#.to_owned()),
            Just(r"\\".to_owned()),
            Just(r"\/".to_owned()),
            Just(r"\n".to_owned()),
            Just(r"\t".to_owned()),
            Just(r"\u00e9".to_owned()),
            Just(r"\u00E9".to_owned()),
            Just(r"\ud83d\ude00".to_owned()),
            Just("é".to_owned()),
            Just("😀".to_owned()),
        ];
        proptest::collection::vec(piece, 0..5).prop_map(|p| format!("\"{}\"", p.concat()))
    }

    /// A number as text, in forms a canonical encoder would not write.
    fn number_text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            "-?(0|[1-9][0-9]{0,5})\\.[0-9]{1,4}([eE][+-]?[0-9]{1,2})?",
            Just("-0.0".to_owned()),
            Just("1E3".to_owned()),
            Just("2.50".to_owned()),
        ]
    }

    /// Any JSON value as non-canonical text: whitespace anywhere, object keys in any order
    /// (never sorted, never repeated), escapes and number spellings as above.
    fn json_text() -> BoxedStrategy<String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            number_text(),
            string_text(),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                (
                    proptest::collection::vec((ws(), inner.clone(), ws()), 0..5),
                    ws()
                )
                    .prop_map(|(items, pad)| {
                        let items: Vec<String> = items
                            .into_iter()
                            .map(|(a, v, b)| format!("{a}{v}{b}"))
                            .collect();
                        format!("[{pad}{}]", items.join(","))
                    }),
                object_text(inner),
            ]
        })
        .boxed()
    }

    fn object_text(value: BoxedStrategy<String>) -> impl Strategy<Value = String> {
        (
            proptest::collection::vec(("[a-z]{1,3}", ws(), value, ws()), 0..5),
            ws(),
        )
            .prop_map(|(members, pad)| {
                // The index makes each key unique; the random part before it makes the order
                // anything but sorted.
                let members: Vec<String> = members
                    .into_iter()
                    .enumerate()
                    .map(|(i, (k, a, v, b))| format!("{a}\"{k}{i}\"{b}:{a}{v}{b}"))
                    .collect();
                format!("{{{pad}{}}}", members.join(","))
            })
    }

    proptest! {
        /// Unknown fields and `ext` written by another encoder (or a person): kept byte for
        /// byte, whitespace, escapes and key order included, and the request re-encodes to a
        /// fixed point.
        #[test]
        fn unknown_fields_and_ext_keep_their_exact_text(
            top in json_text(),
            in_imp in json_text(),
            ext in object_text(json_text()),
            pads in proptest::collection::vec(ws(), 8),
            order in Just([0usize, 1, 2]).prop_shuffle(),
        ) {
            let members = [
                format!(r#""id"{}:{}"p""#, pads[0], pads[1]),
                format!(r#""zz_top"{}:{}{top}"#, pads[2], pads[3]),
                format!(
                    r#""imp":[{}{{"ext":{ext},"id":"1","zz_imp":{}{in_imp}{}}}]"#,
                    pads[4], pads[5], pads[6]
                ),
            ];
            let text = format!(
                "{{{}{}}}",
                pads[7],
                order.iter().map(|&i| members[i].as_str()).collect::<Vec<_>>().join(" , ")
            );
            let req = BidRequest::from_slice(text.as_bytes())
                .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            prop_assert_eq!(req.unknown.get("zz_top").unwrap().get(), top.as_str());
            prop_assert_eq!(req.imp[0].unknown.get("zz_imp").unwrap().get(), in_imp.as_str());
            prop_assert_eq!(req.imp[0].ext.as_ref().unwrap().get(), ext.as_str());
            let encoded = req.to_vec().unwrap();
            let again = BidRequest::from_slice(&encoded).unwrap();
            prop_assert_eq!(&again, &req);
            prop_assert_eq!(again.to_vec().unwrap(), encoded);
        }
    }

    proptest! {
        #[test]
        fn arbitrary_unknown_fields_and_ext_roundtrip(
            top in json_value(),
            in_imp in json_value(),
            ext in json_value(),
        ) {
            let text = format!(
                r#"{{"id":"p","zz_top":{},"imp":[{{"id":"1","zz_imp":{},"ext":{}}}]}}"#,
                serde_json::to_string(&top).unwrap(),
                serde_json::to_string(&in_imp).unwrap(),
                serde_json::to_string(&ext).unwrap(),
            );
            let req = BidRequest::from_slice(text.as_bytes()).unwrap();
            let again = BidRequest::from_slice(&req.to_vec().unwrap()).unwrap();
            prop_assert_eq!(&again, &req);
            prop_assert_eq!(req.unknown.get("zz_top").unwrap().get(), serde_json::to_string(&top).unwrap());
            if !ext.is_null() {
                prop_assert_eq!(req.imp[0].ext.as_ref().unwrap().get(), serde_json::to_string(&ext).unwrap());
            }
        }

        #[test]
        fn bid_price_roundtrips_through_json(micros in 0i64..1_000_000_000_000_000) {
            let price = Price::from_micros(micros);
            let text = format!(r#"{{"id":"r","seatbid":[{{"bid":[{{"id":"b","impid":"1","price":{price}}}]}}]}}"#);
            let resp = BidResponse::from_slice(text.as_bytes()).unwrap();
            prop_assert_eq!(resp.seatbid.as_ref().unwrap()[0].bid[0].price, price);
            let again = BidResponse::from_slice(&resp.to_vec().unwrap()).unwrap();
            prop_assert_eq!(again, resp);
        }
    }
}
