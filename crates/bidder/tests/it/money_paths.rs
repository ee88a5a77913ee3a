//! The bidder's money paths off the happy path, each with exact counts: a ledger refusal moves on
//! to the next candidate, three at most; a request with too little time left reserves nothing;
//! a notice for a reservation this ledger does not hold is 404 and charges nothing; a notice the
//! ledger cannot take is 503 (so the exchange retries) and charges once when it comes again; the
//! expiry task returns a Redis reservation whose notice never came; a request waiting on its
//! reservation sheds the next ones at a full admission gate, and a reservation Redis does not
//! answer in time is no bid. Real loopback sockets, and a real `redis-server` where Redis is the
//! point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{
    TestBidder, banner_request, banner_request_with_tmax, bid, call, campaign_json, metric, money,
};
use serde_json::Value;
use testkit::{RedisOptions, RedisServer, TempDir};

/// Three campaigns funded for less than one impression at their CPM (4, 3, 2) above one funded
/// for exactly one (CPM 1). The first request's three candidates are all refused and the CPM-1
/// campaign is not tried: three candidates per imp at most. The refusals are remembered
/// (`mark_exhausted`), so the second request passes over the three and bids with the CPM-1
/// campaign instead of proposing the spent ones again.
#[tokio::test]
async fn a_refused_reservation_tries_the_next_candidate_three_at_most() {
    let campaigns = format!(
        "[{}, {}, {}, {}]",
        campaign_json("c4", 0.003, 4.0, "asap"),
        campaign_json("c3", 0.002, 3.0, "asap"),
        campaign_json("c2", 0.001, 2.0, "asap"),
        campaign_json("c1", 0.001, 1.0, "asap"),
    );
    let b = TestBidder::start(&campaigns, "").await;
    let refused = "gavel_bidder_candidate_skips_total{reason=\"ledger_refused\"}";
    let exhausted = "gavel_bidder_candidate_skips_total{reason=\"budget_exhausted\"}";
    let (status, body) = b.post_bid(&banner_request("r0", 300, 250, 0.1)).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(metric(&b, refused).await, 3);
    assert_eq!(b.campaign("c1").await["bids"], 0);
    // Within the first refusals' 250 ms the next request skips all three. A machine slow enough
    // to pass that asks them again, and each refusal in a row doubles the skip: a few requests
    // at most.
    let mut requests = 1;
    let body = loop {
        requests += 1;
        assert!(requests <= 6, "the spent campaigns were never passed over");
        let (status, body) = b
            .post_bid(&banner_request(&format!("r{requests}"), 300, 250, 0.1))
            .await;
        if status == 200 {
            break body;
        }
        assert_eq!(status, 204, "{body}");
    };
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["seatbid"][0]["bid"][0]["price"].as_f64(), Some(1.0));
    assert_eq!(metric(&b, refused).await, 3 * (requests - 1));
    assert!(metric(&b, exhausted).await >= 3);
    for id in ["c4", "c3", "c2"] {
        assert_eq!(money(&b, id).await, (0, 0), "{id}");
    }
    assert_eq!(money(&b, "c1").await, (0, 1_000_000));
}

/// `min_time_left_ms` above the request's whole `tmax`: every request is answered no-bid at
/// once, counted as too late, and reserves nothing.
#[tokio::test]
async fn a_request_with_too_little_time_left_reserves_nothing() {
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        "[admission]\nmin_time_left_ms = 200\n",
    )
    .await;
    for i in 0..5 {
        // `banner_request` carries tmax 100.
        let (status, body) = b
            .post_bid(&banner_request(&format!("r{i}"), 300, 250, 0.1))
            .await;
        assert_eq!(status, 204, "{body}");
    }
    let count = |line: &'static str| metric(&b, line);
    assert_eq!(
        count("gavel_bidder_admission_total{outcome=\"too_little_time\"}").await,
        5
    );
    assert_eq!(
        count("gavel_bidder_requests_total{outcome=\"no_bid\"}").await,
        5
    );
    assert_eq!(count("gavel_bidder_bids_total").await, 0);
    assert_eq!(money(&b, "c1").await, (0, 0));
    assert_eq!(b.campaign("c1").await["bids"], 0);
}

/// A genuine, signed win notice reaching an instance whose in-memory ledger never held the
/// reservation (another instance bid, or this one restarted): 404, counted, nothing charged.
#[tokio::test]
async fn a_notice_for_a_reservation_the_ledger_does_not_hold_is_404() {
    let campaigns = format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap"));
    let bidder = TestBidder::start(&campaigns, "").await;
    let elsewhere = TestBidder::start(&campaigns, "").await;
    let (nurl, _, _) = bid(&bidder, "r1").await;
    let (status, body) = elsewhere
        .notice(&nurl.replace("${AUCTION_PRICE}", "1.5"))
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("unknown_reservation"), "{body}");
    assert_eq!(
        metric(
            &elsewhere,
            "gavel_bidder_notices_total{kind=\"win\",outcome=\"unknown_reservation\"}"
        )
        .await,
        1
    );
    assert_eq!(money(&elsewhere, "c1").await, (0, 0));
    assert_eq!(elsewhere.campaign("c1").await["wins"], 0);
    // The instance that bid still holds it, uncharged.
    assert_eq!(money(&bidder, "c1").await, (0, 2_000_000));
}

fn per_bid_on(redis: &RedisServer) -> String {
    per_bid_with_timeout(redis, 200)
}

fn per_bid_with_timeout(redis: &RedisServer, timeout_ms: u64) -> String {
    format!(
        "[ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\nredis_mode = \"per-bid\"\nredis_timeout_ms = {timeout_ms}\n",
        redis.addr()
    )
}

/// Redis takes no writes (every reservation waits) until [`unpause`]; reads and the unpause
/// itself still answer. A pause of a minute, lifted by the test, not by a timer.
async fn pause_writes(redis: &RedisServer) {
    let paused = redis.raw("CLIENT PAUSE 60000 WRITE").await;
    assert!(paused.starts_with("+OK"), "{paused}");
}

async fn unpause(redis: &RedisServer) {
    let answer = redis.raw("CLIENT UNPAUSE").await;
    assert!(answer.starts_with("+OK"), "{answer}");
}

/// One bid request waiting on its reservation (Redis paused) holds the only admission place
/// (`max_in_flight = 1`): each of the next five is shed at once, exactly five are counted, and
/// none reserves anything. Once Redis writes again, the held request bids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_one_request_holds_the_only_place_the_next_are_shed_and_counted_exactly() {
    let redis = RedisServer::start().await;
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        &format!(
            "{}[admission]\nmode = \"fixed\"\nmax_in_flight = 1\n\
             [deadline]\nmax_tmax_ms = 20000\n",
            per_bid_with_timeout(&redis, 10_000)
        ),
    )
    .await;
    first_bid(&b).await;
    assert_eq!(money(&b, "c1").await, (0, 2_000_000));

    pause_writes(&redis).await;
    let held = {
        let request = banner_request_with_tmax("held", 300, 250, 0.1, 15_000);
        let addr = b.addr;
        tokio::spawn(async move { call(addr, "POST", bidder::BID_PATH, &request).await })
    };
    testkit::time::eventually(
        Duration::from_secs(10),
        "the held request in flight",
        || async { metric(&b, "gavel_bidder_admission_in_flight").await == 1 },
    )
    .await;
    let shed = "gavel_bidder_requests_total{outcome=\"shed\"}";
    assert_eq!(metric(&b, shed).await, 0);
    for i in 0..5 {
        let (status, body) = b
            .post_bid(&banner_request(&format!("s{i}"), 300, 250, 0.1))
            .await;
        assert_eq!(status, 204, "{body}");
    }
    assert_eq!(metric(&b, shed).await, 5);

    unpause(&redis).await;
    let (status, body) = held.await.unwrap();
    assert_eq!(status, 200, "{body}");
    // Two bids reserved; the five shed requests nothing.
    assert_eq!(money(&b, "c1").await, (0, 4_000_000));
    assert_eq!(metric(&b, shed).await, 5);
}

/// A reservation Redis does not answer within `redis_timeout_ms` is no bid, counted once as a
/// ledger timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_redis_does_not_answer_in_time_is_no_bid_and_counted() {
    let redis = RedisServer::start().await;
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        &format!(
            "{}[deadline]\nmax_tmax_ms = 5000\n",
            per_bid_with_timeout(&redis, 50)
        ),
    )
    .await;
    first_bid(&b).await;
    let timeouts = "gavel_bidder_candidate_skips_total{reason=\"ledger_timeout\"}";
    assert_eq!(metric(&b, timeouts).await, 0);
    pause_writes(&redis).await;
    // tmax 5 s: the ledger's own 50 ms bound, not the request's deadline, gives up.
    let (status, body) = b
        .post_bid(&banner_request_with_tmax("t", 300, 250, 0.1, 5_000))
        .await;
    unpause(&redis).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(metric(&b, timeouts).await, 1);
    assert_eq!(
        b.campaign("c1").await["bids"],
        1,
        "only the first request bid"
    );
}

/// Bids until the first bid comes (a per-bid ledger has no limits in Redis until the first
/// pacing tick writes them), for at most 10 s; its `nurl`.
async fn first_bid(b: &TestBidder) -> String {
    let started = std::time::Instant::now();
    loop {
        let (status, body) = b.post_bid(&banner_request("r1", 300, 250, 0.1)).await;
        if status == 200 {
            let v: Value = serde_json::from_str(&body).unwrap();
            return v["seatbid"][0]["bid"][0]["nurl"]
                .as_str()
                .unwrap()
                .to_owned();
        }
        assert_eq!(status, 204, "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no bid in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A win notice arriving while Redis is down is answered 503 (the exchange retries 5xx) and
/// charges nothing; the same notice once Redis is back charges once, and a third time is a
/// duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_the_ledger_cannot_take_is_503_and_charges_once_when_retried() {
    let data = TempDir::new("redis-data");
    let options = RedisOptions {
        data_dir: Some(data.path().to_path_buf()),
        ..RedisOptions::default()
    };
    let mut redis = RedisServer::start_with(&options).await;
    let port = redis.port;
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        &per_bid_on(&redis),
    )
    .await;
    let nurl = first_bid(&b).await;
    let win = nurl.replace("${AUCTION_PRICE}", "1.5");

    redis.kill();
    let (status, body) = b.get(&win).await;
    assert_eq!(status, 503, "{body}");
    let outcome = |o: &str| format!("gavel_bidder_notices_total{{kind=\"win\",outcome=\"{o}\"}}");
    assert_eq!(metric(&b, &outcome("ledger_error")).await, 1);
    assert_eq!(metric(&b, &outcome("charged")).await, 0);

    let _redis = RedisServer::start_on_with(port, &options).await.unwrap();
    let (status, body) = b.notice(&win).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(b.notice(&win).await.0, 204);
    assert_eq!(metric(&b, &outcome("charged")).await, 1);
    assert_eq!(metric(&b, &outcome("duplicate")).await, 1);
    assert_eq!(money(&b, "c1").await, (1_500_000, 0));
    assert_eq!(b.campaign("c1").await["wins"], 1);
}

/// The expiry task over a per-bid Redis ledger: a reservation no notice settles is returned
/// once its TTL and grace have passed, and counted once. Needs real time: Redis and the notice
/// token expire on the wall clock; the wait is for the counter, bounded generously.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expiry_task_returns_an_unsettled_redis_reservation() {
    let redis = RedisServer::start().await;
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 10.0, 2.0, "asap")),
        &format!(
            "{}reservation_ttl_ms = 1000\nreservation_grace_ms = 500\n",
            per_bid_on(&redis)
        ),
    )
    .await;
    first_bid(&b).await;
    assert_eq!(money(&b, "c1").await, (0, 2_000_000));
    let expired = "gavel_bidder_reservations_expired_total";
    testkit::time::eventually(
        Duration::from_secs(20),
        "the reservation expired",
        || async { metric(&b, expired).await >= 1 },
    )
    .await;
    assert_eq!(metric(&b, expired).await, 1);
    assert_eq!(money(&b, "c1").await, (0, 0));
}
