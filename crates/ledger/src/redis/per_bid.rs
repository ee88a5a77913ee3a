//! [`RedisLedger`]: the shared ledger, one atomic Lua script per operation.

use std::sync::Arc;
use std::time::Duration;

use units::{Limits, Nanos, Timestamp};

use crate::book::{Balance, CommitOutcome, DailyBalance, Refusal, ReleaseOutcome, SettleError};

use super::client::{Client, Script, classify_error};
use super::resp::Value;
use super::{LeaseError, LedgerError, MAX_AMOUNT, RedisTls, scripts};

/// Where and how to reach Redis, and the ledger's own knobs. Every field has a default.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `host:port` of the Redis primary.
    pub addr: String,
    /// Prepended to every key. For Redis Cluster, put a hash tag in it (e.g. `{gavel}:`): the
    /// scripts touch several keys, which must then share one slot.
    pub prefix: String,
    /// Deadline of each call, end to end (waiting for a connection, dialling, the round trip).
    /// [`RedisLedger::with_timeout`] gives a handle with another one.
    pub timeout: Duration,
    /// Open connections at most; calls beyond wait (within their deadline).
    pub max_connections: usize,
    /// How long resolved reservations and leases are remembered (Redis `PEXPIRE`, on the Redis
    /// server's clock), so that duplicate notices and late lease reports are recognized. Memory
    /// is one small hash per id resolved within the TTL.
    pub tombstone_ttl: Duration,
    /// Most expired reservations and leases released by one [`RedisLedger::expire`] call, which
    /// bounds how long one script holds Redis.
    pub sweep_batch: usize,
    /// `AUTH` user (Redis 6 ACL); `None` with a password uses the default user.
    pub username: Option<String>,
    /// `AUTH` password, if Redis requires one.
    pub password: Option<String>,
    /// Logical database (`SELECT`).
    pub db: u32,
    /// TLS (`rediss://`); `None` for plain TCP.
    pub tls: Option<RedisTls>,
}

impl Default for RedisConfig {
    fn default() -> RedisConfig {
        RedisConfig {
            addr: "127.0.0.1:6379".to_owned(),
            prefix: "gavel:".to_owned(),
            timeout: Duration::from_millis(100),
            max_connections: 16,
            tombstone_ttl: Duration::from_secs(15 * 60),
            sweep_batch: 1000,
            username: None,
            password: None,
            db: 0,
            tls: None,
        }
    }
}

/// What one [`RedisLedger::expire`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Reservations released because their expiry passed.
    pub reservations: usize,
    /// Leases reclaimed because their expiry passed.
    pub leases: usize,
    /// The batch was full: call again to continue.
    pub more: bool,
}

impl Swept {
    pub const fn total(&self) -> usize {
        self.reservations + self.leases
    }
}

/// The state of a lease in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Its unreported amount is reserved for its holder.
    Open,
    /// Closed by its holder; its remainder went back to the campaign.
    Closed,
    /// Expired before its holder extended it; the sweep returned its remainder.
    Reclaimed,
}

/// The answer to [`RedisLedger::take_lease`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseGrant {
    /// Added to the lease by this call: `min(want, total available, today's available)`, maybe 0.
    pub granted: Nanos,
    /// The lease's amount after this call (everything ever granted to it).
    pub amount: Nanos,
    /// The lease's expiry after this call (it only moves forward).
    pub expires_at: Timestamp,
}

/// The answer to [`RedisLedger::report_lease`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseReport {
    /// Newly charged by this call (moved from reserved to spent, or for a lease no longer open,
    /// taken from what the campaign still had available).
    pub charged: Nanos,
    /// Newly reported spend that could not be charged (beyond the lease, or beyond what the
    /// campaign had left after the lease was reclaimed). Count it as a metric: it was spent but
    /// is not in the books.
    pub uncharged: Nanos,
    pub state: LeaseState,
    pub amount: Nanos,
    /// Charged so far against this lease, in total.
    pub reported: Nanos,
    pub expires_at: Timestamp,
}

/// The answer to [`RedisLedger::close_lease`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseClose {
    pub charged: Nanos,
    pub uncharged: Nanos,
    /// Returned to the campaign by this call (zero if the lease was already closed or reclaimed).
    pub released: Nanos,
    pub amount: Nanos,
    pub reported: Nanos,
}

/// The shared budget ledger on Redis: the same operations and answers as [`crate::Book`], each
/// one atomic Lua script, plus leases. Cheap to clone (one connection pool behind an `Arc`).
/// Every call is bounded by the configured timeout and never panics; the outer `Result` is the
/// transport, the inner one the ledger's answer.
#[derive(Clone, Debug)]
pub struct RedisLedger {
    shared: Arc<Shared>,
    timeout: Duration,
}

#[derive(Debug)]
struct Shared {
    client: Client,
    prefix: String,
    tombstone_ms: String,
    sweep_batch: String,
    /// The ledger id this handle opened ([`RedisLedger::open_ledger`]); empty: unchecked;
    /// [`NOT_OPEN`]: expected ([`RedisLedger::expect_ledger`]) but not opened yet.
    ledger_id: std::sync::RwLock<Arc<str>>,
    /// A script answered that Redis no longer holds that ledger (cleared when one is opened).
    lost: std::sync::atomic::AtomicBool,
    /// Whether opening may create a missing ledger (`None`: never opened, unchecked).
    create: std::sync::Mutex<Option<bool>>,
}

/// Sent as the ledger id before the ledger was opened: never a real id, so every write that
/// checks it is refused.
const NOT_OPEN: &str = "!not-open";

/// Most `SCAN` round trips [`RedisLedger::keys_under_prefix`] makes (1,000 keys looked at
/// each): past that, the scan says it is incomplete.
pub const EVIDENCE_SCAN_ROUNDS: usize = 1_000;

/// What [`RedisLedger::keys_under_prefix`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyScan {
    /// Keys under the prefix.
    pub keys: u64,
    /// Up to five of them, to show an operator.
    pub sample: Vec<String>,
    /// The scan stopped at its bound: there may be more.
    pub incomplete: bool,
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

type Reply<T, E> = Result<Result<T, E>, LedgerError>;

/// Most script calls sent in one pipelined round trip by [`RedisLedger::set_limits_many`] and
/// by lease mode's background task. Each lease script takes Redis some tens of microseconds, so
/// a full pipeline is a few milliseconds of Redis time: well within a tight per-call timeout,
/// and short enough not to hold other clients back for long (Redis interleaves other clients'
/// commands between the scripts of a pipeline anyway).
pub const PIPELINE_MAX: usize = 100;

/// Campaigns read per script call by [`RedisLedger::balances`]. Reading a campaign costs the
/// script a few microseconds (measured: about 8 ms per 1,000 on a small shared machine, where
/// the bare `HMGET`s alone are half of it), so a chunk stays well under a tight per-call
/// timeout (the bidder's default is 20 ms) and never holds Redis for long.
pub const BALANCES_CHUNK: usize = 500;

/// One script call, for [`RedisLedger::pipeline`].
/// What a take of a lease may do to the lease of that id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Create it, or grow it if it exists ([`RedisLedger::take_lease`]).
    CreateOrGrow,
    /// Grow it only: answer [`LeaseError::UnknownLease`] rather than create it. The caller
    /// holds it, so a Redis that does not know it lost it, and must not re-create it under the
    /// old id with the amount the caller believes in.
    GrowOnly,
    /// Create it only: if it exists, answer it as it stands. A creation whose answer was lost
    /// (a timeout) is sent again under the same id; had it been applied, growing the lease a
    /// second time would park a second chunk on this instance.
    CreateOnce,
}

#[derive(Clone, Debug)]
pub(crate) enum Call {
    SetLimits {
        campaign: String,
        limits: Limits,
    },
    TakeLease {
        id: String,
        campaign: String,
        want: Nanos,
        expires_at: Timestamp,
        /// Whether the lease may be created, grown, or both.
        take: Take,
        /// The holder's node: a lease it creates becomes the node's lease of the campaign,
        /// which other instances charge when they settle its reservations (empty: none).
        node: String,
    },
    ReportLease {
        id: String,
        cumulative: Nanos,
        expires_at: Timestamp,
    },
    CloseLease {
        id: String,
        cumulative: Nanos,
    },
    Expire,
    /// Claims a reservation's outcome (lease mode), as [`RedisLedger::settle`].
    Settle(SettleRequest),
    /// Takes up to [`DRAIN_MAX`] settlements other instances made for `node`'s reservations.
    Drain {
        node: String,
    },
}

/// Most settlements one [`Call::Drain`] takes from an inbox.
pub(crate) const DRAIN_MAX: usize = 1_000;

/// A notice to settle in lease mode, whichever instance received it.
#[derive(Clone, Debug)]
pub(crate) struct SettleRequest {
    pub(crate) id: String,
    /// Charge `price` (a win or billing notice), or release (a loss).
    pub(crate) charge: bool,
    pub(crate) price: Nanos,
    pub(crate) campaign: String,
    /// The node that made the reservation (and holds it in its local book).
    pub(crate) owner: String,
    /// The caller is that node and still knows the reservation: it only claims the outcome.
    pub(crate) here: bool,
}

/// What [`RedisLedger::settle`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// Claimed for the caller, who holds the reservation: settle it in the local book.
    Local,
    /// A charge claimed for the holder after a loss was claimed first: charge it in the local
    /// book (whose release may not have arrived yet), as a charge after the release.
    LocalAfterRelease,
    /// Charged against the holder's lease.
    Charged(Nanos),
    /// Charged from the campaign directly: the holder's lease is gone, or a loss came first.
    ChargedAfterRelease(Nanos),
    AlreadyCommitted(Nanos),
    /// Released for the holder (told through its inbox).
    Released,
    AlreadyReleased,
}

/// The answer to one [`Call`], of the matching kind.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    LimitsSet,
    Grant(Result<LeaseGrant, LeaseError>),
    Report(Result<LeaseReport, LeaseError>),
    Close(Result<LeaseClose, LeaseError>),
    Swept(Swept),
    Settled(Result<Settlement, SettleError>),
    Drained(Vec<String>),
}

enum Prepared {
    Send(&'static Script, Vec<String>),
    Answered(Result<Answer, LedgerError>),
}

/// Reads a script's reply as the answer to `call`.
fn decode(call: &Call, reply: Value) -> Result<Answer, LedgerError> {
    let items = array(reply)?;
    Ok(match call {
        Call::SetLimits { .. } => match status(&items)? {
            "ok" => Answer::LimitsSet,
            "NoLedger" => return Err(LedgerError::NoLedger),
            other => return Err(unexpected("set_limits", other)),
        },
        Call::TakeLease { .. } => Answer::Grant(match status(&items)? {
            "NoLedger" => return Err(LedgerError::NoLedger),
            "ok" => Ok(LeaseGrant {
                granted: nanos_at(&items, 1)?,
                amount: nanos_at(&items, 2)?,
                expires_at: time_at(&items, 3)?,
            }),
            other => Err(lease_error("take_lease", other)?),
        }),
        Call::ReportLease { .. } => Answer::Report(match status(&items)? {
            "ok" => Ok(LeaseReport {
                charged: nanos_at(&items, 1)?,
                uncharged: nanos_at(&items, 2)?,
                state: lease_state(items.get(3))?,
                amount: nanos_at(&items, 4)?,
                reported: nanos_at(&items, 5)?,
                expires_at: time_at(&items, 6)?,
            }),
            other => Err(lease_error("report_lease", other)?),
        }),
        Call::CloseLease { .. } => Answer::Close(match status(&items)? {
            "ok" => Ok(LeaseClose {
                charged: nanos_at(&items, 1)?,
                uncharged: nanos_at(&items, 2)?,
                released: nanos_at(&items, 3)?,
                amount: nanos_at(&items, 4)?,
                reported: nanos_at(&items, 5)?,
            }),
            other => Err(lease_error("close_lease", other)?),
        }),
        Call::Expire => Answer::Swept(Swept {
            reservations: count_at(&items, 0)?,
            leases: count_at(&items, 1)?,
            more: int_at(&items, 2)? != 0,
        }),
        Call::Settle(_) => Answer::Settled(match status(&items)? {
            "Local" => Ok(Settlement::Local),
            "LocalAfterRelease" => Ok(Settlement::LocalAfterRelease),
            "Charged" => Ok(Settlement::Charged(nanos_at(&items, 1)?)),
            "ChargedAfterRelease" => Ok(Settlement::ChargedAfterRelease(nanos_at(&items, 1)?)),
            "AlreadyCommitted" => Ok(Settlement::AlreadyCommitted(nanos_at(&items, 1)?)),
            "Released" => Ok(Settlement::Released),
            "AlreadyReleased" => Ok(Settlement::AlreadyReleased),
            "NegativePrice" => Err(SettleError::NegativePrice),
            "UnknownReservation" => Err(SettleError::UnknownReservation),
            other => return Err(unexpected("settle", other)),
        }),
        Call::Drain { .. } => Answer::Drained(
            items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| protocol("inbox item is not text"))
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

fn mismatch(op: &str, answer: &Answer) -> LedgerError {
    LedgerError::Protocol(format!("{op}: answered as another call: {answer:?}"))
}

impl RedisLedger {
    /// A ledger handle. Does no I/O: connections are opened on first use and re-opened after
    /// any failure, so the handle can be created while Redis is down.
    pub fn new(config: RedisConfig) -> RedisLedger {
        let auth = config.password.map(|p| (config.username, p));
        let client = Client::new(
            config.addr,
            auth,
            config.db,
            config.max_connections,
            config.tls,
        );
        let tombstone_ms = u64::try_from(config.tombstone_ttl.as_millis()).unwrap_or(u64::MAX);
        RedisLedger {
            shared: Arc::new(Shared {
                client,
                prefix: config.prefix,
                tombstone_ms: tombstone_ms.min(MAX_AMOUNT as u64).to_string(),
                sweep_batch: config.sweep_batch.max(1).to_string(),
                ledger_id: std::sync::RwLock::new(Arc::from("")),
                lost: std::sync::atomic::AtomicBool::new(false),
                create: std::sync::Mutex::new(None),
            }),
            timeout: config.timeout,
        }
    }

    /// Opens the ledger: reads its marker, or creates it when `create` and it is missing.
    /// Answers its id (`None`: missing, not created). From then on this handle's limit writes
    /// and lease grants are refused ([`LedgerError::NoLedger`]) if Redis no longer holds that
    /// id: it lost its data, and re-creating campaigns would reopen their budgets.
    pub async fn open_ledger(&self, create: bool) -> Result<Option<String>, LedgerError> {
        let fresh = fresh_id();
        let create = if create { "1" } else { "0" };
        let reply = self
            .eval(
                &scripts::OPEN_LEDGER,
                &[create.as_bytes(), fresh.as_bytes()],
            )
            .await?;
        let items = array(reply)?;
        let id = match status(&items)? {
            "ok" | "created" => items
                .get(1)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| protocol("open_ledger: no id"))?,
            "missing" => return Ok(None),
            other => return Err(unexpected("open_ledger", other)),
        };
        *self
            .shared
            .ledger_id
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::from(id.as_str());
        self.shared
            .lost
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(id))
    }

    /// Makes this handle check the ledger's marker: until [`RedisLedger::open_ledger`] (or
    /// [`RedisLedger::reopen`]) succeeds, limit writes and lease grants are refused. `create`:
    /// whether reopening may create a missing ledger (a first start).
    pub fn expect_ledger(&self, create: bool) {
        *self
            .shared
            .create
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(create);
        let mut id = self
            .shared
            .ledger_id
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if id.is_empty() {
            *id = Arc::from(NOT_OPEN);
        }
    }

    /// Whether [`RedisLedger::expect_ledger`] was called and no ledger is open yet.
    pub fn needs_open(&self) -> bool {
        &**self
            .shared
            .ledger_id
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            == NOT_OPEN
    }

    /// Whether this handle has no ledger to write to: never opened, or a script found that
    /// Redis no longer holds it (it lost its data). Cleared when one is opened.
    pub fn ledger_missing(&self) -> bool {
        self.needs_open() || self.shared.lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes a reply that says Redis no longer holds the ledger.
    fn note<T>(&self, r: Result<T, LedgerError>) -> Result<T, LedgerError> {
        if matches!(r, Err(LedgerError::NoLedger)) {
            self.shared
                .lost
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    /// Opens the ledger as [`RedisLedger::expect_ledger`] said; true when one is open now (its
    /// id may be a new one an operator created). Only a handle that never opened a ledger may
    /// create one (if allowed): once a ledger was open, its loss waits for an operator.
    pub async fn reopen(&self) -> Result<bool, LedgerError> {
        let allowed = self
            .shared
            .create
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or(false);
        let create = allowed && self.needs_open();
        Ok(self.open_ledger(create).await?.is_some())
    }

    /// The id of the ledger this handle has open: `None` before one is opened, and once a
    /// script has found that Redis no longer holds it.
    pub fn open_ledger_id(&self) -> Option<String> {
        let id = self.ledger_id();
        let open = !id.is_empty()
            && &*id != NOT_OPEN
            && !self.shared.lost.load(std::sync::atomic::Ordering::Relaxed);
        open.then(|| id.to_string())
    }

    /// What Redis holds under this ledger's prefix, looked through with `SCAN` (at most
    /// [`EVIDENCE_SCAN_ROUNDS`] round trips, each bounded by the timeout): evidence that a
    /// ledger lived there, for deciding whether a missing one may be created. Not for the
    /// request path.
    pub async fn keys_under_prefix(&self) -> Result<KeyScan, LedgerError> {
        let pattern = format!("{}*", glob_escape(&self.shared.prefix));
        let mut scan = KeyScan::default();
        let mut cursor = b"0".to_vec();
        for _ in 0..EVIDENCE_SCAN_ROUNDS {
            let reply = self
                .shared
                .client
                .call(
                    &[
                        b"SCAN",
                        &cursor,
                        b"MATCH",
                        pattern.as_bytes(),
                        b"COUNT",
                        b"1000",
                    ],
                    self.timeout,
                )
                .await?;
            let items = match reply {
                Value::Error(msg) => return Err(classify_error(msg)),
                other => array(other)?,
            };
            let (Some(next), Some(Value::Array(keys))) = (items.first(), items.get(1)) else {
                return Err(protocol("SCAN: not [cursor, keys]"));
            };
            for key in keys {
                scan.keys += 1;
                if scan.sample.len() < 5
                    && let Some(k) = key.as_str()
                {
                    scan.sample.push(k.to_owned());
                }
            }
            cursor = match next.as_str() {
                Some("0") => return Ok(scan),
                Some(c) => c.as_bytes().to_vec(),
                None => return Err(protocol("SCAN: cursor is not text")),
            };
        }
        scan.incomplete = true;
        Ok(scan)
    }

    fn ledger_id(&self) -> Arc<str> {
        Arc::clone(
            &self
                .shared
                .ledger_id
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The same ledger (same connections) with another per-call deadline.
    pub fn with_timeout(&self, timeout: Duration) -> RedisLedger {
        RedisLedger {
            shared: Arc::clone(&self.shared),
            timeout,
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `PING`: is Redis reachable now?
    pub async fn ping(&self) -> Result<(), LedgerError> {
        match self.shared.client.call(&[b"PING"], self.timeout).await? {
            Value::Error(msg) => Err(classify_error(msg)),
            _ => Ok(()),
        }
    }

    /// Creates a campaign or replaces its limits, as [`crate::Book::set_limits`]: the budget in
    /// force never drops below what is spent+reserved. Refused with
    /// [`LedgerError::OutOfRange`] beyond [`MAX_AMOUNT`].
    pub async fn set_limits(
        &self,
        campaign: &str,
        limits: Limits,
        now: Timestamp,
    ) -> Result<(), LedgerError> {
        let call = Call::SetLimits {
            campaign: campaign.to_owned(),
            limits,
        };
        match self.one(&call, now).await? {
            Answer::LimitsSet => Ok(()),
            other => Err(mismatch("set_limits", &other)),
        }
    }

    /// [`RedisLedger::set_limits`] for many campaigns, pipelined: [`PIPELINE_MAX`] scripts per
    /// round trip, each round trip bounded by the timeout. Answers per campaign, in order
    /// (e.g. [`LedgerError::OutOfRange`] for one does not stop the others). The outer error is
    /// the transport, which stops at the first failure: some limits may have been written;
    /// writing them again is harmless.
    pub async fn set_limits_many(
        &self,
        campaigns: &[(String, Limits)],
        now: Timestamp,
    ) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
        let mut out = Vec::with_capacity(campaigns.len());
        for chunk in campaigns.chunks(PIPELINE_MAX) {
            let calls: Vec<Call> = chunk
                .iter()
                .map(|(campaign, limits)| Call::SetLimits {
                    campaign: campaign.clone(),
                    limits: *limits,
                })
                .collect();
            for answer in self.pipeline(&calls, now).await? {
                out.push(answer.and_then(|a| match a {
                    Answer::LimitsSet => Ok(()),
                    other => Err(mismatch("set_limits", &other)),
                }));
            }
        }
        Ok(out)
    }

    /// Reserves `amount` of `campaign`'s budget (and its day's) under `id` until `expires_at`,
    /// as [`crate::Book::reserve`].
    pub async fn reserve(
        &self,
        id: &str,
        campaign: &str,
        amount: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Reply<(), Refusal> {
        if !amount.is_positive() {
            return Ok(Err(Refusal::NonPositiveAmount));
        }
        // Above the exact range, any amount is beyond every budget: send the first inexact
        // integer's neighbour 2^53, which Lua holds exactly and refuses.
        let amount = amount.get().min(MAX_AMOUNT + 1).to_string();
        let (expires_at, day) = (ms(expires_at), now.day().to_string());
        let ledger = self.ledger_id();
        let reply = self
            .eval(
                &scripts::RESERVE,
                &[
                    id.as_bytes(),
                    campaign.as_bytes(),
                    amount.as_bytes(),
                    expires_at.as_bytes(),
                    day.as_bytes(),
                    ledger.as_bytes(),
                ],
            )
            .await?;
        let items = array(reply)?;
        Ok(match status(&items)? {
            "ok" => Ok(()),
            "NoLedger" => return self.note(Err(LedgerError::NoLedger)),
            "NonPositiveAmount" => Err(Refusal::NonPositiveAmount),
            "DuplicateId" => Err(Refusal::DuplicateId),
            "UnknownCampaign" => Err(Refusal::UnknownCampaign),
            "InsufficientBudget" => Err(Refusal::InsufficientBudget),
            "InsufficientDailyBudget" => Err(Refusal::InsufficientDailyBudget),
            other => return Err(unexpected("reserve", other)),
        })
    }

    /// Charges `price` for reservation `id`, as [`crate::Book::commit`].
    pub async fn commit(
        &self,
        id: &str,
        price: Nanos,
        now: Timestamp,
    ) -> Reply<CommitOutcome, SettleError> {
        if price.get() < 0 {
            return Ok(Err(SettleError::NegativePrice));
        }
        let sent = price.get().min(MAX_AMOUNT + 1).to_string();
        let (now_ms, day) = (ms(now), now.day().to_string());
        let ttl = self.shared.tombstone_ms.clone();
        let reply = self
            .eval(
                &scripts::COMMIT,
                &[
                    id.as_bytes(),
                    sent.as_bytes(),
                    now_ms.as_bytes(),
                    day.as_bytes(),
                    ttl.as_bytes(),
                ],
            )
            .await?;
        let items = array(reply)?;
        Ok(match status(&items)? {
            "Charged" => Ok(CommitOutcome::Charged(nanos_at(&items, 1)?)),
            "ChargedAfterRelease" => Ok(CommitOutcome::ChargedAfterRelease(nanos_at(&items, 1)?)),
            "AlreadyCommitted" => Ok(CommitOutcome::AlreadyCommitted(nanos_at(&items, 1)?)),
            "UnknownReservation" => Err(SettleError::UnknownReservation),
            "NegativePrice" => Err(SettleError::NegativePrice),
            // The price as the caller gave it, not as clamped for Lua.
            "AboveReservation" => Err(SettleError::AboveReservation {
                reserved: nanos_at(&items, 1)?,
                price,
            }),
            other => return Err(unexpected("commit", other)),
        })
    }

    /// Returns reservation `id`'s amount to its campaign, as [`crate::Book::release`].
    pub async fn release(&self, id: &str, now: Timestamp) -> Reply<ReleaseOutcome, SettleError> {
        let day = now.day().to_string();
        let ttl = self.shared.tombstone_ms.clone();
        let reply = self
            .eval(
                &scripts::RELEASE,
                &[id.as_bytes(), day.as_bytes(), ttl.as_bytes()],
            )
            .await?;
        let items = array(reply)?;
        Ok(match status(&items)? {
            "Released" => Ok(ReleaseOutcome::Released(nanos_at(&items, 1)?)),
            "AlreadyReleased" => Ok(ReleaseOutcome::AlreadyReleased),
            "AlreadyCommitted" => Ok(ReleaseOutcome::AlreadyCommitted),
            "UnknownReservation" => Err(SettleError::UnknownReservation),
            other => return Err(unexpected("release", other)),
        })
    }

    /// Releases open reservations and reclaims open leases whose expiry is at or before `now`,
    /// at most `sweep_batch` of them (call again while [`Swept::more`]). Tombstones are
    /// forgotten by Redis itself (`PEXPIRE`).
    pub async fn expire(&self, now: Timestamp) -> Result<Swept, LedgerError> {
        match self.one(&Call::Expire, now).await? {
            Answer::Swept(swept) => Ok(swept),
            other => Err(mismatch("expire", &other)),
        }
    }

    /// One campaign's balance as of `now`, as [`crate::Book::balance`].
    pub async fn balance(
        &self,
        campaign: &str,
        now: Timestamp,
    ) -> Result<Option<Balance>, LedgerError> {
        let mut all = self.balances(&[campaign], now).await?;
        Ok(all.pop())
    }

    /// The balances of `campaigns` as of `now`, in their order; unknown campaigns are left out.
    /// Read [`BALANCES_CHUNK`] campaigns per script call, one call per round trip, each bounded
    /// by the timeout: each chunk is a consistent snapshot, and no single script holds Redis for
    /// long however many campaigns are asked for (100,000 campaigns are 200 short calls; their
    /// total cost in Redis still grows with the number asked for).
    pub async fn balances<S: AsRef<str>>(
        &self,
        campaigns: &[S],
        now: Timestamp,
    ) -> Result<Vec<Balance>, LedgerError> {
        let day = now.day().to_string();
        let mut out = Vec::with_capacity(campaigns.len());
        for chunk in campaigns.chunks(BALANCES_CHUNK) {
            let mut argv: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 1);
            argv.push(day.as_bytes());
            argv.extend(chunk.iter().map(|c| c.as_ref().as_bytes()));
            let reply = self.eval(&scripts::BALANCES, &argv).await?;
            for item in array(reply)? {
                out.push(balance_of(item)?);
            }
        }
        Ok(out)
    }

    /// Every campaign that has limits in Redis, in no particular order.
    pub async fn campaigns(&self) -> Result<Vec<String>, LedgerError> {
        let key = format!("{}campaigns", self.shared.prefix);
        let reply = self
            .shared
            .client
            .call(&[b"SMEMBERS", key.as_bytes()], self.timeout)
            .await?;
        let reply = match reply {
            Value::Error(msg) => return Err(classify_error(msg)),
            other => other,
        };
        array(reply)?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| protocol("campaign name is not text"))
            })
            .collect()
    }

    /// Audits Redis as [`crate::Book::check_invariants`] audits the book: each campaign's
    /// reserved (total and today's) is the sum of its open reservations and leases, and no
    /// counter is negative. O(campaigns + open items): for tests and operators.
    pub async fn check_invariants(&self) -> Result<Result<(), String>, LedgerError> {
        let reply = self.eval(&scripts::CHECK, &[]).await?;
        let problems: Vec<String> = array(reply)?
            .iter()
            .map(|v| v.as_str().unwrap_or("(not text)").to_owned())
            .collect();
        Ok(if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        })
    }

    /// Grants up to `want` of `campaign`'s budget to lease `lease_id` (creating it, or growing it
    /// if open): `min(want, total available, today's available)`, possibly zero, counted as
    /// reserved until reported as spent or returned. The expiry becomes the later of the
    /// lease's and `expires_at`.
    pub async fn take_lease(
        &self,
        lease_id: &str,
        campaign: &str,
        want: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Reply<LeaseGrant, LeaseError> {
        let call = Call::TakeLease {
            id: lease_id.to_owned(),
            campaign: campaign.to_owned(),
            want,
            expires_at,
            take: Take::CreateOrGrow,
            node: String::new(),
        };
        match self.one(&call, now).await? {
            Answer::Grant(g) => Ok(g),
            other => Err(mismatch("take_lease", &other)),
        }
    }

    /// Reports the lease holder's cumulative spend: charges what is new since the highest
    /// earlier report (so repeats and reordering change nothing), capped at the lease amount;
    /// extends an open lease's expiry to `new_expires_at` (never shortens it). After the lease
    /// was reclaimed or closed, charges at most what the campaign still has available and says
    /// how much it could not charge.
    pub async fn report_lease(
        &self,
        lease_id: &str,
        cumulative_spent: Nanos,
        new_expires_at: Timestamp,
        now: Timestamp,
    ) -> Reply<LeaseReport, LeaseError> {
        let call = Call::ReportLease {
            id: lease_id.to_owned(),
            cumulative: cumulative_spent,
            expires_at: new_expires_at,
        };
        match self.one(&call, now).await? {
            Answer::Report(r) => Ok(r),
            other => Err(mismatch("report_lease", &other)),
        }
    }

    /// Reports the final cumulative spend (as [`RedisLedger::report_lease`]) and returns the
    /// lease's unreported remainder to the campaign. Closing again only reports.
    pub async fn close_lease(
        &self,
        lease_id: &str,
        cumulative_spent: Nanos,
        now: Timestamp,
    ) -> Reply<LeaseClose, LeaseError> {
        let call = Call::CloseLease {
            id: lease_id.to_owned(),
            cumulative: cumulative_spent,
        };
        match self.one(&call, now).await? {
            Answer::Close(c) => Ok(c),
            other => Err(mismatch("close_lease", &other)),
        }
    }

    /// Settles a notice in lease mode, whichever instance received it (see `lua/settle.lua`):
    /// claims the reservation's outcome so that it happens once across instances and replays,
    /// and, when the caller does not hold the reservation, charges the holder's lease (or the
    /// campaign) and tells the holder through its inbox.
    pub(crate) async fn settle(
        &self,
        request: SettleRequest,
        now: Timestamp,
    ) -> Reply<Settlement, SettleError> {
        match self.one(&Call::Settle(request), now).await? {
            Answer::Settled(s) => Ok(s),
            other => Err(mismatch("settle", &other)),
        }
    }

    /// Runs several calls in one round trip (a pipeline; Redis runs them in order, each
    /// atomically), bounded by the timeout as a whole. The caller keeps batches to about
    /// [`PIPELINE_MAX`](crate::PIPELINE_MAX). Answers are per call, in order; the outer error is the transport (any
    /// call may or may not have run: every one of them is safe to repeat).
    pub(crate) async fn pipeline(
        &self,
        calls: &[Call],
        now: Timestamp,
    ) -> Result<Vec<Result<Answer, LedgerError>>, LedgerError> {
        let mut answers: Vec<Option<Result<Answer, LedgerError>>> = Vec::with_capacity(calls.len());
        let mut sent: Vec<(usize, &'static Script, Vec<String>)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            match self.prepare(call, now) {
                Prepared::Send(script, args) => {
                    sent.push((i, script, args));
                    answers.push(None);
                }
                Prepared::Answered(answer) => answers.push(Some(answer)),
            }
        }
        let prefix = self.shared.prefix.as_bytes();
        let batch: Vec<(&Script, Vec<&[u8]>)> = sent
            .iter()
            .map(|(_, script, args)| {
                let mut argv: Vec<&[u8]> = Vec::with_capacity(args.len() + 1);
                argv.push(prefix);
                argv.extend(args.iter().map(String::as_bytes));
                (*script, argv)
            })
            .collect();
        let replies = self
            .shared
            .client
            .eval_pipeline(&batch, self.timeout)
            .await?;
        for ((i, _, _), reply) in sent.iter().zip(replies) {
            if let (Some(slot), Some(call)) = (answers.get_mut(*i), calls.get(*i)) {
                *slot = Some(self.note(reply.and_then(|v| decode(call, v))));
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(protocol("pipeline: a call got no reply"))))
            .collect())
    }

    /// One call, one round trip.
    async fn one(&self, call: &Call, now: Timestamp) -> Result<Answer, LedgerError> {
        match self.prepare(call, now) {
            Prepared::Answered(answer) => answer,
            Prepared::Send(script, args) => {
                let argv: Vec<&[u8]> = args.iter().map(String::as_bytes).collect();
                let reply = self.eval(script, &argv).await?;
                self.note(decode(call, reply))
            }
        }
    }

    /// A call's script and arguments (after the prefix), or its answer when it needs no Redis.
    fn prepare(&self, call: &Call, now: Timestamp) -> Prepared {
        let day = now.day().to_string();
        match call {
            Call::SetLimits { campaign, limits } => {
                let total = match exact(limits.total, "total budget") {
                    Ok(t) => t,
                    Err(e) => return Prepared::Answered(Err(e)),
                };
                let daily = match limits.daily.map(|d| exact(d, "daily budget")) {
                    None => String::new(),
                    Some(Ok(d)) => d,
                    Some(Err(e)) => return Prepared::Answered(Err(e)),
                };
                Prepared::Send(
                    &scripts::SET_LIMITS,
                    vec![
                        campaign.clone(),
                        total,
                        daily,
                        day,
                        self.ledger_id().to_string(),
                    ],
                )
            }
            Call::TakeLease {
                id,
                campaign,
                want,
                expires_at,
                take,
                node,
            } => {
                if !want.is_positive() {
                    return Prepared::Answered(Ok(Answer::Grant(Err(
                        LeaseError::NonPositiveAmount,
                    ))));
                }
                let want = want.get().min(MAX_AMOUNT).to_string();
                let take = match take {
                    Take::CreateOrGrow => "0",
                    Take::GrowOnly => "1",
                    Take::CreateOnce => "2",
                };
                Prepared::Send(
                    &scripts::TAKE_LEASE,
                    vec![
                        id.clone(),
                        campaign.clone(),
                        want,
                        ms(*expires_at),
                        day,
                        take.to_owned(),
                        node.clone(),
                        self.ledger_id().to_string(),
                    ],
                )
            }
            Call::ReportLease {
                id,
                cumulative,
                expires_at,
            } => {
                if cumulative.get() < 0 {
                    return Prepared::Answered(Ok(Answer::Report(Err(LeaseError::NegativeSpend))));
                }
                let cum = cumulative.get().min(MAX_AMOUNT).to_string();
                Prepared::Send(
                    &scripts::REPORT_LEASE,
                    vec![id.clone(), cum, ms(*expires_at), day],
                )
            }
            Call::CloseLease { id, cumulative } => {
                if cumulative.get() < 0 {
                    return Prepared::Answered(Ok(Answer::Close(Err(LeaseError::NegativeSpend))));
                }
                let cum = cumulative.get().min(MAX_AMOUNT).to_string();
                let ttl = self.shared.tombstone_ms.clone();
                Prepared::Send(&scripts::CLOSE_LEASE, vec![id.clone(), cum, day, ttl])
            }
            Call::Expire => Prepared::Send(
                &scripts::EXPIRE,
                vec![
                    ms(now),
                    day,
                    self.shared.tombstone_ms.clone(),
                    self.shared.sweep_batch.clone(),
                ],
            ),
            Call::Settle(r) => {
                if r.price.get() < 0 {
                    return Prepared::Answered(Ok(Answer::Settled(Err(
                        SettleError::NegativePrice,
                    ))));
                }
                let (kind, price) = if r.charge {
                    ("charge", r.price.get().min(MAX_AMOUNT).to_string())
                } else {
                    ("release", "0".to_owned())
                };
                Prepared::Send(
                    &scripts::SETTLE,
                    vec![
                        r.id.clone(),
                        kind.to_owned(),
                        price,
                        r.campaign.clone(),
                        r.owner.clone(),
                        if r.here { "1" } else { "0" }.to_owned(),
                        day,
                        self.shared.tombstone_ms.clone(),
                    ],
                )
            }
            Call::Drain { node } => {
                Prepared::Send(&scripts::DRAIN, vec![node.clone(), DRAIN_MAX.to_string()])
            }
        }
    }

    /// Runs a script with the key prefix as `ARGV[1]`.
    async fn eval(&self, script: &Script, argv: &[&[u8]]) -> Result<Value, LedgerError> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(argv.len() + 1);
        args.push(self.shared.prefix.as_bytes());
        args.extend_from_slice(argv);
        self.shared.client.eval(script, &args, self.timeout).await
    }
}

/// An amount as the decimal integer the scripts read, refused beyond the exact range.
fn exact(n: Nanos, what: &'static str) -> Result<String, LedgerError> {
    if n.get().unsigned_abs() > MAX_AMOUNT.unsigned_abs() {
        return Err(LedgerError::OutOfRange(what));
    }
    Ok(n.get().to_string())
}

/// A timestamp as the scripts read it; beyond 2^53 ms (year 287,000) it saturates.
fn ms(t: Timestamp) -> String {
    t.millis().min(MAX_AMOUNT as u64).to_string()
}

fn protocol(what: &str) -> LedgerError {
    LedgerError::Protocol(what.to_owned())
}

fn unexpected(op: &str, status: &str) -> LedgerError {
    LedgerError::Protocol(format!("{op}: unexpected answer {status:?}"))
}

fn array(v: Value) -> Result<Vec<Value>, LedgerError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(LedgerError::Protocol(format!(
            "expected an array, got {other:?}"
        ))),
    }
}

fn status(items: &[Value]) -> Result<&str, LedgerError> {
    items
        .first()
        .and_then(Value::as_str)
        .ok_or_else(|| protocol("answer without a status"))
}

fn int_at(items: &[Value], i: usize) -> Result<i64, LedgerError> {
    items
        .get(i)
        .and_then(Value::as_i64)
        .ok_or_else(|| LedgerError::Protocol(format!("answer field {i} is not an integer")))
}

fn nanos_at(items: &[Value], i: usize) -> Result<Nanos, LedgerError> {
    int_at(items, i).map(Nanos)
}

fn count_at(items: &[Value], i: usize) -> Result<usize, LedgerError> {
    usize::try_from(int_at(items, i)?).map_err(|_| protocol("negative count"))
}

fn time_at(items: &[Value], i: usize) -> Result<Timestamp, LedgerError> {
    u64::try_from(int_at(items, i)?)
        .map(Timestamp)
        .map_err(|_| protocol("negative timestamp"))
}

fn lease_state(v: Option<&Value>) -> Result<LeaseState, LedgerError> {
    match v.and_then(Value::as_str) {
        Some("open") => Ok(LeaseState::Open),
        Some("closed") => Ok(LeaseState::Closed),
        Some("reclaimed") => Ok(LeaseState::Reclaimed),
        other => Err(LedgerError::Protocol(format!(
            "unknown lease state {other:?}"
        ))),
    }
}

fn lease_error(op: &str, status: &str) -> Result<LeaseError, LedgerError> {
    Ok(match status {
        "UnknownCampaign" => LeaseError::UnknownCampaign,
        "UnknownLease" => LeaseError::UnknownLease,
        "NonPositiveAmount" => LeaseError::NonPositiveAmount,
        "NegativeSpend" => LeaseError::NegativeSpend,
        "LeaseClosed" => LeaseError::LeaseClosed,
        "CampaignMismatch" => LeaseError::CampaignMismatch,
        other => return Err(unexpected(op, other)),
    })
}

/// A balance from the raw counters, computed exactly as `crate::Book` computes it: the budget
/// in force is the configured one clamped up to spent+reserved; availability is never negative.
fn balance_of(v: Value) -> Result<Balance, LedgerError> {
    let items = array(v)?;
    let campaign = status(&items)?.to_owned();
    let (total, spent, reserved) = (
        nanos_at(&items, 1)?,
        nanos_at(&items, 2)?,
        nanos_at(&items, 3)?,
    );
    let has_daily = int_at(&items, 4)? != 0;
    let used = spent.saturating_add(reserved);
    let daily = if has_daily {
        let daily = nanos_at(&items, 5)?;
        let day = u64::try_from(int_at(&items, 6)?).map_err(|_| protocol("negative day"))?;
        let (day_spent, day_reserved) = (nanos_at(&items, 7)?, nanos_at(&items, 8)?);
        let day_used = day_spent.saturating_add(day_reserved);
        let budget = daily.max(day_used);
        Some(DailyBalance {
            day,
            budget,
            spent: day_spent,
            reserved: day_reserved,
            available: budget.saturating_sub(day_used),
        })
    } else {
        None
    };
    let budget = total.max(used);
    Ok(Balance {
        campaign,
        budget,
        spent,
        reserved,
        available: budget.saturating_sub(used),
        daily,
    })
}

/// A new ledger id: the time and the process, unique enough for a marker an operator creates
/// once in a while (it only has to differ from the id of the ledger that was lost).
fn fresh_id() -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{:x}-{seq}", std::process::id())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const NOW: Timestamp = Timestamp(10 * Timestamp::MS_PER_DAY);

    fn take(id: &str, want: i64, take: Take) -> Call {
        Call::TakeLease {
            id: id.to_owned(),
            campaign: "c".to_owned(),
            want: Nanos(want),
            expires_at: Timestamp(NOW.0 + 10_000),
            take,
            node: "n1".to_owned(),
        }
    }

    async fn grant(l: &RedisLedger, call: &Call) -> Result<LeaseGrant, LeaseError> {
        match l.one(call, NOW).await.unwrap() {
            Answer::Grant(g) => g,
            other => panic!("{other:?}"),
        }
    }

    /// The lease task's takes: a creation sent again (its first answer lost) grants nothing
    /// more; a grow of a lease Redis does not know is refused; the public take does both.
    #[tokio::test]
    async fn each_kind_of_take_does_only_what_it_may() {
        let server = testkit::RedisServer::start().await;
        let l = RedisLedger::new(RedisConfig {
            addr: server.addr(),
            timeout: Duration::from_secs(2),
            ..RedisConfig::default()
        });
        let limits = Limits {
            total: Nanos(1_000),
            daily: None,
        };
        l.set_limits("c", limits, NOW).await.unwrap();

        let first = grant(&l, &take("l1", 100, Take::CreateOnce)).await.unwrap();
        assert_eq!((first.granted, first.amount), (Nanos(100), Nanos(100)));
        let again = grant(&l, &take("l1", 100, Take::CreateOnce)).await.unwrap();
        assert_eq!((again.granted, again.amount), (Nanos(0), Nanos(100)));
        assert_eq!(
            l.balance("c", NOW).await.unwrap().unwrap().reserved,
            Nanos(100)
        );

        let grown = grant(&l, &take("l1", 50, Take::GrowOnly)).await.unwrap();
        assert_eq!((grown.granted, grown.amount), (Nanos(50), Nanos(150)));
        assert_eq!(
            grant(&l, &take("l2", 50, Take::GrowOnly)).await,
            Err(LeaseError::UnknownLease)
        );
        let public = grant(&l, &take("l1", 10, Take::CreateOrGrow))
            .await
            .unwrap();
        assert_eq!(public.amount, Nanos(160));
        assert_eq!(
            l.balance("c", NOW).await.unwrap().unwrap().reserved,
            Nanos(160)
        );
    }
}
