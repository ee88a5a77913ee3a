//! [`Book::check_invariants`]: the whole-book audit the property tests run after every step.
// The tests' audit, not a bid's path: one list of every invariant reads best in one place.
#![allow(clippy::too_many_lines)]

use std::collections::HashMap;

use super::Book;
use units::Timestamp;

impl Book {
    /// Recomputes the reserved sums from the open reservations and checks every invariant of the
    /// [ledger module docs](crate::book). For tests and debug endpoints: O(campaigns +
    /// reservations + tombstones).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut reserved: HashMap<&str, (i128, i128)> = HashMap::new();
        for (id, r) in &self.open {
            let account = self.accounts.get(&*r.campaign).ok_or_else(|| {
                format!("reservation {id} is for unknown campaign {}", r.campaign)
            })?;
            if !r.amount.is_positive() {
                return Err(format!("reservation {id} holds {}", r.amount));
            }
            if r.day > account.day {
                return Err(format!(
                    "reservation {id} is from a day after its campaign's"
                ));
            }
            if !self.deadlines.contains(&(r.expires_at, id.clone())) {
                return Err(format!(
                    "reservation {id} is missing from the deadline index"
                ));
            }
            if self.tombstones.contains_key(id) {
                return Err(format!("reservation {id} is both open and resolved"));
            }
            let sums = reserved.entry(&r.campaign).or_default();
            sums.0 += i128::from(r.amount.get());
            if r.day == account.day {
                sums.1 += i128::from(r.amount.get());
            }
        }
        if self.deadlines.len() != self.open.len() {
            return Err(format!(
                "{} deadlines for {} open reservations",
                self.deadlines.len(),
                self.open.len()
            ));
        }
        let mut previous = Timestamp(0);
        for (resolved_at, id) in &self.graveyard {
            if *resolved_at < previous {
                return Err(format!("graveyard out of order at {id}"));
            }
            previous = *resolved_at;
            if self.tombstones.get(id).map(|t| t.resolved_at) != Some(*resolved_at) {
                return Err(format!("graveyard entry {id} does not match its tombstone"));
            }
        }
        if self.graveyard.len() != self.tombstones.len() {
            return Err(format!(
                "{} graveyard entries for {} tombstones",
                self.graveyard.len(),
                self.tombstones.len()
            ));
        }
        for (name, a) in &self.accounts {
            let (sum, day_sum) = reserved.get(&**name).copied().unwrap_or_default();
            let check = |what: &str, ok: bool| {
                if ok {
                    Ok(())
                } else {
                    Err(format!("campaign {name}: {what} ({a:?})"))
                }
            };
            check(
                "reserved is the sum of open reservations",
                i128::from(a.reserved.get()) == sum,
            )?;
            check(
                "day reserved is the sum of the day's open reservations",
                i128::from(a.day_reserved.get()) == day_sum,
            )?;
            check("spent >= 0", a.spent.get() >= 0)?;
            check("day spent >= 0", a.day_spent.get() >= 0)?;
            check("day spent <= spent", a.day_spent <= a.spent)?;
            let budget = i128::from(a.budget().get());
            let used = i128::from(a.spent.get()) + i128::from(a.reserved.get());
            let available = i128::from(a.available().get());
            check("spent + reserved <= budget", used <= budget)?;
            check("available >= 0", available >= 0)?;
            check(
                "spent + reserved + available == budget",
                used + available == budget,
            )?;
            if let Some(d) = a.daily(a.day) {
                let used = i128::from(d.spent.get()) + i128::from(d.reserved.get());
                let (budget, available) =
                    (i128::from(d.budget.get()), i128::from(d.available.get()));
                check("day spent + reserved <= day budget", used <= budget)?;
                check("day available >= 0", available >= 0)?;
                check(
                    "day spent + reserved + available == day budget",
                    used + available == budget,
                )?;
            }
        }
        Ok(())
    }
}
