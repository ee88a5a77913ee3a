//! Each targeting dimension, allowed and refused, through the index and the scan alike; creative
//! fit and blocking; the price rule and deal terms.

use openrtb::Price;
use serde_json::{Value, json};
use units::Timestamp;

use super::{TEN_UTC, candidates, request, set};
use crate::{Candidate, ImpFacts, RequestFacts, bid_price};

/// One campaign with the given targeting and two banner creatives (300x250, 728x90).
fn campaign_with(targeting: Value) -> String {
    json!([{
        "id": "t", "budget": {"total": 100}, "bid": {"cpm": 2},
        "creatives": [
            {"id": "mpu", "w": 300, "h": 250, "adm": "<div></div>"},
            {"id": "lb", "w": 728, "h": 90, "adm": "<div></div>"}
        ],
        "targeting": targeting
    }])
    .to_string()
}

/// A request on `site` (or any other top-level keys) with one 300x250 impression.
fn request_with(extra: Value) -> String {
    let mut r = json!({"id": "r", "imp": [{"id": "1", "banner": {"w": 300, "h": 250}}]});
    if let (Some(obj), Value::Object(more)) = (r.as_object_mut(), extra) {
        obj.extend(more);
    }
    r.to_string()
}

/// Whether the campaign with `targeting` bids on the request built from `extra` at `now`.
fn bids(targeting: Value, extra: Value, now: Timestamp) -> bool {
    let s = set(&campaign_with(targeting));
    let r = request(&request_with(extra));
    !candidates(&s, &r, 0, now).is_empty()
}

fn yes(targeting: Value, extra: Value) {
    assert!(
        bids(targeting.clone(), extra.clone(), TEN_UTC),
        "should bid: {targeting} on {extra}"
    );
}

fn no(targeting: Value, extra: Value) {
    assert!(
        !bids(targeting.clone(), extra.clone(), TEN_UTC),
        "should not bid: {targeting} on {extra}"
    );
}

#[test]
fn untargeted_campaign_bids_on_a_bare_request() {
    yes(json!({}), json!({}));
}

#[test]
fn countries_match_device_geo_then_user_geo() {
    let t = json!({"countries": ["USA", "CAN"]});
    yes(t.clone(), json!({"device": {"geo": {"country": "USA"}}}));
    yes(t.clone(), json!({"device": {"geo": {"country": "can"}}}));
    yes(t.clone(), json!({"user": {"geo": {"country": "USA"}}}));
    no(
        t.clone(),
        json!({"device": {"geo": {"country": "FRA"}}, "user": {"geo": {"country": "USA"}}}),
    );
    no(t.clone(), json!({"device": {"geo": {"country": "US"}}}));
    no(t, json!({}));
}

#[test]
fn regions_match_case_insensitively() {
    let t = json!({"regions": ["ca"]});
    yes(
        t.clone(),
        json!({"device": {"geo": {"country": "USA", "region": "CA"}}}),
    );
    no(t.clone(), json!({"device": {"geo": {"region": "NY"}}}));
    no(t, json!({}));
}

#[test]
fn device_types_match_the_code() {
    let t = json!({"device_types": [4, 5]});
    yes(t.clone(), json!({"device": {"devicetype": 5}}));
    no(t.clone(), json!({"device": {"devicetype": 2}}));
    no(t, json!({"device": {}}));
}

#[test]
fn os_matches_case_insensitively() {
    let t = json!({"os": ["iOS"]});
    yes(t.clone(), json!({"device": {"os": "IOS"}}));
    yes(t.clone(), json!({"device": {"os": "ios "}}));
    no(t.clone(), json!({"device": {"os": "Android"}}));
    no(t, json!({}));
}

#[test]
fn domains_match_the_domain_or_a_parent() {
    let t = json!({"domains": ["example.com", "com.example.game"]});
    yes(t.clone(), json!({"site": {"domain": "example.com"}}));
    yes(t.clone(), json!({"site": {"domain": "news.Example.com."}}));
    yes(
        t.clone(),
        json!({"site": {"page": "https://www.example.com/a?b=c"}}),
    );
    yes(t.clone(), json!({"app": {"bundle": "com.example.game"}}));
    yes(
        t.clone(),
        json!({"app": {"bundle": "com.other", "domain": "example.com"}}),
    );
    no(t.clone(), json!({"site": {"domain": "badexample.com"}}));
    no(t.clone(), json!({"site": {"domain": "com"}}));
    no(t.clone(), json!({"site": {"domain": "example.org"}}));
    no(t, json!({}));
    // A configured parent that is a single label still works as a parent.
    yes(
        json!({"domains": ["*.org"]}),
        json!({"site": {"domain": "a.example.org"}}),
    );
}

#[test]
fn block_domains_block_the_domain_and_its_subdomains() {
    let t = json!({"block_domains": ["bad.example"]});
    no(t.clone(), json!({"site": {"domain": "bad.example"}}));
    no(t.clone(), json!({"site": {"domain": "www.bad.example"}}));
    no(
        t.clone(),
        json!({"app": {"bundle": "com.x", "domain": "bad.example"}}),
    );
    yes(t.clone(), json!({"site": {"domain": "notbad.example"}}));
    yes(t.clone(), json!({"site": {"domain": "example"}}));
    yes(t, json!({}));
    // Allow and block together: the block wins on its subtree.
    let both = json!({"domains": ["example.com"], "block_domains": ["ugc.example.com"]});
    yes(
        both.clone(),
        json!({"site": {"domain": "news.example.com"}}),
    );
    no(both, json!({"site": {"domain": "u1.ugc.example.com"}}));
}

#[test]
fn publishers_match_site_app_and_dooh() {
    let t = json!({"publishers": ["pub-1"]});
    yes(t.clone(), json!({"site": {"publisher": {"id": "pub-1"}}}));
    yes(t.clone(), json!({"app": {"publisher": {"id": "pub-1"}}}));
    yes(t.clone(), json!({"dooh": {"publisher": {"id": "pub-1"}}}));
    no(t.clone(), json!({"site": {"publisher": {"id": "PUB-1"}}}));
    no(t, json!({"site": {}}));
}

#[test]
fn categories_match_any_of_cat_sectioncat_pagecat() {
    let t = json!({"categories": ["IAB12", "IAB19"]});
    yes(t.clone(), json!({"site": {"cat": ["IAB1", "IAB12"]}}));
    yes(t.clone(), json!({"site": {"sectioncat": ["IAB19"]}}));
    yes(t.clone(), json!({"site": {"pagecat": ["IAB19"]}}));
    yes(t.clone(), json!({"app": {"cat": ["IAB12"]}}));
    no(t.clone(), json!({"site": {"cat": ["IAB1"]}}));
    no(t, json!({}));
}

#[test]
fn segments_match_any_user_data_segment() {
    let t = json!({"segments": ["s2", "s9"]});
    yes(
        t.clone(),
        json!({"user": {"data": [{"segment": [{"id": "s1"}]}, {"segment": [{"id": "s9"}]}]}}),
    );
    no(
        t.clone(),
        json!({"user": {"data": [{"segment": [{"id": "s1"}, {"name": "s2"}]}]}}),
    );
    no(t, json!({"user": {}}));
}

#[test]
fn hours_are_local_when_utcoffset_is_given() {
    // TEN_UTC is 10:00 UTC.
    yes(json!({"hours": [10]}), json!({}));
    no(json!({"hours": [12]}), json!({}));
    yes(
        json!({"hours": [12]}),
        json!({"device": {"geo": {"utcoffset": 120}}}),
    );
    no(
        json!({"hours": [10]}),
        json!({"device": {"geo": {"utcoffset": 120}}}),
    );
    yes(
        json!({"hours": [23]}),
        json!({"device": {"geo": {"utcoffset": -660}}}),
    );
    yes(
        json!({"hours": [12]}),
        json!({"user": {"geo": {"utcoffset": 120}}}),
    );
    // 10:59:59 is still hour 10; 11:00 is not.
    let s = set(&campaign_with(json!({"hours": [10]})));
    let r = request(&request_with(json!({})));
    assert_eq!(
        candidates(&s, &r, 0, Timestamp(TEN_UTC.0 + 3_599_999)).len(),
        1
    );
    assert!(candidates(&s, &r, 0, Timestamp(TEN_UTC.0 + 3_600_000)).is_empty());
}

#[test]
fn flight_contains_start_but_not_end() {
    let doc = json!([{
        "id": "f", "budget": {"total": 1}, "bid": {"cpm": 1},
        "flight": {"start": "2025-03-01T10:00:00Z", "end": "2025-03-01T11:00:00Z"},
        "creatives": [{"id": "a", "w": 300, "h": 250, "adm": "x"}]
    }]);
    let s = set(&doc.to_string());
    let r = request(&request_with(json!({})));
    let at = |ms: u64| candidates(&s, &r, 0, Timestamp(ms)).len();
    assert_eq!(at(TEN_UTC.0 - 1), 0);
    assert_eq!(at(TEN_UTC.0), 1);
    assert_eq!(at(TEN_UTC.0 + 3_599_999), 1);
    assert_eq!(at(TEN_UTC.0 + 3_600_000), 0);
}

#[test]
fn deals_restrict_the_campaign_and_name_the_deal() {
    let deal_campaign = json!({"deals": ["d2", "d3"]});
    let s = set(&campaign_with(deal_campaign.clone()));
    let with_deals = |private: i32| {
        request(&json!({"id": "r", "imp": [{"id": "1", "banner": {"w": 300, "h": 250},
            "pmp": {"private_auction": private, "deals": [{"id": "d1"}, {"bidfloor": 9}, {"id": "d3"}, {"id": "d2"}]}}]})
        .to_string())
    };
    // First listed deal in request order: d3 at position 2 (the id-less deal keeps its slot).
    let got = candidates(&s, &with_deals(0), 0, TEN_UTC);
    assert_eq!(
        got,
        [Candidate {
            campaign: 0,
            creative: 0,
            deal: Some(2)
        }]
    );
    no(deal_campaign, json!({}));

    // An open campaign bids in the open auction, not in a private one.
    let open = set(&campaign_with(json!({})));
    assert_eq!(candidates(&open, &with_deals(0), 0, TEN_UTC)[0].deal, None);
    assert!(candidates(&open, &with_deals(1), 0, TEN_UTC).is_empty());
    assert_eq!(candidates(&s, &with_deals(1), 0, TEN_UTC)[0].deal, Some(2));
}

#[test]
fn banner_sizes_come_from_format_and_w_h_and_the_sizes_list_narrows_them() {
    let s = set(&campaign_with(json!({})));
    let r = request(&json!({"id": "r", "imp": [
        {"id": "1", "banner": {"format": [{"w": 728, "h": 90}, {"w": 0, "h": 90}, {"wratio": 4, "hratio": 1}], "w": 300, "h": 250}},
        {"id": "2", "banner": {"format": [{"w": 160, "h": 600}]}},
        {"id": "3", "video": {"mimes": ["video/mp4"]}},
        {"id": "4", "native": {"request": "{}"}}
    ]}).to_string());
    let creatives = |imp| -> Vec<u32> {
        candidates(&s, &r, imp, TEN_UTC)
            .iter()
            .map(|c| c.creative)
            .collect()
    };
    assert_eq!(creatives(0), [0, 1]);
    assert!(creatives(1).is_empty());
    assert!(creatives(2).is_empty());
    assert!(creatives(3).is_empty());

    let narrowed = set(&campaign_with(json!({"sizes": ["728x90", "160x600"]})));
    let got: Vec<u32> = candidates(&narrowed, &r, 0, TEN_UTC)
        .iter()
        .map(|c| c.creative)
        .collect();
    assert_eq!(got, [1]);
    assert!(candidates(&narrowed, &r, 1, TEN_UTC).is_empty());
}

#[test]
fn video_creatives_need_an_accepted_mime_duration_and_protocol() {
    let doc = json!([{
        "id": "v", "budget": {"total": 1}, "bid": {"cpm": 1},
        "creatives": [
            {"id": "v15", "video": {"mimes": ["video/mp4"], "duration": 15, "protocols": [3, 7]}, "adm": "<VAST/>"},
            {"id": "v60", "video": {"mimes": ["video/webm"], "duration": 60}, "adm": "<VAST/>"}
        ]
    }]);
    let s = set(&doc.to_string());
    let fits = |video: Value| -> Vec<u32> {
        let r = request(&json!({"id": "r", "imp": [{"id": "1", "video": video}]}).to_string());
        candidates(&s, &r, 0, TEN_UTC)
            .iter()
            .map(|c| c.creative)
            .collect()
    };
    assert_eq!(fits(json!({})), [0, 1]);
    assert_eq!(fits(json!({"mimes": ["VIDEO/MP4"]})), [0]);
    assert_eq!(fits(json!({"maxduration": 30})), [0]);
    assert_eq!(fits(json!({"minduration": 20})), [1]);
    assert_eq!(fits(json!({"rqddurs": [60]})), [1]);
    assert_eq!(fits(json!({"protocols": [2]})), [1]);
    assert_eq!(fits(json!({"protocols": [2, 7]})), [0, 1]);
    assert!(fits(json!({"mimes": ["video/ogg"]})).is_empty());
}

#[test]
fn bcat_and_badv_block_creatives_not_campaigns() {
    let doc = json!([{
        "id": "b", "budget": {"total": 1}, "bid": {"cpm": 1}, "adomain": ["brand.example"],
        "creatives": [
            {"id": "casino", "w": 300, "h": 250, "adm": "x", "cat": ["IAB7-39"]},
            {"id": "plain", "w": 300, "h": 250, "adm": "x", "adomain": ["Shop.Other.example"]}
        ]
    }]);
    let s = set(&doc.to_string());
    let creatives = |extra: Value| -> Vec<u32> {
        let r = request(&request_with(extra));
        candidates(&s, &r, 0, TEN_UTC)
            .iter()
            .map(|c| c.creative)
            .collect()
    };
    assert_eq!(creatives(json!({})), [0, 1]);
    assert_eq!(creatives(json!({"bcat": ["IAB7"]})), [1]);
    assert_eq!(creatives(json!({"bcat": ["IAB7-39"]})), [1]);
    assert_eq!(creatives(json!({"bcat": ["IAB7-3"]})), [0, 1]);
    assert_eq!(creatives(json!({"badv": ["brand.example"]})), [1]);
    assert_eq!(creatives(json!({"badv": ["other.example"]})), [0]);
    assert!(creatives(json!({"badv": ["BRAND.example", "other.example"]})).is_empty());
}

#[test]
fn bid_price_follows_the_floor_shading_and_ceiling() {
    let doc = json!([
        {"id": "plain", "budget": {"total": 1}, "bid": {"cpm": 2.0},
         "creatives": [{"id": "a", "w": 1, "h": 1, "adm": "x"}]},
        {"id": "shaded", "budget": {"total": 1}, "bid": {"cpm": 2.0, "max_cpm": 3.0, "shading": 0.333333},
         "creatives": [{"id": "a", "w": 1, "h": 1, "adm": "x"}]}
    ]);
    let s = set(&doc.to_string());
    // The set orders by max_cpm: "shaded" (3.0) comes before "plain" (2.0).
    let (Some(plain), Some(shaded)) = (s.get("plain"), s.get("shaded")) else {
        panic!("both campaigns load");
    };
    let p = Price::from_micros;
    // Second price: the CPM, whatever the floor below it.
    assert_eq!(bid_price(plain, p(0), false), Some(p(2_000_000)));
    assert_eq!(bid_price(plain, p(1_999_999), false), Some(p(2_000_000)));
    assert_eq!(bid_price(plain, p(2_000_000), false), Some(p(2_000_000)));
    assert_eq!(bid_price(plain, p(2_000_001), false), None);
    assert_eq!(bid_price(plain, p(-5), false), Some(p(2_000_000)));
    // First price without shading: still the CPM.
    assert_eq!(bid_price(plain, p(500_000), true), Some(p(2_000_000)));
    // First price with shading: cpm x shading rounded down, raised to the floor, up to max_cpm.
    assert_eq!(bid_price(shaded, p(0), true), Some(p(666_666)));
    assert_eq!(bid_price(shaded, p(1_000_000), true), Some(p(1_000_000)));
    assert_eq!(bid_price(shaded, p(2_500_000), true), Some(p(2_500_000)));
    assert_eq!(bid_price(shaded, p(3_000_000), true), Some(p(3_000_000)));
    assert_eq!(bid_price(shaded, p(3_000_001), true), None);
    // Second price ignores shading; max_cpm lets it meet a floor above cpm.
    assert_eq!(bid_price(shaded, p(0), false), Some(p(2_000_000)));
    assert_eq!(bid_price(shaded, p(2_400_000), false), Some(p(2_400_000)));
}

#[test]
fn imp_terms_use_the_deal_floor_and_auction_type() {
    let r = request(&json!({"id": "r", "at": 2, "imp": [{"id": "1", "bidfloor": 1.5, "banner": {"w": 1, "h": 1},
        "pmp": {"deals": [{"id": "a", "bidfloor": 4.0, "at": 1}, {"id": "b"}, {"id": "c", "bidfloor": 2, "at": 3}]}}]})
    .to_string());
    let req = RequestFacts::from_request(&r, TEN_UTC);
    let imp = ImpFacts::from_imp(&r.imp[0]);
    let p = Price::from_micros;
    assert_eq!(imp.terms(&req, None), (p(1_500_000), false));
    assert_eq!(imp.terms(&req, Some(0)), (p(4_000_000), true));
    assert_eq!(imp.terms(&req, Some(1)), (p(0), false));
    assert_eq!(imp.terms(&req, Some(2)), (p(2_000_000), true));
    assert_eq!(imp.terms(&req, Some(7)), (p(1_500_000), false));
    assert!(!imp.private_auction());
}
