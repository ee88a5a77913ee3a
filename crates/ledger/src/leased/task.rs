//! The lease task: a full round every report interval and a top-up round whenever a
//! reservation asks, each round planned (`plan.rs`), sent as pipelined script calls, and its
//! answers applied (`apply.rs`). Also the start's first limits and the shutdown's last closes.
#![warn(clippy::too_many_lines)]

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;

use units::Timestamp;

use super::Inner;
use super::local::lock;
use super::plan::{LIMITS_PER_ROUND, Step, limits_steps};
use crate::redis::LedgerError;
use crate::redis::PIPELINE_MAX;
use crate::redis::script::CloseLease;
use crate::redis::script::{Call, ScriptReply};

/// The background task: a full round every `interval`, and a top-up round whenever a
/// reservation wakes it (unless Redis failed last time: then it waits for the interval, so an
/// outage costs one failed round per interval, not one per bid).
pub(super) async fn run(inner: Weak<Inner>, interval: Duration) {
    let mut next_full = tokio::time::Instant::now() + interval;
    let mut healthy = true;
    loop {
        // Only a weak reference between rounds: dropping every handle ends the task (the
        // leases are then reclaimed by the sweep after their expiry).
        let Some(inner) = inner.upgrade() else { return };
        let woken = tokio::select! {
            () = tokio::time::sleep_until(next_full) => false,
            () = inner.wake.notified() => true,
        };
        if inner.stopping.load(Ordering::Acquire) {
            return;
        }
        if woken && !healthy {
            continue;
        }
        let full = tokio::time::Instant::now() >= next_full;
        if full {
            next_full = tokio::time::Instant::now() + interval;
        }
        healthy = inner.round(Timestamp::now(), full).await;
    }
}

impl Inner {
    /// One round, two pipelined phases. Upkeep: report the leases whose spend changed or whose
    /// expiry nears, close retired, idle or yesterday's leases, run one batch of the shared
    /// sweep, write pending limits. Top-ups: grant the campaigns that asked (creating their
    /// lease, with their limits first if unwritten). A full round looks at every lease; a
    /// wake-up round only at the campaigns that asked, and does not sweep. Returns false when
    /// Redis could not be reached (the round stops at the first transport error).
    pub(super) async fn round(&self, now: Timestamp, full: bool) -> bool {
        self.stats.rounds.fetch_add(1, Ordering::Relaxed);
        if full {
            match self.check_ledger().await {
                Some(true) => {}
                // Nothing to report to, nothing to take: wait for an operator.
                Some(false) => return true,
                None => return false,
            }
        }
        let steps = self.plan_upkeep(now, full);
        if self.exchange(steps, now).await.is_err() {
            return false;
        }
        let steps = self.plan_top_ups(now);
        self.exchange(steps, now).await.is_ok()
    }

    /// Sends `steps` (pipelined, [`PIPELINE_MAX`] per round trip, in order) and applies the
    /// answers. Stops at the first transport error, which it returns: the steps not answered
    /// are retried later.
    pub(super) async fn exchange(
        &self,
        steps: Vec<(Call, Step)>,
        now: Timestamp,
    ) -> Result<(), LedgerError> {
        if steps.is_empty() {
            return Ok(());
        }
        let (calls, steps): (Vec<Call>, Vec<Step>) = steps.into_iter().unzip();
        let mut answers: Vec<Option<Result<ScriptReply, LedgerError>>> =
            Vec::with_capacity(calls.len());
        let mut failed: Option<LedgerError> = None;
        for chunk in calls.chunks(PIPELINE_MAX) {
            if failed.is_none() {
                let n = u64::try_from(chunk.len()).unwrap_or(u64::MAX);
                self.stats.redis_calls.fetch_add(n, Ordering::Relaxed);
                self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
                match self.outcome(self.redis.pipeline(chunk, now).await) {
                    Ok(replies) => {
                        for reply in replies {
                            // Redis answering "cannot serve now" (LOADING, BUSY...) to a call
                            // is a transport failure for that call.
                            if let Err(e @ (LedgerError::Unavailable(_) | LedgerError::Timeout)) =
                                &reply
                            {
                                if failed.is_none() {
                                    failed = self.outcome::<()>(Err(e.clone())).err();
                                }
                                answers.push(None);
                            } else {
                                answers.push(Some(reply));
                            }
                        }
                        continue;
                    }
                    Err(e) => failed = Some(e),
                }
            }
            answers.extend(chunk.iter().map(|_| None));
        }
        let mut wake = false;
        {
            let mut local = lock(&self.local);
            for (step, answer) in steps.into_iter().zip(answers) {
                wake |= self.apply(&mut local, step, answer, now);
            }
        }
        if wake {
            self.wake.notify_one();
        }
        failed.map_or(Ok(()), Err)
    }

    /// Writes up to one round's worth of pending limits; true if that made progress and more
    /// remain.
    pub(super) async fn write_limits(&self, now: Timestamp) -> bool {
        let (steps, before) = {
            let local = lock(&self.local);
            (
                limits_steps(&local, LIMITS_PER_ROUND),
                local.unapplied.len(),
            )
        };
        if steps.is_empty() || self.exchange(steps, now).await.is_err() {
            return false;
        }
        let after = lock(&self.local).unapplied.len();
        after > 0 && after < before
    }

    /// Whether a ledger is open (`None`: Redis did not answer). When it was missing, asks
    /// Redis again: an operator may have opened it (a new id); then every limit is written
    /// again and bidding resumes.
    pub(super) async fn check_ledger(&self) -> Option<bool> {
        let missing = self.ledger_missing.load(Ordering::Relaxed);
        if !missing && !self.redis.needs_open() {
            return Some(true);
        }
        match self.redis.reopen().await {
            Ok(true) => {
                if missing {
                    tracing::warn!(
                        "ledger: a ledger is open in redis again; writing limits, bidding resumes"
                    );
                }
                self.ledger_missing.store(false, Ordering::Relaxed);
                let mut local = lock(&self.local);
                let names: Vec<String> = local.campaigns.keys().cloned().collect();
                for name in names {
                    local.unapply(&name);
                }
                Some(true)
            }
            Ok(false) => {
                self.missing_ledger();
                Some(false)
            }
            Err(e) => {
                let _ = self.outcome::<()>(Err(e));
                None
            }
        }
    }

    /// Redis holds no ledger for us: fail closed, say so once.
    pub(super) fn missing_ledger(&self) {
        if !self.ledger_missing.swap(true, Ordering::Relaxed) {
            tracing::error!(
                "ledger: redis holds no Gavel ledger (it lost its data, or it was never created): \
                 no bids until an operator creates it (gavel ledger create, or POST /admin/ledger/open)"
            );
        }
    }

    /// Notes a transport outcome: counts errors, logs transitions between up and down.
    pub(super) fn outcome<T>(&self, r: Result<T, LedgerError>) -> Result<T, LedgerError> {
        match &r {
            Ok(_) => {
                if !self.redis_ok.swap(true, Ordering::Relaxed) {
                    tracing::info!("ledger: redis reachable again");
                }
            }
            Err(e) => {
                self.stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                if self.redis_ok.swap(false, Ordering::Relaxed) {
                    tracing::warn!(error = %e, label = e.label(), "ledger: redis unreachable; spending leased budget only");
                }
            }
        }
        r
    }

    /// Closes every lease (final reports), pipelined.
    pub(super) async fn close_all(&self, now: Timestamp) -> Result<(), LedgerError> {
        let steps: Vec<(Call, Step)> = {
            let mut local = lock(&self.local);
            local.book.expire(now);
            let local = &*local;
            local
                .leased
                .iter()
                .filter_map(|name| {
                    let lease = local.campaigns.get(name)?.lease.clone()?;
                    let (spent, _) = local.used(name, now);
                    let cumulative = spent.saturating_sub(lease.base);
                    let call = Call::CloseLease(CloseLease {
                        id: lease.id.clone(),
                        campaign: name.clone(),
                        cumulative,
                    });
                    let step = Step::Close {
                        name: name.clone(),
                        lease,
                        cumulative,
                        idle: false,
                        renew: false,
                    };
                    Some((call, step))
                })
                .collect()
        };
        self.exchange(steps, now).await
    }
}
