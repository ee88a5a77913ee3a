//! One source of truth for budgets: bidder instances sharing one real Redis with different
//! campaign files do not fight over the limits. A `file` writer writes its file's limits as a
//! compare-and-set on the version it last wrote, so a change another writer made since is
//! reported, never overwritten; a `follow` instance writes nothing, spends by the ledger's
//! limits and reports its differing file; the admin API writes with the version the caller
//! saw (409 on a stale one, nothing written).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{ADMIN_TOKEN, TestBidder, banner_request, call, call_as, campaign_json, metric};
use serde_json::Value;
use testkit::RedisServer;

const UNIT: i64 = 1_000_000_000;

/// `[ledger]` lines for instance `node` on `redis`, in `mode`, as a `file` writer or follower.
fn ledger_toml(redis: &RedisServer, node: &str, mode: &str, limits: &str) -> String {
    format!(
        "node = \"{node}\"\n[ledger]\nbackend = \"redis\"\nredis_mode = \"{mode}\"\n\
         redis_timeout_ms = 500\nredis_url = \"redis://{}\"\nlease_chunk = 0.05\n\
         lease_report_ms = 50\nlimits = \"{limits}\"\n",
        redis.addr()
    )
}

/// A campaign file of `(id, total budget in units, cpm)`.
fn file(campaigns: &[(&str, f64, f64)]) -> String {
    let list: Vec<String> = campaigns
        .iter()
        .map(|(id, total, cpm)| campaign_json(id, *total, *cpm, "asap"))
        .collect();
    format!("[{}]", list.join(","))
}

async fn reload(b: &TestBidder) {
    let (status, body) = b.admin_call("POST", "/admin/reload").await;
    assert_eq!(status, 200, "{body}");
}

/// `(limits_version, limits_writer, budget in nanos, conflict)` of campaign `id` as `b`'s
/// admin page shows it.
async fn limits_of(b: &TestBidder, id: &str) -> (u64, String, i64, Value) {
    let c = b.campaign(id).await;
    (
        c["limits_version"]
            .as_u64()
            .unwrap_or_else(|| panic!("{c}")),
        c["limits_writer"].as_str().unwrap().to_owned(),
        c["nanos"]["budget"].as_i64().unwrap(),
        c["conflict"].clone(),
    )
}

/// The `conflict` object's totals: (local, ledger) in nanos.
fn totals(conflict: &Value) -> (i64, i64) {
    (
        conflict["local"]["nanos"]["total"].as_i64().unwrap(),
        conflict["ledger"]["nanos"]["total"].as_i64().unwrap(),
    )
}

async fn put_limits(b: &TestBidder, id: &str, body: &str) -> (u16, Value) {
    let (status, text) = call_as(
        b.admin_addr,
        "PUT",
        &format!("/admin/campaigns/{id}/limits"),
        Some(ADMIN_TOKEN),
        body,
    )
    .await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_file_writers_do_not_fight_the_first_creates_the_second_reports() {
    let redis = RedisServer::start().await;
    let a = TestBidder::start(
        &file(&[("c", 10.0, 2.0)]),
        &ledger_toml(&redis, "a", "per-bid", "file"),
    )
    .await;
    let b_file = |total: f64| file(&[("c", total, 2.0)]);
    let b = TestBidder::start(&b_file(20.0), &ledger_toml(&redis, "b", "per-bid", "file")).await;

    assert_eq!(
        limits_of(&a, "c").await,
        (1, "file:a".into(), 10 * UNIT, Value::Null)
    );
    let (version, writer, budget, conflict) = limits_of(&b, "c").await;
    assert_eq!((version, writer.as_str(), budget), (1, "file:a", 10 * UNIT));
    assert_eq!(totals(&conflict), (20 * UNIT, 10 * UNIT));
    assert_eq!(metric(&b, "gavel_bidder_ledger_limit_conflicts").await, 1);
    assert_eq!(metric(&a, "gavel_bidder_ledger_limit_conflicts").await, 0);

    // Each reloads its file again and again (b with ever other limits): the stored limits
    // never flip; only a's own change moves the version.
    let mut versions = Vec::new();
    for round in 0..3 {
        reload(&a).await;
        b.write_campaigns(&b_file(20.0 + f64::from(round)));
        reload(&b).await;
        versions.push(limits_of(&a, "c").await.0);
        versions.push(limits_of(&b, "c").await.0);
    }
    a.write_campaigns(&file(&[("c", 15.0, 2.0)]));
    reload(&a).await;
    reload(&b).await;
    let (version, writer, budget, conflict) = limits_of(&b, "c").await;
    versions.push(version);
    assert_eq!(versions, [1, 1, 1, 1, 1, 1, 2]);
    assert_eq!((writer.as_str(), budget), ("file:a", 15 * UNIT));
    assert_eq!(totals(&conflict), (22 * UNIT, 15 * UNIT));
    // b agreeing with the ledger ends its conflict (and makes that version its base).
    b.write_campaigns(&b_file(15.0));
    reload(&b).await;
    assert_eq!(
        limits_of(&b, "c").await,
        (2, "file:a".into(), 15 * UNIT, Value::Null)
    );
    assert_eq!(metric(&b, "gavel_bidder_ledger_limit_conflicts").await, 0);
}

/// One writer, one follower (of `mode`): the follower serves the writer's limits, reports its
/// differing file, bids on no campaign the ledger lacks, and follows the writer's next version.
async fn a_follower_serves_the_writers_limits(mode: &str) {
    let redis = RedisServer::start().await;
    let writer = TestBidder::start(
        &file(&[("c", 10.0, 2.0)]),
        &ledger_toml(&redis, "w", mode, "file"),
    )
    .await;
    // The follower's file differs on c, and has d, which no writer wrote (bidding higher).
    let follower = TestBidder::start(
        &file(&[("c", 99.0, 2.0), ("d", 50.0, 3.0)]),
        &ledger_toml(&redis, "f", mode, "follow"),
    )
    .await;
    let (version, who, budget, conflict) = limits_of(&follower, "c").await;
    assert_eq!((version, who.as_str(), budget), (1, "file:w", 10 * UNIT));
    assert_eq!(totals(&conflict), (99 * UNIT, 10 * UNIT));
    let d = follower.campaign("d").await;
    assert_eq!(
        (d["in_ledger"].as_bool(), &d["limits_version"]),
        (Some(false), &Value::Null)
    );
    assert_eq!(
        metric(&follower, "gavel_bidder_ledger_limit_conflicts").await,
        1
    );
    assert_eq!(
        metric(&follower, "gavel_bidder_ledger_campaigns_missing").await,
        1
    );

    // It bids, on c only (d has no budget of record), spending from the writer's budget. A
    // lease-mode instance refuses a campaign's first bids until its lease arrives.
    let mut bid = Value::Null;
    for i in 0..200 {
        let (status, body) = follower
            .post_bid(&banner_request(&format!("q{i}"), 300, 250, 0.5))
            .await;
        if status == 200 {
            bid = serde_json::from_str(&body).unwrap();
            break;
        }
        assert_eq!(status, 204, "{body}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(bid["seatbid"][0]["bid"][0]["cid"], "c", "{bid}");
    let nurl = bid["seatbid"][0]["bid"][0]["nurl"].as_str().unwrap();
    let (status, _) = follower
        .notice(&nurl.replace("${AUCTION_PRICE}", "1.5"))
        .await;
    assert_eq!(status, 204);

    // The writer changes c; the follower picks up the new version (here at its reload; its
    // periodic check does the same) and still writes nothing.
    writer.write_campaigns(&file(&[("c", 12.0, 2.0)]));
    reload(&writer).await;
    reload(&follower).await;
    let (version, who, budget, conflict) = limits_of(&follower, "c").await;
    assert_eq!((version, who.as_str(), budget), (2, "file:w", 12 * UNIT));
    assert_eq!(totals(&conflict), (99 * UNIT, 12 * UNIT));
    assert_eq!(limits_of(&writer, "c").await.3, Value::Null);
    let stored = redis.raw("HGET gavel:{c}c:c writer").await;
    assert!(stored.contains("file:w"), "{stored}");
    assert!(redis.raw("EXISTS gavel:{d}c:d").await.starts_with(":0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_bid_follower_serves_the_writers_limits_and_reports_its_file() {
    a_follower_serves_the_writers_limits("per-bid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_follower_serves_the_writers_limits_and_reports_its_file() {
    a_follower_serves_the_writers_limits("lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_writes_limits_with_the_version_it_saw_and_a_stale_one_gets_409() {
    let redis = RedisServer::start().await;
    let a = TestBidder::start(
        &file(&[("c", 10.0, 2.0)]),
        &ledger_toml(&redis, "a", "per-bid", "file"),
    )
    .await;
    // Stale: the campaign exists (version 1), the caller believes it does not.
    let (status, body) = put_limits(&a, "c", r#"{"total": "30", "base_version": 0}"#).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        (body["version"].as_u64(), body["writer"].as_str()),
        (Some(1), Some("file:a"))
    );
    assert_eq!(body["limits"]["nanos"]["total"], 10 * UNIT);
    assert_eq!(
        limits_of(&a, "c").await,
        (1, "file:a".into(), 10 * UNIT, Value::Null),
        "nothing written"
    );
    // Refusals that name the field, a campaign not in the file, no token.
    let (status, body) = put_limits(&a, "c", r#"{"total": -1, "base_version": 1}"#).await;
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().starts_with("total"),
        "{body}"
    );
    let (status, _) = put_limits(&a, "nope", r#"{"total": 1, "base_version": 0}"#).await;
    assert_eq!(status, 404);
    let (status, _) = call(a.admin_addr, "PUT", "/admin/campaigns/c/limits", "{}").await;
    assert_eq!(status, 401);
    let (status, _) = a.admin_call("GET", "/admin/campaigns/c/limits").await;
    assert_eq!(status, 405);
    // Based on the version seen: written, and the writer's own file now conflicts.
    let (status, body) = put_limits(
        &a,
        "c",
        r#"{"total": "30.5", "daily": 3, "base_version": 1}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["version"].as_u64(), body["writer"].as_str()),
        (Some(2), Some("admin:a"))
    );
    let (version, who, budget, conflict) = limits_of(&a, "c").await;
    assert_eq!(
        (version, who.as_str(), budget),
        (2, "admin:a", 30_500_000_000)
    );
    assert_eq!(totals(&conflict), (10 * UNIT, 30_500_000_000));
    assert_eq!(a.campaign("c").await["daily"]["budget"], 3.0);
    // The same change again is a no-op that keeps the version.
    let (status, body) = put_limits(
        &a,
        "c",
        r#"{"total": "30.5", "daily": 3, "base_version": 1}"#,
    )
    .await;
    assert_eq!(
        (status, body["version"].as_u64(), body["changed"].as_bool()),
        (200, Some(2), Some(false))
    );
    // The writer's reloads do not undo it.
    reload(&a).await;
    reload(&a).await;
    assert_eq!(limits_of(&a, "c").await.0, 2);
    assert_eq!(metric(&a, "gavel_bidder_ledger_limit_conflicts").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_restarted_with_yesterdays_file_does_not_undo_an_admin_change() {
    let redis = RedisServer::start().await;
    let yesterday = file(&[("c", 10.0, 2.0)]);
    let extra = ledger_toml(&redis, "a", "per-bid", "file");
    let a = TestBidder::start(&yesterday, &extra).await;
    let (status, body) = put_limits(&a, "c", r#"{"total": 40, "base_version": 1}"#).await;
    assert_eq!(status, 200, "{body}");
    drop(a);

    // The same instance (same node), restarted with its own earlier limits.
    let again = TestBidder::start(&yesterday, &extra).await;
    let (version, who, budget, conflict) = limits_of(&again, "c").await;
    assert_eq!((version, who.as_str(), budget), (2, "admin:a", 40 * UNIT));
    assert_eq!(totals(&conflict), (10 * UNIT, 40 * UNIT));
    reload(&again).await;
    assert_eq!(limits_of(&again, "c").await.0, 2);
    // A lease-mode restart does not undo it either.
    drop(again);
    let lease = TestBidder::start(&yesterday, &ledger_toml(&redis, "a", "lease", "file")).await;
    reload(&lease).await;
    let (version, who, budget, _) = limits_of(&lease, "c").await;
    assert_eq!((version, who.as_str(), budget), (2, "admin:a", 40 * UNIT));
}
