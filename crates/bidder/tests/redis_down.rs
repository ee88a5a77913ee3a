//! The bidder on a real `redis-server` that is killed and restarted: every request is still
//! answered within its `tmax` (no bid once nothing is funded: fail closed), and bidding resumes
//! by itself when Redis is back, without restarting the bidder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{TestBidder, banner_request, campaign_json};
use ledger_redis::test_server::RedisServer;

/// Requests carry `tmax` 100 ms; the bidder decides within `tmax - answer_margin`.
const TMAX: Duration = Duration::from_millis(100);

async fn bidder_on(redis: &RedisServer, mode: &str) -> TestBidder {
    TestBidder::start(
        &format!("[{}]", campaign_json("c1", 1.0, 2.0, "asap")),
        &format!(
            "[ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\nredis_mode = \"{mode}\"\n\
             redis_timeout_ms = 20\nlease_chunk = 0.01\nlease_report_ms = 50\nlease_ttl_ms = 1000\n\
             [pacing]\ncontrol_interval_ms = 100\n",
            redis.addr()
        ),
    )
    .await
}

/// Sends `n` requests; returns how many got a bid. Every answer must come within `TMAX`.
async fn burst(b: &TestBidder, n: usize) -> usize {
    let mut bids = 0;
    for i in 0..n {
        let started = Instant::now();
        let (status, body) = b
            .post_bid(&banner_request(&format!("r{i}"), 300, 250, 0.1))
            .await;
        let took = started.elapsed();
        assert!(took < TMAX, "answered after {took:?}: {status} {body}");
        match status {
            200 => bids += 1,
            204 => {}
            other => panic!("status {other}: {body}"),
        }
    }
    bids
}

/// Waits until the bidder bids again, for at most 10 s; returns how long it took.
async fn until_it_bids(b: &TestBidder) -> Duration {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if burst(b, 1).await == 1 {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no bid within 10 s of Redis coming back");
}

async fn kill_and_restart(mode: &str) {
    let mut redis = RedisServer::start().await;
    let port = redis.port;
    let b = bidder_on(&redis, mode).await;
    until_it_bids(&b).await;

    redis.kill();
    // Per bid: every reservation needs Redis, so no bid at all. Leases: what is leased locally
    // (at most 0.01 = 5 bids at CPM 2) may still be spent, then nothing.
    let bids_while_down = burst(&b, 40).await;
    let allowed = if mode == "lease" { 5 } else { 0 };
    assert!(
        bids_while_down <= allowed,
        "{mode}: {bids_while_down} bids with Redis down"
    );

    // An empty Redis on the same port (no persistence): the bidder writes its limits again
    // and bids without being restarted.
    let _redis = RedisServer::start_on(port).await.unwrap();
    let took = until_it_bids(&b).await;
    if mode == "lease" {
        // The outage shows in the lease task's metrics.
        let metrics = b.get("/metrics").await.1;
        let errors: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("gavel_bidder_lease_redis_errors_total "))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(errors > 0, "{metrics}");
    }
    eprintln!(
        "{mode}: {bids_while_down} bids while Redis was down; bidding again {took:?} after it came back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_bid_mode_fails_closed_and_recovers() {
    kill_and_restart("per-bid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_mode_fails_closed_and_recovers() {
    kill_and_restart("lease").await;
}
