//! [`LeasedLedger`]: one bidder instance's front for lease mode. Bids reserve and commit against
//! a local [`Book`] (synchronous, no Redis on the request path) whose budget per
//! campaign is what Redis has leased to this instance; a background task takes leases for the
//! campaigns that try to spend, keeps them topped up, reports spend and extends them, closes the
//! leases of campaigns that stopped spending, and fails closed when Redis is away.
//!
//! The task's work per round is proportional to the campaigns that are spending, not to the
//! campaigns configured: it only looks at campaigns holding a lease and at those a reservation
//! asked budget for, and it pipelines its Redis calls (see the [`redis` module docs](crate::redis)).
//!
//! | file | job |
//! | --- | --- |
//! | `mod.rs` | the API the bidder calls: start, reserve, commit, release, balances, shutdown |
//! | `config.rs` | [`LeaseConfig`], its defaults and checks |
//! | `local.rs` | the local state under one lock: the book, each campaign's lease and demand |
//! | `plan.rs` | what a round asks of Redis, as (call, step) pairs |
//! | `apply.rs` | what each answer does to the local state |
//! | `task.rs` | the background task: rounds, pipelined exchanges, the last closes |
#![warn(clippy::too_many_lines)]

mod apply;
mod config;
mod local;
mod plan;
mod task;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use units::{Limits, Nanos, Timestamp};

pub use config::LeaseConfig;
use local::{Camp, Local, lock, raise};

use crate::book::{Balance, Book, CommitOutcome, Refusal, ReleaseOutcome, SettleError};
use crate::redis::LedgerError;
use crate::redis::RedisLedger;
use crate::redis::script::{SettleRequest, Settlement};

/// Counters for metrics, since start (and one gauge, `open_leases`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeaseStats {
    /// Grants received (calls to `take_lease` that answered).
    pub grants: u64,
    /// Money granted to this instance in total.
    pub granted: Nanos,
    /// Spend charged in Redis through this instance's reports and closes.
    pub charged: Nanos,
    /// Spend reported but not chargeable (late reports beyond what was left): spent, not billed.
    pub uncharged: Nanos,
    /// Leases found reclaimed or unknown (Redis expired or lost them).
    pub leases_lost: u64,
    /// Leases closed because their campaign stopped reserving ([`LeaseConfig::idle_close`](crate::LeaseConfig::idle_close)).
    pub idle_closes: u64,
    /// Leases this instance holds now.
    pub open_leases: u64,
    /// Rounds of the background task (every report interval, plus wake-ups for top-ups).
    pub rounds: u64,
    /// Script calls the background task (and shutdown) sent to Redis.
    pub redis_calls: u64,
    /// Round trips those calls took (they are pipelined, up to [`PIPELINE_MAX`](crate::PIPELINE_MAX) per trip).
    pub round_trips: u64,
    /// Round trips that failed (transport), or calls Redis could not serve.
    pub redis_errors: u64,
    /// Reservations of this instance that another instance settled (their notice reached it).
    pub settled_elsewhere: u64,
    /// Outcomes settled locally while Redis was away and never claimed there (the queue was
    /// full): a replay of one of them to another instance could charge it again.
    pub marks_dropped: u64,
}

/// One instance's lease-mode ledger: bids reserve and commit against a local [`crate::Book`]
/// holding what Redis leased to this instance; a background task takes leases on demand, tops
/// up, reports, extends and closes them (see the [`redis` module docs](crate::redis) for the protocol and its
/// failure bounds). Cheap to clone.
#[derive(Clone, Debug)]
pub struct LeasedLedger {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    redis: RedisLedger,
    config: LeaseConfig,
    local: Mutex<Local>,
    wake: Notify,
    stopping: AtomicBool,
    redis_ok: AtomicBool,
    /// Redis holds no ledger under the id this instance opened (it lost its data): no bids,
    /// no grants, no limits written, until an operator opens it again (checked every round).
    ledger_missing: AtomicBool,
    /// The last sweep batch was full: the next round, even a wake-up one, sweeps again.
    sweep_behind: AtomicBool,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Lease ids are `<instance>.<incarnation>.<seq>`.
    incarnation: String,
    seq: AtomicU64,
    stats: Stats,
}

#[derive(Debug, Default)]
struct Stats {
    grants: AtomicU64,
    granted: AtomicI64,
    charged: AtomicI64,
    uncharged: AtomicI64,
    leases_lost: AtomicU64,
    idle_closes: AtomicU64,
    rounds: AtomicU64,
    redis_calls: AtomicU64,
    round_trips: AtomicU64,
    redis_errors: AtomicU64,
    settled_elsewhere: AtomicU64,
    marks_dropped: AtomicU64,
}

impl LeasedLedger {
    /// Creates the instance's ledger for `campaigns` (name and shared limits), writes their
    /// limits to Redis (a [`LeaseConfig::limits`] writer, each a compare-and-set that never
    /// overwrites another writer's change; a follower writes none) (pipelined: about one round trip per [`PIPELINE_MAX`](crate::PIPELINE_MAX) campaigns; if Redis
    /// is down it starts anyway, and the task writes them later), and spawns the background
    /// task. Takes no lease: a campaign gets one when it first tries to spend (its first bids
    /// are refused until the lease arrives, one round trip later). Must be called within a
    /// tokio runtime.
    pub async fn start(
        redis: RedisLedger,
        config: LeaseConfig,
        campaigns: Vec<(String, Limits)>,
    ) -> LeasedLedger {
        let config = config.repaired();
        // Start time, process id and a per-process counter: lease ids never repeat across
        // restarts of one instance nor across ledgers in one process.
        static STARTS: AtomicU64 = AtomicU64::new(0);
        let now = Timestamp::now();
        let nth = STARTS.fetch_add(1, Ordering::Relaxed);
        let incarnation = format!("{:x}-{:x}-{nth}", now.millis(), std::process::id());
        let inner = Arc::new(Inner {
            redis,
            local: Mutex::new(Local {
                book: Book::new(config.tombstone_ttl),
                campaigns: HashMap::new(),
                wanted: Vec::new(),
                leased: BTreeSet::new(),
                unapplied: BTreeSet::new(),
                active: Arc::from(Vec::new()),
                marks: Vec::new(),
                writer: config.limits.writer().map(str::to_owned),
            }),
            config,
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
            redis_ok: AtomicBool::new(true),
            ledger_missing: AtomicBool::new(false),
            sweep_behind: AtomicBool::new(false),
            task: Mutex::new(None),
            incarnation,
            seq: AtomicU64::new(0),
            stats: Stats::default(),
        });
        let ledger = LeasedLedger { inner };
        ledger.configure(campaigns, now);
        ledger.inner.check_ledger().await;
        // Every limit now (a start is rare), so that the shared balances list every campaign.
        while ledger.inner.write_limits(Timestamp::now()).await {}
        ledger.inner.round(Timestamp::now(), true).await;
        let weak = Arc::downgrade(&ledger.inner);
        let interval = ledger.inner.config.report_interval;
        let handle = tokio::spawn(task::run(weak, interval));
        *lock(&ledger.inner.task) = Some(handle);
        ledger
    }

    /// Replaces the set of campaigns (a configuration reload): new campaigns are added, changed
    /// limits are pushed to Redis, campaigns no longer listed take no new bids and give their
    /// lease back once their open reservations are resolved. Applied by the background task,
    /// which this wakes.
    pub fn set_campaigns(&self, campaigns: Vec<(String, Limits)>) {
        self.configure(campaigns, Timestamp::now());
        self.inner.wake.notify_one();
    }

    /// Writes the limits still to be written now rather than in the task's next rounds (a
    /// reload: so that what the ledger holds can be read back at once). Gives up quietly when
    /// Redis does not answer: the task retries.
    pub async fn write_limits_now(&self) {
        while self.inner.write_limits(Timestamp::now()).await {}
    }

    /// Whether this instance writes limits, and as whom.
    pub fn limits_role(&self) -> &crate::redis::LimitsRole {
        &self.inner.config.limits
    }

    fn configure(&self, campaigns: Vec<(String, Limits)>, now: Timestamp) {
        let mut local = lock(&self.inner.local);
        let Local {
            book,
            campaigns: known,
            unapplied,
            active,
            writer,
            ..
        } = &mut *local;
        for camp in known.values_mut() {
            camp.active = false;
        }
        {
            let mut sweep = self.inner.redis.sweep_list();
            for (name, _) in &campaigns {
                sweep.add(name);
            }
        }
        for (name, limits) in campaigns {
            match known.get_mut(&name) {
                Some(camp) => {
                    if camp.limits != limits {
                        camp.limits = limits;
                        // A follower's limits are the ledger's: nothing to write.
                        camp.applied = writer.is_none();
                    }
                    camp.active = true;
                    if !camp.applied {
                        unapplied.insert(name);
                    }
                }
                None => {
                    // No budget locally until a lease arrives.
                    book.set_limits(
                        &name,
                        Limits {
                            total: Nanos::ZERO,
                            daily: None,
                        },
                        now,
                    );
                    let camp = Camp {
                        limits,
                        active: true,
                        applied: writer.is_none(),
                        version: None,
                        lease: None,
                        accounted: Nanos::ZERO,
                        pending: None,
                        last_demand: Timestamp(0),
                        wanted: false,
                        ask_after: Timestamp(0),
                        short_until: Timestamp(0),
                        need: Nanos::ZERO,
                    };
                    if writer.is_some() {
                        unapplied.insert(name.clone());
                    }
                    known.insert(name, camp);
                }
            }
        }
        unapplied.retain(|name| known.get(name).is_some_and(|c| c.active));
        let mut names: Vec<String> = known
            .iter()
            .filter(|(_, c)| c.active)
            .map(|(n, _)| n.clone())
            .collect();
        names.sort_unstable();
        *active = Arc::from(names);
    }

    /// Reserves locally, as [`crate::Book::reserve`], from the budget leased to this instance.
    /// Refused with [`Refusal::InsufficientBudget`] when nothing (or not enough) is leased, or
    /// when the lease is within the safety margin of its expiry (Redis has not heard from us:
    /// fail closed), or when a daily-budget campaign's lease is from another UTC day. Such a
    /// refusal, or a reservation that leaves less than half a chunk leased, asks the background
    /// task for a top-up and wakes it: O(1), no Redis call here.
    pub fn reserve(
        &self,
        id: &str,
        campaign: &str,
        amount: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        let inner = &*self.inner;
        let margin = inner.config.safety_margin;
        let chunk = inner.config.lease_chunk;
        let stopping = inner.stopping.load(Ordering::Relaxed);
        if inner.ledger_missing.load(Ordering::Relaxed) {
            // Fail closed: Redis lost the books; nothing is spent until they are back.
            return Err(Refusal::InsufficientBudget);
        }
        let (result, wake) = {
            let mut guard = lock(&inner.local);
            let Local {
                book,
                campaigns,
                wanted,
                ..
            } = &mut *guard;
            let Some(camp) = campaigns.get_mut(campaign) else {
                return Err(Refusal::UnknownCampaign);
            };
            let serving = camp.active && !stopping;
            let usable = serving
                && camp.lease.as_ref().is_some_and(|l| {
                    now < l.spend_until(margin)
                        && (camp.limits.daily.is_none() || l.day == now.day())
                });
            if !amount.is_positive() {
                // As Book answers it, before anything else.
                return Err(Refusal::NonPositiveAmount);
            }
            if serving {
                camp.last_demand = camp.last_demand.max(now);
            }
            if usable {
                let result = book.reserve(id, campaign, amount, expires_at, now);
                let short = match &result {
                    Err(Refusal::InsufficientBudget) => {
                        camp.need = camp.need.max(amount);
                        true
                    }
                    // Below half a chunk left: top up before it runs dry.
                    Ok(()) if !camp.wanted && now >= camp.ask_after => book
                        .balance(campaign, now)
                        .is_some_and(|b| b.available.get().saturating_mul(2) < chunk.get()),
                    _ => false,
                };
                (result, short && raise(camp, campaign, wanted, now))
            } else {
                if serving {
                    camp.need = camp.need.max(amount);
                }
                let wake = serving && raise(camp, campaign, wanted, now);
                (Err(Refusal::InsufficientBudget), wake)
            }
        };
        if wake {
            inner.wake.notify_one();
        }
        result
    }

    /// Whether a refusal for budget is the ledger's last word for now: Redis's last grant for
    /// the campaign fell short of what was asked and the task is not asking again yet. Until
    /// then a refusal only means "no lease yet" (the request that asked for one).
    pub fn spent_out(&self, campaign: &str, now: Timestamp) -> bool {
        lock(&self.inner.local)
            .campaigns
            .get(campaign)
            .is_some_and(|c| now < c.short_until)
    }

    /// Commits locally, as [`crate::Book::commit`]. Always allowed, lease or not: the
    /// impression was bought; the spend reaches Redis with the next report.
    pub fn commit(
        &self,
        id: &str,
        price: Nanos,
        now: Timestamp,
    ) -> Result<CommitOutcome, SettleError> {
        lock(&self.inner.local).book.commit(id, price, now)
    }

    /// Releases locally, as [`crate::Book::release`].
    pub fn release(&self, id: &str, now: Timestamp) -> Result<ReleaseOutcome, SettleError> {
        lock(&self.inner.local).book.release(id, now)
    }

    /// Settles a win or billing notice that may have reached any instance (behind a load
    /// balancer). Reservation ids are `{instance_id}-{suffix}`: the part before the last `-`
    /// names the instance holding the reservation. The outcome is claimed in Redis first, so a
    /// (reservation, charge) is charged once whichever instance receives it and however often
    /// it is replayed:
    /// - held here: claimed, then committed locally (reported with the lease, as
    ///   [`LeasedLedger::commit`]);
    /// - held elsewhere: charged in Redis against the holder's lease (or, if the holder has no
    ///   open lease or a loss came first, from the campaign), and the holder is told;
    /// - Redis unreachable: held here, committed locally and claimed once Redis answers (a win
    ///   is never lost); held elsewhere, an error (the sender may retry).
    pub async fn commit_notice(
        &self,
        id: &str,
        campaign: Option<&str>,
        price: Nanos,
        now: Timestamp,
    ) -> Result<Result<CommitOutcome, SettleError>, LedgerError> {
        if price.get() < 0 {
            return Ok(Err(SettleError::NegativePrice));
        }
        let here = {
            let local = lock(&self.inner.local);
            match local.book.reserved_amount(id) {
                Some(reserved) if price > reserved => {
                    return Ok(Err(SettleError::AboveReservation { reserved, price }));
                }
                Some(_) => true,
                None => false,
            }
        };
        let Some(request) = self.request(id, campaign, true, price, here) else {
            return Ok(Err(SettleError::UnknownReservation));
        };
        match self.inner.redis.settle(request, now).await {
            Ok(Ok(Settlement::Local)) => Ok(lock(&self.inner.local).book.commit(id, price, now)),
            // The fleet's order is Redis's: a loss came first, so this is a charge after the
            // release, even where the holder's book has not heard of the release yet.
            Ok(Ok(Settlement::LocalAfterRelease)) => {
                let outcome = lock(&self.inner.local).book.commit(id, price, now);
                Ok(outcome.map(|o| match o {
                    CommitOutcome::Charged(p) => CommitOutcome::ChargedAfterRelease(p),
                    other => other,
                }))
            }
            Ok(Ok(Settlement::Charged(p))) => Ok(Ok(CommitOutcome::Charged(p))),
            Ok(Ok(Settlement::ChargedAfterRelease(p))) => {
                Ok(Ok(CommitOutcome::ChargedAfterRelease(p)))
            }
            Ok(Ok(Settlement::AlreadyCommitted(p))) => Ok(Ok(CommitOutcome::AlreadyCommitted(p))),
            Ok(Ok(Settlement::Released | Settlement::AlreadyReleased)) => Err(
                LedgerError::Protocol("settle: a charge answered as a release".into()),
            ),
            Ok(Err(e)) => Ok(Err(e)),
            Err(e) if here => {
                let mut local = lock(&self.inner.local);
                let outcome = local.book.commit(id, price, now);
                if matches!(
                    outcome,
                    Ok(CommitOutcome::Charged(_) | CommitOutcome::ChargedAfterRelease(_))
                ) && let Some(mark) = self.request(id, campaign, true, price, here)
                {
                    self.inner.mark(&mut local, mark);
                }
                tracing::debug!(error = %e, "ledger: notice settled locally; claimed once redis answers");
                Ok(outcome)
            }
            Err(e) => Err(e),
        }
    }

    /// Settles a loss notice that may have reached any instance, as
    /// [`LeasedLedger::commit_notice`]: a loss after a charge changes nothing
    /// ([`ReleaseOutcome::AlreadyCommitted`]); a loss for a reservation held elsewhere is
    /// passed to its holder (answered `Released(0)`: the amount is the holder's to know).
    pub async fn release_notice(
        &self,
        id: &str,
        campaign: Option<&str>,
        now: Timestamp,
    ) -> Result<Result<ReleaseOutcome, SettleError>, LedgerError> {
        let here = lock(&self.inner.local).book.knows(id);
        let Some(request) = self.request(id, campaign, false, Nanos::ZERO, here) else {
            return Ok(Err(SettleError::UnknownReservation));
        };
        match self.inner.redis.settle(request, now).await {
            Ok(Ok(Settlement::Local)) => Ok(lock(&self.inner.local).book.release(id, now)),
            Ok(Ok(Settlement::Released)) => Ok(Ok(ReleaseOutcome::Released(Nanos::ZERO))),
            Ok(Ok(Settlement::AlreadyReleased)) => Ok(Ok(ReleaseOutcome::AlreadyReleased)),
            Ok(Ok(Settlement::AlreadyCommitted(_))) => Ok(Ok(ReleaseOutcome::AlreadyCommitted)),
            Ok(Ok(
                Settlement::Charged(_)
                | Settlement::ChargedAfterRelease(_)
                | Settlement::LocalAfterRelease,
            )) => Err(LedgerError::Protocol(
                "settle: a release answered as a charge".into(),
            )),
            Ok(Err(e)) => Ok(Err(e)),
            // A loss only returns money early: without Redis the holder's reservation expires.
            Err(_) if here => Ok(lock(&self.inner.local).book.release(id, now)),
            Err(e) => Err(e),
        }
    }

    /// The claim for notice `id`, or `None` when the id names no instance, or the reservation
    /// is held elsewhere and the notice does not say its campaign.
    fn request(
        &self,
        id: &str,
        campaign: Option<&str>,
        charge: bool,
        price: Nanos,
        here: bool,
    ) -> Option<SettleRequest> {
        let (owner, _) = id.rsplit_once('-')?;
        let campaign = match campaign {
            Some(c) => c.to_owned(),
            // The holder knows the campaign; nobody else needs it for a claim.
            None if here => String::new(),
            None => return None,
        };
        Some(SettleRequest {
            id: id.to_owned(),
            charge,
            price,
            campaign,
            owner: owner.to_owned(),
            here,
        })
    }

    /// This instance's local view: its budget is what it has leased (plus what it spent before).
    pub fn local_balance(&self, campaign: &str, now: Timestamp) -> Option<Balance> {
        lock(&self.inner.local).book.balance(campaign, now)
    }

    /// The shared balances of the configured campaigns, read from Redis (every instance reports
    /// the same figures), [`BALANCES_CHUNK`](crate::BALANCES_CHUNK) campaigns per call. Fails
    /// when Redis does. A configured campaign Redis does not know (it lost it, e.g. restarted
    /// without persistence) has its limits written again by the task.
    pub async fn balances(&self, now: Timestamp) -> Result<Vec<Balance>, LedgerError> {
        let names = Arc::clone(&lock(&self.inner.local).active);
        self.balances_of(&names[..], now).await
    }

    /// [`LeasedLedger::balances`](crate::LeasedLedger::balances) for some campaigns only (e.g. the ones a pacer needs), with
    /// the same repair of campaigns Redis lost.
    pub async fn balances_of<S: AsRef<str>>(
        &self,
        campaigns: &[S],
        now: Timestamp,
    ) -> Result<Vec<Balance>, LedgerError> {
        let balances = self.inner.redis.balances(campaigns, now).await?;
        if balances.len() < campaigns.len() {
            let known: HashSet<&str> = balances.iter().map(|b| b.campaign.as_str()).collect();
            let mut lost = false;
            let mut local = lock(&self.inner.local);
            for name in campaigns
                .iter()
                .map(AsRef::as_ref)
                .filter(|n| !known.contains(n))
            {
                if local.campaigns.get(name).is_some_and(|c| c.applied) {
                    local.unapply(name);
                    lost = true;
                }
            }
            drop(local);
            if lost {
                self.inner.wake.notify_one();
            }
        }
        Ok(balances)
    }

    /// Whether Redis lost the ledger this instance opened (or it was never created): the
    /// instance bids nothing until an operator opens it (`RedisLedger::open_ledger`).
    pub fn ledger_missing(&self) -> bool {
        self.inner.ledger_missing.load(Ordering::Relaxed)
    }

    /// The Redis handle this ledger uses (same connections).
    pub fn redis(&self) -> RedisLedger {
        self.inner.redis.clone()
    }

    /// Whether the last Redis call of the background task succeeded.
    pub fn redis_healthy(&self) -> bool {
        self.inner.redis_ok.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> LeaseStats {
        let s = &self.inner.stats;
        let open_leases = lock(&self.inner.local).leased.len();
        LeaseStats {
            grants: s.grants.load(Ordering::Relaxed),
            granted: Nanos(s.granted.load(Ordering::Relaxed)),
            charged: Nanos(s.charged.load(Ordering::Relaxed)),
            uncharged: Nanos(s.uncharged.load(Ordering::Relaxed)),
            leases_lost: s.leases_lost.load(Ordering::Relaxed),
            idle_closes: s.idle_closes.load(Ordering::Relaxed),
            open_leases: u64::try_from(open_leases).unwrap_or(u64::MAX),
            rounds: s.rounds.load(Ordering::Relaxed),
            redis_calls: s.redis_calls.load(Ordering::Relaxed),
            round_trips: s.round_trips.load(Ordering::Relaxed),
            redis_errors: s.redis_errors.load(Ordering::Relaxed),
            settled_elsewhere: s.settled_elsewhere.load(Ordering::Relaxed),
            marks_dropped: s.marks_dropped.load(Ordering::Relaxed),
        }
    }

    /// Stops the background task, then reports final spend and closes every lease (pipelined),
    /// returning the unspent remainders to the shared budget. Drain the request path first: a
    /// win notice committed after this is not reported. Local reservations still open are
    /// released in Redis (they go back to the campaign). Errors when Redis cannot be reached:
    /// the leases are then reclaimed by the sweep after their expiry.
    pub async fn shutdown(&self) -> Result<(), LedgerError> {
        self.inner.stopping.store(true, Ordering::Release);
        self.inner.wake.notify_one();
        let handle = lock(&self.inner.task).take();
        if let Some(handle) = handle {
            // A panicking task would be a bug; its leases still get closed below.
            let _ = handle.await;
        }
        self.inner.close_all(Timestamp::now()).await
    }
}
