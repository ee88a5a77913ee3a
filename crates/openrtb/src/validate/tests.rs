//! One row per rule: a small valid request that carries every object a rule looks at, mutated to
//! break exactly that rule, and the path (and the gist of the problem) the message must name.
//! `repair`'s tests reuse the request and the table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::{InvalidRequest, validate};
use crate::BidRequest;

/// A Native 1.2 request for an in-feed unit: title, main image, icon, sponsored-by, description,
/// call to action, a video, impression and viewability trackers.
pub(super) fn native() -> Value {
    json!({
        "ver": "1.2", "context": 1, "contextsubtype": 11, "plcmttype": 1, "plcmtcnt": 1, "seq": 0,
        "aurlsupport": 0, "durlsupport": 0, "privacy": 1,
        "assets": [
            {"id": 1, "required": 1, "title": {"len": 90}},
            {"id": 2, "required": 1, "img": {"type": 3, "wmin": 1200, "hmin": 627, "w": 1200, "h": 627}},
            {"id": 3, "required": 0, "img": {"type": 1, "w": 80, "h": 80}},
            {"id": 4, "required": 1, "data": {"type": 1, "len": 25}},
            {"id": 5, "data": {"type": 2, "len": 140}},
            {"id": 6, "data": {"type": 12, "len": 15}},
            {"id": 7, "video": {"mimes": ["video/mp4"], "minduration": 5, "maxduration": 30, "protocols": [2, 3, 7]}}
        ],
        "eventtrackers": [{"event": 1, "methods": [1, 2]}, {"event": 2, "methods": [1]}]
    })
}

/// Valid, with every object and field some rule reads. `imp[0].native.request` is kept as an
/// object here and encoded to its string by [`build`].
pub(super) fn base() -> Value {
    json!({
        "id": "req-1",
        "imp": [{
            "id": "1", "instl": 0, "clickbrowser": 1, "secure": 1, "rwdd": 0, "ssai": 1, "exp": 300,
            "bidfloor": 0.5, "bidfloorcur": "USD",
            "banner": {
                "w": 300, "h": 250, "topframe": 1, "vcm": 0,
                "format": [{"w": 300, "h": 250}, {"wratio": 16, "hratio": 9, "wmin": 320}]
            },
            "video": {
                "mimes": ["video/mp4"], "minduration": 5, "maxduration": 30, "startdelay": -1,
                "maxseq": 3, "poddur": 60, "w": 640, "h": 360, "skip": 1, "skipmin": 15,
                "skipafter": 5, "sequence": 1, "mincpmpersec": 0.1, "maxextended": -1,
                "minbitrate": 300, "maxbitrate": 1500, "boxingallowed": 1,
                "companionad": [{"w": 300, "h": 250, "vcm": 1}],
                "durfloors": [{"mindur": 1, "maxdur": 15, "bidfloor": 1.0}]
            },
            "audio": {
                "mimes": ["audio/mp4"], "minduration": 5, "maxduration": 30, "poddur": 60,
                "startdelay": -2, "sequence": 0, "mincpmpersec": 0.05, "maxextended": 0,
                "minbitrate": 64, "maxbitrate": 320, "maxseq": 2, "stitched": 1,
                "companionad": [{"w": 300, "h": 250}],
                "durfloors": [{"mindur": 16, "bidfloor": 2.0}]
            },
            "native": {"request": native(), "ver": "1.2"},
            "pmp": {
                "private_auction": 0,
                "deals": [{"id": "d1", "bidfloor": 1.0, "guar": 0, "mincpmpersec": 0.1,
                           "durfloors": [{"maxdur": 30, "bidfloor": 1.5}]}]
            },
            "qty": {"multiplier": 14.2},
            "refresh": {"count": 2, "refsettings": [{"reftype": 3, "minint": 30}]}
        }],
        "site": {
            "id": "s1", "mobile": 1, "privacypolicy": 1,
            "content": {"livestream": 0, "sourcerelationship": 1, "embeddable": 1, "len": 120}
        },
        "device": {
            "dnt": 0, "lmt": 0, "w": 390, "h": 844, "ppi": 460, "pxratio": 3.0, "js": 1,
            "geofetch": 0, "sua": {"mobile": 1},
            "geo": {"lat": 48.85, "lon": 2.35, "accuracy": 20, "lastfix": 30}
        },
        "user": {"geo": {"lat": -33.9, "lon": 151.2}},
        "test": 0, "at": 2, "allimps": 0,
        "source": {"fd": 1, "schain": {"complete": 1, "ver": "1.0", "nodes": [{"asi": "a.example", "sid": "1", "hp": 1}]}},
        "regs": {"coppa": 0, "gdpr": 1}
    })
}

pub(super) fn build(mut v: Value) -> BidRequest {
    for imp in v["imp"].as_array_mut().unwrap() {
        if let Some(request) = imp.pointer_mut("/native/request")
            && !request.is_string()
            && !request.is_null()
        {
            *request = Value::String(request.to_string());
        }
    }
    BidRequest::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap()
}

pub(super) type Mutation = Box<dyn Fn(&mut Value)>;

/// Sets the value at a JSON pointer whose parent exists (`null` removes an optional field: the
/// codec reads it as absent).
pub(super) fn set(pointer: impl Into<String>, value: Value) -> Mutation {
    let pointer = pointer.into();
    Box::new(move |v: &mut Value| {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        match v.pointer_mut(parent).unwrap() {
            Value::Object(map) => {
                map.insert(key.to_owned(), value.clone());
            }
            Value::Array(items) => items[key.parse::<usize>().unwrap()] = value.clone(),
            other => panic!("{pointer}: parent is {other}"),
        }
    })
}

fn remove_media() -> Mutation {
    Box::new(|v: &mut Value| {
        let imp = v["imp"][0].as_object_mut().unwrap();
        for key in ["banner", "video", "audio", "native"] {
            imp.remove(key);
        }
    })
}

/// Moves `site` to `to` (`app` or `dooh`), then applies `then`.
pub(super) fn channel(to: &'static str, then: Mutation) -> Mutation {
    Box::new(move |v: &mut Value| {
        let site = v.as_object_mut().unwrap().remove("site").unwrap();
        v[to] = json!({"id": "x", "content": site["content"].clone()});
        then(v);
    })
}

/// The JSON path a message uses for a JSON pointer: `/imp/0/banner/w` -> `imp[0].banner.w`.
pub(super) fn json_path(pointer: &str) -> String {
    let mut path = String::new();
    for step in pointer.split('/').skip(1) {
        if step.bytes().all(|b| b.is_ascii_digit()) {
            path.push_str(&format!("[{step}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(step);
        }
    }
    path
}

pub(super) const NATIVE: &str = "/imp/0/native/request";
const NEG: &str = "must not be negative";
const FLAG: &str = "must be 0 or 1";
const REQUIRED: &str = "required";

/// One rule broken: the mutation, and the path and problem its message must name.
pub(super) struct Row {
    pub(super) mutate: Mutation,
    pub(super) path: String,
    pub(super) problem: &'static str,
}

fn row(mutate: Mutation, path: &str, problem: &'static str) -> Row {
    let path = path.to_owned();
    Row {
        mutate,
        path,
        problem,
    }
}

/// The field at `pointer` set to `value`, refused with a message naming that field.
fn bad(pointer: &str, value: Value, problem: &'static str) -> Row {
    row(set(pointer, value), &json_path(pointer), problem)
}

fn negative(pointer: &str) -> Row {
    bad(pointer, json!(-1), NEG)
}

fn not_flag(pointer: &str) -> Row {
    bad(pointer, json!(2), FLAG)
}

fn missing(pointer: &str) -> Row {
    bad(pointer, Value::Null, REQUIRED)
}

/// The same, with `pointer` inside the native request.
fn native_bad(pointer: &str, value: Value, problem: &'static str) -> Row {
    bad(&format!("{NATIVE}{pointer}"), value, problem)
}

fn native_negative(pointer: &str) -> Row {
    native_bad(pointer, json!(-1), NEG)
}

fn native_missing(pointer: &str) -> Row {
    native_bad(pointer, Value::Null, REQUIRED)
}

/// `imp[0].native.request` replaced by `text`.
fn native_text(text: impl Into<String>, problem: &'static str) -> Row {
    row(
        set(NATIVE, Value::String(text.into())),
        "imp[0].native.request",
        problem,
    )
}

#[rustfmt::skip]
pub(super) fn rows() -> Vec<Row> {
    let not_a_code = "must be 1 (icon), 3 (main), 2 (deprecated logo)";
    vec![
        // Imp (3.2.4)
        row(remove_media(), "imp[0]", "needs a banner, video, audio or native"),
        not_flag("/imp/0/instl"),
        not_flag("/imp/0/clickbrowser"),
        not_flag("/imp/0/secure"),
        not_flag("/imp/0/rwdd"),
        bad("/imp/0/ssai", json!(4), "must be 0, 1, 2 or 3"),
        negative("/imp/0/exp"),
        bad("/imp/0/qty/multiplier", json!(-1.5), NEG),
        negative("/imp/0/refresh/count"),
        negative("/imp/0/refresh/refsettings/0/minint"),
        // Banner and Format (3.2.6, 3.2.10)
        negative("/imp/0/banner/w"),
        negative("/imp/0/banner/h"),
        negative("/imp/0/banner/format/0/w"),
        negative("/imp/0/banner/format/0/h"),
        negative("/imp/0/banner/format/1/wratio"),
        negative("/imp/0/banner/format/1/hratio"),
        negative("/imp/0/banner/format/1/wmin"),
        not_flag("/imp/0/banner/topframe"),
        not_flag("/imp/0/banner/vcm"),
        // Video (3.2.7)
        missing("/imp/0/video/mimes"),
        bad("/imp/0/video/mimes", json!([]), "at least one MIME type"),
        negative("/imp/0/video/minduration"),
        negative("/imp/0/video/maxduration"),
        bad("/imp/0/video/startdelay", json!(-3), "-1 (mid-roll) or -2 (post-roll)"),
        negative("/imp/0/video/maxseq"),
        negative("/imp/0/video/poddur"),
        negative("/imp/0/video/w"),
        negative("/imp/0/video/h"),
        row(set("/imp/0/video/rqddurs", json!([15, -30])), "imp[0].video.rqddurs[1]", NEG),
        not_flag("/imp/0/video/skip"),
        negative("/imp/0/video/skipmin"),
        negative("/imp/0/video/skipafter"),
        negative("/imp/0/video/sequence"),
        bad("/imp/0/video/mincpmpersec", json!(-0.1), NEG),
        bad("/imp/0/video/maxextended", json!(-2), "-1 (no limit)"),
        negative("/imp/0/video/minbitrate"),
        negative("/imp/0/video/maxbitrate"),
        not_flag("/imp/0/video/boxingallowed"),
        negative("/imp/0/video/companionad/0/w"),
        negative("/imp/0/video/durfloors/0/mindur"),
        negative("/imp/0/video/durfloors/0/maxdur"),
        negative("/imp/0/video/durfloors/0/bidfloor"),
        // Audio (3.2.8)
        missing("/imp/0/audio/mimes"),
        bad("/imp/0/audio/mimes", json!([]), "at least one MIME type"),
        negative("/imp/0/audio/minduration"),
        negative("/imp/0/audio/maxduration"),
        negative("/imp/0/audio/poddur"),
        bad("/imp/0/audio/startdelay", json!(-10), "-1 (mid-roll) or -2 (post-roll)"),
        row(set("/imp/0/audio/rqddurs", json!([-15])), "imp[0].audio.rqddurs[0]", NEG),
        negative("/imp/0/audio/sequence"),
        bad("/imp/0/audio/mincpmpersec", json!(-0.05), NEG),
        bad("/imp/0/audio/maxextended", json!(-5), "-1 (no limit)"),
        negative("/imp/0/audio/minbitrate"),
        negative("/imp/0/audio/maxbitrate"),
        negative("/imp/0/audio/maxseq"),
        not_flag("/imp/0/audio/stitched"),
        negative("/imp/0/audio/companionad/0/h"),
        negative("/imp/0/audio/durfloors/0/bidfloor"),
        // Pmp and Deal (3.2.11, 3.2.12, 3.2.35)
        not_flag("/imp/0/pmp/private_auction"),
        not_flag("/imp/0/pmp/deals/0/guar"),
        bad("/imp/0/pmp/deals/0/mincpmpersec", json!(-0.1), NEG),
        negative("/imp/0/pmp/deals/0/durfloors/0/maxdur"),
        // Native (3.2.9): the string itself
        missing("/imp/0/native/request"),
        native_text("", "must be a JSON object"),
        native_text("[]", "or one wrapped as {\"native\": ...}"),
        native_text("{not json", "key must be a string"),
        native_text(r#"{"assets":[{"id":1,"title":{"len":9}}],"assets":[]}"#, "duplicate field `assets`"),
        native_text(" ".repeat(32 * 1024) + "{}", "longer than 32768 bytes"),
        native_bad("/assets/0/id", json!("1"), "invalid type: string"),
        // Native 1.2 Native Markup Request (4.1) and its lists (7.1 - 7.3)
        native_missing("/assets"),
        native_bad("/assets", json!([]), "at least one asset"),
        native_bad("/assets", too_many_assets(), "more than 64 assets"),
        native_bad("/context", json!(4), "must be 1 (content), 2 (social), 3 (product)"),
        native_bad("/contextsubtype", json!(20), "does not match context"),
        native_bad("/contextsubtype", json!(40), "must be 10-19 (content)"),
        native_bad("/plcmttype", json!(0), "must be 1 or more"),
        native_negative("/plcmtcnt"),
        native_negative("/seq"),
        native_bad("/aurlsupport", json!(2), FLAG),
        native_bad("/durlsupport", json!(2), FLAG),
        native_bad("/privacy", json!(2), FLAG),
        row(set(NATIVE, json!({"native": {"ver": "1.0", "assets": []}})),
            "imp[0].native.request.native.assets", "at least one asset"),
        // Native 1.2 Asset (4.2)
        native_missing("/assets/1/id"),
        native_bad("/assets/1/id", json!(1), "used by another asset"),
        row(set(format!("{NATIVE}/assets/0/img"), json!({"type": 3})),
            "imp[0].native.request.assets[0]", "needs exactly one of title, img, video and data"),
        row(set(format!("{NATIVE}/assets/0/title"), Value::Null),
            "imp[0].native.request.assets[0]", "exactly one of title, img, video and data"),
        native_bad("/assets/0/required", json!(2), FLAG),
        // Title (4.3), Image (4.4, 7.5), Video (4.5), Data (4.6, 7.4)
        native_missing("/assets/0/title/len"),
        native_negative("/assets/0/title/len"),
        native_bad("/assets/1/img/type", json!(4), not_a_code),
        native_bad("/assets/1/img/type", json!(0), "or an exchange-specific 500 or more"),
        native_negative("/assets/1/img/w"),
        native_negative("/assets/1/img/wmin"),
        native_negative("/assets/1/img/h"),
        native_negative("/assets/1/img/hmin"),
        native_missing("/assets/6/video/mimes"),
        native_bad("/assets/6/video/mimes", json!([]), "at least one MIME type"),
        native_missing("/assets/6/video/minduration"),
        native_negative("/assets/6/video/minduration"),
        native_missing("/assets/6/video/maxduration"),
        native_negative("/assets/6/video/maxduration"),
        native_missing("/assets/6/video/protocols"),
        native_missing("/assets/3/data/type"),
        native_bad("/assets/3/data/type", json!(13), "must be 1 to 12"),
        native_negative("/assets/3/data/len"),
        // Event Trackers (4.7, 7.6, 7.7)
        native_missing("/eventtrackers/1/event"),
        native_bad("/eventtrackers/1/event", json!(5), "must be 1 to 4"),
        native_missing("/eventtrackers/0/methods"),
        row(set(format!("{NATIVE}/eventtrackers/0/methods"), json!([1, 3])),
            "imp[0].native.request.eventtrackers[0].methods[1]", "1 (image), 2 (JavaScript)"),
        // BidRequest (3.2.1)
        not_flag("/test"),
        bad("/at", json!(3), "must be 1 (first price), 2 (second price)"),
        not_flag("/allimps"),
        // Site, App, DOOH, Content (3.2.13, 3.2.14, 3.2.16, 3.2.32)
        bad("/app", json!({"id": "a"}), "at most one of site, app and dooh"),
        bad("/dooh", json!({"id": "d"}), "at most one of site, app and dooh"),
        not_flag("/site/mobile"),
        not_flag("/site/privacypolicy"),
        not_flag("/site/content/livestream"),
        not_flag("/site/content/sourcerelationship"),
        not_flag("/site/content/embeddable"),
        negative("/site/content/len"),
        row(channel("app", set("/app/privacypolicy", json!(2))), "app.privacypolicy", FLAG),
        row(channel("app", set("/app/paid", json!(2))), "app.paid", FLAG),
        row(channel("app", set("/app/content/len", json!(-1))), "app.content.len", NEG),
        row(channel("dooh", set("/dooh/content/embeddable", json!(3))), "dooh.content.embeddable", FLAG),
        // Device, UserAgent, Geo (3.2.18, 3.2.19, 3.2.29)
        not_flag("/device/dnt"),
        not_flag("/device/lmt"),
        negative("/device/h"),
        negative("/device/w"),
        negative("/device/ppi"),
        bad("/device/pxratio", json!(-3.0), NEG),
        not_flag("/device/js"),
        not_flag("/device/geofetch"),
        not_flag("/device/sua/mobile"),
        bad("/device/geo/lat", json!(90.5), "must be between -90 and 90"),
        bad("/device/geo/lon", json!(-180.5), "must be between -180 and 180"),
        negative("/device/geo/accuracy"),
        negative("/device/geo/lastfix"),
        bad("/user/geo/lat", json!(-91), "must be between -90 and 90"),
        // Source, SupplyChain (3.2.2, 3.2.25, 3.2.26)
        not_flag("/source/fd"),
        not_flag("/source/schain/complete"),
        not_flag("/source/schain/nodes/0/hp"),
        // Regs (3.2.3)
        not_flag("/regs/coppa"),
        not_flag("/regs/gdpr"),
    ]
}

fn too_many_assets() -> Value {
    (1..=65)
        .map(|id| json!({"id": id, "title": {"len": 25}}))
        .collect()
}

#[test]
fn the_base_request_is_valid() {
    assert_eq!(validate(&build(base()), "USD"), Ok(()));
}

#[test]
fn every_rule_names_its_field() {
    for Row {
        mutate,
        path,
        problem,
    } in rows()
    {
        let mut request = base();
        mutate(&mut request);
        let err = validate(&build(request), "USD")
            .expect_err(&format!("{path} ({problem}) was accepted"));
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("{path}: ")) && message.contains(problem),
            "expected `{path}: ...{problem}...`, got `{message}`"
        );
    }
}

/// Values the spec allows that a careless rule would refuse.
#[test]
fn open_lists_and_legal_codes_are_accepted() {
    let ok: Vec<Mutation> = vec![
        set("/at", json!(1)),
        set("/at", json!(500)),
        set("/at", json!(777)),
        set("/imp/0/video/startdelay", json!(-2)),
        set("/imp/0/video/startdelay", json!(12)),
        set("/imp/0/audio/maxextended", json!(-1)),
        set("/imp/0/video/minduration", json!(60)), // above maxduration: not refused
        set("/imp/0/video/rqddurs", json!([15, 30])), // with min/maxduration: not refused
        set("/imp/0/video/plcmt", json!(9)),        // AdCOM list: open
        set("/imp/0/video/protocols", json!([2, 999])),
        set("/imp/0/banner/btype", json!([7])),
        set("/device/devicetype", json!(99)),
        set("/device/geo/lat", json!(-90.0)),
        set("/device/geo/lon", json!(180.0)),
        set("/imp/0/pmp/deals/0/at", json!(3)),
        set("/imp/0/pmp/deals/0/at", json!(4)),
        set("/imp/0/native/request/context", json!(500)),
        set("/imp/0/native/request/contextsubtype", json!(501)),
        set("/imp/0/native/request/contextsubtype", json!(15)),
        set("/imp/0/native/request/contextsubtype", json!(19)),
        set("/imp/0/native/request/plcmttype", json!(4)),
        set("/imp/0/native/request/plcmttype", json!(600)),
        set("/imp/0/native/request/plcmttype", json!(11)), // as in the spec's examples
        set("/imp/0/native/request/assets/1/img/type", json!(2)), // deprecated, still sent
        set("/imp/0/native/request/assets/1/img/type", json!(501)),
        set("/imp/0/native/request/assets/1/img/type", Value::Null),
        set("/imp/0/native/request/assets/3/data/type", json!(500)),
        set("/imp/0/native/request/assets/0/id", json!(0)),
        set("/imp/0/native/request/eventtrackers/0/event", json!(4)),
        set("/imp/0/native/request/eventtrackers/0/event", json!(555)),
        set(
            "/imp/0/native/request/eventtrackers/0/methods",
            json!([2, 500]),
        ),
        set("/imp/0/native/request/eventtrackers/0/methods", json!([])),
        set("/imp/0/native/request/layout", json!(3)), // Native 1.0 field: ignored
        set(
            "/imp/0/native/request/ext",
            json!({"any": [1, {"x": null}]}),
        ),
        set(
            "/imp/0/native/request/assets/0/title/ext",
            json!({"any": true}),
        ),
        set("/imp/0/native/request/ver", json!(1.2)), // not read, so not type-checked
        set(
            "/imp/0/native/request/eventrackers",
            json!("typo in the spec's own examples"),
        ),
        set(NATIVE, json!({"native": native()})),
        set(NATIVE, json!(format!(" \n{}", native()))),
        remove_native_extras(),
    ];
    for (i, mutate) in ok.iter().enumerate() {
        let mut request = base();
        mutate(&mut request);
        assert_eq!(validate(&build(request), "USD"), Ok(()), "case {i}");
    }
}

/// Only what Native 1.2 requires: one asset with an id and a title length.
fn remove_native_extras() -> Mutation {
    set(NATIVE, json!({"assets": [{"id": 1, "title": {"len": 25}}]}))
}

/// A request refused by the checks that existed before the media, native and context rules
/// gets the same message as before, even when it breaks those rules too.
#[test]
fn earlier_rules_keep_their_messages() {
    let cases: &[(&str, InvalidRequest)] = &[
        (
            r#"{"id":"x","imp":[{"id":"1"},{"id":"1"}]}"#,
            InvalidRequest::DuplicateImpId {
                index: 1,
                id: "1".to_owned(),
            },
        ),
        (
            r#"{"id":"","imp":[{"id":"1"}],"test":7}"#,
            InvalidRequest::MissingId,
        ),
        (
            r#"{"id":"x","imp":[{"id":"1","bidfloor":1,"bidfloorcur":"EUR"},{"id":"2","bidfloor":-1}]}"#,
            InvalidRequest::FloorCurrency {
                index: 0,
                found: "EUR".to_owned(),
                auction: "USD".to_owned(),
            },
        ),
        (
            r#"{"id":"x","imp":[{"id":"1","banner":{"w":-1}},{"id":"2","bidfloor":-1}]}"#,
            InvalidRequest::NegativeFloor(1),
        ),
    ];
    for (body, want) in cases {
        let request = BidRequest::from_slice(body.as_bytes()).unwrap();
        assert_eq!(validate(&request, "USD").as_ref(), Err(want), "{body}");
    }
}

/// Rules run per imp in order, and the index in the path is the imp's.
#[test]
fn the_path_names_the_imp_at_fault() {
    let mut request = base();
    let mut second = request["imp"][0].clone();
    second["id"] = json!("2");
    second["banner"]["format"][1]["wmin"] = json!(-1);
    request["imp"].as_array_mut().unwrap().push(second);
    let request = build(request);
    assert_eq!(
        validate(&request, "USD").unwrap_err().to_string(),
        "imp[1].banner.format[1].wmin: must not be negative"
    );
}

/// The `native_request` fuzz target's property, on every test run: any string as the native
/// request of an otherwise valid request is either accepted or refused with a message naming
/// `imp[0].native.request`, never a panic.
pub(super) mod props {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::super::validate;
    use crate::{BidRequest, Imp, Native};

    const KEYS: &[&str] = &[
        "native",
        "assets",
        "id",
        "required",
        "title",
        "len",
        "img",
        "type",
        "w",
        "h",
        "wmin",
        "hmin",
        "video",
        "mimes",
        "minduration",
        "maxduration",
        "protocols",
        "data",
        "context",
        "contextsubtype",
        "plcmttype",
        "plcmtcnt",
        "seq",
        "aurlsupport",
        "durlsupport",
        "privacy",
        "eventtrackers",
        "event",
        "methods",
        "ext",
        "ver",
    ];

    /// JSON shaped like a native request: its keys, small codes, nesting.
    pub(in crate::validate) fn native_like() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-3i64..600).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e3f64..1e3).prop_map(Value::from),
            "[a-z/0-9.]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..8).prop_map(
                    |fields| Value::Object(
                        fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                    )
                ),
            ]
        })
    }

    fn check(text: String) {
        let request = BidRequest {
            id: "p".to_owned(),
            imp: vec![Imp {
                id: "1".to_owned(),
                native: Some(Native {
                    request: Some(text.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        if let Err(e) = validate(&request, "USD") {
            let message = e.to_string();
            assert!(
                message.starts_with("imp[0].native.request"),
                "{text:?} -> {message}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_string_is_judged_without_panic(text in "\\PC{0,64}") {
            check(text);
        }

        #[test]
        fn native_shaped_json_is_judged_without_panic(value in native_like()) {
            check(value.to_string());
        }
    }
}
