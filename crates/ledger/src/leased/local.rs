//! The local state of lease mode, under one lock: the book bids reserve against, each
//! campaign's lease and demand, and the queues the task works through. Every change here is
//! O(1) hash-map work; nothing awaits.
// On every bid's path to the ledger: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use units::{Limits, Nanos, Timestamp};

use crate::book::Book;
use crate::redis::script::SettleRequest;

#[derive(Debug)]
pub(super) struct Local {
    pub(super) book: Book,
    pub(super) campaigns: HashMap<String, Camp>,
    /// Campaigns whose `wanted` flag was raised, each once, in order: the task's top-up queue.
    pub(super) wanted: Vec<String>,
    /// Campaigns holding a lease: with `wanted`, the only campaigns a round looks at.
    pub(super) leased: BTreeSet<String>,
    /// Active campaigns whose limits are to be written (new, changed, or lost by Redis).
    pub(super) unapplied: BTreeSet<String>,
    /// The active campaigns' names, sorted (for `balances`, without a copy under the lock).
    pub(super) active: Arc<[String]>,
    /// The writer this instance writes limits as; `None`: a follower, which never writes them.
    pub(super) writer: Option<String>,
    /// Outcomes settled locally while Redis was unreachable, to claim there once it answers
    /// (so that a replay to another instance finds them). At most [`MARKS_MAX`].
    pub(super) marks: Vec<SettleRequest>,
}

/// Most unclaimed local outcomes kept while Redis is away; beyond it they are counted and
/// dropped (a replay of one of them to another instance could then charge it again).
pub(super) const MARKS_MAX: usize = 100_000;

#[derive(Debug)]
pub(super) struct Camp {
    /// The shared limits to keep in Redis.
    pub(super) limits: Limits,
    /// In the latest configuration; an inactive campaign takes no new leases.
    pub(super) active: bool,
    /// `set_limits` has succeeded since the limits changed (or since Redis lost them), or was
    /// refused because another writer changed them (reported by the bidder, not retried).
    pub(super) applied: bool,
    /// The version of the limits this instance last wrote or found equal to its own: the base
    /// of its next change. `None`: none yet (the change is based on being the campaign's own
    /// writer, which a restart must not lose).
    pub(super) version: Option<u64>,
    pub(super) lease: Option<Lease>,
    /// Local spend up to this figure is attributed to earlier leases; the next lease's
    /// cumulative spend counts from here.
    pub(super) accounted: Nanos,
    /// The id of a lease being created whose grant has not been answered yet: a retry after a
    /// timeout reuses it, so a grant that did land is adopted rather than parked until expiry.
    pub(super) pending: Option<String>,
    /// The latest reservation attempt (granted or not): idle leases are closed after a while.
    pub(super) last_demand: Timestamp,
    /// A reservation needs more budget than is leased; the campaign is in `Local::wanted`.
    pub(super) wanted: bool,
    /// No top-up is asked before then (after a grant that fell short).
    pub(super) ask_after: Timestamp,
    /// Until then a refusal for budget is the ledger's last word: Redis granted less than was
    /// asked (the campaign's budget, or today's, is spent or leased to other instances), so the
    /// bidder should try its other campaigns rather than ask again at every request.
    pub(super) short_until: Timestamp,
    /// The largest reservation refused since the task last looked: a top-up is asked while
    /// less than this is leased, and asks for at least this much (a campaign whose bid is
    /// worth more than a chunk, or whose lease has something left but less than a bid).
    pub(super) need: Nanos,
}

#[derive(Clone, Debug)]
pub(super) struct Lease {
    pub(super) id: String,
    /// Granted, as Redis last said.
    pub(super) amount: Nanos,
    /// Local `spent` when this lease took over; its cumulative spend is `spent - base`.
    pub(super) base: Nanos,
    pub(super) expires_at: Timestamp,
    pub(super) day: u64,
    /// The cumulative spend Redis last acknowledged (reports are sent only when it changed).
    pub(super) reported: Nanos,
    /// Charged against this lease by other instances (they settled our reservations), as our
    /// inbox told us: no longer ours to spend.
    pub(super) remote: Nanos,
}

impl Lease {
    /// The local budget this lease backs: local spend may reach it.
    pub(super) fn limit(&self) -> Nanos {
        self.base
            .saturating_add(self.amount)
            .saturating_sub(self.remote)
    }

    /// Local reservations may draw on this lease until then.
    pub(super) fn spend_until(&self, margin: Duration) -> Timestamp {
        let margin = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.expires_at.millis().saturating_sub(margin))
    }
}

impl Local {
    /// Raises a campaign's demand for a top-up; true if it was not raised yet (wake the task).
    pub(super) fn want(&mut self, name: &str, now: Timestamp) -> bool {
        match self.campaigns.get_mut(name) {
            Some(camp) => raise(camp, name, &mut self.wanted, now),
            None => false,
        }
    }

    /// Raises a campaign's demand even while it backs off (a top-up whose answer was lost: the
    /// retry adopts a grant that did land). No wake-up: the next round retries.
    pub(super) fn requeue(&mut self, name: &str) {
        if let Some(camp) = self.campaigns.get_mut(name)
            && !camp.wanted
        {
            camp.wanted = true;
            self.wanted.push(name.to_owned());
        }
    }

    /// Keeps an outcome to claim in Redis once it answers (bounded: see [`MARKS_MAX`]).
    pub(super) fn mark(&mut self, mark: SettleRequest) -> bool {
        if self.marks.len() >= MARKS_MAX {
            return false;
        }
        self.marks.push(mark);
        true
    }

    /// Whether the campaign asks for a top-up (raising its demand if it may): wake the task.
    pub(super) fn wants(&mut self, name: &str, now: Timestamp) -> bool {
        self.want(name, now);
        self.campaigns.get(name).is_some_and(|c| c.wanted)
    }

    /// `spent` and `reserved` of a campaign in the local book.
    pub(super) fn used(&self, name: &str, now: Timestamp) -> (Nanos, Nanos) {
        self.book
            .balance(name, now)
            .map_or((Nanos::ZERO, Nanos::ZERO), |b| (b.spent, b.reserved))
    }

    /// Limits need writing (again): Redis lost them, so the version remembered is gone too. A
    /// follower writes none.
    pub(super) fn unapply(&mut self, name: &str) {
        if self.writer.is_none() {
            return;
        }
        if let Some(camp) = self.campaigns.get_mut(name) {
            camp.applied = false;
            camp.version = None;
            if camp.active {
                self.unapplied.insert(name.to_owned());
            }
        }
    }

    /// Limits `limits` were written (or found stored) as `version`: applied, unless they changed
    /// meanwhile.
    pub(super) fn applied(&mut self, name: &str, limits: Limits, version: u64) {
        if let Some(camp) = self.campaigns.get_mut(name)
            && camp.limits == limits
        {
            camp.applied = true;
            camp.version = Some(version);
            self.unapplied.remove(name);
        }
    }

    /// Ends lease `id`: local spend up to `accounted` is attributed to it (or to earlier ones).
    /// If the campaign still has spend or open reservations beyond that, they need a lease to
    /// be reported: the campaign asks for one.
    pub(super) fn end_lease(&mut self, name: &str, id: &str, accounted: Nanos, now: Timestamp) {
        let Some(camp) = self.campaigns.get_mut(name) else {
            return;
        };
        if camp.lease.as_ref().is_none_or(|l| l.id != id) {
            return;
        }
        camp.lease = None;
        camp.accounted = accounted;
        let active = camp.active;
        self.leased.remove(name);
        let zero = Limits {
            total: Nanos::ZERO,
            daily: None,
        };
        self.book.set_limits(name, zero, now);
        let (spent, reserved) = self.used(name, now);
        if active && spent.saturating_add(reserved) > accounted {
            self.want(name, now);
        }
    }
}

/// Raises `camp`'s demand flag (queuing `name`) unless raised already or backing off.
pub(super) fn raise(camp: &mut Camp, name: &str, queue: &mut Vec<String>, now: Timestamp) -> bool {
    if camp.wanted || now < camp.ask_after {
        return false;
    }
    camp.wanted = true;
    queue.push(name.to_owned());
    true
}

pub(super) fn lease_mut<'a>(local: &'a mut Local, name: &str, id: &str) -> Option<&'a mut Lease> {
    local
        .campaigns
        .get_mut(name)?
        .lease
        .as_mut()
        .filter(|l| l.id == id)
}

pub(super) fn clear_pending(local: &mut Local, name: &str, id: &str) {
    if let Some(camp) = local.campaigns.get_mut(name)
        && camp.pending.as_deref() == Some(id)
    {
        camp.pending = None;
    }
}

pub(super) fn update_lease(
    local: &mut Local,
    name: &str,
    id: &str,
    amount: Nanos,
    expires_at: Timestamp,
    now: Timestamp,
) {
    let Local {
        book, campaigns, ..
    } = local;
    if let Some(l) = campaigns
        .get_mut(name)
        .and_then(|c| c.lease.as_mut())
        .filter(|l| l.id == id)
    {
        // Redis may know a larger amount (a grant whose answer timed out): it is ours.
        l.amount = l.amount.max(amount);
        l.expires_at = l.expires_at.max(expires_at);
        let total = l.limit();
        book.set_limits(name, Limits { total, daily: None }, now);
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks can panic halfway through an update (the Book does not
    // panic), so a poisoned lock still holds consistent data.
    telemetry::locks::lock(m)
}
