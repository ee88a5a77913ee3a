//! One row per repairable rule: `validate`'s test request broken in one way, the exact request
//! repair must make of it, and the repairs it must report. Then `validate`'s own table: each of
//! its rows is either repaired into a valid request or left as it was, with the same refusal,
//! and the refused ones are exactly those the module documentation lists.

use serde_json::{Value, json};

use super::super::super::tests::{Mutation, NATIVE, base, build, channel, json_path, rows, set};
use super::super::super::validate;
use super::super::repair;
use super::{both, remove, summary, unchanged, without_indices};

type Record = (String, String, &'static str);

/// A rule broken, the request repair must make of it, and what it must report. `list` names
/// the list whose entries the row drops, for the property tests that combine rows.
pub(super) struct Fix {
    pub(super) broken: Mutation,
    pub(super) fixed: Mutation,
    pub(super) repaired: Vec<Record>,
    pub(super) list: Option<&'static str>,
}

fn record(path: &str, action: &'static str) -> Record {
    (without_indices(path), path.to_owned(), action)
}

fn dropped_at(path: &str) -> Record {
    record(path, "dropped")
}

/// The value at `pointer` set to `bad`, dropped.
fn dropped(pointer: &'static str, bad: Value) -> Fix {
    Fix {
        broken: set(pointer, bad),
        fixed: remove(pointer),
        repaired: vec![dropped_at(&json_path(pointer))],
        list: None,
    }
}

fn flag(pointer: &'static str) -> Fix {
    dropped(pointer, json!(2))
}

fn negative(pointer: &'static str) -> Fix {
    dropped(pointer, json!(-1))
}

fn native_dropped(pointer: &str, bad: Value) -> Fix {
    dropped(leak(format!("{NATIVE}{pointer}")), bad)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The list at `pointer` set to `broken`, repaired to `fixed`, dropping the entries at `bad`.
fn entries(pointer: &'static str, broken: Value, fixed: Value, bad: &[usize]) -> Fix {
    let path = json_path(pointer);
    Fix {
        broken: set(pointer, broken),
        fixed: set(pointer, fixed),
        repaired: bad
            .iter()
            .map(|i| dropped_at(&format!("{path}[{i}]")))
            .collect(),
        list: Some(pointer),
    }
}

/// `lat` or `lon` of the geo at `geo` set to `bad`: both coordinates dropped, with `dropped`
/// other fields of that fix.
fn bad_fix(geo: &'static str, key: &str, bad: Value, also: &[&'static str]) -> Fix {
    let prefix = json_path(geo);
    let mut fixed = both(
        remove(leak(format!("{geo}/lat"))),
        remove(leak(format!("{geo}/lon"))),
    );
    let mut repaired = vec![
        dropped_at(&format!("{prefix}.lat")),
        dropped_at(&format!("{prefix}.lon")),
    ];
    for &field in also {
        fixed = both(fixed, remove(leak(format!("{geo}/{field}"))));
        repaired.push(dropped_at(&format!("{prefix}.{field}")));
    }
    Fix {
        broken: set(leak(format!("{geo}/{key}")), bad),
        fixed,
        repaired,
        list: None,
    }
}

fn trackers() -> Value {
    json!([{"event": 1, "methods": [1, 2]}, {"event": 2, "methods": [1]}])
}

#[rustfmt::skip]
pub(super) fn fixes() -> Vec<Fix> {
    let native = |p: &str| leak(format!("{NATIVE}{p}"));
    vec![
        // Imp
        flag("/imp/0/instl"),
        flag("/imp/0/clickbrowser"),
        flag("/imp/0/rwdd"),
        dropped("/imp/0/ssai", json!(4)),
        negative("/imp/0/exp"),
        negative("/imp/0/refresh/count"),
        negative("/imp/0/refresh/refsettings/0/minint"),
        // Banner, its formats, companions
        negative("/imp/0/banner/w"),
        negative("/imp/0/banner/h"),
        flag("/imp/0/banner/topframe"),
        flag("/imp/0/banner/vcm"),
        entries("/imp/0/banner/format",
            json!([{"w": 300, "h": 250}, {"w": -300, "h": 250}, {"wratio": 16, "hratio": 9, "wmin": 320}]),
            json!([{"w": 300, "h": 250}, {"wratio": 16, "hratio": 9, "wmin": 320}]), &[1]),
        entries("/imp/0/banner/format",
            json!([{"w": 300, "h": -1}, {"wratio": -16, "hratio": 9}, {"w": 300, "h": 250}, {"wmin": -1}]),
            json!([{"w": 300, "h": 250}]), &[0, 1, 3]),
        negative("/imp/0/video/companionad/0/w"),
        flag("/imp/0/video/companionad/0/vcm"),
        negative("/imp/0/audio/companionad/0/h"),
        // Video
        negative("/imp/0/video/minduration"),
        negative("/imp/0/video/maxduration"),
        dropped("/imp/0/video/startdelay", json!(-3)),
        negative("/imp/0/video/maxseq"),
        negative("/imp/0/video/poddur"),
        negative("/imp/0/video/w"),
        negative("/imp/0/video/h"),
        entries("/imp/0/video/rqddurs", json!([15, -30, 30]), json!([15, 30]), &[1]),
        flag("/imp/0/video/skip"),
        negative("/imp/0/video/skipmin"),
        negative("/imp/0/video/skipafter"),
        negative("/imp/0/video/sequence"),
        dropped("/imp/0/video/maxextended", json!(-2)),
        negative("/imp/0/video/minbitrate"),
        negative("/imp/0/video/maxbitrate"),
        flag("/imp/0/video/boxingallowed"),
        // Audio
        negative("/imp/0/audio/minduration"),
        negative("/imp/0/audio/maxduration"),
        negative("/imp/0/audio/poddur"),
        dropped("/imp/0/audio/startdelay", json!(-10)),
        entries("/imp/0/audio/rqddurs", json!([-15, 30]), json!([30]), &[0]),
        negative("/imp/0/audio/sequence"),
        dropped("/imp/0/audio/maxextended", json!(-5)),
        negative("/imp/0/audio/minbitrate"),
        negative("/imp/0/audio/maxbitrate"),
        negative("/imp/0/audio/maxseq"),
        flag("/imp/0/audio/stitched"),
        // Native 1.2 request
        native_dropped("/context", json!(4)),
        native_dropped("/contextsubtype", json!(40)),
        Fix {
            broken: set(native("/contextsubtype"), json!(20)),
            fixed: both(remove(native("/contextsubtype")), remove(native("/context"))),
            repaired: vec![
                dropped_at("imp[0].native.request.contextsubtype"),
                dropped_at("imp[0].native.request.context"),
            ],
            list: None,
        },
        Fix {
            broken: both(set(native("/context"), json!(7)), set(native("/contextsubtype"), json!(21))),
            fixed: both(remove(native("/context")), set(native("/contextsubtype"), json!(21))),
            repaired: vec![dropped_at("imp[0].native.request.context")],
            list: None,
        },
        native_dropped("/plcmttype", json!(0)),
        native_dropped("/plcmtcnt", json!(-1)),
        native_dropped("/seq", json!(-1)),
        native_dropped("/aurlsupport", json!(2)),
        native_dropped("/durlsupport", json!(-1)),
        native_dropped("/privacy", json!(9)),
        native_dropped("/assets/0/required", json!(2)),
        native_dropped("/assets/1/img/type", json!(4)),
        native_dropped("/assets/2/img/type", json!(0)),
        native_dropped("/assets/1/img/w", json!(-1)),
        native_dropped("/assets/1/img/wmin", json!(-1)),
        native_dropped("/assets/1/img/h", json!(-1)),
        native_dropped("/assets/1/img/hmin", json!(-1)),
        native_dropped("/assets/3/data/len", json!(-25)),
        Fix {
            broken: set(native("/assets/1/id"), Value::Null),
            // Index 1 is asset 0's id: the smallest id no asset uses is 0.
            fixed: set(native("/assets/1/id"), json!(0)),
            repaired: vec![record("imp[0].native.request.assets[1].id", "filled")],
            list: None,
        },
        Fix {
            broken: both(set(native("/assets/4/id"), Value::Null), set(native("/assets/6/id"), Value::Null)),
            // Ids 1-4 and 6 stay; index 4 is taken, so asset 4 gets 0; index 6 too, so asset 6
            // gets the next free id, 5.
            fixed: both(set(native("/assets/4/id"), json!(0)), set(native("/assets/6/id"), json!(5))),
            repaired: vec![
                record("imp[0].native.request.assets[4].id", "filled"),
                record("imp[0].native.request.assets[6].id", "filled"),
            ],
            list: None,
        },
        Fix {
            broken: set(native("/eventtrackers/1/event"), Value::Null),
            fixed: set(native("/eventtrackers"), json!([trackers()[0]])),
            repaired: vec![dropped_at("imp[0].native.request.eventtrackers[1]")],
            list: Some("eventtrackers"),
        },
        Fix {
            broken: set(native("/eventtrackers/1/event"), json!(5)),
            fixed: set(native("/eventtrackers"), json!([trackers()[0]])),
            repaired: vec![dropped_at("imp[0].native.request.eventtrackers[1]")],
            list: Some("eventtrackers"),
        },
        Fix {
            broken: set(native("/eventtrackers/0/methods"), Value::Null),
            fixed: set(native("/eventtrackers"), json!([trackers()[1]])),
            repaired: vec![dropped_at("imp[0].native.request.eventtrackers[0]")],
            list: Some("eventtrackers"),
        },
        Fix {
            broken: set(native("/eventtrackers/0/methods"), json!([3, 4])),
            fixed: set(native("/eventtrackers"), json!([trackers()[1]])),
            repaired: vec![dropped_at("imp[0].native.request.eventtrackers[0]")],
            list: Some("eventtrackers"),
        },
        Fix {
            broken: set(native("/eventtrackers/0/methods"), json!([3, 1, 0, 2])),
            fixed: unchanged(),
            repaired: vec![
                dropped_at("imp[0].native.request.eventtrackers[0].methods[0]"),
                dropped_at("imp[0].native.request.eventtrackers[0].methods[2]"),
            ],
            list: Some("eventtrackers"),
        },
        // Request, site, app, DOOH, content
        flag("/allimps"),
        flag("/site/mobile"),
        flag("/site/privacypolicy"),
        flag("/site/content/livestream"),
        flag("/site/content/sourcerelationship"),
        flag("/site/content/embeddable"),
        negative("/site/content/len"),
        Fix {
            broken: channel("app", set("/app/privacypolicy", json!(2))),
            fixed: channel("app", unchanged()),
            repaired: vec![dropped_at("app.privacypolicy")],
            list: Some("channel"),
        },
        Fix {
            broken: channel("app", set("/app/paid", json!(-1))),
            fixed: channel("app", unchanged()),
            repaired: vec![dropped_at("app.paid")],
            list: Some("channel"),
        },
        Fix {
            broken: channel("app", set("/app/content/len", json!(-1))),
            fixed: channel("app", remove("/app/content/len")),
            repaired: vec![dropped_at("app.content.len")],
            list: Some("channel"),
        },
        Fix {
            broken: channel("dooh", set("/dooh/content/embeddable", json!(3))),
            fixed: channel("dooh", remove("/dooh/content/embeddable")),
            repaired: vec![dropped_at("dooh.content.embeddable")],
            list: Some("channel"),
        },
        // Device, geo, source
        negative("/device/h"),
        negative("/device/w"),
        negative("/device/ppi"),
        dropped("/device/pxratio", json!(-3.0)),
        flag("/device/js"),
        flag("/device/geofetch"),
        flag("/device/sua/mobile"),
        bad_fix("/device/geo", "lat", json!(200.0), &["accuracy", "lastfix"]),
        bad_fix("/device/geo", "lon", json!(-180.5), &["accuracy", "lastfix"]),
        negative("/device/geo/accuracy"),
        negative("/device/geo/lastfix"),
        bad_fix("/user/geo", "lat", json!(-91), &[]),
        bad_fix("/user/geo", "lon", json!(1e300), &[]),
        flag("/source/fd"),
    ]
}

#[test]
fn every_repairable_rule_is_repaired_exactly() {
    for (row, fix) in fixes().into_iter().enumerate() {
        let mut broken = base();
        (fix.broken)(&mut broken);
        let mut request = build(broken);
        assert!(
            validate(&request, "USD").is_err(),
            "row {row} breaks no rule: {:?}",
            fix.repaired
        );
        let done = repair(&mut request);
        assert_eq!(summary(&done), fix.repaired, "row {row}");
        let mut fixed = base();
        (fix.fixed)(&mut fixed);
        let fixed = build(fixed);
        assert_eq!(request, fixed, "row {row}: {:?}", fix.repaired);
        assert_eq!(
            request.to_vec().unwrap(),
            fixed.to_vec().unwrap(),
            "row {row}"
        );
        assert_eq!(validate(&request, "USD"), Ok(()), "row {row}");
        assert_eq!(repair(&mut request), [], "row {row}: not idempotent");
    }
}

/// The rows of `validate`'s table that repair must leave to it: what the module documentation
/// marks as refused, in the order of that table.
#[rustfmt::skip]
const REFUSED: &[&str] = &[
    "imp[0]", "imp[0].secure", "imp[0].qty.multiplier",
    "imp[0].video.mimes", "imp[0].video.mimes", "imp[0].video.mincpmpersec",
    "imp[0].video.durfloors[0].mindur", "imp[0].video.durfloors[0].maxdur",
    "imp[0].video.durfloors[0].bidfloor",
    "imp[0].audio.mimes", "imp[0].audio.mimes",
    // The only entry of `rqddurs`: dropping it would allow any duration.
    "imp[0].audio.rqddurs[0]",
    "imp[0].audio.mincpmpersec", "imp[0].audio.durfloors[0].bidfloor",
    "imp[0].pmp.private_auction", "imp[0].pmp.deals[0].guar",
    "imp[0].pmp.deals[0].mincpmpersec", "imp[0].pmp.deals[0].durfloors[0].maxdur",
    // Missing, empty, an array, not JSON, a duplicate key, too long, an id of the wrong type.
    "imp[0].native.request", "imp[0].native.request", "imp[0].native.request",
    "imp[0].native.request", "imp[0].native.request", "imp[0].native.request",
    "imp[0].native.request.assets[0].id",
    "imp[0].native.request.assets", "imp[0].native.request.assets",
    "imp[0].native.request.assets",
    "imp[0].native.request.native.assets",
    "imp[0].native.request.assets[1].id",
    "imp[0].native.request.assets[0]", "imp[0].native.request.assets[0]",
    "imp[0].native.request.assets[0].title.len", "imp[0].native.request.assets[0].title.len",
    "imp[0].native.request.assets[6].video.mimes", "imp[0].native.request.assets[6].video.mimes",
    "imp[0].native.request.assets[6].video.minduration",
    "imp[0].native.request.assets[6].video.minduration",
    "imp[0].native.request.assets[6].video.maxduration",
    "imp[0].native.request.assets[6].video.maxduration",
    "imp[0].native.request.assets[6].video.protocols",
    "imp[0].native.request.assets[3].data.type", "imp[0].native.request.assets[3].data.type",
    "test", "at", "app", "dooh", "device.dnt", "device.lmt",
    "source.schain.complete", "source.schain.nodes[0].hp", "regs.coppa", "regs.gdpr",
];

#[test]
fn every_rule_of_validate_is_repaired_or_refused_as_documented() {
    let mut refused = Vec::new();
    for row in rows() {
        let mut broken = base();
        (row.mutate)(&mut broken);
        let mut request = build(broken);
        let before = validate(&request, "USD").expect_err(&row.path);
        let original = request.clone();
        let done = repair(&mut request);
        if done.is_empty() {
            assert_eq!(request, original, "{}", row.path);
            assert_eq!(request.to_vec().unwrap(), original.to_vec().unwrap());
            assert_eq!(validate(&request, "USD"), Err(before), "{}", row.path);
            refused.push(row.path);
        } else {
            assert_eq!(
                validate(&request, "USD"),
                Ok(()),
                "{} ({}) -> {done:?}",
                row.path,
                row.problem
            );
            assert_eq!(repair(&mut request), [], "{}: not idempotent", row.path);
        }
    }
    assert_eq!(refused, REFUSED);
}

/// `cap_imps` keeps the seller's first imps.
#[test]
fn cap_imps_drops_the_imps_past_the_cap() {
    let mut request = base();
    let mut second = request["imp"][0].clone();
    second["id"] = json!("2");
    request["imp"].as_array_mut().unwrap().push(second);
    let mut request = build(request);
    assert_eq!(super::super::cap_imps(&mut request, 5), 0);
    assert_eq!(request.imp.len(), 2);
    assert_eq!(super::super::cap_imps(&mut request, 1), 1);
    assert_eq!(request.imp.len(), 1);
    assert_eq!(request.imp[0].id, "1");
    assert_eq!(super::super::cap_imps(&mut request, 0), 1);
    assert!(request.imp.is_empty());
}

/// Repairs of several imps name each imp, in order, and a request past the imp limit (refused
/// whatever is fixed) is not repaired.
#[test]
fn repairs_name_their_imp_and_too_many_imps_are_left() {
    let mut request = base();
    let mut second = request["imp"][0].clone();
    second["id"] = json!("2");
    second["instl"] = json!(5);
    request["imp"][0]["rwdd"] = json!(-1);
    request["imp"].as_array_mut().unwrap().push(second);
    let mut built = build(request.clone());
    let done: Vec<String> = repair(&mut built).iter().map(ToString::to_string).collect();
    assert_eq!(done, ["imp[0].rwdd: dropped", "imp[1].instl: dropped"]);

    let imps = request["imp"].as_array_mut().unwrap();
    while imps.len() <= crate::validate::MAX_IMPS {
        let mut next = imps[1].clone();
        next["id"] = json!(imps.len().to_string());
        imps.push(next);
    }
    let mut built = build(request);
    let original = built.clone();
    assert_eq!(repair(&mut built), []);
    assert_eq!(built, original);
}
