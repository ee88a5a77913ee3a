//! The ledger on Redis as operators run it: a password (`requirepass`) and TLS (`rediss://`
//! with a CA file), on real redis-servers started here, with certificates made by `openssl`.
//! A wrong password or an untrusted certificate stops the start with a message that says so,
//! within the Redis timeout. A Redis with no ledger (it lost its data) gets no bids until an
//! operator opens one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{TestBidder, banner_request, call, campaign_json};
use testkit::{RedisOptions, RedisServer, TempDir};

/// `[ledger]` lines for `url` (per-bid: every bid and notice is a Redis call).
fn ledger_toml(url: &str, extra: &str) -> String {
    format!(
        "[ledger]\nbackend = \"redis\"\nredis_mode = \"per-bid\"\nredis_timeout_ms = 500\nredis_url = \"{url}\"\n{extra}"
    )
}

/// A bid, its win notice charged, the spend read back through Redis.
async fn bid_and_win(b: &TestBidder) {
    let (status, body) = b.post_bid(&banner_request("q1", 300, 250, 0.5)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let nurl = v["seatbid"][0]["bid"][0]["nurl"].as_str().unwrap();
    let win = nurl.replace("${AUCTION_PRICE}", "1.5");
    assert_eq!(call(b.addr, "GET", &win, "").await.0, 204);
    let c = b.campaign("c").await;
    assert_eq!(c["nanos"]["spent"], 1_500_000, "{c}");
}

/// Starts a bidder on `ledger` and returns the start error, bounded in time.
async fn start_error(ledger: &str) -> String {
    let dir = TempDir::new("refused");
    std::fs::write(
        dir.join("campaigns.json"),
        format!("[{}]", campaign_json("c", 10.0, 2.0, "asap")),
    )
    .unwrap();
    let security = testkit::secrets::security_toml(dir.path());
    let text = format!("campaigns = \"campaigns.json\"\n{security}{ledger}");
    std::fs::write(dir.join("bidder.toml"), text).unwrap();
    let config = match bidder::BidderConfig::load(&dir.join("bidder.toml")) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    let started = tokio::time::timeout(Duration::from_secs(10), bidder::Bidder::start(config))
        .await
        .expect("a refused start is an error, never a hang");
    match started {
        Ok(_) => panic!("started against a Redis that should refuse it: {ledger}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_url_authenticates_and_a_wrong_one_stops_the_start() {
    let redis = RedisServer::start_with(&RedisOptions {
        password: Some("s3cr@t-pw".into()),
        ..RedisOptions::default()
    })
    .await;
    let port = redis.port;
    let campaigns = format!("[{}]", campaign_json("c", 10.0, 2.0, "asap"));
    // `@` in the password, percent-encoded.
    let url = format!("redis://:s3cr%40t-pw@127.0.0.1:{port}");
    let b = TestBidder::start(&campaigns, &ledger_toml(&url, "")).await;
    bid_and_win(&b).await;

    let wrong = start_error(&ledger_toml(
        &format!("redis://default:nope@127.0.0.1:{port}"),
        "",
    ))
    .await;
    // The redis crate names a refused AUTH itself (Redis's own WRONGPASS text is not kept).
    assert!(
        wrong.contains("refused the connection") && wrong.contains("authentication failed"),
        "{wrong}"
    );
    assert!(
        !wrong.contains("nope"),
        "the password is never shown: {wrong}"
    );
    let none = start_error(&ledger_toml(&format!("redis://127.0.0.1:{port}"), "")).await;
    assert!(none.contains("NOAUTH"), "{none}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_right_ca_works_and_an_untrusted_certificate_stops_the_start() {
    let certs = TempDir::new("redis-tls");
    let good = testkit::tls::generate(certs.path(), "good");
    let other = testkit::tls::generate(certs.path(), "other");
    let redis = RedisServer::start_with(&RedisOptions {
        tls: Some(good.clone()),
        ..RedisOptions::default()
    })
    .await;
    let tls_addr = redis.tls_addr().unwrap();
    let campaigns = format!("[{}]", campaign_json("c", 10.0, 2.0, "asap"));
    let ca = |p: &std::path::Path| format!("redis_ca_file = \"{}\"\n", p.display());
    let url = format!("rediss://{tls_addr}");
    let b = TestBidder::start(&campaigns, &ledger_toml(&url, &ca(&good.ca))).await;
    bid_and_win(&b).await;

    let untrusted = start_error(&ledger_toml(&url, &ca(&other.ca))).await;
    assert!(
        untrusted.contains("refused") && untrusted.contains("certificate"),
        "{untrusted}"
    );
    let missing_ca = start_error(&ledger_toml(&url, "")).await;
    assert!(missing_ca.contains("ledger.redis_ca_file"), "{missing_ca}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_without_a_ledger_gets_no_bids_until_an_operator_opens_one() {
    let redis = RedisServer::start().await;
    let campaigns = format!("[{}]", campaign_json("c", 10.0, 2.0, "asap"));
    for mode in ["per-bid", "lease"] {
        assert!(redis.raw("FLUSHALL").await.starts_with("+OK"));
        let toml = format!(
            "[ledger]\nbackend = \"redis\"\nredis_mode = \"{mode}\"\nlease_report_ms = 50\nredis_url = \"redis://{}\"\n",
            redis.addr()
        );
        let b = TestBidder::start_without_ledger(&campaigns, &toml).await;
        // Fail closed, and say so: no bid, the gauge at 1, nothing written to Redis.
        let (status, _) = b.post_bid(&banner_request("q0", 300, 250, 0.5)).await;
        assert_eq!(status, 204, "{mode}");
        let metrics = b.metrics_page().await;
        // The sample line: the metric's HELP text also begins "gavel_bidder_ledger_missing 1".
        assert!(
            metrics
                .lines()
                .any(|l| l == "gavel_bidder_ledger_missing 1"),
            "{mode}"
        );
        assert!(
            redis.raw("EXISTS gavel:{c}c:c").await.starts_with(":0"),
            "{mode}"
        );
        // Only the admin port, with the token, opens it.
        let (denied, _) = common::call(b.admin_addr, "POST", "/admin/ledger/open", "").await;
        assert_eq!(denied, 401);
        let (status, body) = b.admin_call("POST", "/admin/ledger/open").await;
        assert_eq!(status, 200, "{body}");
        testkit::time::eventually(Duration::from_secs(10), "bids resume", || async {
            b.post_bid(&banner_request("q1", 300, 250, 0.5)).await.0 == 200
        })
        .await;
        let metrics = b.metrics_page().await;
        assert!(metrics.contains("gavel_bidder_ledger_missing 0"), "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_have_their_own_gate_and_never_shed_bids() {
    let redis = RedisServer::start().await;
    let campaigns = format!("[{}]", campaign_json("c", 10.0, 2.0, "asap"));
    let toml = format!(
        "max_notices_in_flight = 1\n[ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\nredis_timeout_ms = 10000\nlease_chunk = 1.0\nlease_report_ms = 50\n",
        redis.addr()
    );
    let b = TestBidder::start(&campaigns, &toml).await;
    let mut wins = Vec::new();
    for i in 0..500 {
        if wins.len() == 2 {
            break;
        }
        let (status, body) = b
            .post_bid(&banner_request(&format!("q{i}"), 300, 250, 0.5))
            .await;
        if status == 200 {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let nurl = v["seatbid"][0]["bid"][0]["nurl"]
                .as_str()
                .unwrap()
                .to_owned();
            wins.push(nurl.replace("${AUCTION_PRICE}", "1.5"));
        } else {
            // The first bids wait for the lease.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(wins.len(), 2, "no lease");
    // Redis stops taking writes until the test says so: a notice now waits for its claim (up
    // to the 10 s Redis timeout, far longer than the checks below need on a loaded machine).
    assert!(
        redis
            .raw("CLIENT PAUSE 60000 WRITE")
            .await
            .starts_with("+OK")
    );
    let addr = b.addr;
    let first = wins[0].clone();
    let slow = tokio::spawn(async move { call(addr, "GET", &first, "").await });
    testkit::time::eventually(
        Duration::from_secs(5),
        "the first notice in flight",
        || async {
            b.metrics_page()
                .await
                .contains("gavel_bidder_notices_in_flight 1")
        },
    )
    .await;
    // The second notice is refused at once; bids still come from the lease meanwhile.
    assert_eq!(call(addr, "GET", &wins[1], "").await.0, 503);
    let m = b.metrics_page().await;
    assert!(m.contains("gavel_bidder_notices_shed_total 1"), "{m}");
    assert_eq!(
        b.post_bid(&banner_request("q2", 300, 250, 0.5)).await.0,
        200
    );
    // The held notice still charges (locally, claimed once Redis answers).
    assert!(redis.raw("CLIENT UNPAUSE").await.starts_with("+OK"));
    assert_eq!(slow.await.unwrap().0, 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_left_in_redis_are_evidence_even_without_this_hosts_marker() {
    let redis = RedisServer::start().await;
    let campaigns = format!("[{}]", campaign_json("c", 10.0, 2.0, "asap"));
    let toml = ledger_toml(&format!("redis://{}", redis.addr()), "");
    let b = TestBidder::start(&campaigns, &toml).await;
    bid_and_win(&b).await;
    // A partial loss (the ledger's own keys, one marker per hash slot, evicted) on a host whose
    // disk was replaced. (Tabs: `raw` splits the command at spaces.)
    let deleted = redis
        .raw("EVAL for\t_,k\tin\tipairs(redis.call('KEYS',ARGV[1]))\tdo\tredis.call('DEL',k)\tend 0 gavel:{*}ledger")
        .await;
    assert!(!deleted.starts_with('-'), "{deleted}");
    let marker = ledger::Keys::new("gavel:").marker(0);
    for marker in std::fs::read_dir(b.dir.path()).unwrap().flatten() {
        if marker
            .file_name()
            .to_string_lossy()
            .starts_with("gavel-ledger-")
        {
            std::fs::remove_file(marker.path()).unwrap();
        }
    }
    let (status, body) = b.admin_call("POST", "/admin/ledger/open").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("keys under the prefix") && body.contains("gavel:"),
        "{body}"
    );
    assert!(
        redis
            .raw(&format!("EXISTS {marker}"))
            .await
            .starts_with(":0")
    );
    let (status, body) = b
        .admin_call("POST", "/admin/ledger/open?after_loss=true")
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"outcome\":\"created\""), "{body}");
}
