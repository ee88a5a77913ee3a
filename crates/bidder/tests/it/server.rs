//! The bidder over real loopback sockets with the in-memory ledger: bids and their notices,
//! budget exhaustion, input errors, and campaign reloads (good and bad files) while serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{TestBidder, banner_request, campaign_json};
use serde_json::Value;

#[tokio::test]
async fn bids_carry_notice_urls_that_settle_the_budget() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 0.01, 2.0, "asap")), "").await;
    let (status, body) = b.post_bid(&banner_request("r1", 300, 250, 0.5)).await;
    assert_eq!(status, 200, "{body}");
    let resp: Value = serde_json::from_str(&body).unwrap();
    let bid = &resp["seatbid"][0]["bid"][0];
    assert_eq!(bid["impid"], "1");
    assert_eq!(bid["price"], 2.0);
    assert_eq!(bid["cid"], "c1");
    assert_eq!(bid["crid"], "cr1");
    assert_eq!(bid["adomain"][0], "shop.example");
    let nurl = bid["nurl"].as_str().unwrap();
    assert!(
        nurl.contains("/notice/win?") && nurl.contains("${AUCTION_PRICE}"),
        "{nurl}"
    );
    assert!(bid["burl"].as_str().unwrap().contains("/notice/bill?"));
    assert!(bid["lurl"].as_str().unwrap().contains("/notice/loss?"));

    // While the notice is outstanding, the bid's full price is reserved.
    let c = b.campaign("c1").await;
    assert_eq!(c["nanos"]["reserved"], 2_000_000);
    assert_eq!(c["nanos"]["spent"], 0);

    // Win at a clearing price of 1.5, delivered twice, then the billing notice: charged once.
    let win = nurl.replace("${AUCTION_PRICE}", "1.5");
    assert_eq!(b.notice(&win).await.0, 204);
    assert_eq!(b.notice(&win).await.0, 204);
    let bill = bid["burl"]
        .as_str()
        .unwrap()
        .replace("${AUCTION_PRICE}", "1.5");
    assert_eq!(b.notice(&bill).await.0, 204);
    let c = b.campaign("c1").await;
    assert_eq!(c["nanos"]["spent"], 1_500_000);
    assert_eq!(c["nanos"]["reserved"], 0);
    assert_eq!(c["nanos"]["available"], 10_000_000 - 1_500_000);
    assert_eq!(c["wins"], 1);
    assert_eq!(c["bids"], 1);

    // A price above the bid is refused (403, before the ledger) and charges nothing.
    let (status, body) = b.post_bid(&banner_request("r2", 300, 250, 0.5)).await;
    assert_eq!(status, 200, "{body}");
    let resp: Value = serde_json::from_str(&body).unwrap();
    let bid = &resp["seatbid"][0]["bid"][0];
    let forged = bid["nurl"]
        .as_str()
        .unwrap()
        .replace("${AUCTION_PRICE}", "2.5");
    assert_eq!(b.notice(&forged).await.0, 403);
    // The loss notice releases the reservation.
    let loss = bid["lurl"]
        .as_str()
        .unwrap()
        .replace("${AUCTION_LOSS}", "102");
    assert_eq!(b.notice(&loss).await.0, 204);
    let c = b.campaign("c1").await;
    assert_eq!(c["nanos"]["spent"], 1_500_000);
    assert_eq!(c["nanos"]["reserved"], 0);

    let metrics = b.metrics_page().await;
    assert!(
        metrics.contains("gavel_bidder_notices_total{kind=\"win\",outcome=\"duplicate\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gavel_bidder_notices_total{kind=\"win\",outcome=\"refused\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gavel_bidder_notices_refused_total{reason=\"above_bid\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn spend_stops_at_the_budget() {
    // 0.01 units at CPM 2 = exactly 5 impressions.
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 0.01, 2.0, "asap")), "").await;
    let mut bids = 0;
    for i in 0..20 {
        let (status, body) = b
            .post_bid(&banner_request(&format!("r{i}"), 300, 250, 0.1))
            .await;
        if status == 200 {
            bids += 1;
            let resp: Value = serde_json::from_str(&body).unwrap();
            let nurl = resp["seatbid"][0]["bid"][0]["nurl"]
                .as_str()
                .unwrap()
                .to_owned();
            assert_eq!(
                b.notice(&nurl.replace("${AUCTION_PRICE}", "2")).await.0,
                204
            );
        } else {
            assert_eq!(status, 204, "{body}");
        }
    }
    assert_eq!(bids, 5);
    let c = b.campaign("c1").await;
    assert_eq!(c["nanos"]["spent"], 10_000_000);
    assert_eq!(c["nanos"]["available"], 0);
}

#[tokio::test]
async fn floors_sizes_and_bad_input() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 1.0, 2.0, "asap")), "").await;
    // Floor above the bid: no bid.
    assert_eq!(b.post_bid(&banner_request("r", 300, 250, 3.0)).await.0, 204);
    // A size no creative has: no bid.
    assert_eq!(b.post_bid(&banner_request("r", 728, 90, 0.1)).await.0, 204);
    // Broken JSON and invalid requests: 400 naming the problem.
    let (status, body) = b.post_bid("{\"id\": ").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = b.post_bid("{\"id\": \"x\", \"imp\": []}").await;
    assert_eq!(status, 400);
    assert!(body.contains("imp"), "{body}");
    // A tmax of zero or less: 400, as at the exchange (one deadline rule), and nothing bid.
    for tmax in ["0", "-5"] {
        let request = banner_request("t", 300, 250, 0.1)
            .replace("\"tmax\": 100", &format!("\"tmax\": {tmax}"));
        let (status, body) = b.post_bid(&request).await;
        assert_eq!(status, 400, "tmax {tmax}: {body}");
        assert!(body.contains("tmax must be a positive number"), "{body}");
    }
    assert_eq!(b.campaign("c1").await["bids"], 0);
    // Too large: 413.
    let big = format!("{{\"id\": \"{}\"}}", "x".repeat(300 * 1024));
    assert_eq!(b.post_bid(&big).await.0, 413);
    // Wrong method and unknown path.
    assert_eq!(b.get("/openrtb2/bid").await.0, 405);
    assert_eq!(b.get("/nope").await.0, 404);
    // A notice without its ids.
    assert_eq!(b.get("/notice/win?price=1").await.0, 400);
    // The campaign still bids afterwards.
    assert_eq!(b.post_bid(&banner_request("r", 300, 250, 0.1)).await.0, 200);
}

#[tokio::test]
async fn reloads_apply_good_files_and_keep_the_last_good_one() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 1.0, 2.0, "asap")), "").await;
    // A file that fails validation: refused with the reason, c1 keeps serving.
    b.write_campaigns(&format!("[{}]", campaign_json("c1", -1.0, 2.0, "asap")));
    let (status, body) = b.admin_call("POST", "/admin/reload").await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("budget"), "{body}");
    assert_eq!(b.post_bid(&banner_request("r", 300, 250, 0.1)).await.0, 200);
    // Truncated garbage: the same.
    b.write_campaigns("[{\"id\": \"c1\", \"bud");
    assert_eq!(b.admin_call("POST", "/admin/reload").await.0, 422);
    assert_eq!(b.post_bid(&banner_request("r", 300, 250, 0.1)).await.0, 200);

    // A good file, picked up by the watcher without any call: c2 at a higher price.
    b.write_campaigns(&format!(
        "[{}, {}]",
        campaign_json("c1", 1.0, 2.0, "asap"),
        campaign_json("c2", 1.0, 3.0, "asap")
    ));
    let mut price = Value::Null;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (status, body) = b.post_bid(&banner_request("r", 300, 250, 0.1)).await;
        assert_eq!(status, 200);
        let resp: Value = serde_json::from_str(&body).unwrap();
        price = resp["seatbid"][0]["bid"][0]["price"].clone();
        if price == 3.0 {
            break;
        }
    }
    assert_eq!(price, 3.0, "the watcher did not apply the new file");
    let all = b.admin().await;
    assert_eq!(all["campaigns"].as_array().map(Vec::len), Some(2));
    // Each bad file was refused at least once (the watcher may have seen it too).
    let metrics = b.metrics_page().await;
    let failed: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gavel_bidder_campaign_reloads_total{outcome=\"failed\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(failed >= 2, "{metrics}");
}

#[tokio::test]
async fn a_bad_file_at_start_is_refused_with_its_reason() {
    let dir = common::TempDir::new("bad-start");
    let campaigns = dir.join("campaigns.json");
    std::fs::write(&campaigns, "[{\"id\": \"\"}]").unwrap();
    let config = bidder::BidderConfig::from_toml(&format!(
        "campaigns = {:?}\nsecurity.sign_notices = false\n",
        campaigns.display().to_string()
    ))
    .unwrap();
    let err = bidder::Bidder::start(config)
        .await
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_deref().is_some_and(|e| e.starts_with("campaigns:")),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_examples_load_and_bid() {
    // As a user would run them: the example files, with a notice key created beside them.
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let dir = common::TempDir::new("examples");
    for file in ["bidder.toml", "campaigns.json"] {
        std::fs::copy(examples.join(file), dir.join(file)).unwrap();
    }
    testkit::secrets::security_toml(dir.path());
    let mut config = bidder::BidderConfig::load(&dir.join("bidder.toml")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    config.front.listen = addr;
    let b = bidder::Bidder::start(config).await.unwrap();
    tokio::spawn(async move { b.serve(listener, std::future::pending()).await });
    let request = banner_request("r", 300, 250, 0.1);
    let (status, body) = common::call(addr, "POST", bidder::BID_PATH, &request).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_request_that_does_not_allow_the_budget_currency_gets_no_bid() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 1.0, 2.0, "asap")), "").await;
    let request = |cur: &str, floorcur: &str| {
        banner_request("r", 300, 250, 0.1)
            .replace("\"cur\": [\"USD\"]", &format!("\"cur\": {cur}"))
            .replace(
                "\"bidfloorcur\": \"USD\"",
                &format!("\"bidfloorcur\": \"{floorcur}\""),
            )
    };
    // EUR only (floor in EUR): valid, but our budgets are USD.
    let (status, body) = b.post_bid(&request("[\"EUR\"]", "EUR")).await;
    assert_eq!(status, 204, "{body}");
    // USD allowed but the floor is in EUR: not comparable, no bid.
    assert_eq!(
        b.post_bid(&request("[\"EUR\", \"USD\"]", "EUR")).await.0,
        204
    );
    let metrics = b.metrics_page().await;
    assert!(
        metrics.contains("gavel_bidder_no_bids_other_currency_total 2"),
        "{metrics}"
    );
    assert_eq!(b.campaign("c1").await["bids"], 0, "nothing reserved");
    // USD among the allowed ones: a bid, priced in USD.
    let (status, body) = b.post_bid(&request("[\"USD\", \"EUR\"]", "USD")).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["cur"], "USD");
    // A bidder whose budgets are in EUR bids on EUR requests only.
    let eur = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 1.0, 2.0, "asap")),
        "currency = \"EUR\"\n",
    )
    .await;
    assert_eq!(
        eur.post_bid(&banner_request("r", 300, 250, 0.1)).await.0,
        204
    );
    assert_eq!(eur.post_bid(&request("[\"EUR\"]", "EUR")).await.0, 200);
}

#[tokio::test]
async fn framing_a_proxy_might_read_otherwise_is_refused_on_both_ports() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")), "").await;
    testkit::http::assert_strict_framing(b.addr, bidder::BID_PATH).await;
    testkit::http::assert_strict_framing(b.addr, "/notice/win").await;
    testkit::http::assert_strict_framing(b.admin_addr, "/admin/reload").await;
}

/// An exchange with `gzip = true` for this bidder sends its bid requests gzipped: they are
/// inflated and bid on; a coding the bidder does not read is 415.
#[tokio::test]
async fn a_gzip_bid_request_is_bid_on_and_another_coding_refused() {
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 100.0, 2.0, "asap")),
        "",
    )
    .await;
    let body = banner_request("gz-1", 300, 250, 0.1);
    let send = |coding: &'static str, body: Vec<u8>| async move {
        let mut wire = format!(
            "POST {} HTTP/1.1\r\nHost: b\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            bidder::BID_PATH,
            body.len()
        )
        .into_bytes();
        wire.extend_from_slice(&body);
        testkit::http::raw(b.addr, &wire, Duration::from_secs(5))
            .await
            .0
    };
    let gzipped = upstream::gzip::compress(body.as_bytes()).unwrap().to_vec();
    let answer = send("gzip", gzipped).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"id\":\"gz-1\""), "{answer}");
    let answer = send("br", body.into_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 415"), "{answer}");
}
