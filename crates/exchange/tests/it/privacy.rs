//! Privacy never leaks (docs/reliability.md, 17): for a table of consent strings made by IAB's
//! own encoders (`tests/fixtures/privacy/consents.json`, `gen.mjs` there) and regulation flags,
//! what each of seven bidders receives over a real socket is checked field by field. The
//! vendor list is hand-made (`tests/fixtures/privacy/gvl.json`):
//!
//! | bidder | vendor | declares |
//! | --- | --- | --- |
//! | a | 1 | consent for purposes 1-4 and 7, special feature 1 |
//! | b | 2 | purpose 1 by consent; 2 and 7-10 by legitimate interest; no special feature |
//! | c | 3 | consent for 1, 2, 4 (2 flexible); no special feature |
//! | d | 4 | deleted from the list |
//! | e | 5 | no purpose 2 |
//! | f | none | no `gvl_vendor_id` |
//! | g | 99 | not in the list |
//!
//! What a bidder got is written as five letters, upper case when the field arrived as sent
//! and lower case when it was removed or coarsened: `I` ids (`user.buyeruid`, `device.ifa`),
//! `E` `eids`, `D` demographics (`user.yob`), `G` precise geo, `P` the full IP; `-` means it
//! was not called. This is the table of docs/privacy.md, row by row.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::*;

const BIDDERS: [(&str, Option<u16>); 7] = [
    ("a", Some(1)),
    ("b", Some(2)),
    ("c", Some(3)),
    ("d", Some(4)),
    ("e", Some(5)),
    ("f", None),
    ("g", Some(99)),
];

fn consents() -> Value {
    serde_json::from_str(include_str!("../fixtures/privacy/consents.json")).unwrap()
}

fn tcf(name: &str) -> String {
    consents()["tcf"][name].as_str().unwrap().to_owned()
}

fn gpp(name: &str) -> String {
    consents()["gpp"][name].as_str().unwrap().to_owned()
}

/// A request carrying every field privacy law may remove.
fn request(regs: Value, consent: Option<String>, lmt: bool) -> Value {
    let mut user = json!({"buyeruid": "buyer-1", "yob": 1980,
                          "eids": [{"source": "id.example", "uids": [{"id": "e-1"}]}]});
    if let Some(c) = consent {
        user["consent"] = json!(c);
    }
    let mut r = json!({
        "id": "req-p", "tmax": 300,
        "imp": [{"id": "1", "banner": {"w": 300, "h": 250}}],
        "site": {"domain": "news.example"},
        "device": {"ua": "UA", "ip": "192.0.2.123", "ifa": "ifa-1",
                   "geo": {"lat": 48.85661, "lon": 2.35222, "country": "FRA"}},
        "user": user,
        "regs": regs
    });
    if lmt {
        r["device"]["lmt"] = json!(1);
    }
    r
}

/// The five letters of what a bidder received (see the module doc).
fn received(r: &openrtb::BidRequest) -> String {
    let user = r.user.clone().unwrap_or_default();
    let device = r.device.clone().unwrap_or_default();
    let ids = user.buyeruid.is_some() && device.ifa.is_some();
    assert_eq!(
        user.buyeruid.is_some(),
        device.ifa.is_some(),
        "user and device ids go together"
    );
    let geo = device.geo.unwrap_or_default();
    let letters = [
        ('I', ids),
        ('E', user.eids.is_some()),
        ('D', user.yob.is_some()),
        ('G', geo.lat == Some(48.85661)),
        ('P', device.ip.as_deref() == Some("192.0.2.123")),
    ];
    if !letters[3].1 {
        assert_eq!(
            (geo.lat, geo.lon),
            (Some(48.86), Some(2.35)),
            "coarsened, not removed"
        );
    }
    if !letters[4].1 {
        assert_eq!(device.ip.as_deref(), Some("192.0.2.0"), "masked to its /24");
    }
    letters
        .iter()
        .map(|(c, kept)| if *kept { *c } else { c.to_ascii_lowercase() })
        .collect()
}

struct Row {
    what: &'static str,
    request: Value,
    /// Per bidder a..g.
    expect: [&'static str; 7],
}

fn rows() -> Vec<Row> {
    let gdpr = |consent: Option<String>| request(json!({"gdpr": 1}), consent, false);
    let us = |regs: Value| request(regs, None, false);
    vec![
        Row {
            what: "GDPR, everything consented, precise geo opted in",
            request: gdpr(Some(tcf("all_consent"))),
            expect: ["IEDGP", "iEdgp", "IEDgp", "-", "-", "-", "-"],
        },
        Row {
            what: "GDPR, no purpose 4, no precise geo",
            request: gdpr(Some(tcf("no_profile_no_geo"))),
            expect: ["iEdgp", "iEdgp", "iEdgp", "-", "-", "-", "-"],
        },
        Row {
            what: "GDPR, publisher restrictions: purpose 2 not allowed for 1, LI required of 3",
            request: gdpr(Some(tcf("restricted"))),
            expect: ["-", "iEdgp", "-", "-", "-", "-", "-"],
        },
        Row {
            what: "GDPR, nothing consented",
            request: gdpr(Some(tcf("nothing"))),
            expect: ["-", "-", "-", "-", "-", "-", "-"],
        },
        Row {
            what: "GDPR, no consent string",
            request: gdpr(None),
            expect: ["-", "-", "-", "-", "-", "-", "-"],
        },
        Row {
            what: "GDPR, a consent string that does not decode",
            request: gdpr(Some("CPnot-a-consent-string".to_owned())),
            expect: ["-", "-", "-", "-", "-", "-", "-"],
        },
        Row {
            what: "GDPR from GPP's TCF section (no regs.gdpr)",
            request: us(json!({"gpp": gpp("tcf_in_gpp"), "gpp_sid": [2]})),
            expect: ["IEDGP", "-", "IEDgp", "-", "-", "-", "-"],
        },
        Row {
            what: "no GDPR; us_privacy opted out of sale",
            request: us(json!({"gdpr": 0, "us_privacy": "1YYN"})),
            expect: ["ieDgp"; 7],
        },
        Row {
            what: "no GDPR; us_privacy not opted out",
            request: us(json!({"gdpr": 0, "us_privacy": "1YNN"})),
            expect: ["IEDGP"; 7],
        },
        Row {
            what: "no GDPR; GPP US national, sale opt-out",
            request: us(json!({"gdpr": 0, "gpp": gpp("usnat_sale_opt_out"), "gpp_sid": [7]})),
            expect: ["ieDgp"; 7],
        },
        Row {
            what: "no GDPR; GPP US national, no opt-out",
            request: us(json!({"gdpr": 0, "gpp": gpp("usnat_no_opt_out"), "gpp_sid": [7]})),
            expect: ["IEDGP"; 7],
        },
        Row {
            what: "no GDPR; GPP California, sharing opt-out",
            request: us(json!({"gdpr": 0, "gpp": gpp("usca_sharing_opt_out"), "gpp_sid": [8]})),
            expect: ["ieDgp"; 7],
        },
        Row {
            what: "no GDPR; gpp_sid names a US section the string lacks: fail closed",
            request: us(json!({"gdpr": 0, "gpp": gpp("usnat_no_opt_out"), "gpp_sid": [8]})),
            expect: ["ieDgp"; 7],
        },
        Row {
            what: "no GDPR; a GPP string that does not decode, naming a US section",
            request: us(json!({"gdpr": 0, "gpp": "DBAB~garbage", "gpp_sid": [7]})),
            expect: ["ieDgp"; 7],
        },
        Row {
            what: "no GDPR; COPPA",
            request: us(json!({"gdpr": 0, "coppa": 1})),
            expect: ["iedgp"; 7],
        },
        Row {
            what: "no GDPR; device lmt",
            request: request(json!({"gdpr": 0}), None, true),
            expect: ["iedgp"; 7],
        },
        Row {
            what: "GDPR flag absent: the host default (applies) with no string",
            request: request(json!({}), None, false),
            expect: ["-"; 7],
        },
    ]
}

async fn exchange_with_vendors(extra: &str) -> (RunningExchange, Vec<ScriptedBidder>) {
    let gvl = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/privacy/gvl.json"
    );
    let mut text = format!("[privacy]\ngvl_file = \"{gvl}\"\n{extra}");
    let mut bidders = Vec::new();
    for (name, vendor) in BIDDERS {
        let b = ScriptedBidder::start(no_bid_for).await;
        text.push_str(&format!(
            "\n[[bidders]]\nname = \"{name}\"\nendpoint = \"{}\"\n",
            b.endpoint()
        ));
        if let Some(v) = vendor {
            text.push_str(&format!("gvl_vendor_id = {v}\n"));
        }
        bidders.push(b);
    }
    (exchange_from_toml(&text).await, bidders)
}

fn no_bid_for(_: &openrtb::BidRequest) -> Script {
    no_bid()
}

#[tokio::test]
async fn each_bidder_receives_exactly_what_the_law_allows_it() {
    let (ex, bidders) = exchange_with_vendors("").await;
    let mut failures = Vec::new();
    for row in rows() {
        for b in &bidders {
            b.requests.lock().unwrap().clear();
        }
        let (status, _) = auction(ex.addr, &row.request).await;
        assert_eq!(status, 204, "{}: no bidder bids", row.what);
        let got: Vec<String> = bidders
            .iter()
            .map(|b| {
                let requests = b.requests.lock().unwrap();
                assert!(requests.len() <= 1, "{}: called once at most", row.what);
                requests.first().map_or("-".to_owned(), received)
            })
            .collect();
        if got != row.expect {
            failures.push(format!(
                "{}:\n   expected {:?}\n   received {:?}",
                row.what, row.expect, got
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    let text = ex.metrics.render();
    for line in [
        r#"gavel_exchange_privacy_not_called_total{bidder="f",reason="no_vendor_id"}"#,
        r#"gavel_exchange_privacy_not_called_total{bidder="d",reason="unknown_vendor"}"#,
        r#"gavel_exchange_privacy_not_called_total{bidder="e",reason="no_basis"}"#,
        r#"gavel_exchange_privacy_not_called_total{bidder="a",reason="no_consent"}"#,
        r#"gavel_exchange_privacy_actions_total{bidder="b",action="ids_removed"}"#,
        r#"gavel_exchange_privacy_actions_total{bidder="a",action="geo_coarsened"}"#,
    ] {
        let count = text
            .lines()
            .find(|l| l.starts_with(line))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        assert!(count > 0, "{line} counted: {text}");
    }
}

#[tokio::test]
async fn a_sellers_gdpr_default_decides_for_requests_without_the_flag() {
    let keys = testkit::TempDir::new("privacy-sellers");
    std::fs::write(keys.path().join("us.keys"), "us-seller-key-0123456789abc\n").unwrap();
    let (ex, bidders) = exchange_with_vendors(&format!(
        "[[sellers]]\nname = \"us\"\nkey_file = \"{}\"\ngdpr_default = false\n",
        keys.path().join("us.keys").display()
    ))
    .await;
    let body = request(json!({}), None, false).to_string();
    let (status, _) = testkit::http::call_as(
        ex.addr,
        "POST",
        exchange::AUCTION_PATH,
        Some("us-seller-key-0123456789abc"),
        &body,
    )
    .await;
    assert_eq!(status, 204);
    let called = bidders
        .iter()
        .filter(|b| !b.requests.lock().unwrap().is_empty())
        .count();
    assert_eq!(
        called, 7,
        "GDPR does not apply for this seller: everyone called"
    );
}

#[tokio::test]
async fn without_a_vendor_list_tcf_is_not_enforced_but_us_law_is() {
    let mut bidders = Vec::new();
    let mut text = String::new();
    for (name, _) in BIDDERS {
        let b = ScriptedBidder::start(no_bid_for).await;
        text.push_str(&format!(
            "\n[[bidders]]\nname = \"{name}\"\nendpoint = \"{}\"\n",
            b.endpoint()
        ));
        bidders.push(b);
    }
    let ex = exchange_from_toml(&text).await;
    let (status, _) = auction(ex.addr, &request(json!({"gdpr": 1}), None, false)).await;
    assert_eq!(status, 204);
    for b in &bidders {
        assert_eq!(received(&b.requests.lock().unwrap()[0]), "IEDGP");
    }
    let (status, _) = auction(
        ex.addr,
        &request(json!({"gdpr": 1, "coppa": 1}), None, false),
    )
    .await;
    assert_eq!(status, 204);
    for b in &bidders {
        assert_eq!(received(&b.requests.lock().unwrap()[1]), "iedgp");
    }
}

#[tokio::test]
async fn a_2_5_bidder_gets_the_same_removals_in_its_own_places() {
    let gvl = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/privacy/gvl.json"
    );
    let b = ScriptedBidder::start(no_bid_for).await;
    let ex = exchange_from_toml(&format!(
        "[privacy]\ngvl_file = \"{gvl}\"\n[[bidders]]\nname = \"b\"\nendpoint = \"{}\"\n\
         gvl_vendor_id = 2\nopenrtb_version = \"2.5\"\n",
        b.endpoint()
    ))
    .await;
    let (status, _) = auction(
        ex.addr,
        &request(json!({"gdpr": 1}), Some(tcf("all_consent")), false),
    )
    .await;
    assert_eq!(status, 204);
    let got: Value = serde_json::from_slice(&b.wire.lock().unwrap()[0].json).unwrap();
    assert_eq!(got["regs"]["ext"]["gdpr"], 1);
    assert_eq!(got["user"]["ext"]["consent"], tcf("all_consent"));
    assert!(
        got["user"]["ext"]["eids"].is_array(),
        "purpose 2 by LI: eids pass"
    );
    assert!(
        got["user"].get("buyeruid").is_none(),
        "no purpose 4: no ids"
    );
    assert_eq!(got["device"]["ip"], "192.0.2.0");
}

#[tokio::test]
async fn a_2_5_bidder_gets_the_gdpr_flag_and_consent_gpp_alone_carried() {
    let b = ScriptedBidder::start(no_bid_for).await;
    let ex = exchange_from_toml(&format!(
        "[[bidders]]\nname = \"b\"\nendpoint = \"{}\"\nopenrtb_version = \"2.5\"\n",
        b.endpoint()
    ))
    .await;
    let (status, _) = auction(
        ex.addr,
        &request(
            json!({"gpp": gpp("tcf_in_gpp"), "gpp_sid": [2]}),
            None,
            false,
        ),
    )
    .await;
    assert_eq!(status, 204);
    let got: Value = serde_json::from_slice(&b.wire.lock().unwrap()[0].json).unwrap();
    assert_eq!(got["regs"]["ext"]["gdpr"], 1, "{got}");
    let section = gpp("tcf_in_gpp").split_once('~').unwrap().1.to_owned();
    assert_eq!(got["user"]["ext"]["consent"], section);
    assert!(got["regs"].get("gpp").is_none(), "2.5 has no GPP");
}

#[tokio::test]
async fn a_vendor_list_is_reloaded_and_a_bad_one_keeps_the_last_good() {
    let dir = testkit::TempDir::new("gvl-reload");
    let gvl_path = dir.path().join("gvl.json");
    let good = include_str!("../fixtures/privacy/gvl.json");
    std::fs::write(&gvl_path, good).unwrap();
    let b = ScriptedBidder::start(no_bid_for).await;
    let config = dir.path().join("exchange.toml");
    std::fs::write(
        &config,
        format!(
            "[privacy]\ngvl_file = \"gvl.json\"\n[[bidders]]\nname = \"a\"\nendpoint = \"{}\"\ngvl_vendor_id = 1\n",
            b.endpoint()
        ),
    )
    .unwrap();
    let ex = exchange_from_file(&config).await;
    let consented = request(json!({"gdpr": 1}), Some(tcf("all_consent")), false);
    let called = |n: usize| {
        let b = b.clone();
        move || assert_eq!(b.requests.lock().unwrap().len(), n)
    };
    assert_eq!(auction(ex.addr, &consented).await.0, 204);
    called(1)();
    // A list that does not parse: the reload is refused and vendor 1 is still known.
    std::fs::write(&gvl_path, "{ not a vendor list").unwrap();
    assert!(ex.exchange.reload().await.is_err());
    assert_eq!(auction(ex.addr, &consented).await.0, 204);
    called(2)();
    // A list where vendor 1 is deleted: applied, and vendor 1 is no longer called.
    std::fs::write(
        &gvl_path,
        good.replace(
            r#""specialFeatures": [1]},"#,
            r#""specialFeatures": [1], "deletedDate": "2026-11-20T00:00:00Z"},"#,
        ),
    )
    .unwrap();
    ex.exchange.reload().await.unwrap();
    assert_eq!(auction(ex.addr, &consented).await.0, 204);
    called(2)();
    let text = ex.metrics.render();
    assert!(
        text.contains(
            r#"gavel_exchange_privacy_not_called_total{bidder="a",reason="unknown_vendor"} 1"#
        ),
        "{text}"
    );
}
