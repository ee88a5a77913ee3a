//! [`Ledger`]: the budget of record as the bidder sees it, one type over the three ways of
//! keeping it.
//!
//! - `memory`: a [`Book`] in this process (one instance).
//! - `redis` + `per-bid`: every reservation and notice is one atomic script call in Redis
//!   ([`RedisLedger`]).
//! - `redis` + `lease` (the default for Redis): a local book spends budget leased from Redis in
//!   chunks; no Redis round trip is on the bid path ([`LeasedLedger`]).
//!
//! Reservation ids are `{node}-{128 random bits}`: unique across instances sharing a ledger,
//! since nodes are named apart, and across restarts. In lease mode the `{node}` part names the
//! instance holding the reservation, so that a notice reaching another instance is settled
//! through Redis ([`LeasedLedger::commit_notice`]). Every call that may touch Redis is bounded by the bid's deadline or
//! the configured Redis timeout; a store that does not answer is a refusal (fail closed), never
//! a wait.
// On every bid's path to the ledger: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use units::{Limits, Nanos, Timestamp};

use crate::book::{Balance, Book, CommitOutcome, Refusal, ReleaseOutcome, SettleError};
use crate::leased::{LeaseStats, LeasedLedger};
use crate::redis::{
    LedgerError, LimitsBase, LimitsChange, LimitsConflict, LimitsRole, LimitsStatus, LimitsWritten,
    RedisLedger, StoredLimits,
};

/// Most sweep batches (of `RedisConfig::sweep_batch`, 1,000 by default) one
/// [`Ledger::expire`] runs in per-bid mode: 100,000 expiries per call at most.
const SWEEP_BATCHES_PER_CALL: usize = 100;

/// Why a reservation was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    #[error("refused: {0}")]
    Refused(Refusal),
    /// The store did not answer usefully (the bid is not made: fail closed).
    #[error("ledger unavailable: {0}")]
    Unavailable(#[source] LedgerError),
    #[error("ledger did not answer before the deadline")]
    Timeout,
}

/// Why a notice could not settle its reservation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    #[error("{0}")]
    Settle(SettleError),
    /// The store did not answer usefully; the notice may be sent again (settling is
    /// idempotent).
    #[error("ledger unavailable: {0}")]
    Unavailable(#[source] LedgerError),
}

/// Who a campaign set's limits come from, which decides whether they may raise a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitsFrom {
    /// The instance's own campaign file: its writer writes them as they are.
    Own,
    /// A set pushed to the fleet: it may lower a budget the ledger holds, never raise one
    /// (each part capped by the ledger's, [`Limits::capped_by`]); a raise needs the budget
    /// writer (`PUT /admin/campaigns/<id>/limits`). A campaign the ledger does not hold yet
    /// is created with the set's limits.
    Push,
}

/// The ledger could not be read. Like the `Unavailable` variants above, its message repeats
/// its cause (logs print one level), which is also its `source`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ledger unavailable: {0}")]
pub struct Unavailable(#[source] pub LedgerError);

fn names(limits: &[(String, Limits)]) -> Vec<&str> {
    limits.iter().map(|(c, _)| c.as_str()).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    telemetry::locks::lock(m)
}

enum Store {
    Memory(Box<Mutex<Book>>),
    PerBid(RedisLedger),
    Leased(LeasedLedger),
}

/// The budget of record, whichever backend holds it.
pub struct Ledger {
    store: Store,
    reservation_ttl: Duration,
    redis_timeout: Duration,
    /// Whether this instance writes its campaigns' limits (lease mode's is its config's).
    role: LimitsRole,
    /// Per-bid writer: per campaign, the version of the limits it last wrote or found equal
    /// to its file's, the base of its next change.
    bases: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.store {
            Store::Memory(_) => "memory",
            Store::PerBid(_) => "redis per-bid",
            Store::Leased(_) => "redis lease",
        };
        f.debug_struct("Ledger").field("store", &kind).finish()
    }
}

/// How long a resolved reservation is remembered, so that a duplicate notice is recognized
/// (beyond it, an unknown id charges nothing either).
fn tombstone_ttl(reservation_ttl: Duration) -> Duration {
    reservation_ttl
        .saturating_mul(2)
        .max(Duration::from_secs(600))
}

impl Ledger {
    /// An in-process ledger.
    pub fn memory(reservation_ttl: Duration) -> Ledger {
        Ledger {
            store: Store::Memory(Box::new(Mutex::new(Book::new(tombstone_ttl(
                reservation_ttl,
            ))))),
            reservation_ttl,
            redis_timeout: Duration::ZERO,
            role: LimitsRole::Writer("memory".to_owned()),
            bases: Mutex::default(),
        }
    }

    /// A ledger where every reservation is a Redis call; `role`: whether this instance writes
    /// its campaigns' limits there.
    pub fn per_bid(
        redis: RedisLedger,
        reservation_ttl: Duration,
        redis_timeout: Duration,
        role: LimitsRole,
    ) -> Ledger {
        Ledger {
            store: Store::PerBid(redis),
            reservation_ttl,
            redis_timeout,
            role,
            bases: Mutex::default(),
        }
    }

    /// A ledger spending leases of Redis budget locally.
    pub fn leased(
        leased: LeasedLedger,
        reservation_ttl: Duration,
        redis_timeout: Duration,
    ) -> Ledger {
        let role = leased.limits_role().clone();
        Ledger {
            store: Store::Leased(leased),
            reservation_ttl,
            redis_timeout,
            role,
            bases: Mutex::default(),
        }
    }

    /// Whether a refusal for budget of `campaign` means it has none to spend for now, so that
    /// the bidder tries its other campaigns for a while instead of this one at every request.
    /// In memory and per-bid it does. In lease mode a refusal is also how a campaign asks for
    /// its lease: it means "spent" only after Redis granted less than was asked (the budget,
    /// or today's, is spent or leased to other instances), until the task asks again.
    pub fn refusal_is_final(&self, campaign: &str, now: Timestamp) -> bool {
        match &self.store {
            Store::Memory(_) | Store::PerBid(_) => true,
            Store::Leased(l) => l.spent_out(campaign, now),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self.store {
            Store::Memory(_) => "memory",
            Store::PerBid(_) => "redis-per-bid",
            Store::Leased(_) => "redis-lease",
        }
    }

    fn book(book: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
        // A panic while holding the lock cannot leave the book half-updated in a way its own
        // invariant check would not catch; keep serving rather than poison every request.
        telemetry::locks::lock(book)
    }

    /// Whether this instance writes its campaigns' limits, and as whom.
    pub fn limits_role(&self) -> &LimitsRole {
        &self.role
    }

    /// Applies the campaign file's limits (after a load or reload) and answers, per campaign,
    /// the local limits beside those of record. A writer writes its file's limits, each change
    /// a compare-and-set on the version it last wrote or found equal: a campaign another writer
    /// changed since keeps their limits (its status shows the conflict). A follower writes
    /// nothing: it reads the limits of record (lease mode spends by them; a campaign the ledger
    /// does not hold gets no budget). In memory mode the file is the record.
    ///
    /// Limits `from` a push are first capped by those the ledger holds ([`LimitsFrom::Push`]);
    /// the statuses compare the set's own limits with the ledger's, so a raise held back shows
    /// as a conflict.
    pub async fn set_campaigns(
        &self,
        limits: &[(String, Limits)],
        from: LimitsFrom,
    ) -> Result<Vec<LimitsStatus>, Unavailable> {
        let now = Timestamp::now();
        let redis = match &self.store {
            Store::Memory(book) => {
                {
                    let mut book = Self::book(book);
                    for (id, l) in limits {
                        let l = match (from, book.limits(id)) {
                            (LimitsFrom::Push, Some(held)) => l.capped_by(held),
                            _ => *l,
                        };
                        book.set_limits(id, l, now);
                    }
                }
                return self.limits_status(limits).await;
            }
            Store::PerBid(redis) => redis.clone(),
            Store::Leased(leased) => leased.redis(),
        };
        // An operator may have created the ledger since (`gavel ledger create`, or another
        // instance's admin call): adopt it before writing limits. Reopening never creates one.
        if redis.ledger_missing() {
            redis.reopen().await.map_err(Unavailable)?;
        }
        let capped;
        let written = match from {
            LimitsFrom::Own => limits,
            LimitsFrom::Push => {
                let stored = redis
                    .stored_limits(&names(limits))
                    .await
                    .map_err(Unavailable)?;
                capped = limits
                    .iter()
                    .zip(stored)
                    .map(|((c, l), s)| (c.clone(), s.map_or(*l, |s| l.capped_by(s.limits))))
                    .collect::<Vec<_>>();
                &capped[..]
            }
        };
        match (&self.store, &self.role) {
            (Store::PerBid(_), LimitsRole::Writer(writer)) => {
                self.write_per_bid(&redis, writer, written, now).await?;
            }
            (Store::Leased(leased), LimitsRole::Writer(_)) => {
                leased.set_campaigns(written.to_vec());
                leased.write_limits_now().await;
            }
            _ => {}
        }
        self.limits_status(limits).await
    }

    /// The campaign file's limits beside those of record, read back (one `HMGET` per campaign,
    /// pipelined), without writing any. A lease-mode follower also takes the limits of record
    /// as what it spends by (a change by the writer reaches it here).
    pub async fn limits_status(
        &self,
        limits: &[(String, Limits)],
    ) -> Result<Vec<LimitsStatus>, Unavailable> {
        let redis = match &self.store {
            Store::Memory(book) => {
                // The book is the record: no versions, and no conflict unless a push's raise
                // was held back.
                let book = Self::book(book);
                return Ok(limits
                    .iter()
                    .map(|(campaign, l)| LimitsStatus {
                        campaign: campaign.clone(),
                        local: *l,
                        ledger: Some(StoredLimits {
                            limits: book.limits(campaign).unwrap_or(*l),
                            version: 0,
                            writer: String::new(),
                        }),
                    })
                    .collect());
            }
            Store::PerBid(redis) => redis.clone(),
            Store::Leased(leased) => leased.redis(),
        };
        let stored = redis
            .stored_limits(&names(limits))
            .await
            .map_err(Unavailable)?;
        if let (Store::Leased(leased), LimitsRole::Follower) = (&self.store, &self.role) {
            // A follower spends by the limits of record, and only of campaigns the ledger holds.
            let held = limits
                .iter()
                .zip(&stored)
                .filter_map(|((campaign, _), s)| Some((campaign.clone(), s.as_ref()?.limits)))
                .collect();
            leased.set_campaigns(held);
        }
        Ok(limits
            .iter()
            .zip(stored)
            .map(|((campaign, l), ledger)| LimitsStatus {
                campaign: campaign.clone(),
                local: *l,
                ledger,
            })
            .collect())
    }

    /// The per-bid writer's compare-and-sets, pipelined. A campaign the ledger lost since this
    /// instance wrote it is written again as its own.
    async fn write_per_bid(
        &self,
        redis: &RedisLedger,
        writer: &str,
        limits: &[(String, Limits)],
        now: Timestamp,
    ) -> Result<(), Unavailable> {
        let change = |campaign: &String, l: &Limits, base| LimitsChange {
            campaign: campaign.clone(),
            limits: *l,
            writer: writer.to_owned(),
            base,
        };
        let changes: Vec<LimitsChange> = {
            let bases = lock(&self.bases);
            limits
                .iter()
                .map(|(c, l)| {
                    let base = bases
                        .get(c)
                        .map_or(LimitsBase::Own, |v| LimitsBase::Version(*v));
                    change(c, l, base)
                })
                .collect()
        };
        // Pipelined: 100,000 campaigns must not mean 100,000 round trips.
        let answers = redis
            .change_limits_many(&changes, now)
            .await
            .map_err(Unavailable)?;
        let mut again = Vec::new();
        let mut failed = None;
        {
            let mut bases = lock(&self.bases);
            for (c, answer) in changes.iter().zip(answers) {
                match answer {
                    Ok(Ok(written)) => {
                        bases.insert(c.campaign.clone(), written.version);
                    }
                    Ok(Err(conflict)) if conflict.stored.is_none() => {
                        bases.remove(&c.campaign);
                        again.push(change(&c.campaign, &c.limits, LimitsBase::Own));
                    }
                    // Another writer's change stands; the status shows it.
                    Ok(Err(_)) => {}
                    // That campaign's record is gone (the status shows it missing); the others
                    // are written.
                    Err(LedgerError::CampaignGone(_)) => {}
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
        }
        if !again.is_empty() {
            let answers = redis
                .change_limits_many(&again, now)
                .await
                .map_err(Unavailable)?;
            let mut bases = lock(&self.bases);
            for (c, answer) in again.iter().zip(answers) {
                match answer {
                    Ok(Ok(written)) => {
                        bases.insert(c.campaign.clone(), written.version);
                    }
                    Ok(Err(_)) => {}
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
        }
        failed.map_or(Ok(()), |e| Err(Unavailable(e)))
    }

    /// One change of a campaign's limits through this instance (the admin API): a
    /// compare-and-set on `change.base`. In memory mode there is no shared ledger to change:
    /// refused as [`LedgerError::Protocol`].
    pub async fn change_limits(
        &self,
        change: &LimitsChange,
    ) -> Result<Result<LimitsWritten, LimitsConflict>, Unavailable> {
        let redis = self.redis().ok_or_else(|| {
            Unavailable(LedgerError::Protocol(
                "the memory ledger has no shared limits to change".to_owned(),
            ))
        })?;
        if redis.ledger_missing() {
            redis.reopen().await.map_err(Unavailable)?;
        }
        redis
            .change_limits(change, Timestamp::now())
            .await
            .map_err(Unavailable)
    }

    /// Reserves `amount` for a bid; answers by `deadline` whatever the store does.
    pub async fn reserve(
        &self,
        id: &str,
        campaign: &str,
        amount: Nanos,
        deadline: Instant,
    ) -> Result<(), ReserveError> {
        let now = Timestamp::now();
        let expires_at = now.saturating_add(self.reservation_ttl);
        match &self.store {
            Store::Memory(book) => Self::book(book)
                .reserve(id, campaign, amount, expires_at, now)
                .map_err(ReserveError::Refused),
            Store::Leased(leased) => leased
                .reserve(id, campaign, amount, expires_at, now)
                .map_err(ReserveError::Refused),
            Store::PerBid(redis) => {
                let timeout = deadline
                    .saturating_duration_since(Instant::now())
                    .min(self.redis_timeout);
                match redis
                    .with_timeout(timeout)
                    .reserve(id, campaign, amount, expires_at, now)
                    .await
                {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(refusal)) => Err(ReserveError::Refused(refusal)),
                    Err(LedgerError::Timeout) => Err(ReserveError::Timeout),
                    Err(e) => Err(ReserveError::Unavailable(e)),
                }
            }
        }
    }

    /// Charges the clearing price of a won impression; a duplicate charges nothing. `campaign`
    /// (from the signed notice) lets lease mode settle a reservation another instance holds.
    pub async fn commit(
        &self,
        id: &str,
        campaign: Option<&str>,
        price: Nanos,
    ) -> Result<CommitOutcome, NoticeError> {
        let now = Timestamp::now();
        match &self.store {
            Store::Memory(book) => Self::book(book)
                .commit(id, price, now)
                .map_err(NoticeError::Settle),
            Store::Leased(leased) => match leased.commit_notice(id, campaign, price, now).await {
                Ok(r) => r.map_err(NoticeError::Settle),
                Err(e) => Err(NoticeError::Unavailable(e)),
            },
            Store::PerBid(redis) => match redis.commit(id, campaign, price, now).await {
                Ok(r) => r.map_err(NoticeError::Settle),
                Err(e) => Err(NoticeError::Unavailable(e)),
            },
        }
    }

    /// Returns a lost bid's reservation to its campaign.
    pub async fn release(
        &self,
        id: &str,
        campaign: Option<&str>,
    ) -> Result<ReleaseOutcome, NoticeError> {
        let now = Timestamp::now();
        match &self.store {
            Store::Memory(book) => Self::book(book)
                .release(id, now)
                .map_err(NoticeError::Settle),
            Store::Leased(leased) => match leased.release_notice(id, campaign, now).await {
                Ok(r) => r.map_err(NoticeError::Settle),
                Err(e) => Err(NoticeError::Unavailable(e)),
            },
            Store::PerBid(redis) => match redis.release(id, campaign, now).await {
                Ok(r) => r.map_err(NoticeError::Settle),
                Err(e) => Err(NoticeError::Unavailable(e)),
            },
        }
    }

    /// Releases reservations whose notice never came. Returns how many expired.
    pub async fn expire(&self) -> Result<usize, Unavailable> {
        let now = Timestamp::now();
        match &self.store {
            Store::Memory(book) => Ok(Self::book(book).expire(now)),
            // The lease task sweeps its local book and the shared one on its own.
            Store::Leased(_) => Ok(0),
            Store::PerBid(redis) => {
                // Batch after batch while the sweep is behind (each batch is one short script),
                // up to a bound per call: a backlog of expiries is cleared, not left to grow.
                let mut total = 0;
                for _ in 0..SWEEP_BATCHES_PER_CALL {
                    let swept = redis.expire(now).await.map_err(Unavailable)?;
                    total += swept.total();
                    if !swept.more {
                        break;
                    }
                }
                Ok(total)
            }
        }
    }

    /// The balances of record: in Redis mode the shared numbers every instance reports.
    pub async fn balances(&self, campaigns: &[String]) -> Result<Vec<Balance>, Unavailable> {
        let now = Timestamp::now();
        match &self.store {
            Store::Memory(book) => {
                let book = Self::book(book);
                Ok(campaigns
                    .iter()
                    .filter_map(|c| book.balance(c, now))
                    .collect())
            }
            Store::PerBid(redis) => redis.balances(campaigns, now).await.map_err(Unavailable),
            Store::Leased(leased) => leased
                .balances_of(campaigns, now)
                .await
                .map_err(Unavailable),
        }
    }

    /// Whether Redis holds no ledger for this instance (it lost its data, or none was created):
    /// nothing is spent until an operator opens one ([`RedisLedger::open_ledger`], through
    /// [`Ledger::redis`]). Always false in memory mode.
    pub fn ledger_missing(&self) -> bool {
        match &self.store {
            Store::Memory(_) => false,
            Store::PerBid(redis) => redis.ledger_missing(),
            Store::Leased(leased) => leased.ledger_missing(),
        }
    }

    /// The Redis handle of a Redis mode (its connections and open ledger are this ledger's);
    /// `None` in memory mode. For the operator's acts on the ledger itself: creating it after a
    /// data loss (only after the evidence was looked at: the bidder's `ledger_open`), reading
    /// the id it has open.
    pub fn redis(&self) -> Option<RedisLedger> {
        match &self.store {
            Store::Memory(_) => None,
            Store::PerBid(redis) => Some(redis.clone()),
            Store::Leased(leased) => Some(leased.redis()),
        }
    }

    /// Lease mode's counters, and whether the lease task's last Redis call succeeded; `None`
    /// in the other modes.
    pub fn lease_status(&self) -> Option<(LeaseStats, bool)> {
        match &self.store {
            Store::Leased(leased) => Some((leased.stats(), leased.redis_healthy())),
            Store::Memory(_) | Store::PerBid(_) => None,
        }
    }

    /// Hands back unused leases (graceful shutdown).
    pub async fn shutdown(&self) {
        if let Store::Leased(leased) = &self.store
            && let Err(e) = leased.shutdown().await
        {
            tracing::warn!(error = %e, "leases not handed back; they return to the budget when they expire");
        }
    }
}
