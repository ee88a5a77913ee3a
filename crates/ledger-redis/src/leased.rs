//! [`LeasedLedger`]: one bidder instance's front for lease mode. Bids reserve and commit against
//! a local [`pacing::Book`] (synchronous, no Redis on the request path) whose budget per
//! campaign is what Redis has leased to this instance; a background task keeps the leases
//! topped up, reports spend and extends them, and fails closed when Redis is away.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use pacing::{
    Balance, Book, CommitOutcome, Limits, Nanos, Refusal, ReleaseOutcome, SettleError, Timestamp,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::{LeaseError, LeaseState, LedgerError, RedisLedger};

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
    /// How often spend is reported, leases extended and topped up, and the shared sweep run.
    pub report_interval: Duration,
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
        }
        self
    }
}

/// Counters for metrics, since start.
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
    /// Redis calls that failed (transport).
    pub redis_errors: u64,
}

/// One instance's lease-mode ledger: bids reserve and commit against a local [`pacing::Book`]
/// holding what Redis leased to this instance; a background task tops up, reports and extends
/// the leases (see the [crate docs](crate) for the protocol and its failure bounds). Cheap to
/// clone.
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
    redis_errors: AtomicU64,
}

#[derive(Debug)]
struct Local {
    book: Book,
    campaigns: HashMap<String, Camp>,
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
}

impl Lease {
    /// Local reservations may draw on this lease until then.
    fn spend_until(&self, margin: Duration) -> Timestamp {
        let margin = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.expires_at.millis().saturating_sub(margin))
    }
}

/// What the background task needs of one campaign, copied out under the lock.
#[derive(Debug)]
struct Snapshot {
    name: String,
    limits: Limits,
    active: bool,
    applied: bool,
    lease: Option<Lease>,
    accounted: Nanos,
    pending: Option<String>,
    spent: Nanos,
    reserved: Nanos,
}

impl LeasedLedger {
    /// Creates the instance's ledger for `campaigns` (name and shared limits), makes a first
    /// attempt at setting limits and taking leases (bounded by the Redis timeout; if Redis is
    /// down it starts anyway, spending nothing until it can lease), and spawns the background
    /// task. Must be called within a tokio runtime.
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
        ledger.inner.tick(Timestamp::now()).await;
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
                    };
                    known.insert(name, camp);
                }
            }
        }
    }

    /// Reserves locally, as [`pacing::Book::reserve`], from the budget leased to this instance.
    /// Refused with [`Refusal::InsufficientBudget`] when nothing is leased, or when the lease
    /// is within the safety margin of its expiry (Redis has not heard from us: fail closed), or
    /// when a daily-budget campaign's lease is from another UTC day.
    pub fn reserve(
        &self,
        id: &str,
        campaign: &str,
        amount: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        let margin = self.inner.config.safety_margin;
        let mut local = lock(&self.inner.local);
        let Some(camp) = local.campaigns.get(campaign) else {
            return Err(Refusal::UnknownCampaign);
        };
        let usable = camp.active
            && !self.inner.stopping.load(Ordering::Relaxed)
            && camp.lease.as_ref().is_some_and(|l| {
                now < l.spend_until(margin) && (camp.limits.daily.is_none() || l.day == now.day())
            });
        if !usable {
            return Err(if amount.is_positive() {
                Refusal::InsufficientBudget
            } else {
                Refusal::NonPositiveAmount
            });
        }
        local.book.reserve(id, campaign, amount, expires_at, now)
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
    /// the same figures). Fails when Redis does.
    pub async fn balances(&self, now: Timestamp) -> Result<Vec<Balance>, LedgerError> {
        let mut names: Vec<String> = lock(&self.inner.local)
            .campaigns
            .iter()
            .filter(|(_, c)| c.active)
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        self.inner.redis.balances(&names, now).await
    }

    /// Whether the last Redis call of the background task succeeded.
    pub fn redis_healthy(&self) -> bool {
        self.inner.redis_ok.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> LeaseStats {
        let s = &self.inner.stats;
        LeaseStats {
            grants: s.grants.load(Ordering::Relaxed),
            granted: Nanos(s.granted.load(Ordering::Relaxed)),
            charged: Nanos(s.charged.load(Ordering::Relaxed)),
            uncharged: Nanos(s.uncharged.load(Ordering::Relaxed)),
            leases_lost: s.leases_lost.load(Ordering::Relaxed),
            redis_errors: s.redis_errors.load(Ordering::Relaxed),
        }
    }

    /// Stops the background task, then reports final spend and closes every lease, returning
    /// the unspent remainders to the shared budget. Drain the request path first: a win notice
    /// committed after this is not reported. Local reservations still open are released in
    /// Redis (they go back to the campaign). Errors when Redis cannot be reached: the leases are
    /// then reclaimed by the sweep after their expiry.
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

async fn run(inner: Weak<Inner>, interval: Duration) {
    loop {
        // Only a weak reference between ticks: dropping every handle ends the task (the
        // leases are then reclaimed by the sweep after their expiry).
        {
            let Some(inner) = inner.upgrade() else { return };
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = inner.wake.notified() => {}
            }
            if inner.stopping.load(Ordering::Acquire) {
                return;
            }
            inner.tick(Timestamp::now()).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks can panic halfway through an update (pacing::Book does not
    // panic), so a poisoned lock still holds consistent data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// One round: expire local reservations, then for each campaign push limits, report or
    /// close, top up; then run one batch of the shared sweep. The first transport error ends
    /// the round (Redis is away; no point paying the timeout once per campaign).
    async fn tick(&self, now: Timestamp) {
        let snapshots = self.snapshot(now);
        for snap in snapshots {
            if self.campaign_round(snap, now).await.is_err() {
                return;
            }
        }
        let swept = self.redis.expire(now).await;
        let _ = self.outcome(swept);
    }

    fn snapshot(&self, now: Timestamp) -> Vec<Snapshot> {
        let mut local = lock(&self.local);
        local.book.expire(now);
        let Local { book, campaigns } = &*local;
        let mut out: Vec<Snapshot> = campaigns
            .iter()
            .map(|(name, c)| {
                let (spent, reserved) = book
                    .balance(name, now)
                    .map_or((Nanos::ZERO, Nanos::ZERO), |b| (b.spent, b.reserved));
                Snapshot {
                    name: name.clone(),
                    limits: c.limits,
                    active: c.active,
                    applied: c.applied,
                    lease: c.lease.clone(),
                    accounted: c.accounted,
                    pending: c.pending.clone(),
                    spent,
                    reserved,
                }
            })
            .collect();
        // A stable order keeps rounds deterministic (and fair when a round is cut short).
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
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

    async fn campaign_round(&self, mut snap: Snapshot, now: Timestamp) -> Result<(), LedgerError> {
        if let Some(lease) = snap.lease.clone() {
            let cumulative = snap.spent.saturating_sub(lease.base);
            let retire = (!snap.active && snap.reserved == Nanos::ZERO) || lease.day != now.day();
            if retire {
                let closed =
                    self.outcome(self.redis.close_lease(&lease.id, cumulative, now).await)?;
                if let Ok(c) = closed {
                    self.count(c.charged, c.uncharged);
                }
                // Closed, or unknown to Redis: either way this lease is over.
                self.end_lease(&snap.name, &lease.id, snap.spent, now);
                snap.lease = None;
                snap.accounted = snap.spent;
            } else {
                let until = now.saturating_add(self.config.lease_ttl);
                let report = self.outcome(
                    self.redis
                        .report_lease(&lease.id, cumulative, until, now)
                        .await,
                )?;
                match report {
                    Ok(r) if r.state == LeaseState::Open => {
                        self.count(r.charged, r.uncharged);
                        self.update_lease(&snap.name, &lease.id, r.amount, r.expires_at, now);
                        snap.lease = Some(Lease {
                            amount: r.amount,
                            expires_at: r.expires_at,
                            ..lease
                        });
                    }
                    Ok(r) => {
                        // Reclaimed (we were cut off past the expiry): this report was still
                        // charged as far as the campaign could afford; start a new lease.
                        self.count(r.charged, r.uncharged);
                        tracing::warn!(campaign = %snap.name, "ledger: lease was reclaimed");
                        self.lost_lease(&snap.name, &lease.id, snap.spent, now);
                        snap.lease = None;
                        snap.accounted = snap.spent;
                    }
                    Err(e) => {
                        // Unknown lease or campaign: Redis lost them (a restart without
                        // persistence). Start over in this same round, limits first.
                        tracing::warn!(campaign = %snap.name, label = e.label(), "ledger: lease lost");
                        self.lost_lease(&snap.name, &lease.id, snap.spent, now);
                        self.with_camp(&snap.name, |c, _| c.applied = false);
                        snap.lease = None;
                        snap.accounted = snap.spent;
                        snap.applied = false;
                    }
                }
            }
        }
        if snap.active && !snap.applied {
            self.outcome(self.redis.set_limits(&snap.name, snap.limits, now).await)?;
            self.with_camp(&snap.name, |c, _| {
                if c.limits == snap.limits {
                    c.applied = true;
                }
            });
        }
        if snap.active {
            self.top_up(&snap, now).await?;
        }
        Ok(())
    }

    /// Takes more when the local headroom is below half a chunk, creating a lease if needed.
    async fn top_up(&self, snap: &Snapshot, now: Timestamp) -> Result<(), LedgerError> {
        let chunk = self.config.lease_chunk;
        let used = snap.spent.saturating_add(snap.reserved);
        let (id, base, limit) = match &snap.lease {
            Some(l) => {
                let limit = l.base.saturating_add(l.amount);
                if limit.saturating_sub(used).get().saturating_mul(2) >= chunk.get() {
                    return Ok(());
                }
                (l.id.clone(), l.base, limit)
            }
            None => {
                let id = snap.pending.clone().unwrap_or_else(|| self.new_lease_id());
                self.with_camp(&snap.name, |c, _| c.pending = Some(id.clone()));
                (id, snap.accounted, snap.accounted)
            }
        };
        // A new lease also covers what earlier leases no longer do: reservations still open and
        // spend not yet attributed, so that their commits are charged.
        let want = chunk.saturating_add(used.saturating_sub(limit).max(Nanos::ZERO));
        let until = now.saturating_add(self.config.lease_ttl);
        let mut grant = self.outcome(
            self.redis
                .take_lease(&id, &snap.name, want, until, now)
                .await,
        )?;
        if grant == Err(LeaseError::UnknownCampaign) {
            self.outcome(self.redis.set_limits(&snap.name, snap.limits, now).await)?;
            grant = self.outcome(
                self.redis
                    .take_lease(&id, &snap.name, want, until, now)
                    .await,
            )?;
        }
        match grant {
            Ok(g) => {
                self.stats.grants.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .granted
                    .fetch_add(g.granted.get(), Ordering::Relaxed);
                self.with_camp(&snap.name, |c, book| {
                    if c.pending.as_ref() == Some(&id) {
                        c.pending = None;
                    }
                    let lease = c.lease.get_or_insert_with(|| Lease {
                        id: id.clone(),
                        amount: Nanos::ZERO,
                        base,
                        expires_at: g.expires_at,
                        day: now.day(),
                    });
                    if lease.id != id {
                        return;
                    }
                    lease.amount = lease.amount.max(g.amount);
                    lease.expires_at = lease.expires_at.max(g.expires_at);
                    let total = lease.base.saturating_add(lease.amount);
                    book.set_limits(&snap.name, Limits { total, daily: None }, now);
                });
            }
            Err(e) => {
                // Closed or mismatched id: a fresh id next round.
                tracing::warn!(campaign = %snap.name, label = e.label(), "ledger: lease refused");
                self.with_camp(&snap.name, |c, _| {
                    if c.lease.as_ref().is_some_and(|l| l.id == id) {
                        c.lease = None;
                    }
                    if c.pending.as_ref() == Some(&id) {
                        c.pending = None;
                    }
                });
            }
        }
        Ok(())
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

    /// Runs `f` on campaign `name` and the book, under the lock.
    fn with_camp(&self, name: &str, f: impl FnOnce(&mut Camp, &mut Book)) {
        let mut local = lock(&self.local);
        let Local { book, campaigns } = &mut *local;
        if let Some(c) = campaigns.get_mut(name) {
            f(c, book);
        }
    }

    fn update_lease(
        &self,
        name: &str,
        id: &str,
        amount: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) {
        self.with_camp(name, |c, book| {
            if let Some(l) = c.lease.as_mut().filter(|l| l.id == id) {
                // Redis may know a larger amount (a grant whose answer timed out): it is ours.
                l.amount = l.amount.max(amount);
                l.expires_at = l.expires_at.max(expires_at);
                let total = l.base.saturating_add(l.amount);
                book.set_limits(name, Limits { total, daily: None }, now);
            }
        });
    }

    /// The lease is over (closed by us): spend up to `spent` was attributed to it.
    fn end_lease(&self, name: &str, id: &str, spent: Nanos, now: Timestamp) {
        self.with_camp(name, |c, book| {
            if c.lease.as_ref().is_some_and(|l| l.id == id) {
                c.lease = None;
                c.accounted = spent;
                book.set_limits(
                    name,
                    Limits {
                        total: Nanos::ZERO,
                        daily: None,
                    },
                    now,
                );
            }
        });
    }

    fn lost_lease(&self, name: &str, id: &str, spent: Nanos, now: Timestamp) {
        self.stats.leases_lost.fetch_add(1, Ordering::Relaxed);
        self.end_lease(name, id, spent, now);
    }

    async fn close_all(&self, now: Timestamp) -> Result<(), LedgerError> {
        let snapshots = self.snapshot(now);
        let mut first_error = None;
        for snap in snapshots {
            let Some(lease) = snap.lease else { continue };
            let cumulative = snap.spent.saturating_sub(lease.base);
            match self.outcome(self.redis.close_lease(&lease.id, cumulative, now).await) {
                Ok(closed) => {
                    if let Ok(c) = closed {
                        self.count(c.charged, c.uncharged);
                    }
                    self.end_lease(&snap.name, &lease.id, snap.spent, now);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
