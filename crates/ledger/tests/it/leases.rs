//! The lease protocol against a real Redis: grants capped by what is available, cumulative
//! reports (idempotent, order tolerant), close, reclaim after expiry, late reports capped.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{LedgerOn, RedisServer};
use ledger::Balance;
use ledger::{LeaseClose, LeaseError, LeaseState, RedisLedger};
use units::{Limits, Nanos, Timestamp};

const DAY: u64 = Timestamp::MS_PER_DAY;
const NOW: Timestamp = Timestamp(10 * DAY + 1_000);
const EXP: Timestamp = Timestamp(10 * DAY + 11_000);

fn n(v: i64) -> Nanos {
    Nanos(v)
}

async fn setup(total: i64, daily: Option<i64>) -> (RedisServer, RedisLedger) {
    let server = RedisServer::start().await;
    let l = server.ledger("gavel:");
    l.set_limits(
        "c",
        Limits {
            total: n(total),
            daily: daily.map(Nanos),
        },
        NOW,
    )
    .await
    .unwrap();
    (server, l)
}

async fn bal(l: &RedisLedger, now: Timestamp) -> Balance {
    l.balance("c", now).await.unwrap().unwrap()
}

async fn checked(l: &RedisLedger) {
    assert_eq!(l.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test]
async fn a_grant_is_capped_by_total_and_daily_availability() {
    let (_s, l) = setup(1_000, Some(600)).await;
    let g1 = l
        .take_lease("l1", "c", n(400), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (g1.granted, g1.amount, g1.expires_at),
        (n(400), n(400), EXP)
    );
    // Only 200 left today.
    let g2 = l
        .take_lease("l2", "c", n(400), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g2.granted, n(200));
    let g3 = l
        .take_lease("l1", "c", n(100), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((g3.granted, g3.amount), (n(0), n(400)));
    let b = bal(&l, NOW).await;
    assert_eq!((b.reserved, b.available), (n(600), n(400)));
    assert_eq!(
        b.daily.map(|d| (d.reserved, d.available)),
        Some((n(600), n(0)))
    );
    // A per-bid reservation sees the same shared budget.
    let refused = l.reserve("r", "c", n(1), EXP, NOW).await.unwrap();
    assert_eq!(refused, Err(ledger::Refusal::InsufficientDailyBudget));
    checked(&l).await;
}

#[tokio::test]
async fn reports_are_cumulative_idempotent_and_order_tolerant() {
    let (_s, l) = setup(1_000, None).await;
    l.take_lease("l1", "c", n(500), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    let later = Timestamp(EXP.0 + 5_000);
    let r = l
        .report_lease("l1", "c", n(100), later, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.charged, r.uncharged, r.state, r.expires_at),
        (n(100), n(0), LeaseState::Open, later)
    );
    // The same report again, then an older one arriving late: nothing changes.
    let again = l
        .report_lease("l1", "c", n(100), later, NOW)
        .await
        .unwrap()
        .unwrap();
    let older = l
        .report_lease("l1", "c", n(50), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.charged, older.charged, older.reported),
        (n(0), n(0), n(100))
    );
    // The expiry never moves back.
    assert_eq!(older.expires_at, later);
    let r = l
        .report_lease("l1", "c", n(300), later, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.charged, n(200));
    let b = bal(&l, NOW).await;
    assert_eq!((b.spent, b.reserved, b.available), (n(300), n(200), n(500)));
    // Beyond the lease: capped, the excess reported as uncharged, once.
    let over = l
        .report_lease("l1", "c", n(700), later, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (over.charged, over.uncharged, over.reported),
        (n(200), n(200), n(500))
    );
    let over_again = l
        .report_lease("l1", "c", n(700), later, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((over_again.charged, over_again.uncharged), (n(0), n(0)));
    let b = bal(&l, NOW).await;
    assert_eq!((b.spent, b.reserved, b.available), (n(500), n(0), n(500)));
    checked(&l).await;
}

#[tokio::test]
async fn close_reports_and_returns_the_remainder_once() {
    let (_s, l) = setup(1_000, Some(800)).await;
    l.take_lease("l1", "c", n(500), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    l.report_lease("l1", "c", n(20), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    let closed = l
        .close_lease("l1", "c", n(120), NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        closed,
        LeaseClose {
            charged: n(100),
            uncharged: n(0),
            released: n(380),
            amount: n(500),
            reported: n(120)
        }
    );
    let b = bal(&l, NOW).await;
    assert_eq!((b.spent, b.reserved, b.available), (n(120), n(0), n(880)));
    assert_eq!(b.daily.map(|d| (d.spent, d.reserved)), Some((n(120), n(0))));
    let twice = l
        .close_lease("l1", "c", n(120), NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((twice.charged, twice.released), (n(0), n(0)));
    assert_eq!(
        l.take_lease("l1", "c", n(10), EXP, NOW).await.unwrap(),
        Err(LeaseError::LeaseClosed)
    );
    let late = l
        .report_lease("l1", "c", n(120), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(late.state, LeaseState::Closed);
    checked(&l).await;
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_only_after_its_expiry() {
    let (_s, l) = setup(1_000, None).await;
    l.take_lease("l1", "c", n(500), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.expire(Timestamp(EXP.0 - 1)).await.unwrap().leases, 0);
    // Extended before it expired: the sweep at the old expiry leaves it alone.
    let extended = Timestamp(EXP.0 + 10_000);
    l.report_lease("l1", "c", n(50), extended, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.expire(EXP).await.unwrap().leases, 0);
    assert_eq!(bal(&l, EXP).await.reserved, n(450));
    let swept = l.expire(extended).await.unwrap();
    assert_eq!((swept.leases, swept.reservations), (1, 0));
    let b = bal(&l, extended).await;
    assert_eq!((b.spent, b.reserved, b.available), (n(50), n(0), n(950)));
    let after = l
        .report_lease("l1", "c", n(50), extended, extended)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((after.state, after.charged), (LeaseState::Reclaimed, n(0)));
    assert_eq!(
        l.take_lease("l1", "c", n(10), EXP, NOW).await.unwrap(),
        Err(LeaseError::LeaseClosed)
    );
    checked(&l).await;
}

#[tokio::test]
async fn a_late_report_after_reclaim_charges_at_most_what_is_left() {
    let (_s, l) = setup(1_000, None).await;
    l.take_lease("l1", "c", n(600), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    l.report_lease("l1", "c", n(100), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.expire(EXP).await.unwrap().leases, 1);
    // Someone else takes most of what came back.
    let g = l
        .take_lease("l2", "c", n(850), Timestamp(EXP.0 + 10_000), EXP)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.granted, n(850));
    // l1's holder was cut off and reports 400 late: 300 new, only 50 left to charge.
    let late = l
        .report_lease("l1", "c", n(400), EXP, EXP)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (late.charged, late.uncharged, late.state),
        (n(50), n(250), LeaseState::Reclaimed)
    );
    let b = bal(&l, EXP).await;
    assert_eq!(
        (b.spent, b.reserved, b.available, b.budget),
        (n(150), n(850), n(0), n(1_000))
    );
    // Idempotent too.
    let again = l
        .report_lease("l1", "c", n(400), EXP, EXP)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.charged, again.uncharged), (n(0), n(0)));
    checked(&l).await;
}

#[tokio::test]
async fn lease_refusals_change_nothing() {
    let (_s, l) = setup(1_000, None).await;
    l.set_limits(
        "d",
        Limits {
            total: n(10),
            daily: None,
        },
        NOW,
    )
    .await
    .unwrap();
    let before = bal(&l, NOW).await;
    assert_eq!(
        l.take_lease("l", "c", n(0), EXP, NOW).await.unwrap(),
        Err(LeaseError::NonPositiveAmount)
    );
    assert_eq!(
        l.take_lease("l", "x", n(5), EXP, NOW).await.unwrap(),
        Err(LeaseError::UnknownCampaign)
    );
    assert_eq!(
        l.report_lease("nope", "c", n(5), EXP, NOW).await.unwrap(),
        Err(LeaseError::UnknownLease)
    );
    assert_eq!(
        l.close_lease("nope", "c", n(5), NOW).await.unwrap(),
        Err(LeaseError::UnknownLease)
    );
    l.take_lease("l", "c", n(5), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    // Lease ids are per campaign hash tag: campaigns whose tags are equal ("{" is tagged by
    // its hex form, which reads like the plain name "#7b") share ids, and one's lease is not
    // the other's.
    for c in ["{", "#7b"] {
        let limits = Limits {
            total: n(10),
            daily: None,
        };
        l.set_limits(c, limits, NOW).await.unwrap();
    }
    l.take_lease("m", "{", n(5), EXP, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        l.take_lease("m", "#7b", n(5), EXP, NOW).await.unwrap(),
        Err(LeaseError::CampaignMismatch)
    );
    assert_eq!(
        l.report_lease("l", "c", n(-1), EXP, NOW).await.unwrap(),
        Err(LeaseError::NegativeSpend)
    );
    assert_eq!(LeaseError::CampaignMismatch.label(), "campaign_mismatch");
    let after = bal(&l, NOW).await;
    assert_eq!((after.spent, after.reserved), (before.spent, n(5)));
    checked(&l).await;
}

#[tokio::test]
async fn a_lease_counts_against_the_day_it_was_grown_on() {
    let (_s, l) = setup(1_000, Some(300)).await;
    l.take_lease("l1", "c", n(300), Timestamp(12 * DAY), NOW)
        .await
        .unwrap()
        .unwrap();
    l.report_lease("l1", "c", n(100), Timestamp(12 * DAY), NOW)
        .await
        .unwrap()
        .unwrap();
    let d10 = bal(&l, NOW).await.daily.unwrap();
    assert_eq!(
        (d10.spent, d10.reserved, d10.available),
        (n(100), n(200), n(0))
    );
    // Day 11: the 200 left from day 10 still holds the total, not the new day.
    let morning = Timestamp(11 * DAY + 1_000);
    let d11 = bal(&l, morning).await;
    assert_eq!(
        (d11.reserved, d11.daily.map(|d| d.reserved)),
        (n(200), Some(n(0)))
    );
    let g = l
        .take_lease("l1", "c", n(250), Timestamp(12 * DAY), morning)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((g.granted, g.amount), (n(250), n(550)));
    checked(&l).await;
    // 300 more spent: the first 250 count against day 11's grant, the rest against the total.
    let r = l
        .report_lease("l1", "c", n(400), Timestamp(12 * DAY), morning)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.charged, n(300));
    let b = bal(&l, morning).await;
    assert_eq!((b.spent, b.reserved), (n(400), n(150)));
    assert_eq!(
        b.daily.map(|d| (d.spent, d.reserved, d.available)),
        Some((n(250), n(0), n(50)))
    );
    let closed = l
        .close_lease("l1", "c", n(400), morning)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.released, n(150));
    let end = bal(&l, morning).await;
    assert_eq!(
        (end.spent, end.reserved, end.available),
        (n(400), n(0), n(600))
    );
    checked(&l).await;
}
