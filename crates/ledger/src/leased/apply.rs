//! Applying Redis's answers to the local state: each answer with the [`Step`] that asked for
//! it. A grant raises the local budget, a report extends a lease, a lost or reclaimed lease
//! ends and is replaced on demand, and an answer that never came is asked again next round.
#![warn(clippy::too_many_lines)]

use std::sync::atomic::Ordering;

use units::{Limits, Nanos, Timestamp};

use super::Inner;
use super::local::{Lease, Local, clear_pending, lease_mut, update_lease};
use super::plan::{GrantStep, Step};
use crate::redis::script::ScriptReply;
use crate::redis::script::{DRAIN_MAX, LeaseState, SettleRequest};
use crate::redis::{LeaseError, LedgerError};

/// After a grant short of what was asked (the campaign is nearly out of budget, in total or
/// today), the campaign asks again no sooner than this many report intervals later: an exhausted
/// campaign that keeps bidding costs one call per few intervals, not one per bid.
const SHORT_GRANT_BACKOFF: u32 = 4;

impl Inner {
    /// Applies one answer (`None`: not sent, or its fate is unknown). True to wake the task.
    pub(super) fn apply(
        &self,
        local: &mut Local,
        step: Step,
        answer: Option<Result<ScriptReply, LedgerError>>,
        now: Timestamp,
    ) -> bool {
        let Some(answer) = answer else {
            // Unknown: asked again next round (a grant reuses its id; reports are cumulative;
            // a claim is idempotent).
            match step {
                Step::Grant(g) => local.requeue(&g.name),
                Step::Mark(mark) => self.mark(local, mark),
                _ => {}
            }
            return false;
        };
        if matches!(answer, Err(LedgerError::NoLedger)) {
            self.missing_ledger();
            return false;
        }
        match (step, answer) {
            (Step::Limits { name, limits }, Ok(ScriptReply::LimitsSet(written))) => {
                Self::apply_limits(local, &name, limits, written);
                false
            }
            (Step::Limits { name, .. }, Err(e)) => {
                // Not retried every round (a limit out of range stays so): a campaign that
                // asks for a lease tries again, with its limits first.
                tracing::warn!(campaign = %name, error = %e, "ledger: limits not written");
                local.unapplied.remove(&name);
                false
            }
            (
                Step::Report {
                    name,
                    lease,
                    cumulative,
                },
                Ok(ScriptReply::Report(report)),
            ) => {
                self.apply_report(local, &name, &lease, cumulative, report, now);
                false
            }
            (step @ Step::Close { .. }, Ok(ScriptReply::Close(closed))) => {
                self.apply_close(local, step, closed, now);
                false
            }
            (Step::Grant(g), Ok(ScriptReply::Grant(grant))) => {
                self.apply_grant(local, g, grant, now)
            }
            (Step::Sweep, Ok(ScriptReply::Swept(swept))) => {
                // Behind: sweep again at once rather than one batch per report interval.
                self.sweep_behind.fetch_or(swept.more, Ordering::Relaxed);
                swept.more
            }
            (Step::Drain, Ok(ScriptReply::Drained(items))) => {
                for item in &items {
                    self.apply_settled_elsewhere(local, item, now);
                }
                // A full inbox: drain the rest at once rather than a round later.
                items.len() >= DRAIN_MAX
            }
            (Step::Mark(mark), Ok(ScriptReply::Settled(settled))) => {
                // Claimed after the fact: the local book already settled it, whatever Redis
                // says (a claim another instance made first is reported by its holder).
                tracing::debug!(id = %mark.id, ?settled, "ledger: outcome settled offline claimed");
                false
            }
            (Step::Grant(GrantStep { name, .. }), Err(e)) => {
                // A script error (a bug, or an invariant guard): do not hammer it.
                tracing::warn!(campaign = %name, error = %e, "ledger: top-up failed");
                self.back_off(local, &name, now);
                false
            }
            (step, Err(e)) => {
                tracing::warn!(?step, error = %e, "ledger: call failed");
                false
            }
            (step, Ok(answer)) => {
                tracing::warn!(?step, ?answer, "ledger: answer of another kind");
                false
            }
        }
    }

    /// A compare-and-set of a campaign's limits: written, or refused.
    fn apply_limits(
        local: &mut Local,
        name: &str,
        limits: Limits,
        written: Result<crate::LimitsWritten, crate::LimitsConflict>,
    ) {
        match written {
            Ok(written) => local.applied(name, limits, written.version),
            Err(conflict) if conflict.stored.is_none() => {
                // Gone since we wrote it (Redis lost it): written again, as its writer.
                local.unapply(name);
            }
            Err(conflict) => {
                // Another writer changed them since: theirs stand (the bidder reports the
                // conflict); not retried until our limits change again.
                tracing::debug!(campaign = %name, error = %conflict, "ledger: limits not written");
                local.unapplied.remove(name);
                if let Some(camp) = local.campaigns.get_mut(name) {
                    camp.applied = true;
                }
            }
        }
    }

    /// A lease's report: extended, reclaimed (we were cut off past its expiry) or lost.
    fn apply_report(
        &self,
        local: &mut Local,
        name: &str,
        lease: &Lease,
        cumulative: Nanos,
        report: Result<crate::LeaseReport, LeaseError>,
        now: Timestamp,
    ) {
        let spent = lease.base.saturating_add(cumulative);
        match report {
            Ok(r) if r.state == LeaseState::Open => {
                self.count(r.charged, r.uncharged);
                update_lease(local, name, &lease.id, r.amount, r.expires_at, now);
                if let Some(l) = lease_mut(local, name, &lease.id) {
                    l.reported = l.reported.max(cumulative);
                }
            }
            Ok(r) => {
                // Reclaimed: this report was still charged as far as the campaign could
                // afford; a new lease on demand.
                self.count(r.charged, r.uncharged);
                tracing::warn!(campaign = %name, "ledger: lease was reclaimed");
                self.lost(local, name, &lease.id, spent, now);
            }
            Err(e) => {
                // Unknown lease or campaign: Redis lost them (a restart without persistence).
                // Limits first, then a new lease on demand.
                tracing::warn!(campaign = %name, label = e.label(), "ledger: lease lost");
                local.unapply(name);
                self.lost(local, name, &lease.id, spent, now);
            }
        }
    }

    /// A lease closed (idle, inactive, or a new day), or unknown to Redis: over either way.
    fn apply_close(
        &self,
        local: &mut Local,
        step: Step,
        closed: Result<crate::LeaseClose, LeaseError>,
        now: Timestamp,
    ) {
        let Step::Close {
            name,
            lease,
            cumulative,
            idle,
            renew,
        } = step
        else {
            return;
        };
        match closed {
            Ok(c) => {
                self.count(c.charged, c.uncharged);
                if idle {
                    self.stats.idle_closes.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(LeaseError::UnknownCampaign) => local.unapply(&name),
            Err(_) => {}
        }
        let spent = lease.base.saturating_add(cumulative);
        local.end_lease(&name, &lease.id, spent, now);
        if renew {
            // Upkeep comes first in a round: the top-ups of this round take it.
            local.want(&name, now);
        }
    }

    pub(super) fn apply_grant(
        &self,
        local: &mut Local,
        g: GrantStep,
        grant: Result<crate::LeaseGrant, LeaseError>,
        now: Timestamp,
    ) -> bool {
        match grant {
            Ok(grant) => {
                self.take_grant(local, g, &grant, now);
                false
            }
            Err(e) => self.grant_refused(local, g, e, now),
        }
    }

    /// A grant: the lease it opened or grew raises the campaign's local budget.
    fn take_grant(
        &self,
        local: &mut Local,
        g: GrantStep,
        grant: &crate::LeaseGrant,
        now: Timestamp,
    ) {
        let GrantStep {
            name,
            id,
            base,
            want,
            ..
        } = g;
        self.stats.grants.fetch_add(1, Ordering::Relaxed);
        self.stats
            .granted
            .fetch_add(grant.granted.get(), Ordering::Relaxed);
        let Local {
            book,
            campaigns,
            leased,
            ..
        } = local;
        let Some(camp) = campaigns.get_mut(&name) else {
            return;
        };
        if camp.pending.as_ref() == Some(&id) {
            camp.pending = None;
        }
        if grant.granted < want {
            camp.ask_after = now.saturating_add(self.config.report_interval * SHORT_GRANT_BACKOFF);
            camp.short_until = camp.ask_after;
        } else {
            camp.short_until = Timestamp(0);
        }
        let lease = camp.lease.get_or_insert_with(|| Lease {
            id: id.clone(),
            amount: Nanos::ZERO,
            base,
            expires_at: grant.expires_at,
            day: now.day(),
            reported: Nanos::ZERO,
            remote: Nanos::ZERO,
        });
        if lease.id != id {
            return;
        }
        leased.insert(name.clone());
        lease.amount = lease.amount.max(grant.amount);
        lease.expires_at = lease.expires_at.max(grant.expires_at);
        let total = lease.limit();
        book.set_limits(&name, Limits { total, daily: None }, now);
    }

    /// A top-up refused: the campaign or the lease lost, or closed behind our back. True to
    /// wake the task (a new lease is wanted at once).
    fn grant_refused(
        &self,
        local: &mut Local,
        g: GrantStep,
        e: LeaseError,
        now: Timestamp,
    ) -> bool {
        let GrantStep {
            name,
            id,
            existing,
            with_limits,
            spent,
            ..
        } = g;
        match e {
            LeaseError::UnknownCampaign => {
                // Redis lost the campaign (and so any lease of it).
                local.unapply(&name);
                if existing {
                    tracing::warn!(campaign = %name, "ledger: lease lost");
                    self.lost(local, &name, &id, spent, now);
                } else {
                    clear_pending(local, &name, &id);
                }
                if with_limits || local.writer.is_none() {
                    // Its limits went first and still it is unknown: they were refused; or a
                    // follower asked for a campaign the ledger does not hold (it writes none).
                    self.back_off(local, &name, now);
                    false
                } else {
                    local.wants(&name, now)
                }
            }
            LeaseError::UnknownLease => {
                // Growing a lease Redis does not know: it lost it (never re-created under its
                // old id, which would let us spend the amount we believe in).
                tracing::warn!(campaign = %name, "ledger: lease lost");
                self.lost(local, &name, &id, spent, now);
                local.wants(&name, now)
            }
            e => {
                // Closed or reclaimed behind our back, or a mismatched id: a fresh id at once.
                // Spend since the last acknowledged report goes to the next lease.
                tracing::warn!(campaign = %name, label = e.label(), "ledger: lease refused");
                clear_pending(local, &name, &id);
                if let Some(l) = lease_mut(local, &name, &id) {
                    let accounted = l.base.saturating_add(l.reported);
                    self.stats.leases_lost.fetch_add(1, Ordering::Relaxed);
                    local.end_lease(&name, &id, accounted, now);
                }
                local.wants(&name, now)
            }
        }
    }

    /// One settlement another instance made for a reservation of ours: `c <price> <id>
    /// <lease or -> <campaign>` (charged: against our lease, which no longer backs that much
    /// local spend, or from the campaign) or `r <id>` (released). The local reservation stops
    /// holding money, and a later notice for it finds it settled.
    fn apply_settled_elsewhere(&self, local: &mut Local, item: &str, now: Timestamp) {
        let mut parts = item.splitn(5, ' ');
        match (parts.next(), parts.next()) {
            (Some("r"), Some(id)) => {
                let _ = local.book.release(id, now);
            }
            (Some("c"), Some(price)) => {
                let (Some(price), Some(id), Some(lease), Some(campaign)) = (
                    price.parse::<i64>().ok().map(Nanos),
                    parts.next(),
                    parts.next(),
                    parts.next(),
                ) else {
                    tracing::warn!(item, "ledger: unreadable inbox item");
                    return;
                };
                local.book.charged_elsewhere(id, price, now);
                let Local {
                    book, campaigns, ..
                } = local;
                if let Some(l) = campaigns
                    .get_mut(campaign)
                    .and_then(|c| c.lease.as_mut())
                    .filter(|l| l.id == lease)
                {
                    l.remote = l.remote.saturating_add(price);
                    let total = l.limit();
                    book.set_limits(campaign, Limits { total, daily: None }, now);
                }
                self.stats.settled_elsewhere.fetch_add(1, Ordering::Relaxed);
            }
            _ => tracing::warn!(item, "ledger: unreadable inbox item"),
        }
    }

    /// Keeps an outcome to claim in Redis later, counting it if the queue is full.
    pub(super) fn mark(&self, local: &mut Local, mark: SettleRequest) {
        if !local.mark(mark) {
            self.stats.marks_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn back_off(&self, local: &mut Local, name: &str, now: Timestamp) {
        if let Some(camp) = local.campaigns.get_mut(name) {
            camp.ask_after = now.saturating_add(self.config.report_interval * SHORT_GRANT_BACKOFF);
        }
    }

    pub(super) fn lost(
        &self,
        local: &mut Local,
        name: &str,
        id: &str,
        spent: Nanos,
        now: Timestamp,
    ) {
        self.stats.leases_lost.fetch_add(1, Ordering::Relaxed);
        local.end_lease(name, id, spent, now);
    }

    pub(super) fn count(&self, charged: Nanos, uncharged: Nanos) {
        self.stats
            .charged
            .fetch_add(charged.get(), Ordering::Relaxed);
        if uncharged.is_positive() {
            self.stats
                .uncharged
                .fetch_add(uncharged.get(), Ordering::Relaxed);
            tracing::warn!(
                uncharged = uncharged.get(),
                "ledger: spend reported too late to be charged"
            );
        }
    }
}
