//! [`LeasedLedger`]: one bidder instance's front for lease mode. Bids reserve and commit against
//! a local [`pacing::Book`] (synchronous, no Redis on the request path) whose budget per
//! campaign is what Redis has leased to this instance; a background task takes leases for the
//! campaigns that try to spend, keeps them topped up, reports spend and extends them, closes the
//! leases of campaigns that stopped spending, and fails closed when Redis is away.
//!
//! The task's work per round is proportional to the campaigns that are spending, not to the
//! campaigns configured: it only looks at campaigns holding a lease and at those a reservation
//! asked budget for, and it pipelines its Redis calls (see the [crate docs](crate)).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use pacing::{
    Balance, Book, CommitOutcome, Limits, Nanos, Refusal, ReleaseOutcome, SettleError, Timestamp,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::redis_ledger::{Answer, Call};
use crate::{LeaseError, LeaseState, LedgerError, PIPELINE_MAX, RedisLedger};

/// Most limits a round writes (a reload that changes many campaigns is spread over rounds, so
/// that reports and top-ups are not held up behind it). [`LeasedLedger::start`] writes them all.
const LIMITS_PER_ROUND: usize = 2_000;

/// After a grant short of what was asked (the campaign is nearly out of budget, in total or
/// today), the campaign asks again no sooner than this many report intervals later: an exhausted
/// campaign that keeps bidding costs one call per few intervals, not one per bid.
const SHORT_GRANT_BACKOFF: u32 = 4;

/// Knobs of lease mode. Every field has a default.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Names this process in lease ids; must differ between instances sharing a Redis (a
    /// random suffix per start is added, so a restarted instance never resumes an old lease).
    pub instance_id: String,
    /// Amount asked of Redis per top-up; more is asked when the local headroom falls below half
    /// of it. Bigger chunks mean fewer Redis calls but more budget parked per instance (and more
    /// at stake per instance in a partition: see the crate docs). A few seconds of the
    /// campaign's spend rate is a good start.
    pub lease_chunk: Nanos,
    /// Each grant or report extends the lease to now + this.
    pub lease_ttl: Duration,
    /// Local spending from a lease stops at its expiry minus this, by this instance's clock.
    /// Must exceed the clock skew between instances (another instance may run the sweep).
    pub safety_margin: Duration,
    /// How often the background task runs a full round: reports the spend of the leases whose
    /// spend changed, extends the leases nearing expiry, closes idle ones, runs the shared sweep.
    /// Top-ups do not wait for it: a reservation that needs budget wakes the task.
    pub report_interval: Duration,
    /// A lease whose campaign has not tried to reserve for this long is closed (once its open
    /// local reservations are resolved), handing its unspent part back to the shared budget.
    pub idle_close: Duration,
    /// How long the local book remembers resolved reservations (duplicate notices).
    pub tombstone_ttl: Duration,
}

impl Default for LeaseConfig {
    fn default() -> LeaseConfig {
        LeaseConfig {
            instance_id: "gavel".to_owned(),
            lease_chunk: Nanos(1_000_000_000),
            lease_ttl: Duration::from_secs(10),
            safety_margin: Duration::from_secs(3),
            report_interval: Duration::from_millis(200),
            idle_close: Duration::from_secs(30),
            tombstone_ttl: Duration::from_secs(15 * 60),
        }
    }
}

impl LeaseConfig {
    /// Checks the knobs; for configuration loaders, so that a bad file is refused with the field
    /// named. [`LeasedLedger::start`] also repairs what this refuses (and logs it).
    pub fn validate(&self) -> Result<(), &'static str> {
        if !self.lease_chunk.is_positive() {
            return Err("lease_chunk must be positive");
        }
        if self.safety_margin >= self.lease_ttl {
            return Err("safety_margin must be shorter than lease_ttl (no time to spend a lease)");
        }
        if self.report_interval.is_zero()
            || self.report_interval >= self.lease_ttl - self.safety_margin
        {
            return Err(
                "report_interval must be positive and shorter than lease_ttl - safety_margin",
            );
        }
        if self.idle_close < self.report_interval {
            return Err("idle_close must be at least report_interval");
        }
        Ok(())
    }

    fn repaired(mut self) -> LeaseConfig {
        if let Err(why) = self.validate() {
            tracing::warn!(why, "ledger: lease configuration repaired");
            self.lease_chunk = self.lease_chunk.max(Nanos(1));
            if self.safety_margin >= self.lease_ttl {
                self.safety_margin = self.lease_ttl / 4;
            }
            let window = self.lease_ttl - self.safety_margin;
            if self.report_interval.is_zero() || self.report_interval >= window {
                self.report_interval = (window / 4).max(Duration::from_millis(1));
            }
            if self.idle_close < self.report_interval {
                self.idle_close = (self.lease_ttl * 3).max(self.report_interval);
            }
        }
        self
    }

    /// A lease is reported (extended) when its expiry is this close, even without new spend:
    /// half the TTL, and early enough that the extension lands before the safety margin stops
    /// spending (two report intervals of slack).
    fn extend_within(&self) -> Duration {
        (self.lease_ttl / 2)
            .max(self.safety_margin + self.report_interval * 2)
            .min(self.lease_ttl)
    }
}

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
    /// Leases closed because their campaign stopped reserving ([`LeaseConfig::idle_close`]).
    pub idle_closes: u64,
    /// Leases this instance holds now.
    pub open_leases: u64,
    /// Rounds of the background task (every report interval, plus wake-ups for top-ups).
    pub rounds: u64,
    /// Script calls the background task (and shutdown) sent to Redis.
    pub redis_calls: u64,
    /// Round trips those calls took (they are pipelined, up to [`PIPELINE_MAX`] per trip).
    pub round_trips: u64,
    /// Round trips that failed (transport), or calls Redis could not serve.
    pub redis_errors: u64,
}

/// One instance's lease-mode ledger: bids reserve and commit against a local [`pacing::Book`]
/// holding what Redis leased to this instance; a background task takes leases on demand, tops
/// up, reports, extends and closes them (see the [crate docs](crate) for the protocol and its
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
}

#[derive(Debug)]
struct Local {
    book: Book,
    campaigns: HashMap<String, Camp>,
    /// Campaigns whose `wanted` flag was raised, each once, in order: the task's top-up queue.
    wanted: Vec<String>,
    /// Campaigns holding a lease: with `wanted`, the only campaigns a round looks at.
    leased: BTreeSet<String>,
    /// Active campaigns whose limits are to be written (new, changed, or lost by Redis).
    unapplied: BTreeSet<String>,
    /// The active campaigns' names, sorted (for `balances`, without a copy under the lock).
    active: Arc<[String]>,
}

#[derive(Debug)]
struct Camp {
    /// The shared limits to keep in Redis.
    limits: Limits,
    /// In the latest configuration; an inactive campaign takes no new leases.
    active: bool,
    /// `set_limits` has succeeded since the limits changed (or since Redis lost them).
    applied: bool,
    lease: Option<Lease>,
    /// Local spend up to this figure is attributed to earlier leases; the next lease's
    /// cumulative spend counts from here.
    accounted: Nanos,
    /// The id of a lease being created whose grant has not been answered yet: a retry after a
    /// timeout reuses it, so a grant that did land is adopted rather than parked until expiry.
    pending: Option<String>,
    /// The latest reservation attempt (granted or not): idle leases are closed after a while.
    last_demand: Timestamp,
    /// A reservation needs more budget than is leased; the campaign is in `Local::wanted`.
    wanted: bool,
    /// No top-up is asked before then (after a grant that fell short).
    ask_after: Timestamp,
}

#[derive(Clone, Debug)]
struct Lease {
    id: String,
    /// Granted, as Redis last said.
    amount: Nanos,
    /// Local `spent` when this lease took over; its cumulative spend is `spent - base`.
    base: Nanos,
    expires_at: Timestamp,
    day: u64,
    /// The cumulative spend Redis last acknowledged (reports are sent only when it changed).
    reported: Nanos,
}

impl Lease {
    /// Local reservations may draw on this lease until then.
    fn spend_until(&self, margin: Duration) -> Timestamp {
        let margin = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.expires_at.millis().saturating_sub(margin))
    }
}

impl Local {
    /// Raises a campaign's demand for a top-up; true if it was not raised yet (wake the task).
    fn want(&mut self, name: &str, now: Timestamp) -> bool {
        match self.campaigns.get_mut(name) {
            Some(camp) => raise(camp, name, &mut self.wanted, now),
            None => false,
        }
    }

    /// Raises a campaign's demand even while it backs off (a top-up whose answer was lost: the
    /// retry adopts a grant that did land). No wake-up: the next round retries.
    fn requeue(&mut self, name: &str) {
        if let Some(camp) = self.campaigns.get_mut(name)
            && !camp.wanted
        {
            camp.wanted = true;
            self.wanted.push(name.to_owned());
        }
    }

    /// Whether the campaign asks for a top-up (raising its demand if it may): wake the task.
    fn wants(&mut self, name: &str, now: Timestamp) -> bool {
        self.want(name, now);
        self.campaigns.get(name).is_some_and(|c| c.wanted)
    }

    /// `spent` and `reserved` of a campaign in the local book.
    fn used(&self, name: &str, now: Timestamp) -> (Nanos, Nanos) {
        self.book
            .balance(name, now)
            .map_or((Nanos::ZERO, Nanos::ZERO), |b| (b.spent, b.reserved))
    }

    /// Limits need writing (again).
    fn unapply(&mut self, name: &str) {
        if let Some(camp) = self.campaigns.get_mut(name) {
            camp.applied = false;
            if camp.active {
                self.unapplied.insert(name.to_owned());
            }
        }
    }

    /// Limits `limits` were written: applied, unless they changed meanwhile.
    fn applied(&mut self, name: &str, limits: Limits) {
        if let Some(camp) = self.campaigns.get_mut(name)
            && camp.limits == limits
        {
            camp.applied = true;
            self.unapplied.remove(name);
        }
    }

    /// Ends lease `id`: local spend up to `accounted` is attributed to it (or to earlier ones).
    /// If the campaign still has spend or open reservations beyond that, they need a lease to
    /// be reported: the campaign asks for one.
    fn end_lease(&mut self, name: &str, id: &str, accounted: Nanos, now: Timestamp) {
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
fn raise(camp: &mut Camp, name: &str, queue: &mut Vec<String>, now: Timestamp) -> bool {
    if camp.wanted || now < camp.ask_after {
        return false;
    }
    camp.wanted = true;
    queue.push(name.to_owned());
    true
}

/// What a round asked of Redis for one campaign, to apply the answer.
#[derive(Debug)]
enum Step {
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
    Grant {
        name: String,
        id: String,
        /// For a new lease: where its cumulative spend starts.
        base: Nanos,
        want: Nanos,
        /// Growing a lease we hold (rather than creating or adopting a pending one).
        existing: bool,
        /// `set_limits` went just before, in the same pipeline.
        with_limits: bool,
        spent: Nanos,
    },
    Sweep,
}

impl LeasedLedger {
    /// Creates the instance's ledger for `campaigns` (name and shared limits), writes their
    /// limits to Redis (pipelined: about one round trip per [`PIPELINE_MAX`] campaigns; if Redis
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
            }),
            config,
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
            redis_ok: AtomicBool::new(true),
            task: Mutex::new(None),
            incarnation,
            seq: AtomicU64::new(0),
            stats: Stats::default(),
        });
        let ledger = LeasedLedger { inner };
        ledger.configure(campaigns, now);
        // Every limit now (a start is rare), so that the shared balances list every campaign.
        while ledger.inner.write_limits(Timestamp::now()).await {}
        ledger.inner.round(Timestamp::now(), true).await;
        let weak = Arc::downgrade(&ledger.inner);
        let interval = ledger.inner.config.report_interval;
        let handle = tokio::spawn(run(weak, interval));
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

    fn configure(&self, campaigns: Vec<(String, Limits)>, now: Timestamp) {
        let mut local = lock(&self.inner.local);
        let Local {
            book,
            campaigns: known,
            unapplied,
            active,
            ..
        } = &mut *local;
        for camp in known.values_mut() {
            camp.active = false;
        }
        for (name, limits) in campaigns {
            match known.get_mut(&name) {
                Some(camp) => {
                    if camp.limits != limits {
                        camp.limits = limits;
                        camp.applied = false;
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
                        applied: false,
                        lease: None,
                        accounted: Nanos::ZERO,
                        pending: None,
                        last_demand: Timestamp(0),
                        wanted: false,
                        ask_after: Timestamp(0),
                    };
                    unapplied.insert(name.clone());
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

    /// Reserves locally, as [`pacing::Book::reserve`], from the budget leased to this instance.
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
                    Err(Refusal::InsufficientBudget) => true,
                    // Below half a chunk left: top up before it runs dry.
                    Ok(()) if !camp.wanted && now >= camp.ask_after => book
                        .balance(campaign, now)
                        .is_some_and(|b| b.available.get().saturating_mul(2) < chunk.get()),
                    _ => false,
                };
                (result, short && raise(camp, campaign, wanted, now))
            } else {
                let wake = serving && raise(camp, campaign, wanted, now);
                (Err(Refusal::InsufficientBudget), wake)
            }
        };
        if wake {
            inner.wake.notify_one();
        }
        result
    }

    /// Commits locally, as [`pacing::Book::commit`]. Always allowed, lease or not: the
    /// impression was bought; the spend reaches Redis with the next report.
    pub fn commit(
        &self,
        id: &str,
        price: Nanos,
        now: Timestamp,
    ) -> Result<CommitOutcome, SettleError> {
        lock(&self.inner.local).book.commit(id, price, now)
    }

    /// Releases locally, as [`pacing::Book::release`].
    pub fn release(&self, id: &str, now: Timestamp) -> Result<ReleaseOutcome, SettleError> {
        lock(&self.inner.local).book.release(id, now)
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

    /// [`LeasedLedger::balances`] for some campaigns only (e.g. the ones a pacer needs), with
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

/// The background task: a full round every `interval`, and a top-up round whenever a
/// reservation wakes it (unless Redis failed last time: then it waits for the interval, so an
/// outage costs one failed round per interval, not one per bid).
async fn run(inner: Weak<Inner>, interval: Duration) {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks can panic halfway through an update (pacing::Book does not
    // panic), so a poisoned lock still holds consistent data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// One round, two pipelined phases. Upkeep: report the leases whose spend changed or whose
    /// expiry nears, close retired, idle or yesterday's leases, run one batch of the shared
    /// sweep, write pending limits. Top-ups: grant the campaigns that asked (creating their
    /// lease, with their limits first if unwritten). A full round looks at every lease; a
    /// wake-up round only at the campaigns that asked, and does not sweep. Returns false when
    /// Redis could not be reached (the round stops at the first transport error).
    async fn round(&self, now: Timestamp, full: bool) -> bool {
        self.stats.rounds.fetch_add(1, Ordering::Relaxed);
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
    async fn exchange(&self, steps: Vec<(Call, Step)>, now: Timestamp) -> Result<(), LedgerError> {
        if steps.is_empty() {
            return Ok(());
        }
        let (calls, steps): (Vec<Call>, Vec<Step>) = steps.into_iter().unzip();
        let mut answers: Vec<Option<Result<Answer, LedgerError>>> = Vec::with_capacity(calls.len());
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

    fn plan_upkeep(&self, now: Timestamp, full: bool) -> Vec<(Call, Step)> {
        let config = &self.config;
        let idle_ms = u64::try_from(config.idle_close.as_millis()).unwrap_or(u64::MAX);
        let extend_by = now.saturating_add(config.extend_within());
        let mut local = lock(&self.local);
        local.book.expire(now);
        let local = &*local;
        let mut steps = Vec::new();
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
        for name in names {
            let Some(camp) = local.campaigns.get(name) else {
                continue;
            };
            let Some(lease) = &camp.lease else { continue };
            let (spent, reserved) = local.used(name, now);
            let cumulative = spent.saturating_sub(lease.base);
            let idle = now.millis().saturating_sub(camp.last_demand.millis()) >= idle_ms;
            let quiet = reserved == Nanos::ZERO;
            let new_day = lease.day != now.day();
            if (!camp.active && quiet) || new_day || (idle && quiet) {
                steps.push((
                    Call::CloseLease {
                        id: lease.id.clone(),
                        cumulative,
                    },
                    Step::Close {
                        name: name.clone(),
                        lease: lease.clone(),
                        cumulative,
                        idle: camp.active && !new_day,
                        renew: camp.active && new_day && !idle,
                    },
                ));
            } else if cumulative != lease.reported || lease.expires_at <= extend_by {
                steps.push((
                    Call::ReportLease {
                        id: lease.id.clone(),
                        cumulative,
                        expires_at: now.saturating_add(config.lease_ttl),
                    },
                    Step::Report {
                        name: name.clone(),
                        lease: lease.clone(),
                        cumulative,
                    },
                ));
            }
        }
        if full {
            steps.push((Call::Expire, Step::Sweep));
        }
        steps.extend(limits_steps(local, LIMITS_PER_ROUND));
        steps
    }

    fn plan_top_ups(&self, now: Timestamp) -> Vec<(Call, Step)> {
        let chunk = self.config.lease_chunk;
        let stopping = self.stopping.load(Ordering::Relaxed);
        let mut local = lock(&self.local);
        let mut names = std::mem::take(&mut local.wanted);
        names.sort_unstable();
        let mut steps = Vec::new();
        for name in names {
            let (spent, reserved) = local.used(&name, now);
            let Some(camp) = local.campaigns.get_mut(&name) else {
                continue;
            };
            camp.wanted = false;
            if !camp.active || stopping || now < camp.ask_after {
                continue;
            }
            let used = spent.saturating_add(reserved);
            let (id, base, limit, existing) = match &camp.lease {
                Some(l) => {
                    let limit = l.base.saturating_add(l.amount);
                    // Topped up meanwhile (a burst asks once per round trip, not per bid).
                    if limit.saturating_sub(used).get().saturating_mul(2) >= chunk.get() {
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
            let want = chunk.saturating_add(used.saturating_sub(limit).max(Nanos::ZERO));
            let with_limits = !camp.applied;
            if with_limits {
                steps.push((
                    Call::SetLimits {
                        campaign: name.clone(),
                        limits: camp.limits,
                    },
                    Step::Limits {
                        name: name.clone(),
                        limits: camp.limits,
                    },
                ));
            }
            steps.push((
                Call::TakeLease {
                    id: id.clone(),
                    campaign: name.clone(),
                    want,
                    expires_at: now.saturating_add(self.config.lease_ttl),
                    grow_only: existing,
                },
                Step::Grant {
                    name,
                    id,
                    base,
                    want,
                    existing,
                    with_limits,
                    spent,
                },
            ));
        }
        steps
    }

    /// Writes up to one round's worth of pending limits; true if that made progress and more
    /// remain.
    async fn write_limits(&self, now: Timestamp) -> bool {
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

    /// Applies one answer (`None`: not sent, or its fate is unknown). True to wake the task.
    fn apply(
        &self,
        local: &mut Local,
        step: Step,
        answer: Option<Result<Answer, LedgerError>>,
        now: Timestamp,
    ) -> bool {
        let Some(answer) = answer else {
            // Unknown: asked again next round (a grant reuses its id; reports are cumulative).
            if let Step::Grant { name, .. } = step {
                local.requeue(&name);
            }
            return false;
        };
        match (step, answer) {
            (Step::Limits { name, limits }, Ok(Answer::LimitsSet)) => {
                local.applied(&name, limits);
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
                Ok(Answer::Report(report)),
            ) => {
                let spent = lease.base.saturating_add(cumulative);
                match report {
                    Ok(r) if r.state == LeaseState::Open => {
                        self.count(r.charged, r.uncharged);
                        update_lease(local, &name, &lease.id, r.amount, r.expires_at, now);
                        if let Some(l) = lease_mut(local, &name, &lease.id) {
                            l.reported = l.reported.max(cumulative);
                        }
                    }
                    Ok(r) => {
                        // Reclaimed (we were cut off past the expiry): this report was still
                        // charged as far as the campaign could afford; a new lease on demand.
                        self.count(r.charged, r.uncharged);
                        tracing::warn!(campaign = %name, "ledger: lease was reclaimed");
                        self.lost(local, &name, &lease.id, spent, now);
                    }
                    Err(e) => {
                        // Unknown lease or campaign: Redis lost them (a restart without
                        // persistence). Limits first, then a new lease on demand.
                        tracing::warn!(campaign = %name, label = e.label(), "ledger: lease lost");
                        local.unapply(&name);
                        self.lost(local, &name, &lease.id, spent, now);
                    }
                }
                false
            }
            (
                Step::Close {
                    name,
                    lease,
                    cumulative,
                    idle,
                    renew,
                },
                Ok(Answer::Close(closed)),
            ) => {
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
                // Closed, or unknown to Redis: either way this lease is over.
                let spent = lease.base.saturating_add(cumulative);
                local.end_lease(&name, &lease.id, spent, now);
                if renew {
                    // Upkeep comes first in a round: the top-ups of this round take it.
                    local.want(&name, now);
                }
                false
            }
            (
                Step::Grant {
                    name,
                    id,
                    base,
                    want,
                    existing,
                    with_limits,
                    spent,
                },
                Ok(Answer::Grant(grant)),
            ) => self.apply_grant(
                local,
                GrantStep {
                    name,
                    id,
                    base,
                    want,
                    existing,
                    with_limits,
                    spent,
                },
                grant,
                now,
            ),
            (Step::Sweep, Ok(Answer::Swept(_))) => false,
            (Step::Grant { name, .. }, Err(e)) => {
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

    fn apply_grant(
        &self,
        local: &mut Local,
        g: GrantStep,
        grant: Result<crate::LeaseGrant, LeaseError>,
        now: Timestamp,
    ) -> bool {
        let GrantStep {
            name,
            id,
            base,
            want,
            existing,
            with_limits,
            spent,
        } = g;
        match grant {
            Ok(grant) => {
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
                    return false;
                };
                if camp.pending.as_ref() == Some(&id) {
                    camp.pending = None;
                }
                if grant.granted < want {
                    camp.ask_after =
                        now.saturating_add(self.config.report_interval * SHORT_GRANT_BACKOFF);
                }
                let lease = camp.lease.get_or_insert_with(|| Lease {
                    id: id.clone(),
                    amount: Nanos::ZERO,
                    base,
                    expires_at: grant.expires_at,
                    day: now.day(),
                    reported: Nanos::ZERO,
                });
                if lease.id != id {
                    return false;
                }
                leased.insert(name.clone());
                lease.amount = lease.amount.max(grant.amount);
                lease.expires_at = lease.expires_at.max(grant.expires_at);
                let total = lease.base.saturating_add(lease.amount);
                book.set_limits(&name, Limits { total, daily: None }, now);
                false
            }
            Err(LeaseError::UnknownCampaign) => {
                // Redis lost the campaign (and so any lease of it).
                local.unapply(&name);
                if existing {
                    tracing::warn!(campaign = %name, "ledger: lease lost");
                    self.lost(local, &name, &id, spent, now);
                } else {
                    clear_pending(local, &name, &id);
                }
                if with_limits {
                    // Its limits went first and still it is unknown: they were refused.
                    self.back_off(local, &name, now);
                    false
                } else {
                    local.wants(&name, now)
                }
            }
            Err(LeaseError::UnknownLease) => {
                // Growing a lease Redis does not know: it lost it (never re-created under its
                // old id, which would let us spend the amount we believe in).
                tracing::warn!(campaign = %name, "ledger: lease lost");
                self.lost(local, &name, &id, spent, now);
                local.wants(&name, now)
            }
            Err(e) => {
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

    fn back_off(&self, local: &mut Local, name: &str, now: Timestamp) {
        if let Some(camp) = local.campaigns.get_mut(name) {
            camp.ask_after = now.saturating_add(self.config.report_interval * SHORT_GRANT_BACKOFF);
        }
    }

    fn lost(&self, local: &mut Local, name: &str, id: &str, spent: Nanos, now: Timestamp) {
        self.stats.leases_lost.fetch_add(1, Ordering::Relaxed);
        local.end_lease(name, id, spent, now);
    }

    /// Notes a transport outcome: counts errors, logs transitions between up and down.
    fn outcome<T>(&self, r: Result<T, LedgerError>) -> Result<T, LedgerError> {
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

    fn new_lease_id(&self) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{}.{}.{seq}", self.config.instance_id, self.incarnation)
    }

    fn count(&self, charged: Nanos, uncharged: Nanos) {
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

    /// Closes every lease (final reports), pipelined.
    async fn close_all(&self, now: Timestamp) -> Result<(), LedgerError> {
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
                    let call = Call::CloseLease {
                        id: lease.id.clone(),
                        cumulative,
                    };
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

/// A grant's step, unpacked.
struct GrantStep {
    name: String,
    id: String,
    base: Nanos,
    want: Nanos,
    existing: bool,
    with_limits: bool,
    spent: Nanos,
}

/// Up to `max` pending limits, as steps.
fn limits_steps(local: &Local, max: usize) -> Vec<(Call, Step)> {
    local
        .unapplied
        .iter()
        .filter_map(|name| {
            let camp = local.campaigns.get(name).filter(|c| c.active)?;
            let call = Call::SetLimits {
                campaign: name.clone(),
                limits: camp.limits,
            };
            let step = Step::Limits {
                name: name.clone(),
                limits: camp.limits,
            };
            Some((call, step))
        })
        .take(max)
        .collect()
}

fn lease_mut<'a>(local: &'a mut Local, name: &str, id: &str) -> Option<&'a mut Lease> {
    local
        .campaigns
        .get_mut(name)?
        .lease
        .as_mut()
        .filter(|l| l.id == id)
}

fn clear_pending(local: &mut Local, name: &str, id: &str) {
    if let Some(camp) = local.campaigns.get_mut(name)
        && camp.pending.as_deref() == Some(id)
    {
        camp.pending = None;
    }
}

fn update_lease(
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
        let total = l.base.saturating_add(l.amount);
        book.set_limits(name, Limits { total, daily: None }, now);
    }
}
