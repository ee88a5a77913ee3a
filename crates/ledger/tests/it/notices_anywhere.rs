//! Lease mode behind a load balancer: a notice may reach any instance, not the one that made
//! the bid. Four instances on a real Redis; notices round-robin, replayed, reordered, and sent
//! after their holder died. Every win is charged once, a loss never erases a win, and the
//! shared books end exact.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{LedgerOn, RedisServer, lease_config, until_leased};
use ledger::{CommitOutcome, LeasedLedger, RedisLedger, ReleaseOutcome};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use testkit::time::eventually;
use units::{Limits, Nanos, Timestamp};

/// The harness's 2 s timeout: a thousand notices at once on a machine busy with other work
/// must not time out, and the paused-Redis test below still sees its error well within 5 s.
fn redis(server: &RedisServer) -> RedisLedger {
    server.ledger("gavel:")
}

async fn four(server: &RedisServer, budget: i64) -> Vec<LeasedLedger> {
    let campaigns = vec![(
        "c".to_owned(),
        Limits {
            total: Nanos(budget),
            daily: None,
        },
    )];
    let mut all = Vec::new();
    for i in 0..4 {
        let ledger = LeasedLedger::start(
            redis(server),
            lease_config(&format!("n{i}")),
            campaigns.clone(),
        )
        .await;
        until_leased(&ledger, "c").await;
        all.push(ledger);
    }
    all
}

fn reserve(ledger: &LeasedLedger, id: &str, amount: i64) {
    let now = Timestamp::now();
    ledger
        .reserve(
            id,
            "c",
            Nanos(amount),
            now.saturating_add(Duration::from_secs(30)),
            now,
        )
        .unwrap_or_else(|e| panic!("{id}: {e:?}"));
}

async fn spent(server: &RedisServer) -> (i64, i64) {
    let b = redis(server)
        .balance("c", Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    (b.spent.get(), b.reserved.get())
}

/// What happens to one reservation in the round-robin test.
#[derive(Clone, Copy, Debug)]
enum Fate {
    Win,
    Loss,
    LossThenWin,
    WinThenLoss,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_sent_round_robin_to_four_instances_are_all_charged_once() {
    let server = RedisServer::start().await;
    let ledgers = four(&server, 1_000_000_000).await;
    let mut rng = SmallRng::seed_from_u64(16);
    let mut bids = Vec::new();
    for k in 0..400usize {
        let holder = k % 4;
        let id = format!("n{holder}-{k:032x}");
        let amount = rng.random_range(1_000..=5_000);
        reserve(&ledgers[holder], &id, amount);
        let fate = match rng.random_range(0..10) {
            0..=5 => Fate::Win,
            6..=7 => Fate::Loss,
            8 => Fate::LossThenWin,
            _ => Fate::WinThenLoss,
        };
        bids.push((id, amount, rng.random_range(0..=amount), fate));
    }
    // Round robin: the n-th notice goes to instance n % 4, whoever holds the reservation.
    let mut next = 0usize;
    let mut expected = 0i64;
    let (mut after_release, mut refused_losses) = (0, 0);
    for (id, _, price, fate) in &bids {
        let mut to = || {
            next += 1;
            &ledgers[next % 4]
        };
        let now = Timestamp::now();
        let win = |l: &LeasedLedger| {
            let l = l.clone();
            let id = id.clone();
            async move {
                l.commit_notice(&id, Some("c"), Nanos(*price), now)
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let loss = |l: &LeasedLedger| {
            let l = l.clone();
            let id = id.clone();
            async move {
                l.release_notice(&id, Some("c"), now)
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        match fate {
            Fate::Win => {
                assert!(matches!(win(to()).await, CommitOutcome::Charged(p) if p.get() == *price));
                // The billing notice, elsewhere: a duplicate.
                assert!(matches!(
                    win(to()).await,
                    CommitOutcome::AlreadyCommitted(_)
                ));
                expected += price;
            }
            Fate::Loss => {
                assert!(matches!(loss(to()).await, ReleaseOutcome::Released(_)));
                assert_eq!(loss(to()).await, ReleaseOutcome::AlreadyReleased);
            }
            Fate::LossThenWin => {
                assert!(matches!(loss(to()).await, ReleaseOutcome::Released(_)));
                // Charged all the same: "after release" when the release had reached the
                // holder's book, plainly when the holder had not heard of the loss yet.
                let w = win(to()).await;
                match w {
                    CommitOutcome::ChargedAfterRelease(p) => {
                        assert_eq!(p.get(), *price);
                        after_release += 1;
                    }
                    CommitOutcome::Charged(p) => assert_eq!(p.get(), *price),
                    other => panic!("{other:?}"),
                }
                expected += price;
            }
            Fate::WinThenLoss => {
                assert!(matches!(win(to()).await, CommitOutcome::Charged(_)));
                assert_eq!(loss(to()).await, ReleaseOutcome::AlreadyCommitted);
                refused_losses += 1;
                expected += price;
            }
        }
    }
    assert!(after_release > 0 && refused_losses > 0);
    // Every holder hears what the others settled for it, then hands its lease back.
    eventually(Duration::from_secs(10), "inboxes drained", || async {
        let n: u64 = ledgers.iter().map(|l| l.stats().settled_elsewhere).sum();
        // 3 in 4 first notices reach another instance; each reservation is settled once.
        n > 0 && server.raw("KEYS gavel:{*}in:*").await.starts_with("*0")
    })
    .await;
    for l in &ledgers {
        l.shutdown().await.unwrap();
    }
    let (spent, reserved) = spent(&server).await;
    assert_eq!(
        spent, expected,
        "every win charged exactly once, to the nano"
    );
    assert_eq!(reserved, 0, "nothing held once the notices settled");
    for l in &ledgers {
        assert_eq!(l.stats().uncharged, Nanos::ZERO);
    }
    assert_eq!(redis(&server).check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_billing_notice_replayed_a_thousand_times_across_instances_is_charged_once() {
    let server = RedisServer::start().await;
    let ledgers = four(&server, 1_000_000_000).await;
    let id = format!("n2-{:032x}", 7);
    reserve(&ledgers[2], &id, 4_000);
    let mut tasks = Vec::new();
    for k in 0..1_000usize {
        let l = ledgers[k % 4].clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            l.commit_notice(&id, Some("c"), Nanos(3_000), Timestamp::now())
                .await
                .unwrap()
                .unwrap()
        }));
    }
    let mut charged = 0;
    for t in tasks {
        match t.await.unwrap() {
            CommitOutcome::Charged(p) => {
                assert_eq!(p, Nanos(3_000));
                charged += 1;
            }
            CommitOutcome::AlreadyCommitted(p) => assert_eq!(p, Nanos(3_000)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(charged, 1);
    for l in &ledgers {
        l.shutdown().await.unwrap();
    }
    assert_eq!(spent(&server).await, (3_000, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_win_for_a_dead_holder_is_charged_from_the_campaign_once_its_lease_is_reclaimed() {
    let server = RedisServer::start().await;
    let mut ledgers = four(&server, 1_000_000_000).await;
    let id = format!("n0-{:032x}", 9);
    reserve(&ledgers[0], &id, 4_000);
    // n0 dies without a word: its lease is reclaimed by the others' sweep after its expiry.
    drop(ledgers.remove(0));
    eventually(Duration::from_secs(10), "n0's lease reclaimed", || async {
        server.raw("KEYS gavel:{*}own:n0:*").await.starts_with("*0")
    })
    .await;
    let now = Timestamp::now();
    let w = ledgers[1]
        .commit_notice(&id, Some("c"), Nanos(2_500), now)
        .await
        .unwrap();
    assert_eq!(w, Ok(CommitOutcome::ChargedAfterRelease(Nanos(2_500))));
    let again = ledgers[2]
        .commit_notice(&id, Some("c"), Nanos(2_500), now)
        .await
        .unwrap();
    assert_eq!(again, Ok(CommitOutcome::AlreadyCommitted(Nanos(2_500))));
    for l in &ledgers {
        l.shutdown().await.unwrap();
    }
    assert_eq!(spent(&server).await, (2_500, 0));
    assert_eq!(redis(&server).check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_win_settled_while_redis_is_away_is_claimed_there_once_it_answers() {
    let server = RedisServer::start().await;
    let ledgers = four(&server, 1_000_000_000).await;
    let id = format!("n1-{:032x}", 11);
    reserve(&ledgers[1], &id, 4_000);
    // Redis stops taking writes (as during a failover) until the test lifts the pause, so the
    // checks below need no race against a timer on a loaded machine.
    let paused = server.raw("CLIENT PAUSE 60000 WRITE").await;
    assert!(paused.starts_with("+OK"), "{paused}");
    let slow = tokio::time::timeout(
        Duration::from_secs(5),
        ledgers[1].commit_notice(&id, Some("c"), Nanos(3_000), Timestamp::now()),
    )
    .await
    .expect("the notice is answered within the Redis timeout");
    // The holder never loses the win: charged locally, claimed in Redis later.
    assert_eq!(slow.unwrap(), Ok(CommitOutcome::Charged(Nanos(3_000))));
    // Elsewhere, the same notice must wait for Redis: an error the sender retries.
    let elsewhere = ledgers[2]
        .commit_notice(&id, Some("c"), Nanos(3_000), Timestamp::now())
        .await;
    assert!(elsewhere.is_err(), "{elsewhere:?}");
    let unpaused = server.raw("CLIENT UNPAUSE").await;
    assert!(unpaused.starts_with("+OK"), "{unpaused}");
    // Once Redis answers, the claim lands: a replay anywhere is a duplicate.
    eventually(Duration::from_secs(10), "the claim written", || async {
        server
            .raw(&format!("HGET gavel:{{c}}d:{id} state"))
            .await
            .contains("charged")
    })
    .await;
    let replay = ledgers[3]
        .commit_notice(&id, Some("c"), Nanos(3_000), Timestamp::now())
        .await
        .unwrap();
    assert_eq!(replay, Ok(CommitOutcome::AlreadyCommitted(Nanos(3_000))));
    for l in &ledgers {
        l.shutdown().await.unwrap();
    }
    assert_eq!(spent(&server).await, (3_000, 0));
}

/// Found by a hostile test pass: a loss at another instance, then the win at the holder before
/// it had read its inbox, was counted `released` there and `charged` here. Redis's order is the
/// fleet's: the win came after the loss, so it is a charge after the release, whichever book
/// has heard of the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_win_at_the_holder_after_a_loss_elsewhere_is_labelled_a_charge_after_release() {
    let server = RedisServer::start().await;
    let ledgers = four(&server, 1_000_000_000).await;
    let id = format!("n0-{:032x}", 11);
    reserve(&ledgers[0], &id, 4_000);
    let now = Timestamp::now();
    let loss = ledgers[1]
        .release_notice(&id, Some("c"), now)
        .await
        .unwrap();
    assert_eq!(loss, Ok(ReleaseOutcome::Released(Nanos::ZERO)));
    // At once: n0 has not read its inbox (it does every lease_report_ms).
    let win = ledgers[0]
        .commit_notice(&id, Some("c"), Nanos(3_000), now)
        .await
        .unwrap();
    assert_eq!(win, Ok(CommitOutcome::ChargedAfterRelease(Nanos(3_000))));

    // Both at the holder, one after the other: the release, then the charge after it.
    let id = format!("n0-{:032x}", 12);
    reserve(&ledgers[0], &id, 4_000);
    let loss = ledgers[0]
        .release_notice(&id, Some("c"), now)
        .await
        .unwrap();
    assert_eq!(loss, Ok(ReleaseOutcome::Released(Nanos(4_000))));
    let win = ledgers[0]
        .commit_notice(&id, Some("c"), Nanos(3_000), now)
        .await
        .unwrap();
    assert_eq!(win, Ok(CommitOutcome::ChargedAfterRelease(Nanos(3_000))));
    for l in &ledgers {
        l.shutdown().await.unwrap();
    }
    assert_eq!(spent(&server).await, (6_000, 0));
    assert_eq!(redis(&server).check_invariants().await.unwrap(), Ok(()));
}
