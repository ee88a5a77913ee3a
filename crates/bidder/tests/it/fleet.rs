//! Two bidders following one campaign set in a real `nats-server -js` (docs/fleet.md): a push
//! reaches both and each serves the same revision (admin and `/metrics`) and bids from it;
//! invalid sets forced into the bucket are refused by both while the last good revision
//! serves; while a revision is in force the campaign file does not override it; NATS killed
//! and restarted with its store, a bidder started meanwhile serves its file, and a later push
//! (TOML this time) reaches all three. Hostile pushes on a real Redis ledger: an unsigned set
//! raising a budget and a bid (a raw publish, no credentials) is refused; a signed set raising
//! a budget the ledger holds serves its bids but not its budget (the ledger keeps its limits,
//! the conflict shows) until the budget writer approves the raise; a signed set lowering it
//! lowers the ledger.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{ADMIN_TOKEN, TestBidder, campaign_json, metric};
use fleet::{PushRefused, SigningKey};
use serde_json::Value;
use testkit::{NatsServer, RedisServer, TempDir};

const KEY: &str = "bidder.campaigns";
const UNIT: i64 = 1_000_000_000;

/// The operator's key and a directory holding its public key (`fleet.pub`).
fn operator() -> (SigningKey, TempDir) {
    let (key, _) = SigningKey::generate().unwrap();
    let dir = TempDir::new("bidder-fleet-keys");
    dir.file("fleet.pub", &key.public_pem());
    (key, dir)
}

fn fleet_toml(url: &str, keys: &TempDir) -> String {
    format!(
        "[fleet]\nnats_url = \"{url}\"\nresync_ms = 200\ntrusted_keys_file = \"{}\"\n",
        keys.join("fleet.pub").display()
    )
}

async fn follower(url: &str, keys: &TempDir) -> TestBidder {
    let file = format!("[{}]", campaign_json("c1", 1000.0, 2.0, "asap"));
    TestBidder::start(&file, &fleet_toml(url, keys)).await
}

fn refused(b: &TestBidder, reason: PushRefused) -> u64 {
    b.bidder.metrics().config_push_refused.get(reason)
}

/// The campaign ids and the `config` object of `/admin/campaigns`.
async fn serving(b: &TestBidder) -> (Vec<String>, Value) {
    let v = b.admin().await;
    let ids = v["campaigns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    (ids, v["config"].clone())
}

async fn converge(nodes: &[&TestBidder], source: &str, revision: u64) {
    let what = format!("every bidder to serve {source} revision {revision}");
    testkit::time::eventually(Duration::from_secs(15), &what, || async {
        for b in nodes {
            let (_, config) = serving(b).await;
            if config["source"] != source || config["revision"] != revision {
                return false;
            }
        }
        true
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bidders_follow_one_campaign_set_through_faults() {
    let mut nats = NatsServer::start().await;
    let url = nats.url();
    let (key, keys) = operator();
    let section = fleet::FleetSection::new(url.clone());
    let b1 = follower(&url, &keys).await;
    let b2 = follower(&url, &keys).await;
    for b in [&b1, &b2] {
        let (ids, config) = serving(b).await;
        assert_eq!(
            (ids, &config["source"]),
            (vec!["c1".to_owned()], &Value::from("file"))
        );
    }

    let set = format!("[{}]", campaign_json("c2", 1000.0, 3.0, "asap"));
    let r1 = fleet::push(&section, KEY, set.as_bytes(), &key)
        .await
        .unwrap()
        .revision;
    converge(&[&b1, &b2], "nats", r1).await;
    for b in [&b1, &b2] {
        assert_eq!(serving(b).await.0, ["c2"]);
        assert_eq!(
            metric(b, "gavel_bidder_config_version{source=\"nats\"}").await,
            r1
        );
        let (_, _, _) = common::bid(b, "r1").await;
    }

    // Invalid sets forced in: refused by both, counted, r1 keeps serving.
    let invalid = [
        format!("[{}]", campaign_json("c3", -5.0, 3.0, "asap")),
        "[[campaign]\nid = \"x\"\n".to_owned(),
        format!(
            "[{}, {}]",
            campaign_json("c4", 1.0, 2.0, "asap"),
            campaign_json("c4", 1.0, 3.0, "asap")
        ),
    ];
    for (n, text) in invalid.iter().enumerate() {
        fleet::push(&section, KEY, text.as_bytes(), &key)
            .await
            .unwrap();
        let count = n as u64 + 1;
        testkit::time::wait_until(
            Duration::from_secs(15),
            &format!("invalid set {n} refused by both"),
            || {
                [&b1, &b2]
                    .iter()
                    .all(|b| refused(b, PushRefused::Invalid) == count)
            },
        )
        .await;
        for b in [&b1, &b2] {
            let (ids, config) = serving(b).await;
            assert_eq!(
                (ids, &config["revision"]),
                (vec!["c2".to_owned()], &Value::from(r1))
            );
        }
    }

    // The file changed while r1 is in force: not applied, the bucket wins.
    b1.write_campaigns(&format!("[{}]", campaign_json("c5", 1.0, 2.0, "asap")));
    assert_eq!(b1.bidder.reload().await, Ok(1));
    assert_eq!(serving(&b1).await.0, ["c2"]);

    // NATS killed; a bidder started meanwhile serves its file; NATS back with its store.
    nats.kill();
    let b3 = follower(&url, &keys).await;
    assert_eq!(serving(&b3).await.1["source"], "file");
    nats.restart().await;
    let toml = "[[campaign]]\nid = \"c6\"\nbudget = { total = 100 }\nbid = { cpm = 2 }\n\
        creatives = [{ id = \"cr\", w = 300, h = 250, adm = \"x\" }]\n";
    let r2 = fleet::push(&section, KEY, toml.as_bytes(), &key)
        .await
        .unwrap()
        .revision;
    converge(&[&b1, &b2, &b3], "nats", r2).await;
    for b in [&b1, &b2, &b3] {
        assert_eq!(serving(b).await.0, ["c6"]);
    }
}

/// Pushes `set` signed with `key` and waits until `b` serves it; its revision.
async fn push_to(
    b: &TestBidder,
    section: &fleet::FleetSection,
    set: &[u8],
    key: &SigningKey,
) -> u64 {
    let r = fleet::push(section, KEY, set, key).await.unwrap().revision;
    converge(&[b], "nats", r).await;
    r
}

/// `(budget in nanos, limits version, conflict)` of campaign `id`, as `b`'s admin page shows.
async fn budget_of(b: &TestBidder, id: &str) -> (i64, u64, Value) {
    let c = b.campaign(id).await;
    (
        c["nanos"]["budget"].as_i64().unwrap(),
        c["limits_version"].as_u64().unwrap(),
        c["conflict"].clone(),
    )
}

/// The attack of issue 45 on a Redis ledger, per-bid and lease: a set raising campaign `c`
/// from budget 100 and bid 2.00 to budget 1,000,000 and bid 900.
async fn a_push_cannot_raise_a_budget_the_ledger_holds(mode: &str) {
    let nats = NatsServer::start().await;
    let redis = RedisServer::start().await;
    let url = nats.url();
    let (key, keys) = operator();
    let section = fleet::FleetSection::new(url.clone());
    let extra = format!(
        "node = \"a\"\n[ledger]\nbackend = \"redis\"\nredis_mode = \"{mode}\"\nredis_timeout_ms = 500\n\
         redis_url = \"redis://{}\"\nlease_chunk = 0.05\nlease_report_ms = 50\nlimits = \"file\"\n{}",
        redis.addr(),
        fleet_toml(&url, &keys)
    );
    let own = format!("[{}]", campaign_json("c", 100.0, 2.0, "asap"));
    let b = TestBidder::start(&own, &extra).await;
    assert_eq!(budget_of(&b, "c").await.0, 100 * UNIT);
    let raised = format!("[{}]", campaign_json("c", 1_000_000.0, 900.0, "asap"));
    // The operator pushes the fleet's set (the same): the bucket exists from now on.
    let r = push_to(&b, &section, own.as_bytes(), &key).await;

    // Unsigned, published raw without credentials: refused, nothing changes.
    let subject = format!("$KV.{}.{KEY}", section.bucket);
    testkit::nats::publish_raw(nats.port, "{}", &subject, raised.as_bytes())
        .await
        .unwrap();
    testkit::time::wait_until(Duration::from_secs(15), "the unsigned set refused", || {
        refused(&b, PushRefused::Unsigned) == 1
    })
    .await;
    assert_eq!(serving(&b).await.1["revision"], r);
    assert_eq!(budget_of(&b, "c").await.0, 100 * UNIT);
    assert!(
        redis
            .raw("HGET gavel:{c}c:c total")
            .await
            .contains(&(100 * UNIT).to_string())
    );

    // Signed: the set serves (its bid), the ledger keeps its budget, the raise is a conflict.
    push_to(&b, &section, raised.as_bytes(), &key).await;
    let (budget, version, conflict) = budget_of(&b, "c").await;
    assert_eq!(
        (budget, version),
        (100 * UNIT, 1),
        "the ledger's budget stands"
    );
    assert_eq!(
        conflict["local"]["nanos"]["total"].as_i64(),
        Some(1_000_000 * UNIT)
    );
    assert_eq!(metric(&b, "gavel_bidder_ledger_limit_conflicts").await, 1);
    assert!(
        redis
            .raw("HGET gavel:{c}c:c total")
            .await
            .contains(&(100 * UNIT).to_string())
    );

    // Lowering needs nobody's approval: a signed set at 50 lowers the ledger.
    let lowered = format!("[{}]", campaign_json("c", 50.0, 900.0, "asap"));
    push_to(&b, &section, lowered.as_bytes(), &key).await;
    testkit::time::eventually(
        Duration::from_secs(15),
        "the ledger lowered to 50",
        || async { budget_of(&b, "c").await.0 == 50 * UNIT },
    )
    .await;
    assert_eq!(budget_of(&b, "c").await.2, Value::Null, "no conflict");

    // The raise again, then the budget writer (the admin API, a compare-and-set on the
    // version it saw) approves it.
    push_to(&b, &section, raised.as_bytes(), &key).await;
    let (budget, version, _) = budget_of(&b, "c").await;
    assert_eq!(budget, 50 * UNIT);
    let (status, body) = testkit::http::call_as(
        b.admin_addr,
        "PUT",
        "/admin/campaigns/c/limits",
        Some(ADMIN_TOKEN),
        &format!(r#"{{"total": "1000000", "base_version": {version}}}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    testkit::time::eventually(Duration::from_secs(15), "the approved raise", || async {
        let (budget, _, conflict) = budget_of(&b, "c").await;
        budget == 1_000_000 * UNIT && conflict.is_null()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_cannot_raise_a_per_bid_budget() {
    a_push_cannot_raise_a_budget_the_ledger_holds("per-bid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_cannot_raise_a_leased_budget() {
    a_push_cannot_raise_a_budget_the_ledger_holds("lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_cannot_raise_a_memory_budget() {
    let nats = NatsServer::start().await;
    let (key, keys) = operator();
    let section = fleet::FleetSection::new(nats.url());
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c", 100.0, 2.0, "asap")),
        &fleet_toml(&nats.url(), &keys),
    )
    .await;
    let raised = format!("[{}]", campaign_json("c", 1_000_000.0, 900.0, "asap"));
    push_to(&b, &section, raised.as_bytes(), &key).await;
    assert_eq!(
        b.campaign("c").await["nanos"]["budget"].as_i64(),
        Some(100 * UNIT)
    );
    let lowered = format!("[{}]", campaign_json("c", 40.0, 900.0, "asap"));
    push_to(&b, &section, lowered.as_bytes(), &key).await;
    assert_eq!(
        b.campaign("c").await["nanos"]["budget"].as_i64(),
        Some(40 * UNIT)
    );
}
