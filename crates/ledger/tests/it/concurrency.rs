//! Many tasks on several clients spending one campaign at once, with seeded random duplicates
//! and releases: the scripts' atomicity is what keeps the books exact.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{LedgerOn, RedisServer};
use ledger::RedisLedger;
use ledger::{CommitOutcome, Refusal, ReleaseOutcome};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use units::{Limits, Nanos, Timestamp};

const NOW: Timestamp = Timestamp(20_000 * Timestamp::MS_PER_DAY);
const BUDGET: i64 = 2_000_000;

/// One task: reserve until the budget is gone; each reservation is then committed by two
/// clients at once (a win and a billing notice racing, with different prices), or released
/// (sometimes twice), or committed then released. Returns what this task saw charged.
async fn spender(task: usize, seed: u64, a: RedisLedger, b: RedisLedger) -> i64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut charged = 0;
    let mut refusals = 0;
    let mut i = 0;
    while refusals < 3 {
        i += 1;
        let id = format!("t{task}-{i}");
        let amount = rng.random_range(1_000..20_000);
        let expires = Timestamp(NOW.0 + 60_000);
        match a
            .reserve(&id, "c", Nanos(amount), expires, NOW)
            .await
            .unwrap()
        {
            Ok(()) => {}
            Err(Refusal::InsufficientBudget) => {
                refusals += 1;
                continue;
            }
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
        assert_eq!(
            b.reserve(&id, "c", Nanos(amount), expires, NOW)
                .await
                .unwrap(),
            Err(Refusal::DuplicateId)
        );
        match rng.random_range(0..10) {
            0..=5 => {
                let (p1, p2) = (rng.random_range(0..=amount), rng.random_range(0..=amount));
                let (r1, r2) = tokio::join!(
                    a.commit(&id, Some("c"), Nanos(p1), NOW),
                    b.commit(&id, Some("c"), Nanos(p2), NOW)
                );
                match (r1.unwrap().unwrap(), r2.unwrap().unwrap()) {
                    (CommitOutcome::Charged(x), CommitOutcome::AlreadyCommitted(y))
                    | (CommitOutcome::AlreadyCommitted(y), CommitOutcome::Charged(x)) => {
                        assert_eq!(x, y, "the duplicate reports the recorded price");
                        charged += x.get();
                    }
                    other => panic!("exactly one commit must charge: {other:?}"),
                }
                if rng.random_bool(0.3) {
                    assert_eq!(
                        b.release(&id, Some("c"), NOW).await.unwrap(),
                        Ok(ReleaseOutcome::AlreadyCommitted)
                    );
                }
            }
            6..=8 => {
                let (r1, r2) = tokio::join!(
                    a.release(&id, Some("c"), NOW),
                    b.release(&id, Some("c"), NOW)
                );
                let mut answers = [r1.unwrap().unwrap(), r2.unwrap().unwrap()];
                answers.sort_by_key(|r| format!("{r:?}"));
                assert_eq!(
                    answers,
                    [
                        ReleaseOutcome::AlreadyReleased,
                        ReleaseOutcome::Released(Nanos(amount))
                    ]
                );
            }
            _ => {
                // Left open: it holds budget until the final sweep.
            }
        }
    }
    charged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_spenders_never_overspend_and_charges_add_up() {
    let server = RedisServer::start().await;
    let clients: Vec<RedisLedger> = (0..4)
        .map(|_| {
            let mut config = server.config("gavel:");
            config.timeout = Duration::from_secs(5);
            config.max_connections = 4;
            RedisLedger::new(config)
        })
        .collect();
    clients[0]
        .set_limits(
            "c",
            Limits {
                total: Nanos(BUDGET),
                daily: Some(Nanos(BUDGET)),
            },
            NOW,
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for task in 0..24 {
        let a = clients[task % 4].clone();
        let b = clients[(task + 1) % 4].clone();
        tasks.push(tokio::spawn(spender(task, 7_000 + task as u64, a, b)));
    }
    let mut charged = 0;
    for t in tasks {
        charged += t.await.unwrap();
    }
    let before_sweep = clients[1].balance("c", NOW).await.unwrap().unwrap();
    assert!(before_sweep.spent.get() + before_sweep.reserved.get() <= BUDGET);
    assert_eq!(
        before_sweep.spent.get(),
        charged,
        "the sum of charges is what was spent"
    );
    assert_eq!(clients[2].check_invariants().await.unwrap(), Ok(()));
    // Everything left open expires; the books end with spent only.
    let later = Timestamp(NOW.0 + 60_000);
    while clients[3]
        .expire_campaigns(&["c"], later)
        .await
        .unwrap()
        .more
    {}
    let end = clients[0].balance("c", later).await.unwrap().unwrap();
    assert_eq!((end.spent.get(), end.reserved), (charged, Nanos::ZERO));
    assert!(end.spent.get() <= BUDGET);
    assert_eq!(clients[0].check_invariants().await.unwrap(), Ok(()));
    eprintln!(
        "spent {} of {BUDGET} (charges summed: {charged})",
        end.spent.get()
    );
}
