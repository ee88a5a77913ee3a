//! [`RedisLedger`]: the handle on the shared ledger. Its connections (one Redis, or a Redis
//! Cluster), its settings, the ledger marker it checks, and the two ways a script is sent: one
//! call ([`RedisLedger::run`]) or a batch of calls ([`RedisLedger::pipeline`]). The operations
//! themselves are in `per_bid.rs`, `lease.rs` and `sweep.rs`, each script in `script/`.
// On every bid's path to the ledger: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::sync::Arc;
use std::time::Duration;

use units::Timestamp;

use super::backend::{Backend, Primary};
use super::client::Client;
use super::cluster::ClusterClient;
use super::error::classify_error;
use super::keys::{Keys, SLOTS, key_slot};
use super::resp::Value;
use super::script::{
    Call, Ctx, Encoded, LedgerScript, Open, OpenLedger, Ready, ScriptReply, array, protocol,
};
use super::sweep_list::SweepList;
use super::{LedgerError, MAX_AMOUNT, RedisTls};

/// Where and how to reach Redis, and the ledger's own knobs. Every field has a default.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `host:port` of the Redis primary (unused when `cluster_nodes` is set).
    pub addr: String,
    /// Redis Cluster: `host:port` of some of its nodes (the seeds the client learns the cluster
    /// from). Empty: one Redis at `addr`.
    pub cluster_nodes: Vec<String>,
    /// Prepended to every key, before the hash tag (see the key layout in [`crate::redis`]).
    /// Holds no brace (`{` or `}`): the settings refuse one.
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
    /// Logical database (`SELECT`); a cluster has only database 0.
    pub db: u32,
    /// TLS (`rediss://`); `None` for plain TCP. For one Redis.
    pub tls: Option<RedisTls>,
    /// TLS to a cluster: the PEM file of the CA certificates trusted (the only ones); `None`
    /// for plain TCP.
    pub cluster_ca_file: Option<std::path::PathBuf>,
}

impl Default for RedisConfig {
    fn default() -> RedisConfig {
        RedisConfig {
            addr: "127.0.0.1:6379".to_owned(),
            cluster_nodes: Vec::new(),
            cluster_ca_file: None,
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
    backend: Backend,
    keys: Keys,
    /// The campaigns the sweep walks, and where it is.
    sweep: std::sync::Mutex<SweepList>,
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
    ///
    /// # Panics
    /// Never; a cluster seed list the client refuses is reported by every call
    /// ([`RedisLedger::try_new`] reports it at once).
    pub fn new(config: RedisConfig) -> RedisLedger {
        let timeout = config.timeout;
        match RedisLedger::try_new(config.clone()) {
            Ok(ledger) => ledger,
            Err(e) => {
                tracing::error!(error = %e, "redis ledger: cluster seeds refused");
                // Seeds nothing answers: every call fails, naming no address.
                RedisLedger::build(
                    config,
                    Backend::Single(Client::new("0.0.0.0:0".to_owned(), None, 0, 1, None)),
                    timeout,
                )
            }
        }
    }

    /// [`RedisLedger::new`], refusing a cluster seed list the client cannot use.
    ///
    /// # Errors
    /// No seed, an unreadable CA file, or seeds the client refuses.
    pub fn try_new(
        config: RedisConfig,
    ) -> Result<RedisLedger, crate::redis::cluster::ClusterSetupError> {
        let auth = config
            .password
            .clone()
            .map(|p| (config.username.clone(), p));
        let backend = if config.cluster_nodes.is_empty() {
            Backend::Single(Client::new(
                config.addr.clone(),
                auth,
                config.db,
                config.max_connections,
                config.tls.clone(),
            ))
        } else {
            Backend::Cluster(Box::new(ClusterClient::new(
                &config.cluster_nodes,
                auth,
                config.cluster_ca_file.as_deref(),
            )?))
        };
        let timeout = config.timeout;
        Ok(RedisLedger::build(config, backend, timeout))
    }

    fn build(config: RedisConfig, backend: Backend, timeout: Duration) -> RedisLedger {
        let tombstone_ms = u64::try_from(config.tombstone_ttl.as_millis()).unwrap_or(u64::MAX);
        RedisLedger {
            shared: Arc::new(Shared {
                backend,
                keys: Keys::new(&config.prefix),
                sweep: std::sync::Mutex::new(SweepList::default()),
                tombstone_ms: tombstone_ms.min(MAX_AMOUNT as u64).to_string(),
                sweep_batch: config.sweep_batch.max(1).to_string(),
                ledger_id: std::sync::RwLock::new(Arc::from("")),
                lost: std::sync::atomic::AtomicBool::new(false),
                create: std::sync::Mutex::new(None),
            }),
            timeout,
        }
    }

    /// Whether this handle talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.shared.backend, Backend::Cluster(_))
    }

    /// Opens the ledger: reads its marker in every hash slot, or creates it when `create` and
    /// it is missing. Answers its id (`None`: missing, not created). From then on this handle's
    /// limit writes, reservations and lease grants in a slot are refused
    /// ([`LedgerError::NoLedger`]) if that slot no longer holds the id: its node lost its data,
    /// and re-creating campaigns would reopen their budgets.
    ///
    /// The marker is one small hash per slot (16,384). Opening reads the marker of one slot of
    /// each primary (one primary: slot 0), each call bounded by the timeout: a primary that
    /// came back empty shows. When some hold the id and others none (a node lost its data), the
    /// id is opened and the empty slots refuse by themselves. Creating writes every slot, in
    /// batches of [`OPEN_BATCH`] script calls, each bounded by the timeout but at least
    /// [`CREATE_TIMEOUT`] (an operator's act, not the request path): when nothing holds an id, a
    /// new one where none is; when some slots lost it, a new id into every slot (the operator's
    /// decision after looking at the evidence): every instance finds its old id gone and adopts
    /// the new one.
    pub async fn open_ledger(&self, create: bool) -> Result<Option<String>, LedgerError> {
        // Every primary gets the scripts now, so that no call pays for loading one later
        // (after a failover or a restart, `NOSCRIPT` still loads them on demand).
        self.load_scripts().await?;
        let sampled: Vec<u16> = self
            .shared
            .backend
            .primaries(self.timeout)
            .await?
            .into_iter()
            .map(|p| match p {
                Primary::Single => 0,
                Primary::Serving(slot) => slot,
            })
            .collect();
        let ids = self.open_slots(Open::Read, "", &sampled).await?;
        let mut found: Vec<&str> = ids.iter().flatten().map(String::as_str).collect();
        found.sort_unstable();
        found.dedup();
        let missing = ids.iter().any(Option::is_none);
        let id = match (found.as_slice(), create) {
            ([id], false) => Some((*id).to_owned()),
            ([id], true) if !missing => Some((*id).to_owned()),
            ([], false) => None,
            ([], true) => {
                let fresh = fresh_id();
                let written = self.create_everywhere(Open::CreateMissing, &fresh).await?;
                // Two creators at once may each win some slots: one id must hold them all.
                one_id(&written)?
            }
            (_, true) => {
                let fresh = fresh_id();
                let written = self.create_everywhere(Open::Overwrite, &fresh).await?;
                one_id(&written)?
            }
            (several, false) => {
                return Err(LedgerError::Protocol(format!(
                    "the hash slots hold {} different ledger ids: run `gavel ledger create` \
                     to give them one",
                    several.len()
                )));
            }
        };
        let Some(id) = id else {
            return Ok(None);
        };
        *telemetry::locks::write(&self.shared.ledger_id) = Arc::from(id.as_str());
        self.shared
            .lost
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(id))
    }

    /// Runs `open_ledger` in every hash slot, with the creation's longer deadline.
    async fn create_everywhere(
        &self,
        open: Open,
        id: &str,
    ) -> Result<Vec<Option<String>>, LedgerError> {
        let all: Vec<u16> = (0..SLOTS).collect();
        self.with_timeout(self.timeout.max(CREATE_TIMEOUT))
            .open_slots(open, id, &all)
            .await
    }

    /// Runs `open_ledger` in `slots`; the id each answered.
    async fn open_slots(
        &self,
        open: Open,
        id: &str,
        slots: &[u16],
    ) -> Result<Vec<Option<String>>, LedgerError> {
        let mut ids = Vec::with_capacity(slots.len());
        let calls: Vec<OpenLedger> = slots
            .iter()
            .map(|&slot| OpenLedger {
                slot,
                open,
                fresh_id: id.to_owned(),
            })
            .collect();
        for chunk in calls.chunks(OPEN_BATCH) {
            for answer in self.pipeline_of(chunk, Timestamp::now()).await? {
                ids.push(answer?);
            }
        }
        Ok(ids)
    }

    /// Makes this handle check the ledger's marker: until [`RedisLedger::open_ledger`] (or
    /// [`RedisLedger::reopen`]) succeeds, limit writes and lease grants are refused. `create`:
    /// whether reopening may create a missing ledger (a first start).
    pub fn expect_ledger(&self, create: bool) {
        *telemetry::locks::lock(&self.shared.create) = Some(create);
        let mut id = telemetry::locks::write(&self.shared.ledger_id);
        if id.is_empty() {
            *id = Arc::from(NOT_OPEN);
        }
    }

    /// Whether [`RedisLedger::expect_ledger`] was called and no ledger is open yet.
    pub fn needs_open(&self) -> bool {
        &**telemetry::locks::read(&self.shared.ledger_id) == NOT_OPEN
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
        let allowed = telemetry::locks::lock(&self.shared.create).unwrap_or(false);
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

    /// What Redis holds under this ledger's prefix, looked through with `SCAN` on every
    /// primary (at most [`EVIDENCE_SCAN_ROUNDS`] round trips each, each bounded by the
    /// timeout): evidence that a ledger lived there, for deciding whether a missing one may be
    /// created. Not for the request path.
    pub async fn keys_under_prefix(&self) -> Result<KeyScan, LedgerError> {
        let pattern = format!("{}*", glob_escape(self.shared.keys.prefix()));
        let mut scan = KeyScan::default();
        for primary in self.shared.backend.primaries(self.timeout).await? {
            self.scan_primary(primary, &pattern, |key| {
                scan.keys += 1;
                if scan.sample.len() < 5 {
                    scan.sample.push(key.to_owned());
                }
            })
            .await
            .map(|complete| scan.incomplete |= !complete)?;
        }
        Ok(scan)
    }

    /// The keys matching `pattern` on one primary, each given to `found`; false when the scan
    /// stopped at its bound.
    pub(crate) async fn scan_primary(
        &self,
        primary: Primary,
        pattern: &str,
        mut found: impl FnMut(&str),
    ) -> Result<bool, LedgerError> {
        let mut cursor = b"0".to_vec();
        for _ in 0..EVIDENCE_SCAN_ROUNDS {
            let reply = self
                .command_on(
                    primary,
                    &[
                        b"SCAN",
                        &cursor,
                        b"MATCH",
                        pattern.as_bytes(),
                        b"COUNT",
                        b"1000",
                    ],
                )
                .await?;
            let items = array(reply)?;
            let (Some(next), Some(Value::Array(keys))) = (items.first(), items.get(1)) else {
                return Err(protocol("SCAN: not [cursor, keys]"));
            };
            for key in keys {
                if let Some(k) = key.as_str() {
                    found(k);
                }
            }
            cursor = match next.as_str() {
                Some("0") => return Ok(true),
                Some(c) => c.as_bytes().to_vec(),
                None => return Err(protocol("SCAN: cursor is not text")),
            };
        }
        Ok(false)
    }

    /// The hash slots that list campaigns (found with `SCAN` on every primary, bounded as
    /// [`RedisLedger::keys_under_prefix`]): for the audit and the list of campaigns.
    pub(crate) async fn listed_slots(&self) -> Result<Vec<u16>, LedgerError> {
        let keys = &self.shared.keys;
        let pattern = format!("{}{{*}}campaigns", glob_escape(keys.prefix()));
        let mut slots = Vec::new();
        for primary in self.shared.backend.primaries(self.timeout).await? {
            self.scan_primary(primary, &pattern, |key| {
                let slot = key_slot(key.as_bytes());
                // The pattern also matches a campaign hash whose name ends so.
                if keys.campaigns(slot) == key {
                    slots.push(slot);
                }
            })
            .await?;
        }
        slots.sort_unstable();
        slots.dedup();
        Ok(slots)
    }

    fn ledger_id(&self) -> Arc<str> {
        Arc::clone(&telemetry::locks::read(&self.shared.ledger_id))
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

    /// `PING`: is Redis reachable now? (On a cluster: is every primary?)
    pub async fn ping(&self) -> Result<(), LedgerError> {
        for primary in self.shared.backend.primaries(self.timeout).await? {
            self.command_on(primary, &[b"PING"]).await?;
        }
        Ok(())
    }

    /// `SCRIPT LOAD`s every ledger script on every primary, so that the first calls need no
    /// `EVAL` (calls work without it: `NOSCRIPT` is answered by re-sending the script).
    pub async fn load_scripts(&self) -> Result<(), LedgerError> {
        for primary in self.shared.backend.primaries(self.timeout).await? {
            for script in super::script::all() {
                self.command_on(primary, &[b"SCRIPT", b"LOAD", script.body.as_bytes()])
                    .await?;
            }
        }
        Ok(())
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
    ) -> Result<S::Reply, LedgerError> {
        let args = match self.with_ctx(now, |ctx| call.encode(ctx)) {
            Encoded::Answered(answer) => return answer,
            Encoded::Send(args) => args,
        };
        let routed = call.routed(&self.shared.keys);
        let count = routed.keys.len().to_string();
        let tail = script_tail(&count, &routed, &args);
        let reply = self
            .shared
            .backend
            .eval(S::script(), &tail, self.timeout)
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
    ) -> Result<Vec<Result<ScriptReply, LedgerError>>, LedgerError> {
        let keys = &self.shared.keys;
        let encoded = self.with_ctx(now, |ctx| {
            calls.iter().map(|c| c.encode(ctx, keys)).collect()
        });
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
    ) -> Result<Vec<Result<S::Reply, LedgerError>>, LedgerError> {
        let encoded = self.with_ctx(now, |ctx| {
            calls
                .iter()
                .map(|c| match c.encode(ctx) {
                    Encoded::Send(args) => Ok((S::script(), c.routed(&self.shared.keys), args)),
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

    /// Sends the encoded calls in one batch (a pipeline on one Redis, concurrent calls on a
    /// cluster); those answered already are not sent.
    async fn batch<A>(
        &self,
        encoded: Vec<Result<Ready, Result<A, LedgerError>>>,
        decode: impl Fn(usize, Value) -> Result<A, LedgerError>,
    ) -> Result<Vec<Result<A, LedgerError>>, LedgerError> {
        let mut answers: Vec<Option<Result<A, LedgerError>>> = Vec::with_capacity(encoded.len());
        let mut sent = Vec::new();
        for (i, call) in encoded.into_iter().enumerate() {
            match call {
                Ok((script, routed, args)) => {
                    let count = routed.keys.len().to_string();
                    sent.push((i, script, routed, count, args));
                    answers.push(None);
                }
                Err(answer) => answers.push(Some(answer)),
            }
        }
        let batch: Vec<_> = sent
            .iter()
            .map(|(_, script, routed, count, args)| (*script, script_tail(count, routed, args)))
            .collect();
        let replies = self.shared.backend.eval_batch(&batch, self.timeout).await?;
        for ((i, ..), reply) in sent.iter().zip(replies) {
            if let Some(slot) = answers.get_mut(*i) {
                *slot = Some(self.note(reply.and_then(|v| decode(*i, v))));
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(protocol("pipeline: a call got no reply"))))
            .collect())
    }

    /// A plain command (not a script) routed by its key, its error reply classified.
    pub(crate) async fn command(&self, args: &[&[u8]]) -> Result<Value, LedgerError> {
        match self.shared.backend.call(args, self.timeout).await? {
            Value::Error(msg) => Err(classify_error(msg)),
            other => Ok(other),
        }
    }

    /// Several plain commands routed by their keys, bounded by the timeout as a whole; error
    /// replies classified per command.
    pub(crate) async fn commands(
        &self,
        commands: &[Vec<&[u8]>],
    ) -> Result<Vec<Result<Value, LedgerError>>, LedgerError> {
        let replies = self
            .shared
            .backend
            .call_many(commands, self.timeout)
            .await?;
        Ok(replies
            .into_iter()
            .map(|reply| match reply {
                Value::Error(msg) => Err(classify_error(msg)),
                other => Ok(other),
            })
            .collect())
    }

    /// A plain command on one primary, its error reply classified.
    async fn command_on(&self, primary: Primary, args: &[&[u8]]) -> Result<Value, LedgerError> {
        match self
            .shared
            .backend
            .call_on(primary, args, self.timeout)
            .await?
        {
            Value::Error(msg) => Err(classify_error(msg)),
            other => Ok(other),
        }
    }

    /// The key names of this ledger.
    pub(crate) fn keys(&self) -> &Keys {
        &self.shared.keys
    }

    /// The campaigns the sweep walks, and where it stands.
    pub(crate) fn sweep_list(&self) -> std::sync::MutexGuard<'_, SweepList> {
        telemetry::locks::lock(&self.shared.sweep)
    }
}

/// Slots whose marker one batch of a ledger's creation writes (17 batches for all 16,384).
pub const OPEN_BATCH: usize = 1_000;

/// The least deadline of each batch of a ledger's creation (an operator's act).
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(5);

/// What follows `EVALSHA <sha>`: the key count, the keys, the base, the arguments.
fn script_tail<'a>(
    count: &'a str,
    routed: &'a super::keys::Routed,
    args: &'a [String],
) -> Vec<&'a [u8]> {
    let mut tail: Vec<&[u8]> = Vec::with_capacity(2 + routed.keys.len() + args.len());
    tail.push(count.as_bytes());
    tail.extend(routed.keys.iter().map(String::as_bytes));
    tail.push(routed.base.as_bytes());
    tail.extend(args.iter().map(String::as_bytes));
    tail
}

/// The one id every slot answered, or an error naming the split.
fn one_id(ids: &[Option<String>]) -> Result<Option<String>, LedgerError> {
    let first = ids.first().cloned().flatten();
    if ids.iter().all(|id| *id == first) {
        Ok(first)
    } else {
        Err(LedgerError::Protocol(
            "the ledger was created twice at once: its slots hold different ids; run \
             `gavel ledger create` again"
                .to_owned(),
        ))
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
