//! The exchange end to end over real loopback sockets: pricing, floors, deals, blocks, no-bids,
//! slow and garbage bidders, notices, and the HTTP error answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use exchange::metrics::{BidderOutcome, RequestOutcome};
use serde_json::{Value, json};
use support::*;

/// The winning price in CPM micros, decoded as the exchange decodes prices.
fn price_of(response: &Value) -> i64 {
    let price: openrtb::Price =
        serde_json::from_value(response["seatbid"][0]["bid"][0]["price"].clone()).unwrap();
    price.micros()
}

async fn fixed_bidder(seat: &'static str, price: f64) -> ScriptedBidder {
    ScriptedBidder::start(move |r| bids(r, seat, |imp| json!({"id": format!("{seat}-{imp}"), "impid": imp, "price": price, "adomain": [format!("{seat}.example")]}))).await
}

#[tokio::test]
async fn second_price_winner_pays_second_bid_plus_increment() {
    let a = fixed_bidder("a", 2.00).await;
    let b = fixed_bidder("b", 1.50).await;
    let ex = exchange("", &[("a", a.endpoint()), ("b", b.endpoint())]).await;
    let (status, body) = auction(ex.addr, &banner_request(0.5)).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    assert_eq!(body["id"], "req-1", "the seller's id comes back");
    assert_eq!(body["seatbid"][0]["seat"], "a");
    assert_eq!(price_of(&body), 1_510_000);
    assert_eq!(body["seatbid"][0]["bid"][0]["ext"]["origbidprice"], 2.0);
    assert_eq!(body["cur"], "USD");
}

#[tokio::test]
async fn first_price_winner_pays_its_bid() {
    let a = fixed_bidder("a", 2.00).await;
    let b = fixed_bidder("b", 1.50).await;
    let ex = exchange("", &[("a", a.endpoint()), ("b", b.endpoint())]).await;
    let mut req = banner_request(0.5);
    req["at"] = json!(1);
    let (status, body) = auction(ex.addr, &req).await;
    assert_eq!(status, 200);
    assert_eq!(price_of(&body.unwrap()), 2_000_000);
}

#[tokio::test]
async fn floor_filters_bids_and_sets_the_second_price() {
    let a = fixed_bidder("a", 3.00).await;
    let b = fixed_bidder("b", 1.00).await;
    let ex = exchange("", &[("a", a.endpoint()), ("b", b.endpoint())]).await;
    // b is under the floor: a pays the floor plus the increment, not b's price.
    let (status, body) = auction(ex.addr, &banner_request(2.0)).await;
    assert_eq!(status, 200);
    assert_eq!(price_of(&body.unwrap()), 2_010_000);
    let text = ex_metrics_text(&ex);
    assert!(
        text.contains("gavel_exchange_bid_rejections_total{bidder=\"b\",reason=\"below_floor\"} 1"),
        "{text}"
    );
    // Nobody reaches a floor of 5: no winner, 204.
    let (status, body) = auction(ex.addr, &banner_request(5.0)).await;
    assert_eq!(status, 204);
    assert!(body.is_none());
}

fn ex_metrics_text(ex: &RunningExchange) -> String {
    ex.metrics.render()
}

#[tokio::test]
async fn deal_bid_uses_deal_floor_and_deal_auction_type() {
    let deal_bidder = ScriptedBidder::start(|r| {
        bids(
            r,
            "agency1",
            |imp| json!({"id": "d1", "impid": imp, "price": 3.0, "dealid": "DEAL-1"}),
        )
    })
    .await;
    let open_bidder = fixed_bidder("open", 4.0).await;
    let ex = exchange(
        "",
        &[
            ("deal", deal_bidder.endpoint()),
            ("open", open_bidder.endpoint()),
        ],
    )
    .await;
    let mut req = banner_request(0.1);
    req["imp"][0]["pmp"] = json!({
        "private_auction": 1,
        "deals": [{ "id": "DEAL-1", "bidfloor": 2.5, "at": 1, "wseat": ["agency1"] }]
    });
    let (status, body) = auction(ex.addr, &req).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    // The open bid is refused in a private auction; the deal is first price (deal at=1).
    assert_eq!(body["seatbid"][0]["bid"][0]["dealid"], "DEAL-1");
    assert_eq!(price_of(&body), 3_000_000);

    // Below the deal floor: refused, and with no open bids allowed nobody wins.
    let mut low = req.clone();
    low["imp"][0]["pmp"]["deals"][0]["bidfloor"] = json!(3.5);
    let (status, _) = auction(ex.addr, &low).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn blocked_categories_and_advertisers_are_dropped() {
    let blocked_cat = ScriptedBidder::start(|r| bids(r, "c", |imp| json!({"id": "c", "impid": imp, "price": 5.0, "cat": ["IAB25"], "adomain": ["fine.example"]}))).await;
    let blocked_adv = ScriptedBidder::start(|r| {
        bids(
            r,
            "v",
            |imp| json!({"id": "v", "impid": imp, "price": 4.0, "adomain": ["Casino.example"]}),
        )
    })
    .await;
    let clean = fixed_bidder("ok", 1.0).await;
    let ex = exchange(
        "",
        &[
            ("cat", blocked_cat.endpoint()),
            ("adv", blocked_adv.endpoint()),
            ("clean", clean.endpoint()),
        ],
    )
    .await;
    let mut req = banner_request(0.1);
    req["bcat"] = json!(["IAB25"]);
    req["badv"] = json!(["casino.example"]);
    let (status, body) = auction(ex.addr, &req).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    assert_eq!(body["seatbid"][0]["seat"], "ok");
    // Alone among valid bids: pays floor + increment.
    assert_eq!(price_of(&body), 110_000);
}

#[tokio::test]
async fn no_bids_answer_204() {
    let a = ScriptedBidder::start(|_| no_bid()).await;
    let b = ScriptedBidder::start(|r| Script {
        delay: Duration::ZERO,
        status: 200,
        body: json!({"id": r.id, "nbr": 2}).to_string(),
    })
    .await;
    let ex = exchange("", &[("a", a.endpoint()), ("b", b.endpoint())]).await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204);
    assert!(body.is_none());
    assert_eq!(ex.metrics.request_count(RequestOutcome::NoBid), 1);
    assert_eq!(
        ex.metrics
            .bidder(0)
            .unwrap()
            .outcome_count(BidderOutcome::NoBid),
        1
    );
    assert_eq!(
        ex.metrics
            .bidder(1)
            .unwrap()
            .outcome_count(BidderOutcome::NoBid),
        1
    );
}

#[tokio::test]
async fn slow_bidder_is_excluded_and_the_answer_stays_inside_tmax() {
    let fast = fixed_bidder("fast", 1.0).await;
    let slow = ScriptedBidder::start(|r| {
        let mut s = bids(
            r,
            "slow",
            |imp| json!({"id": "s", "impid": imp, "price": 9.0}),
        );
        s.delay = Duration::from_millis(1500);
        s
    })
    .await;
    // The fan-out ends 80 ms before tmax (at the slow bidder's timeout), leaving the answer
    // 80 ms to be built and written: room for a loaded machine, so "not late" is the code's
    // doing, not the scheduler's luck.
    let ex = exchange(
        "[deadline]\nanswer_margin_ms = 80\n",
        &[("fast", fast.endpoint()), ("slow", slow.endpoint())],
    )
    .await;
    let mut req = banner_request(0.1);
    // Wide enough that a loaded CI machine cannot make the fast bidder miss it.
    req["tmax"] = json!(200);
    let started = Instant::now();
    let (status, body) = auction(ex.addr, &req).await;
    let took = started.elapsed();
    assert_eq!(status, 200);
    assert_eq!(body.unwrap()["seatbid"][0]["seat"], "fast");
    // Server side, from when the request was read: not after tmax.
    assert_eq!(ex.metrics.late_answers.get(), 0);
    // Client side, with slack for a loaded test machine: it did not wait for the 1.5 s bidder.
    assert!(
        took < Duration::from_millis(1000),
        "answered in {took:?}, tmax 200 ms"
    );
    assert_eq!(
        ex.metrics
            .bidder(1)
            .unwrap()
            .outcome_count(BidderOutcome::Timeout),
        1
    );
    // The slow bidder was told how long it really had.
    let seen = slow.requests.lock().unwrap()[0].tmax.unwrap();
    assert!((1..=190).contains(&seen), "tmax sent to bidders: {seen}");
}

#[tokio::test]
async fn garbage_answers_are_ignored() {
    let good = fixed_bidder("good", 1.2).await;
    let garbage = ScriptedBidder::start(|_| Script {
        delay: Duration::ZERO,
        status: 200,
        body: "<html>oops".into(),
    })
    .await;
    let wrong_id = ScriptedBidder::start(|_| Script {
        delay: Duration::ZERO,
        status: 200,
        body: json!({"id": "not-this-auction", "seatbid": [{"bid": [{"id": "x", "impid": "1", "price": 50.0}]}]}).to_string(),
    })
    .await;
    let failing = ScriptedBidder::start(|_| Script {
        delay: Duration::ZERO,
        status: 500,
        body: String::new(),
    })
    .await;
    let ex = exchange(
        "",
        &[
            ("good", good.endpoint()),
            ("garbage", garbage.endpoint()),
            ("wrong", wrong_id.endpoint()),
            ("failing", failing.endpoint()),
        ],
    )
    .await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    assert_eq!(body.unwrap()["seatbid"][0]["seat"], "good");
    for i in 1..=3 {
        assert_eq!(
            ex.metrics
                .bidder(i)
                .unwrap()
                .outcome_count(BidderOutcome::Invalid),
            1,
            "bidder {i}"
        );
    }
}

#[tokio::test]
async fn dead_bidder_is_an_error_not_a_failed_auction() {
    // A port nobody listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let good = fixed_bidder("good", 1.0).await;
    let ex = exchange(
        "",
        &[
            ("dead", format!("http://{dead}/bid")),
            ("good", good.endpoint()),
        ],
    )
    .await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    assert_eq!(
        ex.metrics
            .bidder(0)
            .unwrap()
            .outcome_count(BidderOutcome::Error),
        1
    );
}

#[tokio::test]
async fn win_and_billing_notices_are_fired_with_macros_replaced() {
    // A real server that only receives the notices.
    let sink = ScriptedBidder::start(|_| no_bid()).await;
    let host = sink.addr;
    let a = ScriptedBidder::start(move |r| {
        bids(r, "a", |imp| {
            json!({"id": "bid-7", "impid": imp, "price": 2.0, "adid": "ad-9",
                   "adm": "<img src='http://a/imp?p=${AUCTION_PRICE}'>",
                   "nurl": format!("http://{host}/win?a=${{AUCTION_ID}}&i=${{AUCTION_IMP_ID}}&b=${{AUCTION_BID_ID}}&s=${{AUCTION_SEAT_ID}}&ad=${{AUCTION_AD_ID}}&p=${{AUCTION_PRICE}}&c=${{AUCTION_CURRENCY}}"),
                   "burl": format!("http://{host}/bill?p=${{AUCTION_PRICE}}")})
        })
    })
    .await;
    let b = fixed_bidder("b", 1.25).await;
    // Billing on win (the seller default here), and a's notices go to the sink it lists.
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\n\
         [[bidders]]\nname = \"a\"\nendpoint = \"{}\"\nnotice_hosts = [\"{host}\"]\n\
         [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\n",
        a.endpoint(),
        b.endpoint()
    ))
    .await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    let bid = &body["seatbid"][0]["bid"][0];
    assert_eq!(bid["adm"], "<img src='http://a/imp?p=1.26'>");
    for fired in ["nurl", "burl", "lurl"] {
        assert!(
            bid.get(fired).is_none(),
            "the exchange fires {fired}: not handed on ({bid})"
        );
    }
    // Exactly one of each, in any order: a duplicate would be a second charge.
    let mut notices = sink.settled_notices(&ex).await;
    notices.sort();
    let auction_id = a.requests.lock().unwrap()[0].id.clone();
    assert_eq!(
        notices,
        [
            "/bill?p=1.26".to_owned(),
            format!("/win?a={auction_id}&i=1&b=bid-7&s=a&ad=ad-9&p=1.26&c=USD"),
        ]
    );
}

#[tokio::test]
async fn bid_without_adm_gets_markup_from_its_win_notice() {
    let a = ScriptedBidder::start(|_| no_bid()).await;
    let host = a.addr;
    let b = ScriptedBidder::start(move |r| {
        bids(r, "b", |imp| json!({"id": "x", "impid": imp, "price": 1.0, "nurl": format!("http://{host}/win?p=${{AUCTION_PRICE}}")}))
    })
    .await;
    // b's notices go to a's host, which b's configuration lists; b may have its markup fetched.
    let ex = exchange_from_toml(&format!(
        "[[bidders]]\nname = \"a\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\nfetch_markup = true\nnotice_hosts = [\"{host}\"]\n",
        a.endpoint(),
        b.endpoint()
    ))
    .await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    let bid = &body["seatbid"][0]["bid"][0];
    assert_eq!(bid["adm"], "<div>markup from nurl</div>");
    assert!(
        bid.get("nurl").is_none(),
        "an nurl already called is not handed on: {bid}"
    );
    let notices = a.settled_notices(&ex).await;
    assert_eq!(
        notices,
        vec!["/win?p=0.11".to_string()],
        "nurl called once, for the markup"
    );
}

#[tokio::test]
async fn request_is_enriched_for_bidders() {
    let a = fixed_bidder("a", 1.0).await;
    let ex = exchange(
        "[schain]\nasi = \"exchange.example\"\nsid = \"pub-42\"\n",
        &[("a", a.endpoint())],
    )
    .await;
    let mut req = banner_request(0.1);
    req["source"] = json!({"schain": {"complete": 1, "ver": "1.0", "nodes": [{"asi": "ssp.example", "sid": "9", "hp": 1}]}});
    let (status, _) = auction(ex.addr, &req).await;
    assert_eq!(status, 200);
    let seen = a.requests.lock().unwrap()[0].clone();
    assert_ne!(seen.id, "req-1", "bidders see the exchange's auction id");
    let nodes = seen.source.unwrap().schain.unwrap().nodes.unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[1].asi.as_deref(), Some("exchange.example"));
    assert_eq!(nodes[1].sid.as_deref(), Some("pub-42"));
    assert_eq!(nodes[1].rid.as_deref(), Some("req-1"));
    // Unknown fields and ext pass through untouched.
    assert_eq!(seen.ext.unwrap().get(), r#"{"seller":{"kept":true}}"#);
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let ex = exchange("[http]\nmax_body_bytes = 4096\n", &[]).await;
    let cases: &[(&str, &str, u16, &str)] = &[
        ("POST", "{not json", 400, "invalid bid request"),
        (
            "POST",
            r#"{"id":"x","imp":[]}"#,
            400,
            "imp: at least one imp",
        ),
        (
            "POST",
            r#"{"id":"","imp":[{"id":"1"}]}"#,
            400,
            "id: must be a non-empty",
        ),
        (
            "POST",
            r#"{"id":"x","imp":[{"id":"1","banner":{"w":1,"h":1}},{"id":"1","banner":{"w":1,"h":1}}]}"#,
            400,
            "imp[1].id",
        ),
        (
            "POST",
            r#"{"id":"x","imp":[{"id":"1","bidfloor":"cheap"}]}"#,
            400,
            "bidfloor",
        ),
        (
            "POST",
            r#"{"id":"x","tmax":0,"imp":[{"id":"1","banner":{"w":1,"h":1}}]}"#,
            400,
            "tmax",
        ),
        (
            "POST",
            r#"{"id":"x","imp":[{"id":"1","bidfloor":1,"bidfloorcur":"EUR","banner":{"w":1,"h":1}}]}"#,
            400,
            "bidfloorcur",
        ),
    ];
    for (method, body, status, needle) in cases {
        let (got, _, text) = send(ex.addr, method, exchange::AUCTION_PATH, body.to_string()).await;
        let text = String::from_utf8_lossy(&text);
        assert_eq!(got.as_u16(), *status, "{body} -> {text}");
        let json: Value = serde_json::from_str(&text).unwrap();
        assert!(
            json["error"].as_str().unwrap().contains(needle),
            "{body} -> {text}"
        );
    }
    let (got, headers, _) = send(ex.addr, "GET", exchange::AUCTION_PATH, "").await;
    assert_eq!(got, 405);
    assert_eq!(
        headers["allow"], "POST, OPTIONS",
        "the preflight is answered too"
    );
    let (got, _, _) = send(ex.addr, "POST", exchange::AUCTION_PATH, vec![b' '; 5000]).await;
    assert_eq!(got, 413);
    let (got, _, _) = send(ex.addr, "GET", "/nope", "").await;
    assert_eq!(got, 404);
    let (got, _, body) = send(ex.addr, "GET", "/healthz", "").await;
    assert_eq!((got.as_u16(), &body[..]), (200, &b"ok\n"[..]));
    assert_eq!(
        ex.metrics.request_count(RequestOutcome::BadRequest),
        cases.len() as u64
    );
    assert_eq!(ex.metrics.request_count(RequestOutcome::TooLarge), 1);
}

#[tokio::test]
async fn metrics_are_served_in_prometheus_text_on_the_admin_listener_only() {
    let a = fixed_bidder("a", 1.0).await;
    let ex = exchange("", &[("a", a.endpoint())]).await;
    auction(ex.addr, &banner_request(0.1)).await;
    // The auction port names no seller, bidder or revenue to whoever reaches it.
    let (status, _, body) = send(ex.addr, "GET", "/metrics", "").await;
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("admin_listen"));
    let (status, headers, body) = send(ex.admin, "GET", "/metrics", "").await;
    assert_eq!(status, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.contains("gavel_exchange_requests_total{outcome=\"bid\"} 1"));
    assert!(text.contains("gavel_exchange_wins_total{bidder=\"a\"} 1"));
    assert!(text.contains("gavel_exchange_auction_duration_seconds_count{} 1"));
}

#[tokio::test]
async fn loss_notices_carry_the_loss_reason_when_enabled() {
    let sink = ScriptedBidder::start(|_| no_bid()).await;
    let host = sink.addr;
    let winner = fixed_bidder("w", 3.0).await;
    let loser = ScriptedBidder::start(move |r| {
        bids(r, "l", |imp| json!({"id": "l", "impid": imp, "price": 1.0, "lurl": format!("http://{host}/loss?r=${{AUCTION_LOSS}}&m=${{AUCTION_MIN_TO_WIN}}")}))
    })
    .await;
    let under_floor = ScriptedBidder::start(move |r| {
        bids(r, "u", |imp| json!({"id": "u", "impid": imp, "price": 0.05, "lurl": format!("http://{host}/loss?r=${{AUCTION_LOSS}}")}))
    })
    .await;
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_lurl = true\n\
         [[bidders]]\nname = \"w\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"l\"\nendpoint = \"{}\"\nnotice_hosts = [\"{host}\"]\n\
         [[bidders]]\nname = \"u\"\nendpoint = \"{}\"\nnotice_hosts = [\"{host}\"]\n",
        winner.endpoint(),
        loser.endpoint(),
        under_floor.endpoint()
    ))
    .await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    let mut notices = sink.settled_notices(&ex).await;
    notices.sort();
    assert_eq!(
        notices,
        vec!["/loss?r=100".to_string(), "/loss?r=102&m=1.01".to_string()]
    );
}

#[tokio::test]
async fn fixed_price_deal_pays_the_deal_price() {
    let a = ScriptedBidder::start(|r| {
        bids(
            r,
            "a",
            |imp| json!({"id": "a", "impid": imp, "price": 6.0, "dealid": "FIXED"}),
        )
    })
    .await;
    let ex = exchange("", &[("a", a.endpoint())]).await;
    let mut req = banner_request(0.1);
    req["imp"][0]["pmp"] = json!({"deals": [{ "id": "FIXED", "bidfloor": 4.0, "at": 3 }]});
    let (status, body) = auction(ex.addr, &req).await;
    assert_eq!(status, 200);
    assert_eq!(price_of(&body.unwrap()), 4_000_000);
}

#[tokio::test]
async fn a_request_without_schain_gets_one_that_does_not_claim_completeness() {
    let a = fixed_bidder("a", 1.0).await;
    let ex = exchange("", &[("a", a.endpoint())]).await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    let seen = a.requests.lock().unwrap()[0].clone();
    let chain = seen.source.unwrap().schain.unwrap();
    assert_eq!(chain.complete, Some(0));
    assert_eq!(chain.nodes.unwrap().len(), 1);
    assert_eq!(
        seen.tmax.map(|t| (1..=90).contains(&t)),
        Some(true),
        "tmax {:?}",
        seen.tmax
    );
}

#[tokio::test]
async fn each_imp_has_its_own_auction_and_winners_are_grouped_by_seat() {
    // a is strong on imp 1, b on imp 2; each pays the other's bid plus the increment.
    let a = ScriptedBidder::start(|r| bids(r, "a", |imp| json!({"id": format!("a{imp}"), "impid": imp, "price": if imp == "1" { 3.0 } else { 1.0 }}))).await;
    let b = ScriptedBidder::start(|r| bids(r, "b", |imp| json!({"id": format!("b{imp}"), "impid": imp, "price": if imp == "1" { 2.0 } else { 4.0 }}))).await;
    let ex = exchange("", &[("a", a.endpoint()), ("b", b.endpoint())]).await;
    let mut req = banner_request(0.1);
    req["imp"] = json!([
        { "id": "1", "bidfloor": 0.1, "banner": { "w": 300, "h": 250 } },
        { "id": "2", "bidfloor": 0.1, "banner": { "w": 728, "h": 90 } }
    ]);
    let (status, body) = auction(ex.addr, &req).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    let seatbids = body["seatbid"].as_array().unwrap();
    assert_eq!(seatbids.len(), 2);
    let win = |seat: &str| {
        let sb = seatbids.iter().find(|s| s["seat"] == seat).unwrap();
        let bid = &sb["bid"][0];
        let price: openrtb::Price = serde_json::from_value(bid["price"].clone()).unwrap();
        (bid["impid"].as_str().unwrap().to_owned(), price.micros())
    };
    assert_eq!(win("a"), ("1".to_owned(), 2_010_000));
    assert_eq!(win("b"), ("2".to_owned(), 1_010_000));
}
