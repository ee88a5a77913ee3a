//! One test per rule of the book; the property tests in `tests/ledger_props.rs` mix them.

use std::time::Duration;

use super::*;

const DAY: u64 = Timestamp::MS_PER_DAY;
const TTL: Duration = Duration::from_secs(60);

fn t(ms: u64) -> Timestamp {
    Timestamp(ms)
}

fn n(v: i64) -> Nanos {
    Nanos(v)
}

/// A book with campaign "c" of total 1000 (and the given daily budget), at day 10.
fn book(daily: Option<i64>) -> Book {
    let mut b = Book::new(TTL);
    let limits = Limits {
        total: n(1000),
        daily: daily.map(Nanos),
    };
    b.set_limits("c", limits, t(10 * DAY));
    b
}

fn checked(b: &Book) {
    if let Err(e) = b.check_invariants() {
        panic!("invariant broken: {e}");
    }
}

fn bal(b: &Book, now: Timestamp) -> Balance {
    b.balance("c", now).expect("campaign c exists")
}

const NOW: Timestamp = Timestamp(10 * DAY + 1_000);
const LATER: Timestamp = Timestamp(10 * DAY + 5_000);

#[test]
fn commit_charges_the_price_and_returns_the_rest() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    let after_reserve = bal(&b, NOW);
    assert_eq!(
        (after_reserve.reserved, after_reserve.available),
        (n(300), n(700))
    );
    assert_eq!(
        b.commit("r1", n(120), NOW),
        Ok(CommitOutcome::Charged(n(120)))
    );
    let after = bal(&b, NOW);
    assert_eq!(
        (after.spent, after.reserved, after.available, after.budget),
        (n(120), n(0), n(880), n(1000))
    );
    assert_eq!(b.open_reservations(), 0);
    checked(&b);
}

#[test]
fn a_zero_price_commit_is_allowed_and_charges_nothing() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    assert_eq!(b.commit("r1", n(0), NOW), Ok(CommitOutcome::Charged(n(0))));
    assert_eq!(bal(&b, NOW).available, n(1000));
    checked(&b);
}

#[test]
fn a_price_above_the_reservation_is_refused_and_the_reservation_stays_open() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    let err = b.commit("r1", n(301), NOW).unwrap_err();
    assert_eq!(
        err,
        SettleError::AboveReservation {
            reserved: n(300),
            price: n(301)
        }
    );
    assert_eq!(err.label(), "above_reservation");
    assert_eq!(bal(&b, NOW).reserved, n(300));
    assert_eq!(
        b.commit("r1", n(300), NOW),
        Ok(CommitOutcome::Charged(n(300)))
    );
    checked(&b);
}

#[test]
fn a_negative_price_is_refused_and_changes_nothing() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    assert_eq!(b.commit("r1", n(-1), NOW), Err(SettleError::NegativePrice));
    assert_eq!(b.open_reservations(), 1);
    checked(&b);
}

#[test]
fn a_duplicate_commit_charges_once_and_reports_the_recorded_price() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    b.commit("r1", n(100), NOW).unwrap();
    // The billing notice repeats the win notice, even with another price: charged once.
    assert_eq!(
        b.commit("r1", n(100), LATER),
        Ok(CommitOutcome::AlreadyCommitted(n(100)))
    );
    assert_eq!(
        b.commit("r1", n(250), LATER),
        Ok(CommitOutcome::AlreadyCommitted(n(100)))
    );
    assert_eq!(b.release("r1", LATER), Ok(ReleaseOutcome::AlreadyCommitted));
    assert_eq!(bal(&b, LATER).spent, n(100));
    checked(&b);
}

#[test]
fn release_returns_everything_once() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    assert_eq!(b.release("r1", NOW), Ok(ReleaseOutcome::Released(n(300))));
    assert_eq!(b.release("r1", NOW), Ok(ReleaseOutcome::AlreadyReleased));
    let after = bal(&b, NOW);
    assert_eq!(
        (after.spent, after.reserved, after.available),
        (n(0), n(0), n(1000))
    );
    assert_eq!(b.release("nope", NOW), Err(SettleError::UnknownReservation));
    checked(&b);
}

#[test]
fn reserve_refusals_change_nothing() {
    let mut b = book(Some(400));
    let before = bal(&b, NOW);
    assert_eq!(
        b.reserve("r", "x", n(1), LATER, NOW),
        Err(Refusal::UnknownCampaign)
    );
    assert_eq!(
        b.reserve("r", "c", n(0), LATER, NOW),
        Err(Refusal::NonPositiveAmount)
    );
    assert_eq!(
        b.reserve("r", "c", n(-5), LATER, NOW),
        Err(Refusal::NonPositiveAmount)
    );
    assert_eq!(
        b.reserve("r", "c", n(1001), LATER, NOW),
        Err(Refusal::InsufficientBudget)
    );
    assert_eq!(
        b.reserve("r", "c", n(401), LATER, NOW),
        Err(Refusal::InsufficientDailyBudget)
    );
    assert_eq!(bal(&b, NOW), before);
    assert_eq!(b.open_reservations(), 0);
    // Exactly the available amount fits.
    b.reserve("r", "c", n(400), LATER, NOW).unwrap();
    assert_eq!(bal(&b, NOW).daily.map(|d| d.available), Some(n(0)));
    checked(&b);
}

#[test]
fn an_id_cannot_be_reserved_twice_while_open_or_remembered() {
    let mut b = book(None);
    b.reserve("r1", "c", n(10), LATER, NOW).unwrap();
    assert_eq!(
        b.reserve("r1", "c", n(10), LATER, NOW),
        Err(Refusal::DuplicateId)
    );
    b.release("r1", NOW).unwrap();
    assert_eq!(
        b.reserve("r1", "c", n(10), LATER, NOW),
        Err(Refusal::DuplicateId)
    );
    assert_eq!(bal(&b, NOW).reserved, n(0));
    checked(&b);
}

#[test]
fn a_win_after_a_release_or_an_expiry_is_charged_once_and_said_so() {
    let mut b = book(Some(500));
    b.reserve("lost", "c", n(300), LATER, NOW).unwrap();
    b.reserve("late", "c", n(200), t(NOW.0 + 10), NOW).unwrap();
    b.release("lost", NOW).unwrap();
    assert_eq!(b.expire(t(NOW.0 + 10)), 1);
    assert_eq!(bal(&b, NOW).available, n(1000));
    // Above what was reserved: refused, nothing charged.
    assert!(matches!(
        b.commit("lost", n(301), NOW),
        Err(SettleError::AboveReservation { .. })
    ));
    assert_eq!(
        b.commit("lost", n(300), NOW),
        Ok(CommitOutcome::ChargedAfterRelease(n(300)))
    );
    assert_eq!(
        b.commit("late", n(150), NOW),
        Ok(CommitOutcome::ChargedAfterRelease(n(150)))
    );
    // Replays and the billing notice charge nothing more; a loss changes nothing either.
    assert_eq!(
        b.commit("lost", n(300), NOW),
        Ok(CommitOutcome::AlreadyCommitted(n(300)))
    );
    assert_eq!(b.release("late", NOW), Ok(ReleaseOutcome::AlreadyCommitted));
    let after = bal(&b, NOW);
    assert_eq!((after.spent, after.reserved), (n(450), n(0)));
    assert_eq!(after.daily.map(|d| d.spent), Some(n(450)));
    checked(&b);
}

#[test]
fn an_open_reservation_past_its_expiry_is_still_charged_until_swept() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    let after_expiry = t(LATER.0 + 1);
    assert_eq!(
        b.commit("r1", n(100), after_expiry),
        Ok(CommitOutcome::Charged(n(100)))
    );
    assert_eq!(b.expire(after_expiry), 0);
    assert_eq!(bal(&b, after_expiry).spent, n(100));
    checked(&b);
}

#[test]
fn expire_releases_exactly_the_overdue_reservations() {
    let mut b = book(None);
    for (id, at) in [("a", 2_000), ("b", 3_000), ("c", 3_000), ("d", 9_000)] {
        b.reserve(id, "c", n(100), t(10 * DAY + at), NOW).unwrap();
    }
    assert_eq!(b.expire(t(10 * DAY + 1_999)), 0);
    assert_eq!(b.expire(t(10 * DAY + 3_000)), 3);
    assert_eq!(b.open_reservations(), 1);
    assert_eq!(bal(&b, NOW).reserved, n(100));
    assert_eq!(
        b.release("b", t(10 * DAY + 3_000)),
        Ok(ReleaseOutcome::AlreadyReleased)
    );
    assert_eq!(
        b.commit("d", n(1), t(10 * DAY + 3_000)),
        Ok(CommitOutcome::Charged(n(1)))
    );
    assert_eq!(b.expire(t(10 * DAY + 100_000)), 0);
    checked(&b);
}

#[test]
fn tombstones_are_forgotten_after_their_ttl() {
    let mut b = book(None);
    b.reserve("r1", "c", n(300), LATER, NOW).unwrap();
    b.commit("r1", n(100), NOW).unwrap();
    let ttl_ms = u64::try_from(TTL.as_millis()).unwrap();
    b.expire(t(NOW.0 + ttl_ms - 1));
    assert_eq!(b.tombstones(), 1);
    assert_eq!(
        b.commit("r1", n(100), t(NOW.0 + ttl_ms - 1)),
        Ok(CommitOutcome::AlreadyCommitted(n(100)))
    );
    b.expire(t(NOW.0 + ttl_ms));
    assert_eq!(b.tombstones(), 0);
    // Forgotten: a late duplicate charges nothing, and the id may be used again.
    assert_eq!(
        b.commit("r1", n(100), t(NOW.0 + ttl_ms)),
        Err(SettleError::UnknownReservation)
    );
    assert_eq!(bal(&b, LATER).spent, n(100));
    let again = t(NOW.0 + ttl_ms + 1);
    b.reserve("r1", "c", n(5), t(again.0 + 1_000), again)
        .unwrap();
    checked(&b);
}

#[test]
fn lowering_a_budget_below_spend_clamps_it_and_the_campaign_stops() {
    let mut b = book(None);
    b.reserve("r1", "c", n(600), LATER, NOW).unwrap();
    b.commit("r1", n(500), NOW).unwrap();
    b.reserve("r2", "c", n(300), LATER, NOW).unwrap();
    // 500 spent + 300 reserved; ask for 400.
    b.set_limits(
        "c",
        Limits {
            total: n(400),
            daily: None,
        },
        NOW,
    );
    let clamped = bal(&b, NOW);
    assert_eq!((clamped.budget, clamped.available), (n(800), n(0)));
    assert_eq!(b.limits("c").map(|l| l.total), Some(n(400)));
    checked(&b);
    assert_eq!(
        b.reserve("r3", "c", n(1), LATER, NOW),
        Err(Refusal::InsufficientBudget)
    );
    // The open reservation can still be won, and the clamp follows the money down: the
    // campaign does not resume while spend is above what was configured.
    b.commit("r2", n(50), NOW).unwrap();
    let after = bal(&b, NOW);
    assert_eq!(
        (after.spent, after.budget, after.available),
        (n(550), n(550), n(0))
    );
    assert_eq!(
        b.reserve("r3", "c", n(1), LATER, NOW),
        Err(Refusal::InsufficientBudget)
    );
    checked(&b);
    // Raising it again re-opens the campaign.
    b.set_limits(
        "c",
        Limits {
            total: n(600),
            daily: None,
        },
        NOW,
    );
    assert_eq!(bal(&b, NOW).available, n(50));
    checked(&b);
}

#[test]
fn a_negative_budget_behaves_as_zero() {
    let mut b = Book::new(TTL);
    b.set_limits(
        "c",
        Limits {
            total: n(-10),
            daily: Some(n(-3)),
        },
        NOW,
    );
    let zero = bal(&b, NOW);
    assert_eq!((zero.budget, zero.available), (n(0), n(0)));
    assert_eq!(
        b.reserve("r", "c", n(1), LATER, NOW),
        Err(Refusal::InsufficientBudget)
    );
    checked(&b);
}

#[test]
fn daily_counters_roll_over_at_utc_midnight() {
    let mut b = book(Some(300));
    b.reserve("r1", "c", n(300), t(11 * DAY + 10_000), NOW)
        .unwrap();
    b.commit("r1", n(250), NOW).unwrap();
    assert_eq!(
        b.reserve("r2", "c", n(100), LATER, NOW),
        Err(Refusal::InsufficientDailyBudget)
    );
    // Day 11: a fresh daily budget, the total keeps counting.
    let tomorrow = t(11 * DAY);
    let fresh = bal(&b, tomorrow);
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
    b.reserve("r2", "c", n(300), t(tomorrow.0 + 1_000), tomorrow)
        .unwrap();
    checked(&b);
}

#[test]
fn a_reservation_counts_only_against_the_day_it_was_made_on() {
    let mut b = book(Some(300));
    let late = t(11 * DAY - 1);
    b.reserve("y", "c", n(200), t(11 * DAY + 60_000), late)
        .unwrap();
    assert_eq!(bal(&b, late).daily.map(|d| d.reserved), Some(n(200)));
    // After midnight it no longer holds today's budget, but still holds the total.
    let morning = t(11 * DAY + 1_000);
    b.reserve("z", "c", n(300), t(11 * DAY + 60_000), morning)
        .unwrap();
    let both = bal(&b, morning);
    assert_eq!(
        (both.reserved, both.daily.map(|d| d.reserved)),
        (n(500), Some(n(300)))
    );
    checked(&b);
    // Yesterday's win is charged to the total only; today's day counters are untouched by it.
    assert_eq!(
        b.commit("y", n(150), morning),
        Ok(CommitOutcome::Charged(n(150)))
    );
    let after = bal(&b, morning);
    assert_eq!(after.spent, n(150));
    assert_eq!(
        after.daily.map(|d| (d.spent, d.reserved, d.available)),
        Some((n(0), n(300), n(0)))
    );
    checked(&b);
}

#[test]
fn a_daily_budget_set_mid_day_sees_what_the_day_already_spent() {
    let mut b = book(None);
    b.reserve("r1", "c", n(200), LATER, NOW).unwrap();
    b.commit("r1", n(200), NOW).unwrap();
    b.set_limits(
        "c",
        Limits {
            total: n(1000),
            daily: Some(n(150)),
        },
        NOW,
    );
    let daily = bal(&b, NOW).daily.unwrap();
    // Clamped at the day's spend: stopped for today.
    assert_eq!(
        (daily.budget, daily.spent, daily.available),
        (n(200), n(200), n(0))
    );
    assert_eq!(
        b.reserve("r2", "c", n(1), LATER, NOW),
        Err(Refusal::InsufficientDailyBudget)
    );
    checked(&b);
}

#[test]
fn an_earlier_now_never_rolls_a_day_back() {
    let mut b = book(Some(300));
    let tomorrow = t(11 * DAY + 5);
    b.reserve("r1", "c", n(100), t(12 * DAY), tomorrow).unwrap();
    // A straggler from yesterday's clock: still counted against day 11.
    b.reserve("r2", "c", n(100), t(12 * DAY), NOW).unwrap();
    assert_eq!(
        bal(&b, NOW).daily.map(|d| (d.day, d.reserved)),
        Some((11, n(200)))
    );
    b.commit("r1", n(10), tomorrow).unwrap();
    b.commit("r2", n(10), NOW).unwrap();
    assert_eq!(bal(&b, tomorrow).daily.map(|d| d.spent), Some(n(20)));
    checked(&b);
}

#[test]
fn campaigns_are_listed() {
    let mut b = book(None);
    b.set_limits(
        "d",
        Limits {
            total: n(1),
            daily: None,
        },
        NOW,
    );
    let mut names: Vec<&str> = b.campaigns().collect();
    names.sort_unstable();
    assert_eq!(names, ["c", "d"]);
    assert!(b.balance("x", NOW).is_none());
}

#[test]
fn labels_are_bounded_snake_case() {
    let refusals = [
        Refusal::UnknownCampaign,
        Refusal::NonPositiveAmount,
        Refusal::InsufficientBudget,
        Refusal::InsufficientDailyBudget,
        Refusal::DuplicateId,
    ];
    let settles = [
        SettleError::UnknownReservation,
        SettleError::AboveReservation {
            reserved: n(1),
            price: n(2),
        },
        SettleError::NegativePrice,
    ];
    let labels: Vec<&str> = refusals
        .iter()
        .map(Refusal::label)
        .chain(settles.iter().map(SettleError::label))
        .collect();
    for label in &labels {
        assert!(
            label.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{label}"
        );
    }
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), labels.len());
}

#[test]
fn a_balance_serializes_with_its_daily_side() {
    let b = book(Some(300));
    let json = serde_json::to_value(bal(&b, NOW)).unwrap();
    assert_eq!(json["campaign"], "c");
    assert_eq!(json["budget"], 1000);
    assert_eq!(json["daily"]["available"], 300);
}

#[test]
fn a_full_book_refuses_and_a_full_graveyard_forgets_its_oldest() {
    let mut b = book(None).with_caps(2, 3);
    let now = t(10 * DAY);
    let exp = now.saturating_add(TTL);
    b.reserve("r1", "c", n(10), exp, now).unwrap();
    b.reserve("r2", "c", n(10), exp, now).unwrap();
    assert_eq!(
        b.reserve("r3", "c", n(10), exp, now),
        Err(Refusal::TooManyOpen)
    );
    checked(&b);
    // Resolving makes room; tombstones beyond 3 push out the oldest.
    for i in 0..5 {
        let id = format!("s{i}");
        b.release("r1", now).ok();
        b.reserve(&id, "c", n(10), exp, now).unwrap();
        b.commit(&id, n(5), now).unwrap();
    }
    assert_eq!(b.tombstones(), 3);
    assert_eq!(b.tombstones_dropped(), 3);
    // The oldest are forgotten (unknown, never charged again); the newest still dedupe.
    assert_eq!(
        b.commit("s0", n(5), now),
        Err(SettleError::UnknownReservation)
    );
    assert_eq!(
        b.commit("s4", n(5), now),
        Ok(CommitOutcome::AlreadyCommitted(n(5)))
    );
    checked(&b);
}
