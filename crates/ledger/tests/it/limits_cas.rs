//! Limits as a compare-and-set on their version, against a real Redis: one writer changes a
//! campaign's limits, a change based on a stale version is refused with what is stored (and
//! writes nothing), equal limits are a no-op that keeps the version, and the ledger marker is
//! still enforced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{LedgerOn, RedisServer};
use ledger::{
    LedgerError, LimitsBase, LimitsChange, LimitsConflict, LimitsWritten, RedisLedger, StoredLimits,
};
use units::{Limits, Nanos, Timestamp};

fn limits(total: i64, daily: Option<i64>) -> Limits {
    Limits {
        total: Nanos(total),
        daily: daily.map(Nanos),
    }
}

fn change(c: &str, l: Limits, writer: &str, base: LimitsBase) -> LimitsChange {
    LimitsChange {
        campaign: c.to_owned(),
        limits: l,
        writer: writer.to_owned(),
        base,
    }
}

async fn cas(
    redis: &RedisLedger,
    c: &str,
    l: Limits,
    writer: &str,
    base: LimitsBase,
) -> Result<LimitsWritten, LimitsConflict> {
    redis
        .change_limits(&change(c, l, writer, base), Timestamp::now())
        .await
        .expect("redis answers")
}

async fn stored(redis: &RedisLedger, c: &str) -> Option<StoredLimits> {
    redis.stored_limits(&[c]).await.unwrap().pop().flatten()
}

fn written(version: u64, changed: bool) -> Result<LimitsWritten, LimitsConflict> {
    Ok(LimitsWritten { version, changed })
}

#[tokio::test]
async fn a_stale_base_is_refused_with_what_is_stored_and_writes_nothing() {
    let server = RedisServer::start().await;
    let redis = server.ledger("cas:");
    let (a, b) = (limits(1_000, Some(100)), limits(2_000, None));
    // Base 0: the campaign must not exist yet.
    assert_eq!(
        cas(&redis, "c", a, "file:n1", LimitsBase::Version(0)).await,
        written(1, true)
    );
    let v1 = StoredLimits {
        limits: a,
        version: 1,
        writer: "file:n1".into(),
    };
    assert_eq!(stored(&redis, "c").await, Some(v1.clone()));
    // Creating again from base 0 is stale now: refused, with version, writer and limits.
    let refused = cas(&redis, "c", b, "admin:ops", LimitsBase::Version(0)).await;
    assert_eq!(
        refused,
        Err(LimitsConflict {
            campaign: "c".into(),
            version: 1,
            stored: Some(v1.clone()),
        })
    );
    assert_eq!(
        stored(&redis, "c").await,
        Some(v1.clone()),
        "nothing written"
    );
    // Based on version 1: accepted, version 2, the new writer on record.
    assert_eq!(
        cas(&redis, "c", b, "admin:ops", LimitsBase::Version(1)).await,
        written(2, true)
    );
    // The first writer, still based on 1, is refused and does not undo the change.
    let stale = cas(&redis, "c", a, "file:n1", LimitsBase::Version(1)).await;
    assert_eq!(stale.map_err(|c| c.version), Err(2));
    // Nor may it write as "its own": the campaign's writer is another now.
    let own = cas(&redis, "c", a, "file:n1", LimitsBase::Own).await;
    assert_eq!(own.map_err(|c| c.version), Err(2));
    let now = stored(&redis, "c").await.unwrap();
    assert_eq!(
        (now.limits, now.version, now.writer.as_str()),
        (b, 2, "admin:ops")
    );
    // The balance follows the limits of record.
    let balance = redis.balance("c", Timestamp::now()).await.unwrap().unwrap();
    assert_eq!(balance.budget, Nanos(2_000));
    assert!(balance.daily.is_none());
}

#[tokio::test]
async fn equal_limits_are_a_no_op_that_keeps_version_and_writer_whatever_the_base() {
    let server = RedisServer::start().await;
    let redis = server.ledger("cas:");
    let a = limits(5_000, None);
    assert_eq!(
        cas(&redis, "c", a, "file:n1", LimitsBase::Own).await,
        written(1, true)
    );
    for (writer, base) in [
        ("file:n2", LimitsBase::Version(0)),
        ("file:n2", LimitsBase::Own),
        ("admin:ops", LimitsBase::Version(7)),
    ] {
        assert_eq!(
            cas(&redis, "c", a, writer, base).await,
            written(1, false),
            "{writer} {base:?}"
        );
    }
    let s = stored(&redis, "c").await.unwrap();
    assert_eq!((s.version, s.writer.as_str()), (1, "file:n1"));
    // A daily limit is part of the limits: adding one is a change.
    let with_daily = limits(5_000, Some(10));
    assert_eq!(
        cas(&redis, "c", with_daily, "file:n1", LimitsBase::Own).await,
        written(2, true)
    );
    assert_eq!(
        cas(&redis, "c", with_daily, "file:n1", LimitsBase::Version(2)).await,
        written(2, false)
    );
}

#[tokio::test]
async fn a_missing_campaign_is_created_from_base_0_or_as_ones_own_never_from_a_version() {
    let server = RedisServer::start().await;
    let redis = server.ledger("cas:");
    let a = limits(10, None);
    assert_eq!(
        cas(&redis, "gone", a, "admin:ops", LimitsBase::Version(3)).await,
        Err(LimitsConflict {
            campaign: "gone".into(),
            version: 0,
            stored: None,
        })
    );
    assert_eq!(stored(&redis, "gone").await, None, "nothing written");
    assert_eq!(
        cas(&redis, "mine", a, "file:n1", LimitsBase::Own).await,
        written(1, true)
    );
    // A campaign written before versions (no `version`, no `writer`) is at version 0 and
    // unclaimed: its writer takes it over.
    let legacy = "cas:{legacy}c:legacy";
    assert!(
        server
            .raw(&format!(
                "HSET {legacy} total 50 spent 0 reserved 0 day 0 day_spent 0 day_reserved 0"
            ))
            .await
            .starts_with(':')
    );
    let s = stored(&redis, "legacy").await.unwrap();
    assert_eq!((s.version, s.writer.as_str()), (0, ""));
    assert_eq!(
        cas(&redis, "legacy", a, "file:n1", LimitsBase::Own).await,
        written(1, true)
    );
}

#[tokio::test]
async fn tools_overwrite_whatever_is_stored_and_the_version_still_moves() {
    let server = RedisServer::start().await;
    let redis = server.ledger("cas:");
    let now = Timestamp::now();
    cas(&redis, "c", limits(1, None), "admin:ops", LimitsBase::Own)
        .await
        .unwrap();
    redis.set_limits("c", limits(2, None), now).await.unwrap();
    let s = stored(&redis, "c").await.unwrap();
    assert_eq!((s.version, s.writer.as_str()), (2, "operator"));
}

#[tokio::test]
async fn no_ledger_is_still_enforced_before_any_compare() {
    let server = RedisServer::start().await;
    let redis = server
        .ledger("gavel:")
        .with_timeout(Duration::from_millis(500));
    redis.expect_ledger(true);
    assert!(redis.reopen().await.unwrap());
    let a = limits(1_000, None);
    assert_eq!(
        cas(&redis, "c", a, "file:n1", LimitsBase::Version(0)).await,
        written(1, true)
    );
    assert!(server.raw("FLUSHALL").await.starts_with("+OK"));
    for base in [LimitsBase::Version(0), LimitsBase::Own, LimitsBase::Any] {
        assert_eq!(
            redis
                .change_limits(&change("c", a, "file:n1", base), Timestamp::now())
                .await,
            Err(LedgerError::NoLedger),
            "{base:?}"
        );
    }
    assert_eq!(redis.stored_limits(&["c"]).await.unwrap(), vec![None]);
}

/// What a fleet's start and a follower's check cost at 100,000 campaigns: the writer's
/// compare-and-sets (created, then equal: no-ops), and the read-back of every campaign's
/// limits. Prints its timings; run by hand:
/// `cargo test --release -p ledger --test it limits_cas:: -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: prints timings at 100,000 campaigns"]
async fn limits_at_100k_campaigns() {
    let server = RedisServer::start().await;
    let redis = server.ledger("scale:");
    let n = 100_000;
    let changes: Vec<LimitsChange> = (0..n)
        .map(|i| {
            change(
                &format!("c{i}"),
                limits(1_000 + i, None),
                "file:n1",
                LimitsBase::Own,
            )
        })
        .collect();
    for pass in ["create", "equal (no-op)"] {
        let started = std::time::Instant::now();
        let answers = redis
            .change_limits_many(&changes, Timestamp::now())
            .await
            .unwrap();
        let written = answers
            .iter()
            .filter(|a| matches!(a, Ok(Ok(w)) if w.changed))
            .count();
        let ok = answers.iter().filter(|a| matches!(a, Ok(Ok(_)))).count();
        assert_eq!(ok, changes.len());
        println!(
            "{pass}: {n} compare-and-sets in {:?} ({written} written)",
            started.elapsed()
        );
    }
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let started = std::time::Instant::now();
    let stored = redis.stored_limits(&names).await.unwrap();
    assert_eq!(stored.iter().flatten().count(), names.len());
    println!(
        "read back: {n} campaigns' limits in {:?}",
        started.elapsed()
    );
}
