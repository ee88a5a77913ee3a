//! What the exchange keeps of an auction: the record (`records::AuctionRecord`), shown in the
//! answer's `ext.debug` to a test request or a trusted seller's `ext.prebid.debug`, and written
//! to `[records]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::*;

/// A bidder that bids `price` on every imp, with advertiser `adomain`.
async fn bidding(seat: &'static str, price: f64) -> ScriptedBidder {
    ScriptedBidder::start(move |r| {
        bids(r, seat, |imp| {
            json!({"id": format!("{seat}-{imp}"), "impid": imp, "price": price,
                   "adm": "<div>ad</div>", "adomain": [format!("{seat}.example")]})
        })
    })
    .await
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| {
            format!(
                "{}:{}",
                v["bidder"].as_str().unwrap(),
                v[key].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_test_request_gets_every_bidders_outcome_and_bid_in_its_answer() {
    let high = bidding("high", 3.0).await;
    let low = bidding("low", 2.0).await;
    let under = bidding("under", 0.4).await;
    let silent = ScriptedBidder::start(|_| no_bid()).await;
    let ex = exchange(
        "",
        &[
            ("high", high.endpoint()),
            ("low", low.endpoint()),
            ("under", under.endpoint()),
            ("silent", silent.endpoint()),
        ],
    )
    .await;
    let mut request = banner_request(0.5);
    request["test"] = json!(1);
    request["device"] = json!({"ip": "203.0.113.77", "ifa": "secret-device-id",
                               "geo": {"country": "FRA"}});
    request["user"] = json!({"id": "secret-user-id"});
    let (status, answer) = auction(ex.addr, &request).await;
    assert_eq!(status, 200);
    let answer = answer.unwrap();
    let debug = &answer["ext"]["debug"];
    assert_eq!(answer["seatbid"][0]["bid"][0]["price"], json!(2.01));
    assert_eq!(debug["request_id"], "req-1");
    assert_eq!(debug["seller"], "-");
    assert_eq!(debug["outcome"], "bid");
    assert_eq!(debug["test"], true);
    assert_eq!(
        names(&debug["calls"], "outcome"),
        ["high:bid", "low:bid", "under:bid", "silent:no_bid"]
    );
    assert!(debug["calls"][0]["took_us"].as_u64().unwrap() > 0);
    assert_eq!(
        names(&debug["bids"], "status"),
        ["high:won", "low:lost", "under:below_floor"]
    );
    assert_eq!(debug["bids"][0]["price_micros"], 3_000_000);
    assert_eq!(debug["bids"][0]["adomain"], json!(["high.example"]));
    let win = &debug["wins"][0];
    assert_eq!(win["bidder"], "high");
    assert_eq!(win["bid"], "high-1");
    assert_eq!(win["rule"], "second_price");
    assert_eq!(win["cleared_micros"], 2_010_000);
    assert_eq!(win["charged_micros"], 2_010_000);
    assert_eq!(
        debug["imps"][0],
        json!({"id": "1", "media": "banner", "floor_micros": 500_000})
    );
    // What was for sale, and no personal data: the address cut to its network.
    assert_eq!(
        debug["inventory"],
        json!({"site_domain": "news.example", "country": "FRA", "ip_network": "203.0.113.0"})
    );
    let text = debug.to_string();
    for secret in ["secret-device-id", "secret-user-id", "203.0.113.77"] {
        assert!(!text.contains(secret), "{secret} in the record: {text}");
    }
}

#[tokio::test]
async fn a_test_request_nobody_bids_on_gets_its_detail_in_a_200() {
    let silent = ScriptedBidder::start(|_| no_bid()).await;
    let ex = exchange("", &[("silent", silent.endpoint())]).await;
    let mut request = banner_request(0.5);
    request["test"] = json!(1);
    let (status, answer) = auction(ex.addr, &request).await;
    assert_eq!(status, 200);
    let answer = answer.unwrap();
    assert_eq!(answer["id"], "req-1");
    assert_eq!(answer["seatbid"], json!([]));
    assert_eq!(answer["ext"]["debug"]["outcome"], "no_bid");
    assert_eq!(
        names(&answer["ext"]["debug"]["calls"], "outcome"),
        ["silent:no_bid"]
    );
}

#[tokio::test]
async fn prebid_debug_is_honoured_only_from_a_trusted_seller() {
    let high = bidding("high", 3.0).await;
    let keys = testkit::TempDir::new("debug-sellers");
    std::fs::write(
        keys.path().join("t.keys"),
        "trusted-seller-key-0123456789\n",
    )
    .unwrap();
    std::fs::write(keys.path().join("o.keys"), "other-seller-key-0123456789\n").unwrap();
    let ex = exchange_from_toml(&format!(
        "[[sellers]]\nname = \"trusted\"\nkey_file = \"{}\"\ntrusted_debug = true\n\
         [[sellers]]\nname = \"other\"\nkey_file = \"{}\"\n\
         [[bidders]]\nname = \"high\"\nendpoint = \"{}\"\n",
        keys.path().join("t.keys").display(),
        keys.path().join("o.keys").display(),
        high.endpoint()
    ))
    .await;
    let mut request = banner_request(0.5);
    request["ext"] = json!({"prebid": {"debug": true}});
    let body = request.to_string();
    for (key, shown) in [
        ("trusted-seller-key-0123456789", true),
        ("other-seller-key-0123456789", false),
    ] {
        let path = exchange::AUCTION_PATH;
        let (status, text) = testkit::http::call_as(ex.addr, "POST", path, Some(key), &body).await;
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["ext"]["debug"].is_object(), shown, "{key}: {answer}");
        if shown {
            assert_eq!(answer["ext"]["debug"]["seller"], "trusted");
        }
    }
}

/// `billing_by` says who decides the charge, as the exchange decided it: the seller when it
/// fires the billing notice on render (a bidder that bills on `burl`), the exchange when it
/// fires the only charging notice (a bidder with a `nurl` and no `burl`).
#[tokio::test]
async fn billing_by_is_whoever_fires_the_billing_notice() {
    let with_burl = ScriptedBidder::start(|r| {
        bids(r, "billed", |imp| {
            json!({"id": "b1", "impid": imp, "price": 3.0, "adm": "<div>ad</div>",
                   "nurl": "http://127.0.0.1:9/win?p=${AUCTION_PRICE}",
                   "burl": "http://127.0.0.1:9/bill?p=${AUCTION_PRICE}"})
        })
    })
    .await;
    let nurl_only = ScriptedBidder::start(|r| {
        bids(r, "won", |imp| {
            json!({"id": "n1", "impid": imp, "price": 3.0, "adm": "<div>ad</div>",
                   "nurl": "http://127.0.0.1:9/win?p=${AUCTION_PRICE}"})
        })
    })
    .await;
    for (bidder, expected) in [(&with_burl, "seller"), (&nurl_only, "exchange")] {
        let ex = exchange("", &[("dsp", bidder.endpoint())]).await;
        let mut request = banner_request(0.5);
        request["test"] = json!(1);
        let (status, answer) = auction(ex.addr, &request).await;
        assert_eq!(status, 200);
        let answer = answer.unwrap();
        assert_eq!(
            answer["ext"]["debug"]["wins"][0]["billing_by"], expected,
            "{answer}"
        );
    }
}
