//! The packed creative records (`hot.rs`) decide creative fit and blocking exactly like
//! `creative_fits` comparing strings: on random campaigns and requests drawn from small pools
//! that collide often (tier-1 and full categories, parent and subdomain advertisers, MIME types
//! in other cases and with blanks, protocols, durations), the index returns what the scan of
//! every campaign returns, and each campaign's packed bid rule is its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use campaigns::{CampaignSet, ImpFacts, RequestFacts};
use openrtb::BidRequest;
use units::Timestamp;

const CATS: &[&str] = &[
    "IAB1", "IAB1-2", "IAB1-3", "IAB2", "IAB2-1", "IAB10-1", "-x", "iab1-2", "IAB1-2-3",
];
const BCAT: &[&str] = &[
    "IAB1", "IAB1-2", "IAB2-1", "IAB10", "", "IAB3", "iab1", "IAB1-2-3",
];
const ADOMAINS: &[&str] = &["a.example", "b.a.example", "example", "c.example", "x.y.z"];
const BADV: &[&str] = &[
    "example",
    "a.example",
    "B.A.EXAMPLE.",
    " z ",
    "y.z",
    "other.example",
    "b.a.example.com",
];
const MIMES: &[&str] = &["video/mp4", "Video/WebM", "application/javascript"];
const ACCEPTED: &[&str] = &[
    " VIDEO/MP4 ",
    "video/webm",
    "video/ogg",
    "",
    "application/JavaScript",
];
const SIZES: &[(i64, i64)] = &[(300, 250), (728, 90), (320, 50)];

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(pool, 0..=3)
}

fn creative() -> impl Strategy<Value = Value> {
    let video = (
        proptest::sample::subsequence(MIMES, 1..=2),
        prop_oneof![Just(6i64), Just(15), Just(30), Just(60)],
        proptest::sample::subsequence(&[2i64, 3, 5, 7][..], 0..=2),
    );
    (
        any::<bool>(),
        proptest::sample::select(SIZES),
        video,
        pick(CATS),
        proptest::option::of(pick(ADOMAINS)),
    )
        .prop_map(
            |(is_video, (w, h), (mimes, duration, protocols), cat, adomain)| {
                let mut c = json!({"id": "cr", "adm": "<a></a>", "cat": cat});
                if is_video {
                    c["video"] =
                        json!({"mimes": mimes, "duration": duration, "protocols": protocols});
                } else {
                    c["w"] = json!(w);
                    c["h"] = json!(h);
                }
                if let Some(adomain) = adomain {
                    c["adomain"] = json!(adomain);
                }
                c
            },
        )
}

fn campaign() -> impl Strategy<Value = Value> {
    (
        // Past the three creatives a packed campaign record holds itself.
        proptest::collection::vec(creative(), 1..=5),
        pick(ADOMAINS),
        1u32..=20,
        proptest::option::of(proptest::sample::subsequence(
            &["300x250", "728x90"][..],
            1..=2,
        )),
    )
        .prop_map(|(creatives, adomain, cpm, sizes)| {
            let creatives: Vec<Value> = creatives
                .into_iter()
                .enumerate()
                .map(|(j, mut c)| {
                    c["id"] = json!(format!("cr{j}"));
                    c
                })
                .collect();
            let mut targeting = json!({});
            if let Some(sizes) = sizes {
                targeting["sizes"] = json!(sizes);
            }
            json!({
                "budget": {"total": 100}, "bid": {"cpm": f64::from(cpm) / 4.0},
                "adomain": adomain, "creatives": creatives, "targeting": targeting
            })
        })
}

fn request() -> impl Strategy<Value = Value> {
    let video = (
        proptest::option::of(proptest::sample::subsequence(ACCEPTED, 0..=3)),
        proptest::option::of(proptest::sample::subsequence(
            &[1i64, 2, 3, 7, -1][..],
            0..=3,
        )),
        proptest::option::of(prop_oneof![Just(0i64), Just(10), Just(20)]),
        proptest::option::of(prop_oneof![Just(0i64), Just(15), Just(30), Just(-5)]),
        proptest::option::of(proptest::sample::subsequence(&[6i64, 15, 45][..], 0..=2)),
    );
    (
        proptest::collection::vec((any::<bool>(), video), 1..=2),
        proptest::option::of(pick(BCAT)),
        proptest::option::of(pick(BADV)),
    )
        .prop_map(|(imps, bcat, badv)| {
            let imp: Vec<Value> = imps
                .into_iter()
                .enumerate()
                .map(|(k, (banner, (mimes, protocols, min, max, rqd)))| {
                    let mut imp = json!({"id": format!("{k}")});
                    if banner {
                        imp["banner"] =
                            json!({"format": [{"w": 300, "h": 250}, {"w": 728, "h": 90}]});
                    } else {
                        let mut v = json!({});
                        if let Some(m) = mimes {
                            v["mimes"] = json!(m);
                        }
                        if let Some(p) = protocols {
                            v["protocols"] = json!(p);
                        }
                        if let Some(m) = min {
                            v["minduration"] = json!(m);
                        }
                        if let Some(m) = max {
                            v["maxduration"] = json!(m);
                        }
                        if let Some(r) = rqd {
                            v["rqddurs"] = json!(r);
                        }
                        imp["video"] = v;
                    }
                    imp
                })
                .collect();
            let mut r = json!({"id": "r", "imp": imp});
            if let Some(bcat) = bcat {
                r["bcat"] = json!(bcat);
            }
            if let Some(badv) = badv {
                r["badv"] = json!(badv);
            }
            r
        })
}

fn build(campaigns: Vec<Value>) -> CampaignSet {
    let campaigns: Vec<Value> = campaigns
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            c["id"] = json!(format!("c{i}"));
            c
        })
        .collect();
    let json = Value::Array(campaigns).to_string();
    CampaignSet::from_json_bytes(json.as_bytes()).expect("generated campaigns are valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn packed_records_decide_like_the_strings(
        campaigns in proptest::collection::vec(campaign(), 1..=40),
        requests in proptest::collection::vec(request(), 1..=8),
    ) {
        let set = build(campaigns);
        for (i, c) in set.campaigns().iter().enumerate() {
            prop_assert_eq!(set.bid_rule(u32::try_from(i).unwrap()), Some(*c.bid()));
        }
        let now = Timestamp(1_740_830_400_000);
        for r in requests {
            let r: BidRequest = serde_json::from_value(r).expect("generated requests decode");
            let req = RequestFacts::from_request(&r, now);
            for imp in &r.imp {
                let imp = ImpFacts::from_imp(imp);
                let (mut indexed, mut scanned) = (Vec::new(), Vec::new());
                set.candidates(&req, &imp, &mut indexed);
                set.candidates_scan(&req, &imp, &mut scanned);
                prop_assert_eq!(indexed, scanned);
            }
        }
    }
}

/// Not vacuous: in a fixed case, blocking by a tier-1 category, a parent advertiser domain and
/// a MIME type in another case each change the answer.
#[test]
fn each_rule_decides_something() {
    let set = build(vec![
        json!({"budget": {"total": 1}, "bid": {"cpm": 1}, "adomain": ["b.a.example"],
               "creatives": [{"id": "x", "w": 300, "h": 250, "adm": "x", "cat": ["IAB1-2"]}]}),
        json!({"budget": {"total": 1}, "bid": {"cpm": 1},
               "creatives": [{"id": "v", "adm": "x",
                              "video": {"mimes": ["Video/WebM"], "duration": 15}}]}),
    ]);
    let now = Timestamp(1_740_830_400_000);
    let count = |r: Value| {
        let r: BidRequest = serde_json::from_value(r).expect("decodes");
        let req = RequestFacts::from_request(&r, now);
        let imp = ImpFacts::from_imp(&r.imp[0]);
        let (mut indexed, mut scanned) = (Vec::new(), Vec::new());
        set.candidates(&req, &imp, &mut indexed);
        set.candidates_scan(&req, &imp, &mut scanned);
        assert_eq!(indexed, scanned);
        indexed.len()
    };
    let banner = json!([{"id": "1", "banner": {"w": 300, "h": 250}}]);
    assert_eq!(count(json!({"id": "r", "imp": banner})), 1);
    assert_eq!(
        count(json!({"id": "r", "imp": banner, "bcat": ["IAB1"]})),
        0
    );
    assert_eq!(
        count(json!({"id": "r", "imp": banner, "bcat": ["IAB1-3"]})),
        1
    );
    assert_eq!(
        count(json!({"id": "r", "imp": banner, "badv": ["A.Example"]})),
        0
    );
    assert_eq!(
        count(json!({"id": "r", "imp": banner, "badv": ["a.example.com"]})),
        1
    );
    let video = |mimes: &[&str]| json!([{"id": "1", "video": {"mimes": mimes}}]);
    assert_eq!(
        count(json!({"id": "r", "imp": video(&[" VIDEO/webm "])})),
        1
    );
    assert_eq!(count(json!({"id": "r", "imp": video(&["video/mp4"])})), 0);
    assert_eq!(count(json!({"id": "r", "imp": video(&[])})), 1);
}
