//! [`Book`]: the budget of record as a state machine, after TigerBeetle's two-phase transfers.
//!
//! A bid first **reserves** its maximum price against its campaign, with a timeout. The
//! reservation then resolves once: **commit** (charge the clearing price, at most the reserved
//! amount; the rest goes back), **release** (the bid lost: everything goes back) or **expire**
//! (no notice came in time: everything goes back). A resolved reservation leaves a tombstone for
//! `tombstone_ttl`, so that duplicate win and billing notices are recognized and charge once;
//! after that its id is forgotten.
//!
//! A win is never lost: a commit after a release or an expiry still charges (at most the
//! reserved amount), because the impression was served; it answers
//! [`CommitOutcome::ChargedAfterRelease`] so that the caller can count it, and the budget in
//! force grows to cover it (see below). A release after a commit changes nothing: the charge
//! stands. So a win and a loss for the same reservation, in either order, end charged once.
//!
//! Invariants, checked by [`Book::check_invariants`] (the property tests call it after every step):
//! - per campaign, `spent + reserved <= budget`, `spent + reserved + available == budget`,
//!   `available >= 0`, and the same for the current UTC day when a daily budget is set;
//! - `reserved` is the sum of the campaign's open reservations, and the day's `reserved` the sum of
//!   those made on the current day;
//! - a commit never charges more than its reservation; each reservation is charged at most once;
//!   a duplicate commit or release returns the recorded outcome and changes nothing.
//!
//! Budgets in force: a campaign's budget is its configured one, or what it has already spent and
//! reserved if that is higher (a budget lowered below spend clamps there: the campaign stops,
//! its open reservations can still be won). Nothing expires on its own: the caller runs
//! [`Book::expire`] on a timer.
//!
//! Costs: every operation is O(1) amortized hash-map work plus O(log n) for the deadline index;
//! [`Book::expire`] costs O(log n) per reservation it expires and O(1) per tombstone it forgets,
//! never a scan.
//!
//! Days: daily counters roll over lazily, when an operation sees a later UTC day than the
//! campaign's. A reservation counts against the day it was made on, and only while that day is
//! current: committed after midnight, it is charged to the total but to no day's budget (the
//! day that authorized it is closed, and the new day did not). Time never runs backwards for a
//! campaign: an operation with an earlier `now` than seen before uses the later day.
// On every bid's path to the ledger: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

mod invariants;
mod outcome;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

pub use outcome::{Balance, CommitOutcome, DailyBalance, Refusal, ReleaseOutcome, SettleError};

use units::{Limits, Nanos, Timestamp};

/// One campaign's counters. The day counters are kept even without a daily budget, so that a
/// daily budget set in the middle of a day sees what that day already spent.
#[derive(Clone, Debug)]
struct Account {
    name: Arc<str>,
    limits: Limits,
    spent: Nanos,
    reserved: Nanos,
    day: u64,
    day_spent: Nanos,
    day_reserved: Nanos,
}

impl Account {
    fn roll(&mut self, today: u64) {
        if today > self.day {
            self.day = today;
            self.day_spent = Nanos::ZERO;
            self.day_reserved = Nanos::ZERO;
        }
    }

    fn used(&self) -> Nanos {
        self.spent.saturating_add(self.reserved)
    }

    /// The budget in force: the configured total, clamped up to what is already committed to.
    fn budget(&self) -> Nanos {
        self.limits.total.max(self.used())
    }

    fn available(&self) -> Nanos {
        self.budget().saturating_sub(self.used())
    }

    fn daily(&self, today: u64) -> Option<DailyBalance> {
        let daily = self.limits.daily?;
        let (spent, reserved) = if today > self.day {
            (Nanos::ZERO, Nanos::ZERO)
        } else {
            (self.day_spent, self.day_reserved)
        };
        let used = spent.saturating_add(reserved);
        let budget = daily.max(used);
        Some(DailyBalance {
            day: today.max(self.day),
            budget,
            spent,
            reserved,
            available: budget.saturating_sub(used),
        })
    }
}

#[derive(Clone, Debug)]
struct Reservation {
    campaign: Arc<str>,
    amount: Nanos,
    /// The campaign's day when it was made; it counts against that day only.
    day: u64,
    expires_at: Timestamp,
}

/// How a reservation resolved, remembered to answer duplicate notices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolution {
    Committed(Nanos),
    Released,
    Expired,
}

/// A resolved reservation, remembered with what a late win needs to charge it.
#[derive(Clone, Debug)]
struct Tombstone {
    resolution: Resolution,
    resolved_at: Timestamp,
    campaign: Arc<str>,
    amount: Nanos,
    day: u64,
}

/// The budget of record for many campaigns. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Book {
    tombstone_ttl: Duration,
    accounts: HashMap<Arc<str>, Account>,
    open: HashMap<String, Reservation>,
    /// Open reservations by deadline, so that [`Book::expire`] pops instead of scanning.
    deadlines: BTreeSet<(Timestamp, String)>,
    tombstones: HashMap<String, Tombstone>,
    /// Tombstones in the order they are to be forgotten. `resolved_at` is kept non-decreasing
    /// (a `now` earlier than the last one counts as the last one), so the front is the oldest.
    graveyard: VecDeque<(Timestamp, String)>,
    last_resolved_at: Timestamp,
    /// Most open reservations; a reserve beyond is refused ([`Refusal::TooManyOpen`]).
    max_open: usize,
    /// Most tombstones; beyond, the oldest are forgotten early (counted).
    max_tombstones: usize,
    /// Tombstones forgotten before their TTL because of `max_tombstones`.
    tombstones_dropped: u64,
}

/// Default caps of [`Book::new`]: about a gigabyte at most, whatever a flood of bids does.
pub const MAX_OPEN: usize = 2_000_000;
pub const MAX_TOMBSTONES: usize = 4_000_000;

impl Book {
    /// An empty book that remembers resolved reservations for `tombstone_ttl`. Pick a TTL longer
    /// than the longest delay of a duplicate notice (billing notices can be re-sent for minutes).
    pub fn new(tombstone_ttl: Duration) -> Book {
        Book {
            tombstone_ttl,
            accounts: HashMap::new(),
            open: HashMap::new(),
            deadlines: BTreeSet::new(),
            tombstones: HashMap::new(),
            graveyard: VecDeque::new(),
            last_resolved_at: Timestamp(0),
            max_open: MAX_OPEN,
            max_tombstones: MAX_TOMBSTONES,
            tombstones_dropped: 0,
        }
    }

    /// The same book with other caps on open reservations and on tombstones (each at least 1).
    /// Memory per entry is about 150 bytes. A full book refuses new reservations (a no-bid);
    /// a full graveyard forgets its oldest tombstones early, so a duplicate notice older than
    /// that is unknown (answered 404, never charged twice).
    #[must_use]
    pub fn with_caps(mut self, max_open: usize, max_tombstones: usize) -> Book {
        self.max_open = max_open.max(1);
        self.max_tombstones = max_tombstones.max(1);
        self
    }

    /// Tombstones forgotten before their TTL because the graveyard was full.
    pub fn tombstones_dropped(&self) -> u64 {
        self.tombstones_dropped
    }

    /// Creates or updates a campaign's limits.
    ///
    /// A budget (total or daily) can't be lowered below what is already spent+reserved: the
    /// budget in force is clamped there, so the campaign simply stops, and open reservations can
    /// still be committed. The clamp follows the money down: when a reservation is released or
    /// committed below its amount, the budget in force drops back towards the configured one, so
    /// the campaign does not resume until spend falls below what was configured. A negative
    /// configured budget behaves as zero.
    pub fn set_limits(&mut self, campaign: &str, limits: Limits, now: Timestamp) {
        let today = now.day();
        if let Some(account) = self.accounts.get_mut(campaign) {
            account.roll(today);
            account.limits = limits;
            return;
        }
        let name: Arc<str> = Arc::from(campaign);
        let account = Account {
            name: Arc::clone(&name),
            limits,
            spent: Nanos::ZERO,
            reserved: Nanos::ZERO,
            day: today,
            day_spent: Nanos::ZERO,
            day_reserved: Nanos::ZERO,
        };
        self.accounts.insert(name, account);
    }

    /// Reserves `amount` of `campaign`'s budget (and of its day's) under `id`, until `expires_at`
    /// (when [`Book::expire`] releases it if no notice came).
    pub fn reserve(
        &mut self,
        id: &str,
        campaign: &str,
        amount: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        if !amount.is_positive() {
            return Err(Refusal::NonPositiveAmount);
        }
        if self.open.contains_key(id) || self.tombstones.contains_key(id) {
            return Err(Refusal::DuplicateId);
        }
        if self.open.len() >= self.max_open {
            return Err(Refusal::TooManyOpen);
        }
        let account = self
            .accounts
            .get_mut(campaign)
            .ok_or(Refusal::UnknownCampaign)?;
        account.roll(now.day());
        if amount > account.available() {
            return Err(Refusal::InsufficientBudget);
        }
        let day_available = account.daily(account.day).map(|d| d.available);
        if day_available.is_some_and(|available| amount > available) {
            return Err(Refusal::InsufficientDailyBudget);
        }
        // Both sums are bounded by a budget, itself an i64, by the checks above.
        account.reserved = account.reserved.saturating_add(amount);
        account.day_reserved = account.day_reserved.saturating_add(amount);
        let reservation = Reservation {
            campaign: Arc::clone(&account.name),
            amount,
            day: account.day,
            expires_at,
        };
        self.deadlines.insert((expires_at, id.to_owned()));
        self.open.insert(id.to_owned(), reservation);
        Ok(())
    }

    /// Charges `price` (zero allowed) for reservation `id` and returns the rest of its amount to
    /// the campaign.
    ///
    /// A price above the reserved amount is refused and the reservation stays as it was. A
    /// reservation already released or expired is charged all the same (the impression was
    /// served) and the answer says so: [`CommitOutcome::ChargedAfterRelease`]. A duplicate
    /// notice answers with the recorded charge and charges nothing.
    pub fn commit(
        &mut self,
        id: &str,
        price: Nanos,
        now: Timestamp,
    ) -> Result<CommitOutcome, SettleError> {
        if price.get() < 0 {
            return Err(SettleError::NegativePrice);
        }
        if let Some(reservation) = self.open.get(id) {
            if price > reservation.amount {
                return Err(SettleError::AboveReservation {
                    reserved: reservation.amount,
                    price,
                });
            }
            self.resolve_open(id, Resolution::Committed(price), now);
            return Ok(CommitOutcome::Charged(price));
        }
        let Some(tombstone) = self.tombstones.get_mut(id) else {
            return Err(SettleError::UnknownReservation);
        };
        if let Resolution::Committed(charged) = tombstone.resolution {
            return Ok(CommitOutcome::AlreadyCommitted(charged));
        }
        if price > tombstone.amount {
            return Err(SettleError::AboveReservation {
                reserved: tombstone.amount,
                price,
            });
        }
        // Released or expired: its money went back; charge the price now. The tombstone keeps
        // its place in the graveyard (forgotten when it was due).
        tombstone.resolution = Resolution::Committed(price);
        let (campaign, day) = (Arc::clone(&tombstone.campaign), tombstone.day);
        if let Some(account) = self.accounts.get_mut(&*campaign) {
            account.roll(now.day());
            account.spent = account.spent.saturating_add(price);
            if day == account.day {
                account.day_spent = account.day_spent.saturating_add(price);
            }
        }
        Ok(CommitOutcome::ChargedAfterRelease(price))
    }

    /// Whether `id` is open or remembered (a tombstone).
    pub fn knows(&self, id: &str) -> bool {
        self.open.contains_key(id) || self.tombstones.contains_key(id)
    }

    /// The amount reservation `id` holds (open) or held (remembered).
    pub fn reserved_amount(&self, id: &str) -> Option<Nanos> {
        match self.open.get(id) {
            Some(r) => Some(r.amount),
            None => self.tombstones.get(id).map(|t| t.amount),
        }
    }

    /// Records that another instance charged reservation `id` `price` (lease mode: a notice
    /// reached it instead of us, and it charged the shared ledger). An open reservation's money
    /// goes back without becoming local spend; either way a later notice for `id` here finds it
    /// committed. Unknown ids are ignored.
    pub fn charged_elsewhere(&mut self, id: &str, price: Nanos, now: Timestamp) {
        if self.open.contains_key(id) {
            self.resolve_open(id, Resolution::Released, now);
        }
        if let Some(tombstone) = self.tombstones.get_mut(id)
            && !matches!(tombstone.resolution, Resolution::Committed(_))
        {
            tombstone.resolution = Resolution::Committed(price);
        }
    }

    /// Returns reservation `id`'s whole amount to its campaign (the bid lost or was never sent).
    /// Idempotent: a resolved id answers with how it resolved, and a committed one stays
    /// charged ([`ReleaseOutcome::AlreadyCommitted`]: a loss never erases a win).
    pub fn release(&mut self, id: &str, now: Timestamp) -> Result<ReleaseOutcome, SettleError> {
        if let Some(reservation) = self.open.get(id) {
            let amount = reservation.amount;
            self.resolve_open(id, Resolution::Released, now);
            return Ok(ReleaseOutcome::Released(amount));
        }
        match self.tombstones.get(id).map(|t| t.resolution) {
            Some(Resolution::Committed(_)) => Ok(ReleaseOutcome::AlreadyCommitted),
            Some(Resolution::Released | Resolution::Expired) => Ok(ReleaseOutcome::AlreadyReleased),
            None => Err(SettleError::UnknownReservation),
        }
    }

    /// Releases every open reservation with `expires_at <= now` and forgets the tombstones that
    /// are `tombstone_ttl` old (resolved at or before `now - tombstone_ttl`). Returns how many
    /// reservations expired. The caller runs it on a timer; until it runs, an overdue reservation
    /// still holds its money (a commit on it finds it expired).
    pub fn expire(&mut self, now: Timestamp) -> usize {
        let mut expired = 0;
        while self.deadlines.first().is_some_and(|(at, _)| *at <= now) {
            let Some((_, id)) = self.deadlines.pop_first() else {
                break;
            };
            if let Some(reservation) = self.open.remove(&id) {
                self.settle(id, reservation, Resolution::Expired, now);
                expired += 1;
            }
        }
        while let Some((resolved_at, _)) = self.graveyard.front() {
            if resolved_at.saturating_add(self.tombstone_ttl) > now {
                break;
            }
            if let Some((_, id)) = self.graveyard.pop_front() {
                self.tombstones.remove(&id);
            }
        }
        expired
    }

    /// The campaign's balance as of `now` (a new UTC day shows fresh daily counters).
    pub fn balance(&self, campaign: &str, now: Timestamp) -> Option<Balance> {
        let account = self.accounts.get(campaign)?;
        Some(Balance {
            campaign: account.name.to_string(),
            budget: account.budget(),
            spent: account.spent,
            reserved: account.reserved,
            available: account.available(),
            daily: account.daily(now.day()),
        })
    }

    /// The configured limits of a campaign (the balance shows the budget in force).
    pub fn limits(&self, campaign: &str) -> Option<Limits> {
        self.accounts.get(campaign).map(|a| a.limits)
    }

    /// Every campaign with limits, in no particular order.
    pub fn campaigns(&self) -> impl Iterator<Item = &str> {
        self.accounts.keys().map(|name| &**name)
    }

    pub fn open_reservations(&self) -> usize {
        self.open.len()
    }

    /// Resolved reservations still remembered.
    pub fn tombstones(&self) -> usize {
        self.tombstones.len()
    }

    /// Resolves an open reservation (the caller has just seen it in `open`).
    fn resolve_open(&mut self, id: &str, resolution: Resolution, now: Timestamp) {
        let Some((id, reservation)) = self.open.remove_entry(id) else {
            return;
        };
        // `BTreeSet::take` wants the owned key; lend it our id and take it back.
        let probe = (reservation.expires_at, id);
        self.deadlines.remove(&probe);
        self.settle(probe.1, reservation, resolution, now);
    }

    /// Moves a reservation (already out of `open` and `deadlines`) into the accounts and leaves
    /// its tombstone.
    fn settle(&mut self, id: String, r: Reservation, resolution: Resolution, now: Timestamp) {
        if let Some(account) = self.accounts.get_mut(&*r.campaign) {
            account.roll(now.day());
            let same_day = r.day == account.day;
            account.reserved = account.reserved.saturating_sub(r.amount).max(Nanos::ZERO);
            if same_day {
                account.day_reserved = account
                    .day_reserved
                    .saturating_sub(r.amount)
                    .max(Nanos::ZERO);
            }
            if let Resolution::Committed(price) = resolution {
                account.spent = account.spent.saturating_add(price);
                if same_day {
                    account.day_spent = account.day_spent.saturating_add(price);
                }
            }
        }
        let resolved_at = now.max(self.last_resolved_at);
        self.last_resolved_at = resolved_at;
        self.tombstones.insert(
            id.clone(),
            Tombstone {
                resolution,
                resolved_at,
                campaign: r.campaign,
                amount: r.amount,
                day: r.day,
            },
        );
        self.graveyard.push_back((resolved_at, id));
        while self.tombstones.len() > self.max_tombstones {
            let Some((_, oldest)) = self.graveyard.pop_front() else {
                break;
            };
            if self.tombstones.remove(&oldest).is_some() {
                self.tombstones_dropped += 1;
            }
        }
    }
}
