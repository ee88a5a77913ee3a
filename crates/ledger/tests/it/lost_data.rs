//! A Redis that lost its data (restart without persistence, failover to an empty replica) must
//! not reopen full budgets: instances that opened the ledger notice its marker is gone, stop
//! bidding and re-create nothing, until an operator opens the ledger again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{LedgerOn, RedisServer, lease_config, until_leased};
use ledger::{LeasedLedger, RedisLedger, Refusal};
use testkit::time::eventually;
use units::{Limits, Nanos, Timestamp};

fn campaigns() -> Vec<(String, Limits)> {
    vec![(
        "c".to_owned(),
        Limits {
            total: Nanos(100_000_000),
            daily: None,
        },
    )]
}

fn handle(server: &RedisServer, create: bool) -> RedisLedger {
    let redis = server
        .ledger("gavel:")
        .with_timeout(Duration::from_millis(500));
    redis.expect_ledger(create);
    redis
}

fn refused(ledger: &LeasedLedger) -> bool {
    let now = Timestamp::now();
    let expires = now.saturating_add(Duration::from_secs(5));
    ledger.reserve("x-1", "c", Nanos(1), expires, now) == Err(Refusal::InsufficientBudget)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_lost_its_data_reopens_nothing_until_an_operator_opens_the_ledger() {
    let server = RedisServer::start().await;
    let ledger =
        LeasedLedger::start(handle(&server, true), lease_config("solo"), campaigns()).await;
    until_leased(&ledger, "c").await;
    assert!(!ledger.ledger_missing());

    // Redis restarts empty.
    assert!(server.raw("FLUSHALL").await.starts_with("+OK"));
    eventually(Duration::from_secs(10), "the loss noticed", || async {
        ledger.ledger_missing()
    })
    .await;
    assert!(refused(&ledger), "no bid on a lost ledger");
    // Rounds go on; nothing is re-created, so no budget reopens.
    let rounds = ledger.stats().rounds;
    eventually(Duration::from_secs(10), "more rounds", || async {
        ledger.stats().rounds >= rounds + 5
    })
    .await;
    let shared = server.ledger("gavel:");
    assert_eq!(shared.campaigns().await.unwrap(), Vec::<String>::new());
    assert!(refused(&ledger));

    // The operator opens a new ledger (after restoring what could be restored).
    let opened = shared.open_ledger(true).await.unwrap();
    assert!(opened.is_some());
    eventually(Duration::from_secs(10), "bidding resumes", || async {
        !ledger.ledger_missing()
    })
    .await;
    until_leased(&ledger, "c").await;
    ledger.shutdown().await.unwrap();
    assert_eq!(shared.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_redis_is_not_a_ledger_unless_creating_is_allowed() {
    let server = RedisServer::start().await;
    let ledger =
        LeasedLedger::start(handle(&server, false), lease_config("solo"), campaigns()).await;
    assert!(ledger.ledger_missing());
    assert!(refused(&ledger));
    assert_eq!(
        server.ledger("gavel:").campaigns().await.unwrap(),
        Vec::<String>::new(),
        "no limits written to a Redis without a ledger"
    );
    ledger.shutdown().await.unwrap();

    let created =
        LeasedLedger::start(handle(&server, true), lease_config("solo"), campaigns()).await;
    assert!(!created.ledger_missing());
    until_leased(&created, "c").await;
    created.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_campaign_is_not_re_created_with_zero_spend() {
    let server = RedisServer::start().await;
    let redis = handle(&server, true);
    assert!(redis.reopen().await.unwrap());
    let c = Limits {
        total: Nanos(1_000),
        daily: None,
    };
    redis.set_limits("c", c, Timestamp::now()).await.unwrap();
    // Evicted (allkeys-lru under memory pressure): the hash is gone, its name still listed.
    // The ledger is open: the refusal names the campaign, and the handle does not take the
    // whole ledger for lost.
    assert!(server.raw("DEL gavel:{c}c:c").await.starts_with(":1"));
    assert_eq!(
        redis.set_limits("c", c, Timestamp::now()).await,
        Err(ledger::LedgerError::CampaignGone("c".to_owned()))
    );
    assert!(
        !redis.ledger_missing(),
        "one campaign gone is not the ledger gone"
    );
    assert!(redis.stored_limits(&["c"]).await.unwrap()[0].is_none());
}

#[tokio::test]
async fn per_bid_reservations_stop_when_redis_loses_the_ledger() {
    let server = RedisServer::start().await;
    let redis = handle(&server, true);
    assert!(redis.reopen().await.unwrap());
    let now = Timestamp::now();
    let later = now.saturating_add(Duration::from_secs(30));
    for (name, limits) in campaigns() {
        redis.set_limits(&name, limits, now).await.unwrap();
    }
    assert_eq!(
        redis.reserve("a-1", "c", Nanos(10), later, now).await,
        Ok(Ok(()))
    );
    assert!(!redis.ledger_missing());
    assert!(server.raw("FLUSHALL").await.starts_with("+OK"));
    assert_eq!(
        redis.reserve("a-2", "c", Nanos(10), later, now).await,
        Err(ledger::LedgerError::NoLedger)
    );
    assert!(redis.ledger_missing(), "the loss shows");
    // Reopening without the operator does not create it; the operator's open does.
    assert!(!redis.reopen().await.unwrap());
    assert!(
        server
            .ledger("gavel:")
            .open_ledger(true)
            .await
            .unwrap()
            .is_some()
    );
    assert!(redis.reopen().await.unwrap());
    assert!(!redis.ledger_missing());
}

#[tokio::test]
async fn keys_left_under_the_prefix_are_evidence_and_other_prefixes_are_not() {
    let server = RedisServer::start().await;
    // A prefix with glob characters: the scan must match it literally.
    let redis = handle(&server, true).with_timeout(Duration::from_secs(2));
    let starred = server.ledger("g*[1]:");
    assert_eq!(
        redis.keys_under_prefix().await.unwrap(),
        ledger::KeyScan::default()
    );
    assert!(redis.reopen().await.unwrap());
    let c = Limits {
        total: Nanos(1_000),
        daily: None,
    };
    redis.set_limits("c", c, Timestamp::now()).await.unwrap();
    // The campaign's slot's marker evicted, the campaign left: a partial loss.
    let marker = ledger::Keys::new("gavel:").marker(ledger::Keys::campaign_slot("c"));
    assert!(server.raw(&format!("DEL {marker}")).await.starts_with(":1"));
    let scan = redis.keys_under_prefix().await.unwrap();
    // The other 16,383 slots' markers, the campaign's hash and its slot's campaign list.
    assert_eq!((scan.keys, scan.incomplete), (16_385, false), "{scan:?}");
    assert!(
        scan.sample.iter().all(|k| k.starts_with("gavel:")),
        "{scan:?}"
    );
    // `g*[1]:` as a glob would match `gavel:...`; taken literally it matches nothing.
    assert_eq!(starred.keys_under_prefix().await.unwrap().keys, 0);
    assert!(server.raw("SET g*[1]:x 1").await.starts_with("+OK"));
    assert_eq!(starred.keys_under_prefix().await.unwrap().keys, 1);
}
