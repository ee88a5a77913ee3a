//! Lease mode end to end on a real Redis: several instances spending one budget, Redis killed
//! and restarted under them, a crashed instance, configuration reloads, shutdown.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::RedisServer;
use ledger_redis::{LeaseConfig, LeasedLedger, RedisLedger};
use pacing::{CommitOutcome, Limits, Nanos, Refusal, Timestamp};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const MAX_BID: i64 = 5_000;

fn config(instance: &str, chunk: i64) -> LeaseConfig {
    LeaseConfig {
        instance_id: instance.to_owned(),
        lease_chunk: Nanos(chunk),
        lease_ttl: Duration::from_millis(1_000),
        safety_margin: Duration::from_millis(300),
        report_interval: Duration::from_millis(50),
        tombstone_ttl: Duration::from_secs(60),
    }
}

fn redis(server: &RedisServer) -> RedisLedger {
    server
        .ledger("gavel:")
        .with_timeout(Duration::from_millis(200))
}

fn limits(total: i64) -> Limits {
    Limits {
        total: Nanos(total),
        daily: None,
    }
}

/// Bids on `campaign` until it has been refused `patience` times in a row (10 ms apart),
/// releasing some bids, committing the rest (some twice). Returns what was charged locally.
async fn bidder(
    ledger: LeasedLedger,
    campaign: &'static str,
    seed: u64,
    patience: usize,
    charged: Arc<AtomicI64>,
) -> i64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut mine = 0;
    let mut refused = 0;
    let mut i = 0u64;
    while refused < patience {
        i += 1;
        let id = format!("{seed}-{i}");
        let amount = rng.random_range(1_000..=MAX_BID);
        let now = Timestamp::now();
        let expires = now.saturating_add(Duration::from_secs(30));
        match ledger.reserve(&id, campaign, Nanos(amount), expires, now) {
            Ok(()) => refused = 0,
            Err(Refusal::InsufficientBudget) => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
        if rng.random_bool(0.2) {
            ledger.release(&id, now).unwrap();
        } else {
            let price = rng.random_range(0..=amount);
            assert_eq!(
                ledger.commit(&id, Nanos(price), now),
                Ok(CommitOutcome::Charged(Nanos(price)))
            );
            // A duplicate billing notice changes nothing.
            if rng.random_bool(0.1) {
                assert_eq!(
                    ledger.commit(&id, Nanos(price), now),
                    Ok(CommitOutcome::AlreadyCommitted(Nanos(price)))
                );
            }
            mine += price;
            charged.fetch_add(price, Ordering::Relaxed);
        }
        // Let other tasks and the lease task run (the request path is synchronous).
        if i.is_multiple_of(8) {
            tokio::task::yield_now().await;
        }
    }
    mine
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_share_one_budget_and_never_overspend() {
    let server = RedisServer::start().await;
    let budget = 2_000_000;
    let chunk = 40_000;
    let campaigns = vec![("c".to_owned(), limits(budget))];
    let mut instances = Vec::new();
    for i in 0..4 {
        let cfg = config(&format!("i{i}"), chunk);
        instances.push(LeasedLedger::start(redis(&server), cfg, campaigns.clone()).await);
    }
    let charged = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for (i, ledger) in instances.iter().enumerate() {
        for j in 0..3 {
            let seed = (i * 10 + j) as u64;
            tasks.push(tokio::spawn(bidder(
                ledger.clone(),
                "c",
                seed,
                40,
                Arc::clone(&charged),
            )));
        }
    }
    // While they spend, Redis never shows more than the budget.
    let shared = redis(&server);
    let watch = tokio::spawn(async move {
        let mut peak = 0;
        for _ in 0..40 {
            if let Ok(Some(b)) = shared.balance("c", Timestamp::now()).await {
                assert!(b.spent.get() + b.reserved.get() <= budget, "{b:?}");
                peak = peak.max(b.spent.get());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        peak
    });
    for t in tasks {
        t.await.unwrap();
    }
    watch.await.unwrap();
    for ledger in &instances {
        ledger.shutdown().await.unwrap();
    }
    let end = redis(&server)
        .balance("c", Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    let local: i64 = instances
        .iter()
        .map(|l| {
            l.local_balance("c", Timestamp::now())
                .map_or(0, |b| b.spent.get())
        })
        .sum();
    let charged = charged.load(Ordering::Relaxed);
    eprintln!(
        "budget {budget} spent {} (local {local}, charged {charged}), unspent {}",
        end.spent.get(),
        budget - end.spent.get()
    );
    assert_eq!(end.reserved, Nanos::ZERO, "every lease closed");
    assert!(end.spent.get() <= budget);
    assert_eq!(end.spent.get(), local, "every local charge reached Redis");
    assert_eq!(local, charged);
    // Exhausted to within what each instance could not place (less than one bid each).
    assert!(
        budget - end.spent.get() < 4 * MAX_BID,
        "unspent {}",
        budget - end.spent.get()
    );
    assert!(budget - end.spent.get() < chunk);
    for l in &instances {
        assert_eq!(l.stats().uncharged, Nanos::ZERO);
    }
    assert_eq!(redis(&server).check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_closed_then_recovers_by_itself() {
    let mut server = RedisServer::start().await;
    let port = server.port;
    let budget = 100_000_000;
    let chunk = 1_000_000;
    let campaigns = vec![("c".to_owned(), limits(budget))];
    let ledger = LeasedLedger::start(redis(&server), config("solo", chunk), campaigns).await;

    // Phase 1: Redis up; a few bids, reported.
    for i in 0..10 {
        let now = Timestamp::now();
        let id = format!("up-{i}");
        ledger
            .reserve(
                &id,
                "c",
                Nanos(MAX_BID),
                now.saturating_add(Duration::from_secs(5)),
                now,
            )
            .unwrap();
        ledger.commit(&id, Nanos(MAX_BID), now).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Phase 2: Redis killed. Spending goes on from the lease, then stops by the lease's clock.
    server.kill();
    let killed_at = Instant::now();
    let mut phase2 = 0;
    let mut last_ok = Duration::ZERO;
    let mut rng = SmallRng::seed_from_u64(2);
    let mut i = 0;
    while killed_at.elapsed() < Duration::from_millis(1_500) {
        i += 1;
        let now = Timestamp::now();
        let amount = rng.random_range(1_000..=MAX_BID);
        let id = format!("down-{i}");
        match ledger.reserve(
            &id,
            "c",
            Nanos(amount),
            now.saturating_add(Duration::from_secs(5)),
            now,
        ) {
            Ok(()) => {
                ledger.commit(&id, Nanos(amount), now).unwrap();
                phase2 += amount;
                last_ok = killed_at.elapsed();
            }
            Err(Refusal::InsufficientBudget) => {}
            Err(other) => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let headroom = ledger
        .local_balance("c", Timestamp::now())
        .map(|b| b.available);
    eprintln!(
        "down: spent {phase2} from the lease, last bid {last_ok:?} after the kill, {headroom:?} leased but unusable"
    );
    // The lease expires 1 s after its last extension (<= 50 ms before the kill) and spending
    // stops 300 ms before that: by the lease's clock, with leased money left, not for lack of it.
    assert!(
        last_ok >= Duration::from_millis(300) && last_ok <= Duration::from_millis(750),
        "{last_ok:?}"
    );
    assert!(headroom.is_some_and(|h| h.get() > 100_000), "{headroom:?}");
    // Spent at most the local lease.
    assert!(phase2 <= chunk + chunk / 2, "{phase2}");
    assert!(!ledger.redis_healthy());
    // Shared balances fail, and fail fast.
    let started = Instant::now();
    assert!(ledger.balances(Timestamp::now()).await.is_err());
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );

    // Phase 3: a new, empty Redis on the same port. The ledger re-creates the campaign and
    // leases again, with no help.
    let server = RedisServer::start_on(port).await.unwrap();
    let back = Instant::now();
    let recovered = loop {
        let now = Timestamp::now();
        if ledger
            .reserve(
                "probe",
                "c",
                Nanos(1_000),
                now.saturating_add(Duration::from_secs(5)),
                now,
            )
            .is_ok()
        {
            ledger.release("probe", now).unwrap();
            break back.elapsed();
        }
        assert!(back.elapsed() < Duration::from_secs(5), "no recovery");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    eprintln!("recovered {recovered:?} after Redis came back");
    let phase3 = bidder(ledger.clone(), "c", 3, 1, Arc::new(AtomicI64::new(0))).await;
    assert!(phase3 > 0);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while ledger.balances(Timestamp::now()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    ledger.shutdown().await.unwrap();
    let shared = redis(&server)
        .balance("c", Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    // The new Redis knows only what was spent since it came back (it started empty: this is
    // why production Redis needs persistence).
    assert_eq!(shared.budget, Nanos(budget));
    assert_eq!(shared.spent.get(), phase3);
    assert_eq!(shared.reserved, Nanos::ZERO);
    assert!(ledger.redis_healthy());
    assert_eq!(redis(&server).check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_instances_lease_comes_back_after_its_expiry() {
    let server = RedisServer::start().await;
    let budget = 100_000;
    let campaigns = vec![("c".to_owned(), limits(budget))];
    // The whole budget fits in one chunk: the first instance takes it all.
    let crashed = LeasedLedger::start(redis(&server), config("a", budget), campaigns.clone()).await;
    let now = Timestamp::now();
    crashed
        .reserve(
            "x",
            "c",
            Nanos(30_000),
            now.saturating_add(Duration::from_secs(5)),
            now,
        )
        .unwrap();
    crashed.commit("x", Nanos(30_000), now).unwrap();
    let survivor = LeasedLedger::start(redis(&server), config("b", budget), campaigns).await;
    let now = Timestamp::now();
    let starved = survivor.reserve(
        "y",
        "c",
        Nanos(1_000),
        now.saturating_add(Duration::from_secs(5)),
        now,
    );
    assert_eq!(starved, Err(Refusal::InsufficientBudget));
    // Let one report carry the 30,000, then crash: no shutdown, the task dies with the handles.
    tokio::time::sleep(Duration::from_millis(150)).await;
    drop(crashed);
    let crashed_at = Instant::now();
    // The survivor's sweep reclaims the lease after its expiry, then leases the remainder.
    loop {
        let now = Timestamp::now();
        if survivor
            .reserve(
                "y",
                "c",
                Nanos(1_000),
                now.saturating_add(Duration::from_secs(5)),
                now,
            )
            .is_ok()
        {
            break;
        }
        assert!(
            crashed_at.elapsed() < Duration::from_secs(3),
            "lease never reclaimed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("reclaimed and re-leased after {:?}", crashed_at.elapsed());
    assert!(crashed_at.elapsed() >= Duration::from_millis(500));
    survivor.release("y", Timestamp::now()).unwrap();
    survivor.shutdown().await.unwrap();
    let end = redis(&server)
        .balance("c", Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((end.spent, end.reserved), (Nanos(30_000), Nanos::ZERO));
}

#[tokio::test]
async fn reloads_add_change_and_retire_campaigns() {
    let server = RedisServer::start().await;
    let shared = redis(&server);
    let ledger = LeasedLedger::start(
        redis(&server),
        config("r", 10_000),
        vec![("a".into(), limits(50_000))],
    )
    .await;
    let now = Timestamp::now();
    let exp = now.saturating_add(Duration::from_secs(5));
    ledger.reserve("a1", "a", Nanos(2_000), exp, now).unwrap();
    ledger.commit("a1", Nanos(2_000), now).unwrap();
    assert_eq!(
        ledger.reserve("b1", "b", Nanos(1), exp, now),
        Err(Refusal::UnknownCampaign)
    );
    // Add b, raise a.
    ledger.set_campaigns(vec![
        ("a".into(), limits(80_000)),
        ("b".into(), limits(30_000)),
    ]);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let now = Timestamp::now();
        let b_ok = ledger.reserve("b1", "b", Nanos(1_000), exp, now).is_ok();
        let a_budget = shared.balance("a", now).await.unwrap().map(|b| b.budget);
        if b_ok && a_budget == Some(Nanos(80_000)) {
            break;
        }
        assert!(Instant::now() < deadline, "reload not applied");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ledger.commit("b1", Nanos(1_000), Timestamp::now()).unwrap();
    // Retire a: no new bids; its lease goes back.
    ledger.set_campaigns(vec![("b".into(), limits(30_000))]);
    let now = Timestamp::now();
    assert_eq!(
        ledger.reserve("a2", "a", Nanos(1_000), exp, now),
        Err(Refusal::InsufficientBudget)
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while shared
        .balance("a", Timestamp::now())
        .await
        .unwrap()
        .map(|b| b.reserved)
        != Some(Nanos::ZERO)
    {
        assert!(
            Instant::now() < deadline,
            "retired campaign's lease not closed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let a = shared
        .balance("a", Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((a.spent, a.available), (Nanos(2_000), Nanos(78_000)));
    // Balances are the shared figures, for configured campaigns only.
    let all = ledger.balances(Timestamp::now()).await.unwrap();
    assert_eq!(
        all.iter().map(|b| b.campaign.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
    ledger.shutdown().await.unwrap();
    let b = shared
        .balance("b", Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((b.spent, b.reserved), (Nanos(1_000), Nanos::ZERO));
    assert_eq!(shared.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test]
async fn starting_while_redis_is_down_spends_nothing_until_it_is_up() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = ledger_redis::RedisConfig {
        addr: format!("127.0.0.1:{port}"),
        timeout: Duration::from_millis(200),
        ..ledger_redis::RedisConfig::default()
    };
    let started = Instant::now();
    let ledger = LeasedLedger::start(
        RedisLedger::new(cfg),
        config("late", 10_000),
        vec![("c".into(), limits(50_000))],
    )
    .await;
    assert!(started.elapsed() < Duration::from_millis(500));
    let now = Timestamp::now();
    let exp = now.saturating_add(Duration::from_secs(5));
    assert_eq!(
        ledger.reserve("r", "c", Nanos(1), exp, now),
        Err(Refusal::InsufficientBudget)
    );
    let _server = RedisServer::start_on(port).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while ledger
        .reserve("r", "c", Nanos(1), exp, Timestamp::now())
        .is_err()
    {
        assert!(Instant::now() < deadline, "never leased");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ledger.shutdown().await.unwrap();
}

#[test]
fn lease_configuration_is_validated() {
    assert_eq!(LeaseConfig::default().validate(), Ok(()));
    assert_eq!(config("t", 1).validate(), Ok(()));
    let zero_chunk = LeaseConfig {
        lease_chunk: Nanos(0),
        ..LeaseConfig::default()
    };
    assert!(zero_chunk.validate().is_err());
    let no_window = LeaseConfig {
        safety_margin: Duration::from_secs(10),
        ..LeaseConfig::default()
    };
    assert!(no_window.validate().is_err());
    let slow_reports = LeaseConfig {
        report_interval: Duration::from_secs(8),
        ..LeaseConfig::default()
    };
    assert!(slow_reports.validate().is_err());
}
