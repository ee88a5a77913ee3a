//! What a round asks of Redis: the upkeep of the leases held (reports, extensions, closes, one
//! sweep batch, pending limits) and the top-ups the campaigns asked for, each call paired with
//! the [`Step`] that applies its answer (`apply.rs`). Planning reads and marks the local state
//! under its lock; it sends nothing.
#![warn(clippy::too_many_lines)]

use std::sync::atomic::Ordering;

use units::{Limits, Nanos, Timestamp};

use super::Inner;
use super::local::{Lease, Local, lock};
use crate::redis::script::Call;
use crate::redis::script::{
    CloseLease, Drain, Expire, LimitsBase, LimitsChange, ReportLease, SetLimits, SettleRequest,
    Take, TakeLease,
};

/// Most limits a round writes (a reload that changes many campaigns is spread over rounds, so
/// that reports and top-ups are not held up behind it). [`LeasedLedger::start`] writes them all.
pub(super) const LIMITS_PER_ROUND: usize = 2_000;

/// Campaigns of the whole list a full round sweeps besides those it leases or tops up (whose
/// indexes it sweeps every full round): on a cluster each campaign has its own sweep index, so
/// a campaign no instance spends from has an expired lease (of a crashed instance) reclaimed
/// within `campaigns / SWEEP_ROTATION` full rounds, and at once once any instance asks for it.
pub(super) const SWEEP_ROTATION: usize = 2;

/// Most outcomes settled while Redis was away that a round claims.
const MARKS_PER_ROUND: usize = 1_000;

/// What a round asked of Redis for one campaign, to apply the answer.
#[derive(Debug)]
pub(super) enum Step {
    Limits {
        name: String,
        limits: Limits,
    },
    Report {
        name: String,
        lease: Lease,
        cumulative: Nanos,
    },
    Close {
        name: String,
        lease: Lease,
        cumulative: Nanos,
        /// Closed because the campaign stopped reserving.
        idle: bool,
        /// Closed because the day changed while the campaign spends: take the next day's
        /// lease at once rather than refuse its next bid.
        renew: bool,
    },
    Grant(GrantStep),
    Sweep,
    /// Settlements other instances made for our reservations.
    Drain,
    /// An outcome settled locally while Redis was away, claimed now.
    Mark(SettleRequest),
}

/// A top-up: what was asked, and what the answer is applied against.
#[derive(Debug)]
pub(super) struct GrantStep {
    pub(super) name: String,
    pub(super) id: String,
    /// For a new lease: where its cumulative spend starts.
    pub(super) base: Nanos,
    pub(super) want: Nanos,
    /// Growing a lease we hold (rather than creating or adopting a pending one).
    pub(super) existing: bool,
    /// `set_limits` went just before, in the same pipeline.
    pub(super) with_limits: bool,
    pub(super) spent: Nanos,
}

impl Inner {
    pub(super) fn plan_upkeep(&self, now: Timestamp, full: bool) -> Vec<(Call, Step)> {
        let mut local = lock(&self.local);
        local.book.expire(now);
        let marks = local.marks.len().min(MARKS_PER_ROUND);
        let marks: Vec<SettleRequest> = local.marks.drain(..marks).collect();
        let local = &*local;
        let names: Vec<&String> = if full {
            local.leased.iter().collect()
        } else {
            let mut asked: Vec<&String> = local
                .wanted
                .iter()
                .filter(|n| local.leased.contains(*n))
                .collect();
            asked.sort_unstable();
            asked
        };
        let mut steps: Vec<(Call, Step)> = names
            .into_iter()
            .filter_map(|name| self.lease_upkeep(local, name, now))
            .collect();
        if full || self.sweep_behind.swap(false, Ordering::Relaxed) {
            // The indexes of the campaigns this instance spends from or asks for, and a few
            // more of the whole list in turn (see `SWEEP_ROTATION`).
            let mut sweep: Vec<String> = local.leased.iter().cloned().collect();
            sweep.extend(local.wanted.iter().cloned());
            sweep.extend(self.redis.sweep_list().window(SWEEP_ROTATION).0);
            sweep.sort_unstable();
            sweep.dedup();
            for campaign in sweep {
                steps.push((Call::Expire(Expire { campaign }), Step::Sweep));
            }
        }
        if full {
            // Our inbox is per campaign tag: those we hold a lease of.
            for campaign in &local.leased {
                steps.push((
                    Call::Drain(Drain {
                        node: self.config.instance_id.clone(),
                        campaign: campaign.clone(),
                    }),
                    Step::Drain,
                ));
            }
        }
        for mark in marks {
            steps.push((Call::Settle(mark.clone()), Step::Mark(mark)));
        }
        steps.extend(limits_steps(local, LIMITS_PER_ROUND));
        steps
    }

    /// What the lease of campaign `name` needs this round: closed (inactive, idle or a new
    /// day, with nothing reserved), reported (spend moved, or near its expiry), or nothing.
    fn lease_upkeep(&self, local: &Local, name: &String, now: Timestamp) -> Option<(Call, Step)> {
        let config = &self.config;
        let idle_ms = u64::try_from(config.idle_close.as_millis()).unwrap_or(u64::MAX);
        let camp = local.campaigns.get(name)?;
        let lease = camp.lease.as_ref()?;
        let (spent, reserved) = local.used(name, now);
        let cumulative = spent.saturating_sub(lease.base);
        let idle = now.millis().saturating_sub(camp.last_demand.millis()) >= idle_ms;
        let quiet = reserved == Nanos::ZERO;
        let new_day = lease.day != now.day();
        if (!camp.active && quiet) || new_day || (idle && quiet) {
            return Some((
                Call::CloseLease(CloseLease {
                    id: lease.id.clone(),
                    campaign: name.clone(),
                    cumulative,
                }),
                Step::Close {
                    name: name.clone(),
                    lease: lease.clone(),
                    cumulative,
                    idle: camp.active && !new_day,
                    renew: camp.active && new_day && !idle,
                },
            ));
        }
        let extend_by = now.saturating_add(config.extend_within());
        (cumulative != lease.reported || lease.expires_at <= extend_by).then(|| {
            (
                Call::ReportLease(ReportLease {
                    id: lease.id.clone(),
                    campaign: name.clone(),
                    cumulative,
                    expires_at: now.saturating_add(config.lease_ttl),
                }),
                Step::Report {
                    name: name.clone(),
                    lease: lease.clone(),
                    cumulative,
                },
            )
        })
    }

    pub(super) fn plan_top_ups(&self, now: Timestamp) -> Vec<(Call, Step)> {
        let chunk = self.config.lease_chunk;
        let stopping = self.stopping.load(Ordering::Relaxed);
        let mut local = lock(&self.local);
        let mut names = std::mem::take(&mut local.wanted);
        names.sort_unstable();
        let writer = local.writer.clone();
        let mut steps = Vec::new();
        for name in names {
            let (spent, reserved) = local.used(&name, now);
            let Some(camp) = local.campaigns.get_mut(&name) else {
                continue;
            };
            camp.wanted = false;
            let need = std::mem::take(&mut camp.need);
            if !camp.active || stopping || now < camp.ask_after {
                continue;
            }
            let used = spent.saturating_add(reserved);
            let (id, base, limit, existing) = match &camp.lease {
                Some(l) => {
                    let limit = l.limit();
                    let left = limit.saturating_sub(used);
                    // Topped up meanwhile (a burst asks once per round trip, not per bid):
                    // half a chunk left, and enough for the bid that asked.
                    if left.get().saturating_mul(2) >= chunk.get() && left >= need {
                        continue;
                    }
                    (l.id.clone(), l.base, limit, true)
                }
                None => {
                    let id = match &camp.pending {
                        Some(id) => id.clone(),
                        None => {
                            let id = self.new_lease_id();
                            camp.pending = Some(id.clone());
                            id
                        }
                    };
                    (id, camp.accounted, camp.accounted, false)
                }
            };
            // A new lease also covers what earlier leases no longer do: reservations still open
            // and spend not yet attributed, so that their commits are charged.
            let want = chunk
                .max(need)
                .saturating_add(used.saturating_sub(limit).max(Nanos::ZERO));
            let with_limits = !camp.applied && writer.is_some();
            if let (true, Some(writer)) = (with_limits, &writer) {
                steps.push((
                    Call::SetLimits(set_limits(&name, camp, writer)),
                    Step::Limits {
                        name: name.clone(),
                        limits: camp.limits,
                    },
                ));
            }
            steps.push(self.take_lease(
                GrantStep {
                    name,
                    id,
                    base,
                    want,
                    existing,
                    with_limits,
                    spent,
                },
                now,
            ));
        }
        steps
    }

    /// The call that opens (once) or grows a lease, with its step.
    fn take_lease(&self, g: GrantStep, now: Timestamp) -> (Call, Step) {
        let call = Call::TakeLease(TakeLease {
            id: g.id.clone(),
            campaign: g.name.clone(),
            want: g.want,
            expires_at: now.saturating_add(self.config.lease_ttl),
            take: if g.existing {
                Take::GrowOnly
            } else {
                Take::CreateOnce
            },
            node: self.config.instance_id.clone(),
        });
        (call, Step::Grant(g))
    }

    pub(super) fn new_lease_id(&self) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{}.{}.{seq}", self.config.instance_id, self.incarnation)
    }
}

/// The compare-and-set of a campaign's limits: based on the version last written, or on being
/// their writer.
fn set_limits(name: &str, camp: &super::local::Camp, writer: &str) -> SetLimits {
    SetLimits(LimitsChange {
        campaign: name.to_owned(),
        limits: camp.limits,
        writer: writer.to_owned(),
        base: camp.version.map_or(LimitsBase::Own, LimitsBase::Version),
    })
}

/// Up to `max` pending limits, as steps (none for a follower).
pub(super) fn limits_steps(local: &Local, max: usize) -> Vec<(Call, Step)> {
    let Some(writer) = &local.writer else {
        return Vec::new();
    };
    local
        .unapplied
        .iter()
        .filter_map(|name| {
            let camp = local.campaigns.get(name).filter(|c| c.active)?;
            let call = Call::SetLimits(set_limits(name, camp, writer));
            let step = Step::Limits {
                name: name.clone(),
                limits: camp.limits,
            };
            Some((call, step))
        })
        .take(max)
        .collect()
}
