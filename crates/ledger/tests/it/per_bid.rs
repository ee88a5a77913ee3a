//! Per-bid mode against a real Redis: one test per rule of `ledger::Book` (the same scenarios as
//! its unit tests, so both backends are held to the same answers), plus what only Redis has:
//! bounded sweeps, TTL tombstones, the exact-integer range, script cache loss, key prefixes.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{LedgerOn, RedisServer};
use ledger::{Balance, CommitOutcome, DailyBalance, Refusal, ReleaseOutcome, SettleError};
use ledger::{LedgerError, MAX_AMOUNT, RedisLedger, Swept};
use units::{Limits, Nanos, Timestamp};

const DAY: u64 = Timestamp::MS_PER_DAY;
const NOW: Timestamp = Timestamp(10 * DAY + 1_000);
const LATER: Timestamp = Timestamp(10 * DAY + 5_000);

fn t(ms: u64) -> Timestamp {
    Timestamp(ms)
}

fn n(v: i64) -> Nanos {
    Nanos(v)
}

struct Fx {
    _server: RedisServer,
    l: RedisLedger,
}

/// A fresh Redis with campaign "c" of total 1000 (and the given daily budget), at day 10.
async fn fx(daily: Option<i64>) -> Fx {
    let server = RedisServer::start().await;
    let l = server.ledger("gavel:");
    let limits = Limits {
        total: n(1000),
        daily: daily.map(Nanos),
    };
    l.set_limits("c", limits, t(10 * DAY)).await.unwrap();
    Fx { _server: server, l }
}

impl Fx {
    async fn bal(&self, now: Timestamp) -> Balance {
        self.l
            .balance("c", now)
            .await
            .unwrap()
            .expect("campaign c exists")
    }

    async fn checked(&self) {
        if let Err(e) = self.l.check_invariants().await.unwrap() {
            panic!("invariant broken: {e}");
        }
    }

    async fn reserve(
        &self,
        id: &str,
        amount: i64,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        self.l
            .reserve(id, "c", n(amount), expires_at, now)
            .await
            .unwrap()
    }

    async fn commit(
        &self,
        id: &str,
        price: i64,
        now: Timestamp,
    ) -> Result<CommitOutcome, SettleError> {
        self.l.commit(id, Some("c"), n(price), now).await.unwrap()
    }

    async fn release(&self, id: &str, now: Timestamp) -> Result<ReleaseOutcome, SettleError> {
        self.l.release(id, Some("c"), now).await.unwrap()
    }
}

#[tokio::test]
async fn commit_charges_the_price_and_returns_the_rest() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    let after_reserve = f.bal(NOW).await;
    assert_eq!(
        (after_reserve.reserved, after_reserve.available),
        (n(300), n(700))
    );
    assert_eq!(
        f.commit("r1", 120, NOW).await,
        Ok(CommitOutcome::Charged(n(120)))
    );
    let after = f.bal(NOW).await;
    assert_eq!(
        (after.spent, after.reserved, after.available, after.budget),
        (n(120), n(0), n(880), n(1000))
    );
    f.checked().await;
}

#[tokio::test]
async fn a_zero_price_commit_is_allowed_and_charges_nothing() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    assert_eq!(
        f.commit("r1", 0, NOW).await,
        Ok(CommitOutcome::Charged(n(0)))
    );
    assert_eq!(f.bal(NOW).await.available, n(1000));
    f.checked().await;
}

#[tokio::test]
async fn a_price_above_the_reservation_is_refused_and_the_reservation_stays_open() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    assert_eq!(
        f.commit("r1", 301, NOW).await,
        Err(SettleError::AboveReservation {
            reserved: n(300),
            price: n(301)
        })
    );
    assert_eq!(f.bal(NOW).await.reserved, n(300));
    assert_eq!(
        f.commit("r1", 300, NOW).await,
        Ok(CommitOutcome::Charged(n(300)))
    );
    f.checked().await;
}

#[tokio::test]
async fn a_negative_price_is_refused_and_changes_nothing() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    assert_eq!(
        f.commit("r1", -1, NOW).await,
        Err(SettleError::NegativePrice)
    );
    assert_eq!(f.bal(NOW).await.reserved, n(300));
    f.checked().await;
}

#[tokio::test]
async fn a_duplicate_commit_charges_once_and_reports_the_recorded_price() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    f.commit("r1", 100, NOW).await.unwrap();
    assert_eq!(
        f.commit("r1", 100, LATER).await,
        Ok(CommitOutcome::AlreadyCommitted(n(100)))
    );
    assert_eq!(
        f.commit("r1", 250, LATER).await,
        Ok(CommitOutcome::AlreadyCommitted(n(100)))
    );
    assert_eq!(
        f.release("r1", LATER).await,
        Ok(ReleaseOutcome::AlreadyCommitted)
    );
    assert_eq!(f.bal(LATER).await.spent, n(100));
    f.checked().await;
}

#[tokio::test]
async fn release_returns_everything_once() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    assert_eq!(
        f.release("r1", NOW).await,
        Ok(ReleaseOutcome::Released(n(300)))
    );
    assert_eq!(
        f.release("r1", NOW).await,
        Ok(ReleaseOutcome::AlreadyReleased)
    );
    let after = f.bal(NOW).await;
    assert_eq!(
        (after.spent, after.reserved, after.available),
        (n(0), n(0), n(1000))
    );
    assert_eq!(
        f.release("nope", NOW).await,
        Err(SettleError::UnknownReservation)
    );
    assert_eq!(
        f.commit("nope", 1, NOW).await,
        Err(SettleError::UnknownReservation)
    );
    f.checked().await;
}

#[tokio::test]
async fn reserve_refusals_change_nothing() {
    let f = fx(Some(400)).await;
    let before = f.bal(NOW).await;
    assert_eq!(
        f.l.reserve("r", "x", n(1), LATER, NOW).await.unwrap(),
        Err(Refusal::UnknownCampaign)
    );
    assert_eq!(
        f.reserve("r", 0, LATER, NOW).await,
        Err(Refusal::NonPositiveAmount)
    );
    assert_eq!(
        f.reserve("r", -5, LATER, NOW).await,
        Err(Refusal::NonPositiveAmount)
    );
    assert_eq!(
        f.reserve("r", 1001, LATER, NOW).await,
        Err(Refusal::InsufficientBudget)
    );
    assert_eq!(
        f.reserve("r", 401, LATER, NOW).await,
        Err(Refusal::InsufficientDailyBudget)
    );
    assert_eq!(f.bal(NOW).await, before);
    // Exactly the available amount fits.
    f.reserve("r", 400, LATER, NOW).await.unwrap();
    assert_eq!(f.bal(NOW).await.daily.map(|d| d.available), Some(n(0)));
    f.checked().await;
}

#[tokio::test]
async fn an_id_cannot_be_reserved_twice_while_open_or_remembered() {
    let f = fx(None).await;
    f.reserve("r1", 10, LATER, NOW).await.unwrap();
    assert_eq!(
        f.reserve("r1", 10, LATER, NOW).await,
        Err(Refusal::DuplicateId)
    );
    f.release("r1", NOW).await.unwrap();
    assert_eq!(
        f.reserve("r1", 10, LATER, NOW).await,
        Err(Refusal::DuplicateId)
    );
    assert_eq!(f.bal(NOW).await.reserved, n(0));
    f.checked().await;
}

#[tokio::test]
async fn a_win_after_a_release_or_an_expiry_is_charged_once_and_said_so() {
    let f = fx(Some(500)).await;
    f.reserve("lost", 300, LATER, NOW).await.unwrap();
    f.reserve("late", 200, t(NOW.0 + 10), NOW).await.unwrap();
    f.release("lost", NOW).await.unwrap();
    assert_eq!(f.l.expire(t(NOW.0 + 10)).await.unwrap().reservations, 1);
    assert_eq!(f.bal(NOW).await.available, n(1000));
    assert!(matches!(
        f.commit("lost", 301, NOW).await,
        Err(SettleError::AboveReservation { .. })
    ));
    assert_eq!(
        f.commit("lost", 300, NOW).await,
        Ok(CommitOutcome::ChargedAfterRelease(n(300)))
    );
    assert_eq!(
        f.commit("late", 150, NOW).await,
        Ok(CommitOutcome::ChargedAfterRelease(n(150)))
    );
    assert_eq!(
        f.commit("lost", 300, NOW).await,
        Ok(CommitOutcome::AlreadyCommitted(n(300)))
    );
    assert_eq!(
        f.release("late", NOW).await,
        Ok(ReleaseOutcome::AlreadyCommitted)
    );
    let after = f.bal(NOW).await;
    assert_eq!((after.spent, after.reserved), (n(450), n(0)));
    assert_eq!(after.daily.map(|d| d.spent), Some(n(450)));
    f.checked().await;
}

#[tokio::test]
async fn an_open_reservation_past_its_expiry_is_still_charged_until_swept() {
    let f = fx(None).await;
    f.reserve("r1", 300, LATER, NOW).await.unwrap();
    let after_expiry = t(LATER.0 + 1);
    assert_eq!(
        f.commit("r1", 100, after_expiry).await,
        Ok(CommitOutcome::Charged(n(100)))
    );
    assert_eq!(f.l.expire(after_expiry).await.unwrap(), Swept::default());
    assert_eq!(f.bal(after_expiry).await.spent, n(100));
    f.checked().await;
}

#[tokio::test]
async fn expire_releases_exactly_the_overdue_reservations() {
    let f = fx(None).await;
    for (id, at) in [("a", 2_000), ("b", 3_000), ("c", 3_000), ("d", 9_000)] {
        f.reserve(id, 100, t(10 * DAY + at), NOW).await.unwrap();
    }
    assert_eq!(f.l.expire(t(10 * DAY + 1_999)).await.unwrap().total(), 0);
    assert_eq!(
        f.l.expire(t(10 * DAY + 3_000)).await.unwrap().reservations,
        3
    );
    assert_eq!(f.bal(NOW).await.reserved, n(100));
    assert_eq!(
        f.release("c", t(10 * DAY + 3_000)).await,
        Ok(ReleaseOutcome::AlreadyReleased)
    );
    assert_eq!(
        f.commit("d", 1, t(10 * DAY + 3_000)).await,
        Ok(CommitOutcome::Charged(n(1)))
    );
    assert_eq!(f.l.expire(t(10 * DAY + 100_000)).await.unwrap().total(), 0);
    f.checked().await;
}

#[tokio::test]
async fn the_sweep_works_in_bounded_batches() {
    let server = RedisServer::start().await;
    let mut config = server.config("gavel:");
    config.sweep_batch = 3;
    let l = RedisLedger::new(config);
    l.set_limits(
        "c",
        Limits {
            total: n(1000),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    for i in 0..7 {
        l.reserve(&format!("r{i}"), "c", n(10), LATER, NOW)
            .await
            .unwrap()
            .unwrap();
    }
    let sweeps: Vec<Swept> = [
        l.expire(LATER).await.unwrap(),
        l.expire(LATER).await.unwrap(),
        l.expire(LATER).await.unwrap(),
    ]
    .into();
    let counts: Vec<(usize, bool)> = sweeps.iter().map(|s| (s.reservations, s.more)).collect();
    assert_eq!(counts, [(3, true), (3, true), (1, false)]);
    assert_eq!(
        l.balance("c", LATER).await.unwrap().map(|b| b.reserved),
        Some(n(0))
    );
    assert_eq!(l.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test]
async fn tombstones_are_forgotten_after_their_ttl() {
    let server = RedisServer::start().await;
    let mut config = server.config("gavel:");
    config.tombstone_ttl = Duration::from_millis(150);
    let l = RedisLedger::new(config);
    l.set_limits(
        "c",
        Limits {
            total: n(1000),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    l.reserve("r1", "c", n(300), LATER, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        l.commit("r1", Some("c"), n(100), NOW).await.unwrap(),
        Ok(CommitOutcome::Charged(n(100)))
    );
    assert_eq!(
        l.commit("r1", Some("c"), n(100), NOW).await.unwrap(),
        Ok(CommitOutcome::AlreadyCommitted(n(100)))
    );
    // The TTL runs on Redis's clock: wait for it (bounded).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.raw("EXISTS gavel:{c}r:r1").await.starts_with(":1") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "tombstone outlived its TTL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Forgotten: a late duplicate charges nothing, and the id may be used again.
    assert_eq!(
        l.commit("r1", Some("c"), n(100), NOW).await.unwrap(),
        Err(SettleError::UnknownReservation)
    );
    assert_eq!(
        l.balance("c", NOW).await.unwrap().map(|b| b.spent),
        Some(n(100))
    );
    l.reserve("r1", "c", n(5), LATER, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test]
async fn lowering_a_budget_below_spend_clamps_it_and_the_campaign_stops() {
    let f = fx(None).await;
    f.reserve("r1", 600, LATER, NOW).await.unwrap();
    f.commit("r1", 500, NOW).await.unwrap();
    f.reserve("r2", 300, LATER, NOW).await.unwrap();
    f.l.set_limits(
        "c",
        Limits {
            total: n(400),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    let clamped = f.bal(NOW).await;
    assert_eq!((clamped.budget, clamped.available), (n(800), n(0)));
    f.checked().await;
    assert_eq!(
        f.reserve("r3", 1, LATER, NOW).await,
        Err(Refusal::InsufficientBudget)
    );
    f.commit("r2", 50, NOW).await.unwrap();
    let after = f.bal(NOW).await;
    assert_eq!(
        (after.spent, after.budget, after.available),
        (n(550), n(550), n(0))
    );
    assert_eq!(
        f.reserve("r3", 1, LATER, NOW).await,
        Err(Refusal::InsufficientBudget)
    );
    f.l.set_limits(
        "c",
        Limits {
            total: n(600),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    assert_eq!(f.bal(NOW).await.available, n(50));
    f.checked().await;
}

#[tokio::test]
async fn a_negative_budget_behaves_as_zero() {
    let f = fx(None).await;
    f.l.set_limits(
        "z",
        Limits {
            total: n(-10),
            daily: Some(n(-3)),
        },
        NOW,
    )
    .await
    .unwrap();
    let zero = f.l.balance("z", NOW).await.unwrap().unwrap();
    assert_eq!((zero.budget, zero.available), (n(0), n(0)));
    assert_eq!(
        f.l.reserve("r", "z", n(1), LATER, NOW).await.unwrap(),
        Err(Refusal::InsufficientBudget)
    );
    f.checked().await;
}

#[tokio::test]
async fn daily_counters_roll_over_at_utc_midnight() {
    let f = fx(Some(300)).await;
    f.reserve("r1", 300, t(11 * DAY + 10_000), NOW)
        .await
        .unwrap();
    f.commit("r1", 250, NOW).await.unwrap();
    assert_eq!(
        f.reserve("r2", 100, LATER, NOW).await,
        Err(Refusal::InsufficientDailyBudget)
    );
    let tomorrow = t(11 * DAY);
    let fresh = f.bal(tomorrow).await;
    assert_eq!(
        fresh.daily,
        Some(DailyBalance {
            day: 11,
            budget: n(300),
            spent: n(0),
            reserved: n(0),
            available: n(300)
        })
    );
    assert_eq!(fresh.available, n(750));
    f.reserve("r2", 300, t(tomorrow.0 + 1_000), tomorrow)
        .await
        .unwrap();
    f.checked().await;
}

#[tokio::test]
async fn a_reservation_counts_only_against_the_day_it_was_made_on() {
    let f = fx(Some(300)).await;
    let late = t(11 * DAY - 1);
    f.reserve("y", 200, t(11 * DAY + 60_000), late)
        .await
        .unwrap();
    assert_eq!(f.bal(late).await.daily.map(|d| d.reserved), Some(n(200)));
    let morning = t(11 * DAY + 1_000);
    f.reserve("z", 300, t(11 * DAY + 60_000), morning)
        .await
        .unwrap();
    let both = f.bal(morning).await;
    assert_eq!(
        (both.reserved, both.daily.map(|d| d.reserved)),
        (n(500), Some(n(300)))
    );
    f.checked().await;
    assert_eq!(
        f.commit("y", 150, morning).await,
        Ok(CommitOutcome::Charged(n(150)))
    );
    let after = f.bal(morning).await;
    assert_eq!(after.spent, n(150));
    assert_eq!(
        after.daily.map(|d| (d.spent, d.reserved, d.available)),
        Some((n(0), n(300), n(0)))
    );
    f.checked().await;
}

#[tokio::test]
async fn a_daily_budget_set_mid_day_sees_what_the_day_already_spent() {
    let f = fx(None).await;
    f.reserve("r1", 200, LATER, NOW).await.unwrap();
    f.commit("r1", 200, NOW).await.unwrap();
    f.l.set_limits(
        "c",
        Limits {
            total: n(1000),
            daily: Some(n(150)),
        },
        NOW,
    )
    .await
    .unwrap();
    let daily = f.bal(NOW).await.daily.unwrap();
    assert_eq!(
        (daily.budget, daily.spent, daily.available),
        (n(200), n(200), n(0))
    );
    assert_eq!(
        f.reserve("r2", 1, LATER, NOW).await,
        Err(Refusal::InsufficientDailyBudget)
    );
    f.checked().await;
}

#[tokio::test]
async fn an_earlier_now_never_rolls_a_day_back() {
    let f = fx(Some(300)).await;
    let tomorrow = t(11 * DAY + 5);
    f.reserve("r1", 100, t(12 * DAY), tomorrow).await.unwrap();
    f.reserve("r2", 100, t(12 * DAY), NOW).await.unwrap();
    assert_eq!(
        f.bal(NOW).await.daily.map(|d| (d.day, d.reserved)),
        Some((11, n(200)))
    );
    f.commit("r1", 10, tomorrow).await.unwrap();
    f.commit("r2", 10, NOW).await.unwrap();
    assert_eq!(f.bal(tomorrow).await.daily.map(|d| d.spent), Some(n(20)));
    f.checked().await;
}

#[tokio::test]
async fn campaigns_are_listed_and_balances_skip_unknown_ones() {
    let f = fx(None).await;
    f.l.set_limits(
        "d",
        Limits {
            total: n(1),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    let mut names = f.l.campaigns().await.unwrap();
    names.sort_unstable();
    assert_eq!(names, ["c", "d"]);
    assert!(f.l.balance("x", NOW).await.unwrap().is_none());
    let all = f.l.balances(&["d", "x", "c"], NOW).await.unwrap();
    let got: Vec<&str> = all.iter().map(|b| b.campaign.as_str()).collect();
    assert_eq!(got, ["d", "c"]);
}

#[tokio::test]
async fn amounts_are_exact_up_to_2_pow_53_and_refused_beyond() {
    let f = fx(None).await;
    let max = Limits {
        total: n(MAX_AMOUNT),
        daily: Some(n(MAX_AMOUNT)),
    };
    f.l.set_limits("big", max, NOW).await.unwrap();
    let too_big = Limits {
        total: n(MAX_AMOUNT + 1),
        daily: None,
    };
    let err = f.l.set_limits("big", too_big, NOW).await.unwrap_err();
    assert_eq!(err, LedgerError::OutOfRange("total budget"));
    assert_eq!(err.label(), "out_of_range");
    let r = |id: &'static str, amount: i64| f.l.reserve(id, "big", n(amount), LATER, NOW);
    // Odd amounts near 2^53: any rounding would show.
    r("a", MAX_AMOUNT - 2).await.unwrap().unwrap();
    r("b", 1).await.unwrap().unwrap();
    r("c", 1).await.unwrap().unwrap();
    assert_eq!(r("d", 1).await.unwrap(), Err(Refusal::InsufficientBudget));
    assert_eq!(
        r("e", i64::MAX).await.unwrap(),
        Err(Refusal::InsufficientBudget)
    );
    let b = f.l.balance("big", NOW).await.unwrap().unwrap();
    assert_eq!((b.reserved, b.available), (n(MAX_AMOUNT), n(0)));
    assert_eq!(
        f.l.commit("a", Some("big"), n(i64::MAX), NOW)
            .await
            .unwrap(),
        Err(SettleError::AboveReservation {
            reserved: n(MAX_AMOUNT - 2),
            price: n(i64::MAX)
        })
    );
    assert_eq!(
        f.l.commit("a", Some("big"), n(MAX_AMOUNT - 4), NOW)
            .await
            .unwrap(),
        Ok(CommitOutcome::Charged(n(MAX_AMOUNT - 4)))
    );
    let b = f.l.balance("big", NOW).await.unwrap().unwrap();
    assert_eq!(
        (b.spent, b.reserved, b.available),
        (n(MAX_AMOUNT - 4), n(2), n(2))
    );
    // Stored as plain integers, not exponent notation.
    let raw = f._server.raw("HGET gavel:{big}c:big spent").await;
    assert!(raw.contains(&(MAX_AMOUNT - 4).to_string()), "{raw}");
    f.checked().await;
}

#[tokio::test]
async fn scripts_are_reloaded_after_a_script_flush() {
    let f = fx(None).await;
    f.reserve("r1", 10, LATER, NOW).await.unwrap();
    assert!(f._server.raw("SCRIPT FLUSH").await.starts_with("+OK"));
    assert!(f._server.raw("CONFIG RESETSTAT").await.starts_with("+OK"));
    // The first EVALSHA answers NOSCRIPT and the client re-sends the body once with EVAL; the
    // next ones hit the cache, which proves the client's SHA-1 is the one Redis computes.
    for id in ["r2", "r3", "r4"] {
        f.reserve(id, 10, LATER, NOW).await.unwrap();
    }
    let stats = f._server.raw("INFO commandstats").await;
    assert!(stats.contains("cmdstat_eval:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_evalsha:calls=3,"), "{stats}");
    assert_eq!(f.bal(NOW).await.reserved, n(40));
    f.checked().await;
}

#[tokio::test]
async fn prefixes_keep_ledgers_apart() {
    let server = RedisServer::start().await;
    let a = server.ledger("a:");
    let b = server.ledger("b:");
    a.set_limits(
        "c",
        Limits {
            total: n(10),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    assert_eq!(
        b.reserve("r", "c", n(1), LATER, NOW).await.unwrap(),
        Err(Refusal::UnknownCampaign)
    );
    b.set_limits(
        "c",
        Limits {
            total: n(5),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    a.reserve("r", "c", n(10), LATER, NOW)
        .await
        .unwrap()
        .unwrap();
    b.reserve("r", "c", n(5), LATER, NOW)
        .await
        .unwrap()
        .unwrap();
    assert!(server.raw("EXISTS b:{c}c:c").await.starts_with(":1"));
}

/// A backlog of expiries larger than one sweep batch is cleared by one `Ledger::expire` call
/// (batch after batch), not at one batch per tick.
#[tokio::test]
async fn the_sweep_keeps_up_with_a_backlog_beyond_one_batch() {
    let server = RedisServer::start().await;
    let config = ledger::RedisConfig {
        sweep_batch: 100,
        ..server.config("gavel:")
    };
    let redis = RedisLedger::new(config);
    let now = Timestamp::now();
    let limits = Limits {
        total: n(1_000_000),
        daily: None,
    };
    redis.set_limits("c", limits, now).await.unwrap();
    // Reservations whose expiry has already passed (as after an outage of the sweep).
    let past = Timestamp(now.millis() - 1);
    for i in 0..350 {
        let r = redis.reserve(&format!("r{i}"), "c", n(10), past, now).await;
        assert_eq!(r, Ok(Ok(())));
    }
    let front = ledger::Ledger::per_bid(
        redis.clone(),
        Duration::from_secs(1),
        Duration::from_secs(2),
        ledger::LimitsRole::Writer("test".to_owned()),
    );
    assert_eq!(front.expire().await, Ok(350));
    let b = redis.balance("c", Timestamp::now()).await.unwrap().unwrap();
    assert_eq!(b.reserved, Nanos::ZERO);
}
