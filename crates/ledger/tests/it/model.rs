//! Redis against the model: seeded random sequences of every operation (with duplicates, unknown
//! ids and campaigns, bad amounts, late notices, limit changes and midnights) run on both
//! `ledger::Book` and `RedisLedger`; every answer and every balance must be identical.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{LedgerOn, RedisServer};
use ledger::Book;
use ledger::RedisLedger;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use units::{Limits, Nanos, Timestamp};

const DAY: u64 = Timestamp::MS_PER_DAY;
const CAMPAIGNS: [&str; 3] = ["a", "b", "x"]; // "x" never gets limits

fn random_limits(rng: &mut SmallRng) -> Limits {
    Limits {
        total: Nanos(rng.random_range(-100..6_000)),
        daily: rng
            .random_bool(0.5)
            .then(|| Nanos(rng.random_range(-10..2_500))),
    }
}

async fn run(seed: u64, steps: usize, server: &RedisServer) {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Tombstones outlive the test on both sides: their expiry runs on different clocks.
    let mut book = Book::new(Duration::from_secs(1 << 30));
    let mut config = server.config(&format!("m{seed}:"));
    config.tombstone_ttl = Duration::from_secs(3600);
    config.sweep_batch = 10_000;
    let redis = RedisLedger::new(config);
    // Start late in day 10 so that runs cross midnight.
    let mut now = Timestamp(11 * DAY - 600_000);
    for c in &CAMPAIGNS[..2] {
        let limits = random_limits(&mut rng);
        book.set_limits(c, limits, now);
        redis.set_limits(c, limits, now).await.unwrap();
    }
    for step in 0..steps {
        now = Timestamp(now.0 + rng.random_range(0..20_000));
        // Now and then, a straggler with an older clock.
        let at = if rng.random_bool(0.05) {
            Timestamp(now.0.saturating_sub(3_600_000))
        } else {
            now
        };
        let n = rng.random_range(0..60);
        let campaign = CAMPAIGNS[rng.random_range(0..CAMPAIGNS.len())];
        // Ids are unique across campaigns (the bidder's are random); a notice names the
        // campaign, whose slot holds the reservation.
        let id = format!("{campaign}/r{n}");
        let what = rng.random_range(0..100);
        let context = format!("seed {seed} step {step} at {at:?}");
        if std::env::var("MODEL_TRACE").is_ok() {
            eprintln!("{context} what={what} id={id} campaign={campaign}");
        }
        match what {
            0..=39 => {
                let amount = Nanos(rng.random_range(-5..900));
                let expires_at = Timestamp(at.0 + rng.random_range(0..120_000));
                let want = book.reserve(&id, campaign, amount, expires_at, at);
                let got = redis
                    .reserve(&id, campaign, amount, expires_at, at)
                    .await
                    .unwrap();
                assert_eq!(got, want, "reserve {id} {campaign} {amount:?}: {context}");
            }
            40..=69 => {
                let price = Nanos(rng.random_range(-3..950));
                let want = book.commit(&id, price, at);
                let got = redis.commit(&id, Some(campaign), price, at).await.unwrap();
                assert_eq!(got, want, "commit {id} {price:?}: {context}");
            }
            70..=84 => {
                let want = book.release(&id, at);
                let got = redis.release(&id, Some(campaign), at).await.unwrap();
                assert_eq!(got, want, "release {id}: {context}");
            }
            85..=94 => {
                let want = book.expire(at);
                let got = redis.expire(at).await.unwrap();
                assert_eq!(got.total(), want, "expire: {context}");
                assert!(!got.more);
            }
            _ => {
                let c = CAMPAIGNS[rng.random_range(0..2)];
                let limits = random_limits(&mut rng);
                book.set_limits(c, limits, at);
                redis.set_limits(c, limits, at).await.unwrap();
            }
        }
        let want: Vec<_> = CAMPAIGNS
            .iter()
            .filter_map(|c| book.balance(c, at))
            .collect();
        let got = redis.balances(&CAMPAIGNS, at).await.unwrap();
        assert_eq!(got, want, "balances after: {context}");
        if step % 50 == 0 {
            book.check_invariants().unwrap();
            assert_eq!(redis.check_invariants().await.unwrap(), Ok(()), "{context}");
        }
    }
    book.check_invariants().unwrap();
    assert_eq!(redis.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test]
async fn redis_answers_exactly_as_the_book_does() {
    let server = RedisServer::start().await;
    for seed in [1, 2, 3, 4] {
        run(seed, 1_000, &server).await;
    }
}
