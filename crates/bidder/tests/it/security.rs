//! Notices and admin on an open network: forged, replayed, over-priced and expired notices
//! change nothing and are counted; a loss never erases a win; a reservation no notice settles
//! is held through its grace, then released and counted; admin lives on its own port, behind
//! the token, and every mutation is audited. Real loopback sockets; one memory bidder per test,
//! and four lease-mode bidders on a real Redis for forgeries and a replay storm across instances.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{TestBidder, banner_request, bid, campaign_json, metric, money};
use serde_json::Value;

/// The query parameter `key` of `url`.
fn param<'a>(url: &'a str, key: &str) -> &'a str {
    url.split(['?', '&'])
        .find_map(|p| p.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap()
}

fn with_param(url: &str, key: &str, value: &str) -> String {
    url.replace(
        &format!("{key}={}", param(url, key)),
        &format!("{key}={value}"),
    )
}

#[tokio::test]
async fn forged_and_over_priced_notices_change_nothing_and_are_counted_by_reason() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")), "").await;
    let (nurl, burl, lurl) = bid(&b, "r1").await;
    let (other_nurl, _, _) = bid(&b, "r2").await;
    let before = money(&b, "c1").await;
    assert_eq!(before, (0, 4_000_000));
    let win = nurl.replace("${AUCTION_PRICE}", "1.5");
    let token = param(&win, "t").to_owned();
    let other = other_nurl.replace("${AUCTION_PRICE}", "1.5");
    let forged = [
        // No token at all: what anyone could type.
        (win.replace(&format!("&t={token}"), ""), "missing_token"),
        (with_param(&win, "t", "nothex"), "malformed_token"),
        // Another reservation's token on this one; a raised cap; a later expiry; another
        // campaign; the loss URL's token used for a win.
        (with_param(&win, "t", param(&other, "t")), "bad_signature"),
        (with_param(&win, "x", "9000000"), "bad_signature"),
        (with_param(&win, "e", "99999999999"), "bad_signature"),
        (with_param(&win, "c", "c2"), "bad_signature"),
        (with_param(&win, "t", param(&lurl, "t")), "bad_signature"),
        // Genuine, but above the bid (CPM 2).
        (nurl.replace("${AUCTION_PRICE}", "2.000001"), "above_bid"),
        (burl.replace("${AUCTION_PRICE}", "3"), "above_bid"),
    ];
    for (url, reason) in &forged {
        let (status, body) = b.notice(url).await;
        assert_eq!(status, 403, "{reason}: {url} -> {body}");
    }
    // A forged loss would have released the reservation: refused too.
    let loss = lurl.replace("${AUCTION_LOSS}", "102");
    let forged_loss = with_param(&loss, "r", param(&other, "r"));
    assert_eq!(b.notice(&forged_loss).await.0, 403);
    assert_eq!(money(&b, "c1").await, before, "the ledger is untouched");
    for (reason, count) in [
        ("missing_token", 1),
        ("malformed_token", 1),
        ("bad_signature", 6),
        ("above_bid", 2),
    ] {
        let line = format!("gavel_bidder_notices_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(metric(&b, &line).await, count, "{reason}");
    }
    // The genuine notice still works afterwards.
    assert_eq!(b.notice(&win).await.0, 204);
    assert_eq!(money(&b, "c1").await, (1_500_000, 2_000_000));
}

#[tokio::test]
async fn a_replay_storm_charges_once_and_a_loss_never_erases_the_win() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")), "").await;
    let (nurl, burl, lurl) = bid(&b, "r1").await;
    let bill = burl.replace("${AUCTION_PRICE}", "1.25");
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..1_000 {
        *statuses.entry(b.notice(&bill).await.0).or_insert(0) += 1;
    }
    assert_eq!(statuses, [(204, 1_000)].into_iter().collect());
    // The winner's loss URL after the win (any reason but "won") is refused: 409.
    let loss = lurl.replace("${AUCTION_LOSS}", "102");
    assert_eq!(b.notice(&loss).await.0, 409);
    assert_eq!(
        b.notice(&nurl.replace("${AUCTION_PRICE}", "1.25")).await.0,
        204
    );
    assert_eq!(money(&b, "c1").await, (1_250_000, 0));
    let c = b.campaign("c1").await;
    assert_eq!(c["wins"], 1);
    let charged = "gavel_bidder_notices_total{kind=\"bill\",outcome=\"charged\"}";
    assert_eq!(metric(&b, charged).await, 1);
    let duplicate = "gavel_bidder_notices_total{kind=\"bill\",outcome=\"duplicate\"}";
    assert_eq!(metric(&b, duplicate).await, 999);
    let refused = "gavel_bidder_notices_total{kind=\"loss\",outcome=\"loss_after_win\"}";
    assert_eq!(metric(&b, refused).await, 1);
}

#[tokio::test]
async fn a_win_after_the_loss_is_charged_and_counted() {
    let b = TestBidder::start(&format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")), "").await;
    let (nurl, _, lurl) = bid(&b, "r1").await;
    // The exchange's loss notice arrives first (out of order), then the win.
    assert_eq!(
        b.notice(&lurl.replace("${AUCTION_LOSS}", "102")).await.0,
        204
    );
    assert_eq!(money(&b, "c1").await, (0, 0));
    assert_eq!(
        b.notice(&nurl.replace("${AUCTION_PRICE}", "1.5")).await.0,
        204
    );
    assert_eq!(money(&b, "c1").await, (1_500_000, 0));
    let late = "gavel_bidder_notices_total{kind=\"win\",outcome=\"charged_after_release\"}";
    assert_eq!(metric(&b, late).await, 1);
    // The winner's own loss URL ("bid won", loss=0) releases nothing.
    let (_, _, lurl2) = bid(&b, "r2").await;
    assert_eq!(
        b.notice(&lurl2.replace("${AUCTION_LOSS}", "0")).await.0,
        204
    );
    assert_eq!(money(&b, "c1").await, (1_500_000, 2_000_000));
}

/// Needs real time: the expiry is on the wall clock (the token carries Unix seconds). The
/// waits are for an event (the sweep's counter), bounded generously.
#[tokio::test]
async fn an_unsettled_reservation_is_held_through_its_grace_then_released_and_counted() {
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        "[ledger]\nreservation_ttl_ms = 1000\nreservation_grace_ms = 500\n",
    )
    .await;
    let (nurl, _, _) = bid(&b, "r1").await;
    assert_eq!(money(&b, "c1").await, (0, 2_000_000));
    let expired = "gavel_bidder_reservations_expired_total";
    let started = std::time::Instant::now();
    loop {
        if metric(&b, expired).await == 1 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Held for at least TTL + grace.
    assert!(started.elapsed() >= Duration::from_millis(1_400));
    assert_eq!(money(&b, "c1").await, (0, 0));
    // Its notice URL expires with it (at the next whole second, `e`, in Unix seconds).
    let e: u64 = param(&nurl, "e").parse().unwrap();
    let unix_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    assert!(
        e <= unix_now() + 1,
        "the token outlives the reservation by under a second"
    );
    while unix_now() < e {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = b.notice(&nurl.replace("${AUCTION_PRICE}", "1")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("expired"), "{body}");
    assert_eq!(money(&b, "c1").await, (0, 0));
}

#[tokio::test]
async fn metrics_are_off_the_bid_port_and_behind_the_token_when_asked() {
    let campaigns = format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap"));
    let open = TestBidder::start(&campaigns, "").await;
    let (status, body) = open.get("/metrics").await;
    assert_eq!(
        status, 404,
        "the bid port shows no spend to whoever reaches it"
    );
    assert!(body.contains("admin_listen"), "{body}");
    assert!(
        open.metrics_page()
            .await
            .contains("gavel_bidder_requests_total")
    );
    let (status, _) = common::call(open.admin_addr, "GET", "/healthz", "").await;
    assert_eq!(status, 200);

    let guarded = TestBidder::start(&campaigns, "security.metrics_need_token = true\n").await;
    let (status, _) = common::call(guarded.admin_addr, "GET", "/metrics", "").await;
    assert_eq!(status, 401);
    let (status, _) =
        common::call_as(guarded.admin_addr, "GET", "/metrics", Some("guess"), "").await;
    assert_eq!(status, 401);
    let (status, page) = common::call_as(
        guarded.admin_addr,
        "GET",
        "/metrics",
        Some(common::ADMIN_TOKEN),
        "",
    )
    .await;
    assert_eq!(status, 200);
    assert!(page.contains("gavel_bidder_requests_total"), "{page}");
}

#[tokio::test]
async fn admin_is_off_the_bid_port_needs_the_token_and_audits_mutations() {
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        "security.audit_log = \"audit.log\"\n",
    )
    .await;
    // The bid port does not serve admin at all.
    assert_eq!(b.get("/admin/campaigns").await.0, 404);
    assert_eq!(b.post("/admin/reload", "").await.0, 404);
    // The admin port refuses without the token, or with a wrong one.
    let anon = common::call(b.admin_addr, "GET", "/admin/campaigns", "").await;
    assert_eq!(anon.0, 401, "{}", anon.1);
    let wrong = common::call_as(b.admin_addr, "POST", "/admin/reload", Some("guess"), "").await;
    assert_eq!(wrong.0, 401);
    assert!(
        !b.dir.join("audit.log").exists()
            || std::fs::read_to_string(b.dir.join("audit.log"))
                .unwrap()
                .is_empty(),
        "a refused call is not a mutation"
    );
    // With it: the same JSON as before, and a reload writes one audit line.
    assert_eq!(b.admin().await["campaigns"][0]["id"], "c1");
    let (status, body) = b.admin_call("POST", "/admin/reload").await;
    assert_eq!(status, 200, "{body}");
    let audit = std::fs::read_to_string(b.dir.join("audit.log")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{audit}");
    let line = &lines[0];
    assert_eq!(line["what"], "POST /admin/reload");
    assert!(
        line["who"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{line}"
    );
    assert!(!audit.contains(common::ADMIN_TOKEN), "never the token");
    assert_eq!(line["before"]["campaigns"], 1);
    assert_eq!(line["after"]["campaigns"], 1);
}

#[tokio::test]
async fn config_refuses_public_admin_and_unsigned_keys_by_mistake() {
    let refused = |text: &str| {
        bidder::BidderConfig::from_toml(text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let public = refused("campaigns = \"c.json\"\nadmin_listen = \"0.0.0.0:9101\"");
    assert!(public.starts_with("admin_listen:"), "{public}");
    assert!(bidder::BidderConfig::from_toml(
        "campaigns = \"c.json\"\nadmin_listen = \"0.0.0.0:9101\"\n[security]\nadmin_remote = true"
    )
    .is_ok());
    let same = refused(
        "campaigns = \"c.json\"\nlisten = \"127.0.0.1:9100\"\nadmin_listen = \"127.0.0.1:9100\"",
    );
    assert!(same.starts_with("admin_listen:"), "{same}");
    let both = refused(
        "campaigns = \"c.json\"\n[security]\nsign_notices = false\nnotice_key_file = \"k\"",
    );
    assert!(both.starts_with("security.notice_key_file"), "{both}");
    // Signing on without a key: the bidder does not start, and says how to make one.
    let dir = common::TempDir::new("nokey");
    std::fs::write(
        dir.join("campaigns.json"),
        format!("[{}]", campaign_json("c1", 1.0, 1.0, "asap")),
    )
    .unwrap();
    std::fs::write(dir.join("bidder.toml"), "campaigns = \"campaigns.json\"\n").unwrap();
    let config = bidder::BidderConfig::load(&dir.join("bidder.toml")).unwrap();
    let e = bidder::Bidder::start(config).await.err();
    match &e {
        Some(bidder::StartError::Security(settings::Invalid { key, problem })) => {
            assert_eq!(key, "security.notice_key_file");
            assert!(problem.contains("openssl rand"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
}

/// Sum of a metric line over several bidders.
async fn metric_sum(bidders: &[TestBidder], line: &str) -> u64 {
    let mut sum = 0;
    for b in bidders {
        sum += metric(b, line).await;
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_lease_instances_refuse_forgeries_and_charge_a_replay_storm_once() {
    let redis = testkit::RedisServer::start().await;
    let campaigns = format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap"));
    let mut bidders = Vec::new();
    for i in 0..4 {
        let extra = format!(
            "node = \"b{i}\"\n[ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\nredis_timeout_ms = 500\nlease_chunk = 0.05\nlease_report_ms = 50\n",
            redis.addr()
        );
        bidders.push(TestBidder::start(&campaigns, &extra).await);
    }
    // One bid on b0 (its first bids wait for a lease).
    let mut urls = None;
    for i in 0..500 {
        let (status, body) = bidders[0]
            .post_bid(&banner_request(&format!("q{i}"), 300, 250, 0.1))
            .await;
        if status == 200 {
            let v: Value = serde_json::from_str(&body).unwrap();
            let bid = &v["seatbid"][0]["bid"][0];
            let url = |k: &str| bid[k].as_str().unwrap().to_owned();
            urls = Some((url("nurl"), url("burl"), url("lurl")));
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (nurl, burl, lurl) = urls.expect("a bid once leased");
    let win = nurl.replace("${AUCTION_PRICE}", "1.5");
    let token = param(&win, "t").to_owned();
    let corpus = [
        win.replace(&format!("&t={token}"), ""),
        with_param(&win, "t", "nothex"),
        with_param(&win, "x", "9000000"),
        with_param(&win, "c", "c2"),
        with_param(&win, "t", param(&lurl, "t")),
        nurl.replace("${AUCTION_PRICE}", "2.000001"),
        with_param(&lurl.replace("${AUCTION_LOSS}", "102"), "r", "b0-0123"),
    ];
    // Every forgery, to every instance.
    for url in &corpus {
        for b in &bidders {
            assert_eq!(b.notice(url).await.0, 403, "{url}");
        }
    }
    let mut refused = 0;
    for reason in [
        "missing_token",
        "malformed_token",
        "bad_signature",
        "above_bid",
    ] {
        let line = format!("gavel_bidder_notices_refused_total{{reason=\"{reason}\"}}");
        refused += metric_sum(&bidders, &line).await;
    }
    assert_eq!(refused, 4 * corpus.len() as u64, "every refusal counted");
    assert_eq!(money(&bidders[1], "c1").await.0, 0, "nothing charged");

    // The billing notice 1,000 times, round robin over the four, 50 at a time.
    let bill = burl.replace("${AUCTION_PRICE}", "1.25");
    let addrs: Vec<_> = bidders.iter().map(|b| b.addr).collect();
    for batch in 0..20 {
        let mut calls = tokio::task::JoinSet::new();
        for k in 0..50 {
            let (addr, bill) = (addrs[(batch * 50 + k) % 4], bill.clone());
            calls.spawn(async move { testkit::http::notice(addr, &bill).await.0 });
        }
        while let Some(status) = calls.join_next().await {
            assert_eq!(status.unwrap(), 204);
        }
    }
    let charged = "gavel_bidder_notices_total{kind=\"bill\",outcome=\"charged\"}";
    assert_eq!(metric_sum(&bidders, charged).await, 1);
    let duplicate = "gavel_bidder_notices_total{kind=\"bill\",outcome=\"duplicate\"}";
    assert_eq!(metric_sum(&bidders, duplicate).await, 999);
    // The holder reports its spend (or another charged it in Redis): the shared books show it.
    testkit::time::eventually(Duration::from_secs(10), "the charge in Redis", || async {
        money(&bidders[3], "c1").await.0 == 1_250_000
    })
    .await;
    // A loss after it, anywhere, changes nothing.
    let loss = lurl.replace("${AUCTION_LOSS}", "102");
    assert_eq!(bidders[2].notice(&loss).await.0, 409);
    assert_eq!(money(&bidders[1], "c1").await.0, 1_250_000);
}
