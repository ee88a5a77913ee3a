//! Table tests: each moved field both ways, each dropped field, the errors, `Version`.

use serde_json::{Value, json};

use super::*;

fn decode(json: &str) -> BidRequest {
    BidRequest::from_slice(json.as_bytes()).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn encode(request: &BidRequest) -> String {
    String::from_utf8(request.to_vec().expect("encode")).expect("utf-8")
}

fn set(fields: &[Field]) -> FieldSet {
    fields.iter().copied().collect()
}

/// `(name, 2.6 input, exact 2.5 encoding, fields moved)`.
const DOWN_MOVES: &[(&str, &str, &str, &[Field])] = &[
    (
        "schain into a new source.ext",
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"tid":"t","schain":{"complete":1,"nodes":[{"asi":"a.com","sid":"1","hp":1}],"ver":"1.0"}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"tid":"t","ext":{"schain":{"complete":1,"nodes":[{"asi":"a.com","sid":"1","hp":1}],"ver":"1.0"}}}}"#,
        &[Field::SourceSchain],
    ),
    (
        "schain overwrites a stale ext.schain in place",
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"schain":{"complete":0},"ext":{"schain":{"complete":1},"omidpn":"v"}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"ext":{"schain":{"complete":0},"omidpn":"v"}}}"#,
        &[Field::SourceSchain],
    ),
    (
        "gdpr and us_privacy appended to regs.ext, its text kept",
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"coppa":0,"gdpr":1,"us_privacy":"1YNN","ext":{"dsa": {"dsarequired":1}}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"coppa":0,"ext":{"dsa":{"dsarequired":1},"gdpr":1,"us_privacy":"1YNN"}}}"#,
        &[Field::RegsGdpr, Field::RegsUsPrivacy],
    ),
    (
        "gdpr overwrites regs.ext.gdpr",
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"gdpr":0,"ext":{"gdpr":1}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"ext":{"gdpr":0}}}"#,
        &[Field::RegsGdpr],
    ),
    (
        "consent and eids (2.6-202409 keys included) into user.ext",
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"id":"u","consent":"CP","eids":[{"inserter":"x.com","source":"id5-sync.com","mm":3,"uids":[{"id":"ID5*a","atype":1,"ext":{"linkType":2}}]}],"ext":{"sessionduration":4}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"id":"u","ext":{"sessionduration":4,"consent":"CP","eids":[{"inserter":"x.com","source":"id5-sync.com","mm":3,"uids":[{"id":"ID5*a","atype":1,"ext":{"linkType":2}}]}]}}}"#,
        &[Field::UserConsent, Field::UserEids],
    ),
    (
        "an empty consent and empty eids move as they are",
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"consent":"","eids":[]}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"ext":{"consent":"","eids":[]}}}"#,
        &[Field::UserConsent, Field::UserEids],
    ),
    (
        "rwdd of each imp into a new imp.ext.prebid",
        r#"{"id":"r","imp":[{"id":"1","rwdd":1},{"id":"2"},{"id":"3","rwdd":0}]}"#,
        r#"{"id":"r","imp":[{"id":"1","ext":{"prebid":{"is_rewarded_inventory":1}}},{"id":"2"},{"id":"3","ext":{"prebid":{"is_rewarded_inventory":0}}}]}"#,
        &[Field::ImpRwdd],
    ),
    (
        "rwdd joins an existing prebid object, other ext keys kept",
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":{"gpid":"/1/a","prebid":{"storedrequest":{"id":"s"},"is_rewarded_inventory":0},"data":{}}}]}"#,
        r#"{"id":"r","imp":[{"id":"1","ext":{"gpid":"/1/a","prebid":{"storedrequest":{"id":"s"},"is_rewarded_inventory":1},"data":{}}}]}"#,
        &[Field::ImpRwdd],
    ),
    (
        "a null prebid is replaced by a new object",
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":{"prebid":null}}]}"#,
        r#"{"id":"r","imp":[{"id":"1","ext":{"prebid":{"is_rewarded_inventory":1}}}]}"#,
        &[Field::ImpRwdd],
    ),
    (
        "nothing to move: ext text left as it was, spaces included",
        r#"{"id":"r","imp":[{"id":"1","ext":{ "gpid" : "/1/a" }}],"user":{"ext":{"x": 1}},"regs":{"coppa":1,"ext":{ "dsa" : 1 }}}"#,
        r#"{"id":"r","imp":[{"id":"1","ext":{ "gpid" : "/1/a" }}],"user":{"ext":{"x": 1}},"regs":{"coppa":1,"ext":{ "dsa" : 1 }}}"#,
        &[],
    ),
];

#[test]
fn down_moves_each_field_to_its_2_5_home() {
    for (name, input, expected, moved) in DOWN_MOVES {
        let mut request = decode(input);
        let done = down_to_2_5(&mut request).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(encode(&request), *expected, "{name}");
        assert_eq!(done.moved, set(moved), "{name}");
        assert!(done.dropped.is_empty(), "{name}: {done}");
    }
}

/// Where each 2.6-only field sits (a dotted path, numbers index arrays), its key and a value.
const DROPS: &[(Field, &str, &str, &str)] = &[
    (
        Field::Dooh,
        "",
        "dooh",
        r#"{"id":"d","venuetype":["airport"]}"#,
    ),
    (Field::Wlangb, "", "wlangb", r#"["en-GB"]"#),
    (Field::Acat, "", "acat", r#"["IAB1"]"#),
    (Field::Cattax, "", "cattax", "2"),
    (Field::RegsGpp, "regs", "gpp", r#""DBABMA~CP""#),
    (Field::RegsGppSid, "regs", "gpp_sid", "[2,6]"),
    (Field::ImpSsai, "imp.0", "ssai", "1"),
    (Field::ImpQty, "imp.0", "qty", r#"{"multiplier":2.5}"#),
    (Field::ImpDt, "imp.0", "dt", "1700000000000.5"),
    (Field::ImpRefresh, "imp.0", "refresh", r#"{"count":2}"#),
    (Field::VideoMaxseq, "imp.0.video", "maxseq", "3"),
    (Field::VideoPoddur, "imp.0.video", "poddur", "60"),
    (Field::VideoPodid, "imp.0.video", "podid", r#""p1""#),
    (Field::VideoPodseq, "imp.0.video", "podseq", "1"),
    (Field::VideoRqddurs, "imp.0.video", "rqddurs", "[15,30]"),
    (Field::VideoPlcmt, "imp.0.video", "plcmt", "1"),
    (Field::VideoSlotinpod, "imp.0.video", "slotinpod", "1"),
    (
        Field::VideoMincpmpersec,
        "imp.0.video",
        "mincpmpersec",
        "0.5",
    ),
    (Field::VideoPoddedupe, "imp.0.video", "poddedupe", "[1,2]"),
    (
        Field::VideoDurfloors,
        "imp.0.video",
        "durfloors",
        r#"[{"mindur":1,"maxdur":15,"bidfloor":2}]"#,
    ),
    (Field::AudioPoddur, "imp.1.audio", "poddur", "60"),
    (Field::AudioPodid, "imp.1.audio", "podid", r#""p2""#),
    (Field::AudioPodseq, "imp.1.audio", "podseq", "-1"),
    (Field::AudioRqddurs, "imp.1.audio", "rqddurs", "[30]"),
    (Field::AudioSlotinpod, "imp.1.audio", "slotinpod", "2"),
    (
        Field::AudioMincpmpersec,
        "imp.1.audio",
        "mincpmpersec",
        "0.2",
    ),
    (
        Field::AudioDurfloors,
        "imp.1.audio",
        "durfloors",
        r#"[{"bidfloor":1}]"#,
    ),
    (Field::DealGuar, "imp.0.pmp.deals.1", "guar", "1"),
    (
        Field::DealMincpmpersec,
        "imp.0.pmp.deals.0",
        "mincpmpersec",
        "0.1",
    ),
    (
        Field::DealDurfloors,
        "imp.0.pmp.deals.1",
        "durfloors",
        r#"[{"maxdur":30,"bidfloor":3}]"#,
    ),
    (Field::SiteCattax, "site", "cattax", "6"),
    (Field::SiteKwarray, "site", "kwarray", r#"["news"]"#),
    (
        Field::SiteInventorypartnerdomain,
        "site",
        "inventorypartnerdomain",
        r#""p.com""#,
    ),
    (Field::AppCattax, "app", "cattax", "6"),
    (Field::AppKwarray, "app", "kwarray", r#"["game"]"#),
    (
        Field::AppInventorypartnerdomain,
        "app",
        "inventorypartnerdomain",
        r#""q.com""#,
    ),
    (Field::PublisherCattax, "app.publisher", "cattax", "6"),
    (
        Field::ProducerCattax,
        "site.content.producer",
        "cattax",
        "6",
    ),
    (Field::ContentCattax, "app.content", "cattax", "6"),
    (Field::ContentKwarray, "site.content", "kwarray", r#"["k"]"#),
    (Field::ContentLangb, "site.content", "langb", r#""en-GB""#),
    (
        Field::ContentNetwork,
        "app.content",
        "network",
        r#"{"id":"n"}"#,
    ),
    (
        Field::ContentChannel,
        "app.content",
        "channel",
        r#"{"id":"c"}"#,
    ),
    (Field::ContentGtax, "site.content", "gtax", "9"),
    (Field::ContentGenres, "site.content", "genres", "[1,2]"),
    (Field::ContentRealtime, "app.content", "realtime", "1"),
    (
        Field::ContentFirstbroadcast,
        "app.content",
        "firstbroadcast",
        "1",
    ),
    (Field::DeviceSua, "device", "sua", r#"{"mobile":1}"#),
    (Field::DeviceLangb, "device", "langb", r#""fr-CA""#),
    (Field::UserKwarray, "user", "kwarray", r#"["a"]"#),
    (Field::DataCids, "user.data.0", "cids", r#"["c1"]"#),
    (Field::DataCids, "site.content.data.0", "cids", r#"["c2"]"#),
];

/// Every object a 2.6-only field can sit in, with 2.5 fields only (site and app both: the
/// converter handles each on its own).
const DROP_BASE: &str = r#"{"id":"r","imp":[{"id":"1","video":{"mimes":["video/mp4"],"maxduration":30},"pmp":{"deals":[{"id":"d1"},{"id":"d2","bidfloor":1}]}},{"id":"2","audio":{"mimes":["audio/mp4"],"maxseq":2}}],"site":{"id":"s","publisher":{"id":"p"},"content":{"id":"c","producer":{"id":"pr"},"data":[{"id":"cd"}]}},"app":{"id":"a","publisher":{"id":"p"},"content":{"id":"c"}},"device":{"ua":"UA"},"user":{"id":"u","data":[{"id":"ud"}]},"regs":{"coppa":0}}"#;

fn object_at<'a>(root: &'a mut Value, path: &str) -> &'a mut serde_json::Map<String, Value> {
    let mut node = root;
    for step in path.split('.').filter(|s| !s.is_empty()) {
        node = match step.parse::<usize>() {
            Ok(index) => node.get_mut(index),
            Err(_) => node.get_mut(step),
        }
        .unwrap_or_else(|| panic!("no {step} in {path}"));
    }
    node.as_object_mut().expect("an object")
}

#[test]
fn down_drops_each_2_6_only_field() {
    let base = encode(&decode(DROP_BASE));
    for (field, path, key, value) in DROPS {
        let mut input: Value = serde_json::from_str(DROP_BASE).expect("base");
        let value: Value = serde_json::from_str(value).expect("value");
        object_at(&mut input, path).insert((*key).to_owned(), value);
        let mut request = decode(&input.to_string());
        let done = down_to_2_5(&mut request).unwrap_or_else(|e| panic!("{field}: {e}"));
        assert_eq!(done.dropped, set(&[*field]), "{field}");
        assert!(done.moved.is_empty(), "{field}");
        assert_eq!(encode(&request), base, "{field}");
    }
}

#[test]
fn every_field_has_a_table_row() {
    for field in Field::ALL {
        let moved = DOWN_MOVES.iter().any(|(_, _, _, m)| m.contains(field));
        let dropped = DROPS.iter().any(|(f, ..)| f == field);
        assert!(moved ^ dropped, "{field}: moved {moved}, dropped {dropped}");
    }
}

#[test]
fn down_reports_each_field_once_across_imps_and_deals() {
    let mut request = decode(
        r#"{"id":"r","imp":[{"id":"1","ssai":1,"rwdd":1},{"id":"2","ssai":2,"rwdd":1,"pmp":{"deals":[{"guar":1},{"guar":1}]}}]}"#,
    );
    let done = down_to_2_5(&mut request).expect("down");
    assert_eq!(done.moved, set(&[Field::ImpRwdd]));
    assert_eq!(done.dropped, set(&[Field::ImpSsai, Field::DealGuar]));
    assert_eq!(
        done.to_string(),
        "moved=imp.rwdd dropped=imp.ssai,imp.pmp.deals.guar"
    );
}

/// `(name, 2.5 input, exact 2.6 encoding, moved, dropped)`.
type UpCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static [Field],
    &'static [Field],
);

const UP_MOVES: &[UpCase] = &[
    (
        "gdpr and us_privacy out of regs.ext, the rest kept",
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"coppa":0,"ext":{"gdpr":1,"dsa":{"dsarequired":1},"us_privacy":"1YNN"}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"coppa":0,"gdpr":1,"us_privacy":"1YNN","ext":{"dsa":{"dsarequired":1}}}}"#,
        &[Field::RegsGdpr, Field::RegsUsPrivacy],
        &[],
    ),
    (
        "the 2.6 field wins; the ext value goes, and the emptied ext with it",
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"gdpr":0,"ext":{"gdpr":1}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"regs":{"gdpr":0}}"#,
        &[],
        &[Field::RegsGdpr],
    ),
    (
        "consent and eids out of user.ext",
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"id":"u","ext":{"consent":"CP","eids":[{"source":"s.com","uids":[{"id":"x","atype":1}]}]}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"id":"u","consent":"CP","eids":[{"source":"s.com","uids":[{"id":"x","atype":1}]}]}}"#,
        &[Field::UserConsent, Field::UserEids],
        &[],
    ),
    (
        "null counts as absent and is removed",
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"ext":{"consent":null,"k":1}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"user":{"ext":{"k":1}}}"#,
        &[],
        &[],
    ),
    (
        "source.ext.schain to source.schain",
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"tid":"t","ext":{"schain":{"complete":1,"nodes":[],"ver":"1.0"}}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"tid":"t","schain":{"complete":1,"nodes":[],"ver":"1.0"}}}"#,
        &[Field::SourceSchain],
        &[],
    ),
    (
        "the 2.4 ext.schain makes a source",
        r#"{"id":"r","imp":[{"id":"1"}],"ext":{"schain":{"complete":1,"ver":"1.0"},"prebid":{}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"schain":{"complete":1,"ver":"1.0"}},"ext":{"prebid":{}}}"#,
        &[Field::SourceSchain],
        &[],
    ),
    (
        "source.ext.schain beats the 2.4 ext.schain; both are removed",
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"ext":{"schain":{"ver":"25"}}},"ext":{"schain":{"ver":"24"}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"source":{"schain":{"ver":"25"}}}"#,
        &[Field::SourceSchain],
        &[Field::SourceSchain],
    ),
    (
        "is_rewarded_inventory out of prebid, prebid's other keys kept",
        r#"{"id":"r","imp":[{"id":"1","ext":{"gpid":"g","prebid":{"is_rewarded_inventory":1,"storedrequest":{"id":"s"}}}}]}"#,
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":{"gpid":"g","prebid":{"storedrequest":{"id":"s"}}}}]}"#,
        &[Field::ImpRwdd],
        &[],
    ),
    (
        "an emptied prebid goes, then an emptied ext",
        r#"{"id":"r","imp":[{"id":"1","ext":{"prebid":{"is_rewarded_inventory":1}}},{"id":"2","ext":{"prebid":{"is_rewarded_inventory":0}},"rwdd":1}]}"#,
        r#"{"id":"r","imp":[{"id":"1","rwdd":1},{"id":"2","rwdd":1}]}"#,
        &[Field::ImpRwdd],
        &[Field::ImpRwdd],
    ),
    (
        "inventorypartnerdomain out of site.ext and app.ext",
        r#"{"id":"r","imp":[{"id":"1"}],"site":{"ext":{"inventorypartnerdomain":"p.com"}},"app":{"inventorypartnerdomain":"q.com","ext":{"inventorypartnerdomain":"x.com","k":[]}}}"#,
        r#"{"id":"r","imp":[{"id":"1"}],"site":{"inventorypartnerdomain":"p.com"},"app":{"inventorypartnerdomain":"q.com","ext":{"k":[]}}}"#,
        &[Field::SiteInventorypartnerdomain],
        &[Field::AppInventorypartnerdomain],
    ),
    (
        "a 2.6 request is left byte for byte",
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":{ "prebid" : {"bidder":{}} }}],"user":{"consent":"c","ext":{"eid":1}},"regs":{"gdpr":1,"ext":{ "dsa" : 1 }},"ext":{"prebid":null}}"#,
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":{ "prebid" : {"bidder":{}} }}],"user":{"consent":"c","ext":{"eid":1}},"regs":{"gdpr":1,"ext":{ "dsa" : 1 }},"ext":{"prebid":null}}"#,
        &[],
        &[],
    ),
];

#[test]
fn up_moves_each_ext_field_to_its_2_6_home() {
    for (name, input, expected, moved, dropped) in UP_MOVES {
        let mut request = decode(input);
        let done = up_from_2_5(&mut request).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(encode(&request), *expected, "{name}");
        assert_eq!(done.moved, set(moved), "{name}");
        assert_eq!(done.dropped, set(dropped), "{name}");
        // Idempotent: a second pass finds nothing.
        let again = up_from_2_5(&mut request).expect("second pass");
        assert!(again.is_empty(), "{name}: {again}");
        assert_eq!(encode(&request), *expected, "{name}: second pass");
    }
}

/// `(name, input, which way, the error's message)`.
const ERRORS: &[(&str, &str, Version, &str)] = &[
    (
        "a gdpr that is a string",
        r#"{"id":"r","imp":[],"regs":{"ext":{"gdpr":"yes"}}}"#,
        Version::V2_6,
        r#"regs.ext.gdpr: invalid type: string "yes", expected i32 at line 1 column 5"#,
    ),
    (
        "a consent that is a number",
        r#"{"id":"r","imp":[],"user":{"ext":{"consent":1}}}"#,
        Version::V2_6,
        "user.ext.consent: invalid type: integer `1`, expected a string at line 1 column 1",
    ),
    (
        "eids that are an object",
        r#"{"id":"r","imp":[],"user":{"ext":{"eids":{"source":"s"}}}}"#,
        Version::V2_6,
        "user.ext.eids: invalid type: map, expected a sequence at line 1 column 0",
    ),
    (
        "a schain that is an array",
        r#"{"id":"r","imp":[],"source":{"ext":{"schain":[]}}}"#,
        Version::V2_6,
        "source.ext.schain: invalid type: sequence, expected an OpenRTB SupplyChain object at line 1 column 0",
    ),
    (
        "a 2.5 ext that is not an object",
        r#"{"id":"r","imp":[],"regs":{"ext":[1]}}"#,
        Version::V2_6,
        "regs.ext: must be a JSON object",
    ),
    (
        "a prebid that is not an object",
        r#"{"id":"r","imp":[{"id":"1"},{"id":"2","ext":{"prebid":5}}]}"#,
        Version::V2_6,
        "imp[1].ext.prebid: must be a JSON object",
    ),
    (
        "is_rewarded_inventory that is a boolean",
        r#"{"id":"r","imp":[{"id":"1","ext":{"prebid":{"is_rewarded_inventory":true}}}]}"#,
        Version::V2_6,
        "imp[0].ext.prebid.is_rewarded_inventory: invalid type: boolean `true`, expected i32 at line 1 column 4",
    ),
    (
        "gdpr to move into an ext that is a string",
        r#"{"id":"r","imp":[],"regs":{"gdpr":1,"ext":"x"}}"#,
        Version::V2_5,
        "regs.ext: must be a JSON object",
    ),
    (
        "rwdd to move into a prebid that is an array",
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":{"prebid":[1]}}]}"#,
        Version::V2_5,
        "imp[0].ext.prebid: must be a JSON object",
    ),
    (
        "rwdd to move into an imp.ext that is a number",
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"ext":3}]}"#,
        Version::V2_5,
        "imp[0].ext: must be a JSON object",
    ),
];

#[test]
fn errors_name_the_path() {
    for (name, input, to, message) in ERRORS {
        let mut request = decode(input);
        let result = match to {
            Version::V2_5 => down_to_2_5(&mut request),
            Version::V2_6 => up_from_2_5(&mut request),
        };
        let err = result.expect_err(name);
        assert_eq!(err.to_string(), *message, "{name}");
    }
}

#[test]
fn down_ignores_an_ext_it_does_not_write_into() {
    let input = r#"{"id":"r","imp":[{"id":"1","ext":7}],"user":{"ext":[1]},"regs":{"ext":"x"}}"#;
    let mut request = decode(input);
    assert!(
        down_to_2_5(&mut request)
            .expect("nothing to move")
            .is_empty()
    );
    assert_eq!(encode(&request), input);
}

#[test]
fn a_failed_object_is_left_as_it_was() {
    let input = r#"{"id":"r","imp":[],"regs":{"ext":{"gdpr":1,"us_privacy":7}}}"#;
    let mut request = decode(input);
    let err = up_from_2_5(&mut request).expect_err("us_privacy is a number");
    assert_eq!(err.label(), "wrong_type");
    assert_eq!(err.path().to_string(), "regs.ext.us_privacy");
    assert_eq!(encode(&request), input);
}

#[test]
fn round_trip_restores_every_moved_field() {
    for (name, input, ..) in DOWN_MOVES {
        let original = decode(input);
        let mut request = original.clone();
        let down = down_to_2_5(&mut request).expect("down");
        let up = up_from_2_5(&mut request).expect("up");
        assert_eq!(up.moved, down.moved, "{name}");
        let restored = |r: &BidRequest| {
            json!({
                "schain": r.source.as_ref().map(|s| &s.schain),
                "gdpr": r.regs.as_ref().map(|s| s.gdpr),
                "us_privacy": r.regs.as_ref().map(|s| &s.us_privacy),
                "consent": r.user.as_ref().map(|u| &u.consent),
                "eids": r.user.as_ref().map(|u| &u.eids),
                "rwdd": r.imp.iter().map(|i| i.rwdd).collect::<Vec<_>>(),
            })
        };
        assert_eq!(restored(&request), restored(&original), "{name}");
    }
}

#[test]
fn version_parses_displays_and_deserializes() {
    for (text, version) in [("2.5", Version::V2_5), ("2.6", Version::V2_6)] {
        assert_eq!(text.parse::<Version>(), Ok(version));
        assert_eq!(version.to_string(), text);
        let json = format!("\"{text}\"");
        assert_eq!(
            serde_json::from_str::<Version>(&json).expect("json"),
            version
        );
        assert_eq!(serde_json::to_string(&version).expect("json"), json);
    }
    for bad in ["", "2", "2.4", "3.0", " 2.5", "2.6-202303", "2.5.0"] {
        assert!(bad.parse::<Version>().is_err(), "{bad:?}");
    }
    let long = "9".repeat(1000);
    let err = long.parse::<Version>().expect_err("long");
    assert!(err.to_string().len() < 80, "{err}");
}

#[test]
fn for_version_converts_only_for_2_5() {
    let input = r#"{"id":"r","imp":[{"id":"1","rwdd":1}],"device":{"sua":{"mobile":1}}}"#;
    let mut request = decode(input);
    assert!(
        for_version(&mut request, Version::V2_6)
            .expect("2.6")
            .is_empty()
    );
    assert_eq!(encode(&request), input);
    let done = for_version(&mut request, Version::V2_5).expect("2.5");
    assert_eq!(done.to_string(), "moved=imp.rwdd dropped=device.sua");
}

#[test]
fn field_set_and_converted_display() {
    let mut done = Converted::default();
    assert_eq!(done.to_string(), "-");
    done.dropped.insert(Field::DeviceSua);
    assert_eq!(done.to_string(), "dropped=device.sua");
    done.moved.insert(Field::UserConsent);
    done.moved.insert(Field::RegsGdpr);
    done.moved.insert(Field::RegsGdpr);
    assert_eq!(done.moved.len(), 2);
    assert_eq!(
        done.to_string(),
        "moved=regs.gdpr,user.consent dropped=device.sua"
    );
    assert_eq!(
        format!("{:?}", done.moved),
        r#"{"regs.gdpr", "user.consent"}"#
    );
    let labels: Vec<_> = Field::ALL.iter().map(|f| f.label()).collect();
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), labels.len(), "labels are unique");
    let all: FieldSet = Field::ALL.iter().copied().collect();
    assert_eq!(all.len() as usize, Field::ALL.len());
    assert!(all.iter().eq(Field::ALL.iter().copied()));
}
