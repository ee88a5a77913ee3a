//! Property tests of the [`Book`]: random interleavings of limits, reservations, commits,
//! releases, expiries, duplicate notices and time jumps across UTC midnights, over a few
//! campaigns. After every step the book must
//! - agree with a naive reference model (outcomes and every campaign's balance),
//! - pass [`Book::check_invariants`],
//! - never let spent+reserved exceed the configured budget, except by what was already committed
//!   when the budget was lowered (the documented clamp).

use std::time::Duration;

use ledger::{Balance, Book, CommitOutcome, DailyBalance, Refusal, ReleaseOutcome, SettleError};
use proptest::prelude::*;
use units::{Limits, Nanos, Timestamp};

const DAY: u64 = Timestamp::MS_PER_DAY;
const TTL_MS: u64 = 10_000;
const CAMPAIGNS: [&str; 3] = ["c0", "c1", "c2"];
/// One more campaign name than configured, so that unknown campaigns are exercised.
const NAMES: [&str; 4] = ["c0", "c1", "c2", "nope"];

#[derive(Clone, Debug)]
enum Op {
    SetLimits {
        c: usize,
        total: i64,
        daily: Option<i64>,
    },
    Reserve {
        id: u8,
        c: usize,
        amount: i64,
        ttl_ms: u64,
    },
    Commit {
        id: u8,
        price: i64,
    },
    Release {
        id: u8,
    },
    Expire,
    /// Re-sends the last notice that charged, as exchanges do with win + billing notices.
    Resend,
    Advance(Advance),
}

#[derive(Clone, Debug)]
enum Advance {
    Ms(u64),
    Hour,
    ToJustBeforeMidnight,
    ToMidnight,
}

/// Mostly known campaigns, sometimes the unknown one.
fn campaign_index() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0..3usize, 1 => Just(3usize)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..3usize, -10..400i64, prop::option::of(-10..200i64))
            .prop_map(|(c, total, daily)| Op::SetLimits { c, total, daily }),
        6 => (0..10u8, campaign_index(), -2..120i64, 0..20_000u64)
            .prop_map(|(id, c, amount, ttl_ms)| Op::Reserve { id, c, amount, ttl_ms }),
        5 => (0..10u8, prop_oneof![4 => 0..60i64, 1 => -2..130i64])
            .prop_map(|(id, price)| Op::Commit { id, price }),
        2 => (0..10u8).prop_map(|id| Op::Release { id }),
        2 => Just(Op::Expire),
        2 => Just(Op::Resend),
        3 => prop_oneof![
            6 => (0..3_000u64).prop_map(Advance::Ms),
            1 => Just(Advance::Hour),
            1 => Just(Advance::ToJustBeforeMidnight),
            1 => Just(Advance::ToMidnight),
        ]
        .prop_map(Op::Advance),
    ]
}

// ---------------------------------------------------------------------------------------------
// Reference model: everything recomputed by scanning a list of every reservation ever made.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// `late`: charged after a release or an expiry, when the money had gone back.
    Committed {
        price: i64,
        day: u64,
        late: bool,
    },
    Released,
    Expired,
}

#[derive(Clone, Debug)]
struct Res {
    id: String,
    campaign: usize,
    amount: i64,
    day: u64,
    expires_at: u64,
    state: State,
    resolved_at: u64,
    forgotten: bool,
}

#[derive(Clone, Copy, Debug)]
struct Campaign {
    limits: Limits,
    /// `max(total, spent + reserved)` when the limits were set: the documented ceiling.
    cap: i64,
    /// Same for the day the limits were set on.
    day_cap: Option<(u64, i64)>,
}

#[derive(Debug, Default)]
struct Model {
    campaigns: Vec<Option<Campaign>>,
    res: Vec<Res>,
}

impl Model {
    fn live(&mut self, id: &str) -> Option<&mut Res> {
        self.res
            .iter_mut()
            .rev()
            .find(|r| r.id == id && !r.forgotten)
    }

    fn used(&self, c: usize) -> i64 {
        self.res
            .iter()
            .filter(|r| r.campaign == c)
            .map(|r| match r.state {
                State::Open => r.amount,
                State::Committed { price, .. } => price,
                _ => 0,
            })
            .sum()
    }

    /// What late wins charged (after their money had gone back), in total and on `day`: the
    /// most by which the campaign may be past its budget.
    fn late(&self, c: usize, day: u64) -> (i64, i64) {
        let mut total = 0;
        let mut on_day = 0;
        for r in self.res.iter().filter(|r| r.campaign == c) {
            if let State::Committed {
                price,
                day: d,
                late: true,
            } = r.state
            {
                total += price;
                if d == day && r.day == day {
                    on_day += price;
                }
            }
        }
        (total, on_day)
    }

    fn spent(&self, c: usize) -> i64 {
        self.res
            .iter()
            .filter(|r| r.campaign == c)
            .map(|r| match r.state {
                State::Committed { price, .. } => price,
                _ => 0,
            })
            .sum()
    }

    /// (spent, reserved) that count against day `day`: made on that day and, if committed,
    /// committed on it too.
    fn day_counters(&self, c: usize, day: u64) -> (i64, i64) {
        let mut spent = 0;
        let mut reserved = 0;
        for r in self.res.iter().filter(|r| r.campaign == c && r.day == day) {
            match r.state {
                State::Open => reserved += r.amount,
                State::Committed { price, day: d, .. } if d == day => spent += price,
                _ => {}
            }
        }
        (spent, reserved)
    }

    fn balance(&self, c: usize, now: Timestamp) -> Option<Balance> {
        let campaign = (*self.campaigns.get(c)?)?;
        let spent = self.spent(c);
        let used = self.used(c);
        let budget = campaign.limits.total.get().max(used);
        let daily = campaign.limits.daily.map(|d| {
            let (spent, reserved) = self.day_counters(c, now.day());
            let budget = d.get().max(spent + reserved);
            DailyBalance {
                day: now.day(),
                budget: Nanos(budget),
                spent: Nanos(spent),
                reserved: Nanos(reserved),
                available: Nanos(budget - spent - reserved),
            }
        });
        Some(Balance {
            campaign: CAMPAIGNS[c].to_owned(),
            budget: Nanos(budget),
            spent: Nanos(spent),
            reserved: Nanos(used - spent),
            available: Nanos(budget - used),
            daily,
        })
    }

    fn set_limits(&mut self, c: usize, limits: Limits, now: Timestamp) {
        let used = self.used(c);
        let (ds, dr) = self.day_counters(c, now.day());
        if self.campaigns.len() <= c {
            self.campaigns.resize(c + 1, None);
        }
        self.campaigns[c] = Some(Campaign {
            limits,
            cap: limits.total.get().max(used),
            day_cap: limits.daily.map(|d| (now.day(), d.get().max(ds + dr))),
        });
    }

    fn reserve(
        &mut self,
        id: &str,
        c: usize,
        amount: i64,
        exp: u64,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        if amount <= 0 {
            return Err(Refusal::NonPositiveAmount);
        }
        if self.live(id).is_some() {
            return Err(Refusal::DuplicateId);
        }
        let Some(Some(campaign)) = self.campaigns.get(c).copied() else {
            return Err(Refusal::UnknownCampaign);
        };
        let used = self.used(c);
        if amount > campaign.limits.total.get().max(used) - used {
            return Err(Refusal::InsufficientBudget);
        }
        if let Some(d) = campaign.limits.daily {
            let (s, r) = self.day_counters(c, now.day());
            if amount > d.get().max(s + r) - (s + r) {
                return Err(Refusal::InsufficientDailyBudget);
            }
        }
        self.res.push(Res {
            id: id.to_owned(),
            campaign: c,
            amount,
            day: now.day(),
            expires_at: exp,
            state: State::Open,
            resolved_at: 0,
            forgotten: false,
        });
        Ok(())
    }

    fn commit(
        &mut self,
        id: &str,
        price: i64,
        now: Timestamp,
    ) -> Result<CommitOutcome, SettleError> {
        if price < 0 {
            return Err(SettleError::NegativePrice);
        }
        let r = self.live(id).ok_or(SettleError::UnknownReservation)?;
        match r.state {
            State::Committed { price, .. } => Ok(CommitOutcome::AlreadyCommitted(Nanos(price))),
            _ if price > r.amount => Err(SettleError::AboveReservation {
                reserved: Nanos(r.amount),
                price: Nanos(price),
            }),
            State::Open => {
                r.state = State::Committed {
                    price,
                    day: now.day(),
                    late: false,
                };
                r.resolved_at = now.0;
                Ok(CommitOutcome::Charged(Nanos(price)))
            }
            // A late win: charged, and its tombstone keeps its age.
            State::Released | State::Expired => {
                r.state = State::Committed {
                    price,
                    day: now.day(),
                    late: true,
                };
                Ok(CommitOutcome::ChargedAfterRelease(Nanos(price)))
            }
        }
    }

    fn release(&mut self, id: &str, now: Timestamp) -> Result<ReleaseOutcome, SettleError> {
        let r = self.live(id).ok_or(SettleError::UnknownReservation)?;
        match r.state {
            State::Open => {
                r.state = State::Released;
                r.resolved_at = now.0;
                Ok(ReleaseOutcome::Released(Nanos(r.amount)))
            }
            State::Committed { .. } => Ok(ReleaseOutcome::AlreadyCommitted),
            State::Released | State::Expired => Ok(ReleaseOutcome::AlreadyReleased),
        }
    }

    fn expire(&mut self, now: Timestamp) -> usize {
        let mut n = 0;
        for r in &mut self.res {
            if r.state == State::Open && r.expires_at <= now.0 {
                r.state = State::Expired;
                r.resolved_at = now.0;
                n += 1;
            }
        }
        for r in &mut self.res {
            if r.state != State::Open && r.resolved_at + TTL_MS <= now.0 {
                r.forgotten = true;
            }
        }
        n
    }
}

// ---------------------------------------------------------------------------------------------

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut now = Timestamp(10 * DAY + 23 * 3_600_000);
    let mut book = Book::new(Duration::from_millis(TTL_MS));
    let mut model = Model::default();
    let mut last_charge: Option<(String, i64)> = None;
    for (c, name) in CAMPAIGNS.iter().enumerate() {
        let limits = Limits {
            total: Nanos(300),
            daily: (c != 0).then_some(Nanos(120)),
        };
        book.set_limits(name, limits, now);
        model.set_limits(c, limits, now);
    }
    for (step, op) in ops.iter().enumerate() {
        let spent_before: Vec<Option<Nanos>> = CAMPAIGNS
            .iter()
            .map(|c| book.balance(c, now).map(|b| b.spent))
            .collect();
        match op {
            Op::SetLimits { c, total, daily } => {
                let limits = Limits {
                    total: Nanos(*total),
                    daily: daily.map(Nanos),
                };
                book.set_limits(CAMPAIGNS[*c], limits, now);
                model.set_limits(*c, limits, now);
            }
            Op::Reserve {
                id,
                c,
                amount,
                ttl_ms,
            } => {
                let id = format!("r{id}");
                let exp = now.0 + ttl_ms;
                let got = book.reserve(&id, NAMES[*c], Nanos(*amount), Timestamp(exp), now);
                let want = model.reserve(&id, *c, *amount, exp, now);
                prop_assert_eq!(got, want, "step {} {:?}", step, op);
                if got.is_ok() && last_charge.as_ref().is_some_and(|(last, _)| *last == id) {
                    // The id was forgotten and reused: a notice for it is no longer a duplicate.
                    last_charge = None;
                }
            }
            Op::Commit { id, price } => {
                let id = format!("r{id}");
                let got = book.commit(&id, Nanos(*price), now);
                let want = model.commit(&id, *price, now);
                prop_assert_eq!(got, want, "step {} {:?}", step, op);
                if let Ok(CommitOutcome::Charged(p)) = got {
                    prop_assert!(p.get() <= *price);
                    last_charge = Some((id, p.get()));
                }
            }
            Op::Release { id } => {
                let id = format!("r{id}");
                let got = book.release(&id, now);
                let want = model.release(&id, now);
                prop_assert_eq!(got, want, "step {} {:?}", step, op);
            }
            Op::Expire => {
                let got = book.expire(now);
                let want = model.expire(now);
                prop_assert_eq!(got, want, "step {} expire", step);
            }
            Op::Resend => {
                if let Some((id, price)) = &last_charge {
                    let got = book.commit(id, Nanos(*price), now);
                    let want = model.commit(id, *price, now);
                    prop_assert_eq!(got, want, "step {} resend {}", step, id);
                    // A duplicate never charges: recognized, or forgotten and refused.
                    prop_assert!(matches!(
                        got,
                        Ok(CommitOutcome::AlreadyCommitted(_))
                            | Err(SettleError::UnknownReservation)
                    ));
                    let spent_after: Vec<Option<Nanos>> = CAMPAIGNS
                        .iter()
                        .map(|c| book.balance(c, now).map(|b| b.spent))
                        .collect();
                    prop_assert_eq!(&spent_after, &spent_before, "a duplicate notice charged");
                }
            }
            Op::Advance(a) => {
                now = match a {
                    Advance::Ms(ms) => Timestamp(now.0 + ms),
                    Advance::Hour => Timestamp(now.0 + 3_600_000),
                    Advance::ToJustBeforeMidnight => Timestamp((now.day() + 1) * DAY - 1),
                    Advance::ToMidnight => Timestamp((now.day() + 1) * DAY),
                };
            }
        }
        if let Err(e) = book.check_invariants() {
            return Err(TestCaseError::fail(format!("step {step} {op:?}: {e}")));
        }
        prop_assert_eq!(
            book.open_reservations(),
            model.res.iter().filter(|r| r.state == State::Open).count()
        );
        for (c, name) in CAMPAIGNS.iter().enumerate() {
            let got = book.balance(name, now);
            prop_assert_eq!(
                &got,
                &model.balance(c, now),
                "step {} {:?}: {}",
                step,
                op,
                name
            );
            let (Some(b), Some(Some(campaign))) = (got, model.campaigns.get(c)) else {
                continue;
            };
            // Safety: money committed never exceeds the configured budget, or what was already
            // committed when it was lowered, but for wins charged after their money went back.
            let used = b.spent.get() + b.reserved.get();
            let (late, late_today) = model.late(c, now.day());
            prop_assert!(
                used <= campaign.cap.max(campaign.limits.total.get()) + late,
                "step {}: over budget",
                step
            );
            if let (Some(d), Some((day, cap))) = (b.daily, campaign.day_cap) {
                let day_used = d.spent.get() + d.reserved.get();
                let ceiling = if d.day == day {
                    cap
                } else {
                    campaign.limits.daily.map_or(0, Nanos::get)
                };
                prop_assert!(
                    day_used <= ceiling.max(0) + late_today,
                    "step {}: over the daily budget",
                    step
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn the_book_matches_its_model_and_keeps_its_invariants(ops in prop::collection::vec(op(), 1..160)) {
        run(&ops)?;
    }
}

/// Many notices for few reservations: every id is reserved, then committed and released several
/// times in random order; the spend is the sum of one price per id.
#[test]
fn duplicate_notices_charge_once() {
    let now = Timestamp(5 * DAY);
    let mut book = Book::new(Duration::from_secs(60));
    book.set_limits(
        "c",
        Limits {
            total: Nanos(1_000_000),
            daily: None,
        },
        now,
    );
    let mut expected = 0;
    for i in 0..50_i64 {
        let id = format!("r{i}");
        book.reserve(&id, "c", Nanos(100), Timestamp(now.0 + 1_000), now)
            .unwrap();
        if i % 3 == 0 {
            assert_eq!(
                book.release(&id, now),
                Ok(ReleaseOutcome::Released(Nanos(100)))
            );
        }
        // Released first or not, the win charges, once.
        expected += i;
        for _ in 0..3 {
            let _ = book.commit(&id, Nanos(i), now);
            let _ = book.release(&id, now);
        }
    }
    assert_eq!(
        book.balance("c", now).map(|b| (b.spent, b.reserved)),
        Some((Nanos(expected), Nanos(0)))
    );
    book.check_invariants().unwrap();
}
