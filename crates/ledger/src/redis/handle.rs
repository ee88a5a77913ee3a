//! [`RedisLedger`]: the handle on the shared ledger. Its connections, its settings, the ledger
//! marker it checks, and the two ways a script is sent: one call ([`RedisLedger::run`]) or a
//! pipeline of calls ([`RedisLedger::pipeline`]). The operations themselves are in `per_bid.rs`
//! and `lease.rs`, each script in `script/`.

use std::sync::Arc;
use std::time::Duration;

use units::Timestamp;

use super::client::Client;
use super::error::classify_error;
use super::resp::Value;
use super::script::{Answer, Call, Ctx, Encoded, LedgerScript, OpenLedger, Ready, array, protocol};
use super::{LedgerError, MAX_AMOUNT, RedisTls};

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

/// Most script calls sent in one pipelined round trip by [`RedisLedger::set_limits_many`] and
/// by lease mode's background task. Each lease script takes Redis some tens of microseconds, so
/// a full pipeline is a few milliseconds of Redis time: well within a tight per-call timeout,
/// and short enough not to hold other clients back for long (Redis interleaves other clients'
/// commands between the scripts of a pipeline anyway).
pub const PIPELINE_MAX: usize = 100;

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
        let open = OpenLedger {
            create,
            fresh_id: fresh_id(),
        };
        let Some(id) = self.run(&open, Timestamp::now()).await? else {
            return Ok(None);
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
                .command(&[
                    b"SCAN",
                    &cursor,
                    b"MATCH",
                    pattern.as_bytes(),
                    b"COUNT",
                    b"1000",
                ])
                .await?;
            let items = array(reply)?;
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
        self.command(&[b"PING"]).await.map(drop)
    }

    /// The context every script call is encoded in.
    fn with_ctx<T>(&self, now: Timestamp, f: impl FnOnce(&Ctx<'_>) -> T) -> T {
        let ledger = self.ledger_id();
        f(&Ctx {
            now,
            ledger: &ledger,
            tombstone_ms: &self.shared.tombstone_ms,
            sweep_batch: &self.shared.sweep_batch,
        })
    }

    /// One script call, one round trip (none when its arguments are refused here).
    pub(crate) async fn run<S: LedgerScript>(
        &self,
        call: &S,
        now: Timestamp,
    ) -> Result<S::Answer, LedgerError> {
        let args = match self.with_ctx(now, |ctx| call.encode(ctx)) {
            Encoded::Answered(answer) => return answer,
            Encoded::Send(args) => args,
        };
        let mut argv: Vec<&[u8]> = Vec::with_capacity(args.len() + 1);
        argv.push(self.shared.prefix.as_bytes());
        argv.extend(args.iter().map(String::as_bytes));
        let reply = self
            .shared
            .client
            .eval(S::script(), &argv, self.timeout)
            .await?;
        self.note(call.decode(reply))
    }

    /// Runs several calls in one round trip (a pipeline; Redis runs them in order, each
    /// atomically), bounded by the timeout as a whole. The caller keeps batches to about
    /// [`PIPELINE_MAX`]. Answers are per call, in order; the outer error is the transport (any
    /// call may or may not have run: every one of them is safe to repeat).
    pub(crate) async fn pipeline(
        &self,
        calls: &[Call],
        now: Timestamp,
    ) -> Result<Vec<Result<Answer, LedgerError>>, LedgerError> {
        let encoded = self.with_ctx(now, |ctx| calls.iter().map(|c| c.encode(ctx)).collect());
        self.batch(encoded, |i, reply| match calls.get(i) {
            Some(call) => call.decode(reply),
            None => Err(protocol("pipeline: a reply without a call")),
        })
        .await
    }

    /// [`RedisLedger::pipeline`] of calls of one script, answered in its own type.
    pub(crate) async fn pipeline_of<S: LedgerScript>(
        &self,
        calls: &[S],
        now: Timestamp,
    ) -> Result<Vec<Result<S::Answer, LedgerError>>, LedgerError> {
        let encoded = self.with_ctx(now, |ctx| {
            calls
                .iter()
                .map(|c| match c.encode(ctx) {
                    Encoded::Send(args) => Ok((S::script(), args)),
                    Encoded::Answered(answer) => Err(answer),
                })
                .collect()
        });
        self.batch(encoded, |i, reply| match calls.get(i) {
            Some(call) => call.decode(reply),
            None => Err(protocol("pipeline: a reply without a call")),
        })
        .await
    }

    /// Sends the encoded calls in one pipeline; those answered already are not sent.
    async fn batch<A>(
        &self,
        encoded: Vec<Result<Ready, Result<A, LedgerError>>>,
        decode: impl Fn(usize, Value) -> Result<A, LedgerError>,
    ) -> Result<Vec<Result<A, LedgerError>>, LedgerError> {
        let mut answers: Vec<Option<Result<A, LedgerError>>> = Vec::with_capacity(encoded.len());
        let mut sent = Vec::new();
        for (i, call) in encoded.into_iter().enumerate() {
            match call {
                Ok((script, args)) => {
                    sent.push((i, script, args));
                    answers.push(None);
                }
                Err(answer) => answers.push(Some(answer)),
            }
        }
        let prefix = self.shared.prefix.as_bytes();
        let batch: Vec<_> = sent
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
            if let Some(slot) = answers.get_mut(*i) {
                *slot = Some(self.note(reply.and_then(|v| decode(*i, v))));
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(protocol("pipeline: a call got no reply"))))
            .collect())
    }

    /// A plain command (not a script), its error reply classified.
    pub(crate) async fn command(&self, args: &[&[u8]]) -> Result<Value, LedgerError> {
        match self.shared.client.call(args, self.timeout).await? {
            Value::Error(msg) => Err(classify_error(msg)),
            other => Ok(other),
        }
    }

    /// The key prefix this handle writes under.
    pub(crate) fn prefix(&self) -> &str {
        &self.shared.prefix
    }
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
