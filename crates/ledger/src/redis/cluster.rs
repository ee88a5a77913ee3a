//! The ledger's client for Redis Cluster: the `redis` crate's cluster client (`cluster-async`),
//! which learns the slot map from the seed nodes, routes each command by its first key, follows
//! `MOVED` and `ASK` (a slot being migrated), and refreshes the map when a node fails or a
//! replica is promoted. What it adds here:
//! - every call is bounded by the caller's deadline end to end (connecting included): the
//!   crate's own timeouts are off, a call that does not finish in time is
//!   [`LedgerError::Timeout`];
//! - scripts run with `EVALSHA` and are re-sent with `EVAL` on `NOSCRIPT` (a promoted replica
//!   or a restarted node has an empty script cache; `EVAL` fills it for the next call);
//! - a batch of script calls is sent as concurrent calls on the multiplexed connection (each to
//!   its slot's node) rather than as one pipeline, which the crate would send to one node;
//! - plain commands that are about no key (`SCAN`, `SCRIPT LOAD`) go to one primary, named by a
//!   slot it serves.
//!
//! The connection is made on first use (the handle is created while the cluster may be down) and
//! again after it could not be made. TLS (`rediss://`) trusts only the operator's CA file, as for
//! one Redis; the node names in the certificates are checked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, RedisError};

use super::LedgerError;
use super::client::{Script, ScriptCall, script_reply};
use super::error::classify_error;
use super::resp::{Value, error_text};

/// Most times one script call is re-sent after `NOSCRIPT` (once is enough unless the cache is
/// flushed again in between).
const NOSCRIPT_RETRIES: usize = 2;

/// How long every call may fail for want of an answer before the connection is dropped and made
/// again (at most once per this period): see [`Health`].
const STALE_AFTER: Duration = Duration::from_secs(1);

pub(crate) struct ClusterClient {
    client: redis::cluster::ClusterClient,
    conn: tokio::sync::Mutex<Option<ClusterConnection>>,
    health: Health,
}

/// When a call last had an answer, and when the connection was last made again. The crate's
/// connection follows a failover by itself in a quiet process, but a bidder under load that saw
/// a primary killed kept timing out on every call for the rest of a 70 s run (`fleet_faults`:
/// 125 reservations/s timed out, no bid after the kill) while a fresh connection answered at
/// once. So when no call has been answered for [`STALE_AFTER`], the next failure drops the
/// connection, and the next call makes a new one from the seeds (a new slot map, new sockets).
///
/// Lock-free: every call notes its outcome here, on the bid path in per-bid mode.
#[derive(Debug)]
struct Health {
    start: std::time::Instant,
    /// Milliseconds after `start`.
    answered_ms: AtomicU64,
    remade_ms: AtomicU64,
}

impl Health {
    fn new() -> Health {
        Health {
            start: std::time::Instant::now(),
            answered_ms: AtomicU64::new(0),
            remade_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A call was answered (an error reply is an answer).
    fn answered(&self) {
        let now = self.now_ms();
        // Read first: most calls find it current and write nothing to the shared line.
        if self.answered_ms.load(Ordering::Relaxed) != now {
            self.answered_ms.store(now, Ordering::Relaxed);
        }
    }

    /// A call had no answer: whether the connection should be made again now (nothing answered
    /// for [`STALE_AFTER`], nor remade in that time; one caller wins the exchange).
    fn should_remake(&self) -> bool {
        let now = self.now_ms();
        let stale = u64::try_from(STALE_AFTER.as_millis()).unwrap_or(u64::MAX);
        let remade = self.remade_ms.load(Ordering::Relaxed);
        now.saturating_sub(self.answered_ms.load(Ordering::Relaxed)) >= stale
            && now.saturating_sub(remade) >= stale
            && self
                .remade_ms
                .compare_exchange(remade, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient").finish_non_exhaustive()
    }
}

/// Why a Redis Cluster client could not be made from its settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterSetupError {
    #[error("a Redis Cluster needs at least one seed node")]
    NoSeeds,
    #[error("CA file {file}: {reason}")]
    CaFile { file: String, reason: String },
    #[error("redis cluster seeds {seeds}: {reason}")]
    Seeds { seeds: String, reason: String },
}

impl ClusterClient {
    /// A client of the cluster known through `seeds` (`host:port`, at least one reachable at
    /// connect). Does no I/O.
    ///
    /// # Errors
    /// No seed, an unreadable CA file, or a seed that is not `host:port`.
    pub(crate) fn new(
        seeds: &[String],
        auth: Option<(Option<String>, String)>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<ClusterClient, ClusterSetupError> {
        if seeds.is_empty() {
            return Err(ClusterSetupError::NoSeeds);
        }
        let scheme = if ca_file.is_some() { "rediss" } else { "redis" };
        let urls: Vec<String> = seeds.iter().map(|s| format!("{scheme}://{s}")).collect();
        let mut builder = redis::cluster::ClusterClient::builder(urls)
            // The caller's deadline bounds every call; the crate's clocks would be second ones.
            .connection_timeout(Duration::from_secs(3600))
            .response_timeout(Duration::from_secs(3600))
            // Retries (MOVED, ASK, a node gone) happen within the caller's deadline; after a
            // failure the crate waits 10..100 ms, so a failover is retried, not waited out.
            .retries(16)
            .min_retry_wait(10)
            .max_retry_wait(100);
        if let Some(ca_file) = ca_file {
            // The CA file alone is trusted (the client's own roots are not used for a cluster
            // of ours); read now, so that a bad file stops the start.
            let pem = std::fs::read(ca_file).map_err(|e| ClusterSetupError::CaFile {
                file: ca_file.display().to_string(),
                reason: e.to_string(),
            })?;
            // The crate builds its TLS settings with the process's default crypto provider:
            // ring, as everywhere in Gavel (a no-op when one is installed already).
            let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
            builder = builder
                .tls(redis::TlsMode::Secure)
                .certs(redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                });
        }
        if let Some((user, password)) = auth {
            builder = builder.password(password);
            if let Some(user) = user {
                builder = builder.username(user);
            }
        }
        let client = builder.build().map_err(|e| ClusterSetupError::Seeds {
            seeds: format!("{seeds:?}"),
            reason: e.to_string(),
        })?;
        Ok(ClusterClient {
            client,
            conn: tokio::sync::Mutex::new(None),
            health: Health::new(),
        })
    }

    /// The connection, made now if there is none (within the caller's deadline, which wraps
    /// every call of this type).
    async fn conn(&self) -> Result<ClusterConnection, LedgerError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self
            .client
            .get_async_connection()
            .await
            .map_err(|e| reply_error(&e))?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// One command routed by its key (a keyless one goes to any node); an error reply is a
    /// [`Value::Error`].
    pub(crate) async fn call(
        &self,
        args: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        self.bounded(timeout, async {
            let mut conn = self.conn().await?;
            request(&mut conn, args).await
        })
        .await
    }

    /// Several commands, each routed by its key, sent concurrently.
    pub(crate) async fn call_many(
        &self,
        commands: &[Vec<&[u8]>],
        timeout: Duration,
    ) -> Result<Vec<Value>, LedgerError> {
        self.bounded(timeout, async {
            let conn = self.conn().await?;
            let replies = join_all(commands.iter().map(|args| {
                let mut conn = conn.clone();
                async move { request(&mut conn, args).await }
            }))
            .await;
            replies.into_iter().collect()
        })
        .await
    }

    /// One script call, routed by its first key.
    pub(crate) async fn eval(
        &self,
        script: &Script,
        tail: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        self.bounded(timeout, async {
            let mut conn = self.conn().await?;
            eval(&mut conn, script, tail).await.and_then(script_reply)
        })
        .await
    }

    /// Several script calls, each to its slot's node, concurrently: answers per call; the outer
    /// error is the deadline or a connection that could not be made (as a pipeline's would be).
    pub(crate) async fn eval_batch(
        &self,
        calls: &[ScriptCall<'_>],
        timeout: Duration,
    ) -> Result<Vec<Result<Value, LedgerError>>, LedgerError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        self.bounded(timeout, async {
            let conn = self.conn().await?;
            let replies = join_all(calls.iter().map(|(script, tail)| {
                let mut conn = conn.clone();
                async move { eval(&mut conn, script, tail).await.and_then(script_reply) }
            }))
            .await;
            Ok(replies)
        })
        .await
    }

    /// One slot served by each primary (the first of its ranges), from `CLUSTER SLOTS`.
    pub(crate) async fn primary_slots(&self, timeout: Duration) -> Result<Vec<u16>, LedgerError> {
        let reply = self.call(&[b"CLUSTER", b"SLOTS"], timeout).await?;
        let Value::Array(ranges) = reply else {
            return Err(LedgerError::Protocol(format!(
                "CLUSTER SLOTS answered {reply:?}"
            )));
        };
        let mut seen: Vec<(Vec<u8>, u16)> = Vec::new();
        for range in ranges {
            let Value::Array(items) = range else { continue };
            let (Some(start), Some(Value::Array(primary))) = (items.first(), items.get(2)) else {
                continue;
            };
            let start = start
                .as_i64()
                .and_then(|s| u16::try_from(s).ok())
                .ok_or_else(|| LedgerError::Protocol("CLUSTER SLOTS: a bad slot".into()))?;
            // The primary's host and port name it.
            let name: Vec<u8> = format!("{:?}{:?}", primary.first(), primary.get(1)).into_bytes();
            if !seen.iter().any(|(n, _)| *n == name) {
                seen.push((name, start));
            }
        }
        Ok(seen.into_iter().map(|(_, slot)| slot).collect())
    }

    /// One command on the primary serving `slot`.
    pub(crate) async fn call_on(
        &self,
        slot: u16,
        args: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        self.bounded(timeout, async {
            let mut conn = self.conn().await?;
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                slot,
                SlotAddr::Master,
            )));
            match conn.route_command(command(args), routing).await {
                Ok(v) => Ok(Value::from_redis(v)),
                Err(e) => error_value(e),
            }
        })
        .await
    }
}

impl ClusterClient {
    /// `call` within `timeout`, its outcome noted in [`Health`].
    async fn bounded<T>(
        &self,
        timeout: Duration,
        call: impl Future<Output = Result<T, LedgerError>>,
    ) -> Result<T, LedgerError> {
        let result = tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| LedgerError::Timeout)
            .and_then(|r| r);
        let unanswered = matches!(
            result,
            Err(LedgerError::Timeout | LedgerError::Unavailable(_))
        );
        let remake = if unanswered {
            self.health.should_remake()
        } else {
            self.health.answered();
            false
        };
        if remake {
            tracing::warn!(
                "redis cluster: no call answered for {STALE_AFTER:?}; connecting again from the seeds"
            );
            // Without waiting: a call holding the lock while connecting keeps it; the next
            // failure after the period tries again.
            if let Ok(mut slot) = self.conn.try_lock() {
                *slot = None;
            }
        }
        result
    }
}

/// `EVALSHA`, then `EVAL` with the same keys (so the same node) while the node answers
/// `NOSCRIPT`: the script did not run, so sending it again cannot apply it twice.
async fn eval(
    conn: &mut ClusterConnection,
    script: &Script,
    tail: &[&[u8]],
) -> Result<Value, LedgerError> {
    let mut args: Vec<&[u8]> = Vec::with_capacity(tail.len() + 2);
    args.push(b"EVALSHA");
    args.push(script.sha.as_bytes());
    args.extend_from_slice(tail);
    let mut reply = request(conn, &args).await?;
    for _ in 0..NOSCRIPT_RETRIES {
        if !matches!(&reply, Value::Error(msg) if msg.starts_with("NOSCRIPT")) {
            break;
        }
        if let [cmd, body, ..] = args.as_mut_slice() {
            *cmd = b"EVAL";
            *body = script.body.as_bytes();
        }
        reply = request(conn, &args).await?;
    }
    Ok(reply)
}

async fn request(conn: &mut ClusterConnection, args: &[&[u8]]) -> Result<Value, LedgerError> {
    match conn.req_packed_command(&command(args)).await {
        Ok(v) => Ok(Value::from_redis(v)),
        Err(e) => error_value(e),
    }
}

/// An error reply as a value (the call was answered); anything else is the transport.
fn error_value(e: RedisError) -> Result<Value, LedgerError> {
    match e.code() {
        Some(code) => Ok(Value::Error(error_text(code, e.detail()))),
        None => Err(reply_error(&e)),
    }
}

fn reply_error(e: &RedisError) -> LedgerError {
    match e.code() {
        Some(code) => classify_error(error_text(code, e.detail())),
        None => match e.kind() {
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => {
                LedgerError::Protocol(format!("redis cluster reply: {e}"))
            }
            redis::ErrorKind::AuthenticationFailed => LedgerError::Refused(e.to_string()),
            // A certificate the CA file does not vouch for will not fix itself. The crate
            // passes rustls's error on as text only ("invalid peer certificate: ...").
            _ if e.to_string().contains("invalid peer certificate") => {
                LedgerError::Refused(format!("redis cluster TLS: {e}"))
            }
            _ => LedgerError::Unavailable(format!("redis cluster: {e}")),
        },
    }
}

fn command(args: &[&[u8]]) -> Cmd {
    let mut cmd = Cmd::new();
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}
