//! Kept-alive GETs to the hosts named in bidders' notice URLs: win, billing and loss notices,
//! and markup fetched from a winner's `nurl`. A URL arrives already checked against its
//! bidder's allowlist ([`crate::outbound::Target`]); here its host is resolved, every address
//! checked against the ranges the exchange does not call, and the connection made to a checked
//! address only, so a name that resolves elsewhere the second time (DNS rebinding) changes
//! nothing. Connections are cached per scheme and host, a bounded number per host, each closed
//! after an idle timeout: a connection per notice would exhaust ephemeral ports within a minute
//! at a few thousand wins per second.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::conn_pool::IdleList;
use crate::h1::{Conn, H1Error};
use crate::outbound::{ByOrigin, Refusal, Scheme, Target, address_allowed};
use crate::pool::{HttpAnswer, dial};
use crate::tls::{ClientTls, server_name};

/// Notice hosts kept; past this the cache starts afresh (bounded memory). Hosts come from
/// allowlists, so this is only a backstop.
const MAX_HOSTS: usize = 4096;

/// Why a notice GET produced no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    /// The URL or its addresses are not ones the exchange calls: nothing was sent.
    #[error("refused: {0}")]
    Refused(Refusal),
    #[error("{0}")]
    Failed(String),
}

/// What the client is allowed and how long it keeps connections.
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings {
    pub allow_private_addresses: bool,
    pub idle_timeout: Duration,
    pub max_idle_per_host: usize,
}

/// Connection cache shared by the notice workers and the auction path.
pub struct NoticeClient {
    settings: ClientSettings,
    /// Idle connections, one list per host (`conn_pool::IdleList`: newest first, aged out).
    idle: Mutex<ByOrigin<IdleList<Conn>>>,
}

impl std::fmt::Debug for NoticeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts = telemetry::locks::lock(&self.idle).len();
        f.debug_struct("NoticeClient")
            .field("settings", &self.settings)
            .field("hosts", &hosts)
            .finish()
    }
}

impl NoticeClient {
    pub fn new(settings: ClientSettings) -> NoticeClient {
        NoticeClient {
            settings,
            idle: Mutex::new(ByOrigin::default()),
        }
    }

    /// GETs `target` and reads at most `max_bytes` of the answer; `tls` verifies an `https`
    /// host. The caller bounds the time; dropping the future drops the connection.
    ///
    /// # Errors
    /// [`NoticeError::Refused`] when no address of the host may be called (nothing is sent),
    /// [`NoticeError::Failed`] for transport failures.
    pub async fn get(
        &self,
        target: &Target,
        tls: Option<&ClientTls>,
        max_bytes: usize,
    ) -> Result<HttpAnswer, NoticeError> {
        self.get_batch(&[target], tls, max_bytes, None)
            .await
            .pop()
            .unwrap_or_else(|| Err(NoticeError::Failed("no answer".to_owned())))
    }

    /// GETs every target, all of one origin (scheme, host and port), pipelined on one
    /// connection: one write for the batch, the answers read in order. One result per target,
    /// in order; a target whose answer never came (the connection broke or closed first) is
    /// [`NoticeError::Failed`], safe to send again since GETs are idempotent. `each` bounds
    /// the connection and every answer (not the batch: a long batch from a slow but working
    /// host is not cut), and a wait over it fails the answers still to come.
    pub async fn get_batch(
        &self,
        targets: &[&Target],
        tls: Option<&ClientTls>,
        max_bytes: usize,
        each: Option<Duration>,
    ) -> Vec<Result<HttpAnswer, NoticeError>> {
        let Some(first) = targets.first() else {
            return Vec::new();
        };
        if let Some(conn) = self.take(first) {
            // A cached connection may have been closed by the host since; then the requests
            // never reached it, and one try on a fresh connection is safe.
            if let Some(results) = self.pipeline_and_keep(conn, targets, max_bytes, each).await {
                return results;
            }
        }
        let failed = |e: NoticeError| targets.iter().map(|_| Err(e.clone())).collect();
        let timed_out = || NoticeError::Failed("timed out".to_owned());
        let addr = match bounded(each, self.resolve(first)).await {
            Some(Ok(addr)) => addr,
            Some(Err(e)) => return failed(e),
            None => return failed(timed_out()),
        };
        let tls = match first.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let Some(client) = tls else {
                    return failed(NoticeError::Failed(
                        "https notice host, but no CA roots are known".to_owned(),
                    ));
                };
                match server_name(&first.host) {
                    Ok(name) => Some((client, name)),
                    Err(e) => return failed(NoticeError::Failed(e.into())),
                }
            }
        };
        let conn = match bounded(each, dial(addr, tls)).await {
            Some(Ok(conn)) => conn,
            Some(Err(e)) => {
                return failed(NoticeError::Failed(format!("{}: {e}", first.authority)));
            }
            None => return failed(timed_out()),
        };
        self.pipeline_and_keep(conn, targets, max_bytes, each)
            .await
            .unwrap_or_else(|| {
                failed(NoticeError::Failed(
                    "connection closed before an answer".to_owned(),
                ))
            })
    }

    /// [`pipeline`] on `conn`, which goes back to the cache when it may be kept.
    async fn pipeline_and_keep(
        &self,
        mut conn: Conn,
        targets: &[&Target],
        max_bytes: usize,
        each: Option<Duration>,
    ) -> Option<Vec<Result<HttpAnswer, NoticeError>>> {
        let (results, keep) = pipeline(&mut conn, targets, max_bytes, each).await?;
        if let (true, Some(first)) = (keep, targets.first()) {
            self.put(first, conn);
        }
        Some(results)
    }

    /// The first address of `target`'s host that the exchange may call.
    async fn resolve(&self, target: &Target) -> Result<SocketAddr, NoticeError> {
        let allow = self.settings.allow_private_addresses;
        // An address literal needs no lookup.
        if let Ok(ip) = target.host.parse::<std::net::IpAddr>() {
            return if address_allowed(ip, allow) {
                Ok(SocketAddr::new(ip, target.port))
            } else {
                Err(NoticeError::Refused(Refusal::Address(ip)))
            };
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
            .await
            .map_err(|e| NoticeError::Failed(format!("cannot resolve {}: {e}", target.host)))?
            .collect();
        match addrs.iter().find(|a| address_allowed(a.ip(), allow)) {
            Some(addr) => Ok(*addr),
            None => Err(NoticeError::Refused(match addrs.first() {
                Some(a) => Refusal::Address(a.ip()),
                None => Refusal::NoAddress(target.host.clone()),
            })),
        }
    }

    fn take(&self, target: &Target) -> Option<Conn> {
        let mut idle = telemetry::locks::lock(&self.idle);
        // A connection the host closed while idle is found out by the GETs on it, which are
        // then sent once more on a new one (`get_batch`).
        idle.get_mut(target)?.take(Instant::now(), |_| true)
    }

    fn put(&self, target: &Target, conn: Conn) {
        let mut idle = telemetry::locks::lock(&self.idle);
        if idle.len() >= MAX_HOSTS && !idle.contains(target) {
            idle.clear();
        }
        let settings = self.settings;
        let new = || IdleList::new(settings.max_idle_per_host, Some(settings.idle_timeout));
        idle.entry(target, new).put(conn, Instant::now());
    }

    /// Closes connections idle longer than the idle timeout. Called every few seconds by the
    /// notice dispatcher, so a host that sees no more notices does not keep sockets open.
    pub fn close_idle(&self) {
        let now = Instant::now();
        telemetry::locks::lock(&self.idle).retain(|conns| {
            conns.close_stale(now);
            !conns.is_empty()
        });
    }

    /// Idle connections cached now (all hosts).
    pub fn idle_connections(&self) -> usize {
        telemetry::locks::lock(&self.idle)
            .values()
            .map(IdleList::len)
            .sum()
    }
}

/// The GETs of `targets` pipelined on `conn`: a result per target and whether the connection
/// may be kept; `None` when it was closed before any answer (nothing was read: send again).
async fn pipeline(
    conn: &mut Conn,
    targets: &[&Target],
    max_bytes: usize,
    each: Option<Duration>,
) -> Option<(Vec<Result<HttpAnswer, NoticeError>>, bool)> {
    let failed = |e: &H1Error| Err(NoticeError::Failed(e.to_string()));
    let timed_out = || H1Error::Io(std::io::ErrorKind::TimedOut.into());
    let paths: Vec<&str> = targets.iter().map(|t| t.path_and_query.as_str()).collect();
    let authority = targets.first().map_or("", |t| t.authority.as_str());
    match bounded(each, conn.send_gets(&paths, authority)).await {
        Some(Ok(())) => {}
        Some(Err(H1Error::ClosedBeforeAnswer)) => return None,
        Some(Err(e)) => return Some((targets.iter().map(|_| failed(&e)).collect(), false)),
        None => {
            return Some((
                targets.iter().map(|_| failed(&timed_out())).collect(),
                false,
            ));
        }
    }
    let mut results = Vec::with_capacity(targets.len());
    let mut keep = true;
    while results.len() < targets.len() {
        let answer = bounded(each, conn.read_answer(max_bytes))
            .await
            .unwrap_or_else(|| Err(timed_out()));
        match answer {
            Ok(r) => {
                results.push(Ok(HttpAnswer {
                    status: r.status,
                    body: r.body,
                }));
                if !r.keep_alive {
                    keep = false;
                    break;
                }
            }
            Err(H1Error::ClosedBeforeAnswer) if results.is_empty() => return None,
            Err(e) => {
                results.push(failed(&e));
                keep = false;
                break;
            }
        }
    }
    let cut = H1Error::Protocol("connection closed or timed out before this answer");
    results.resize_with(targets.len(), || failed(&cut));
    Some((results, keep && conn.idle_clean()))
}

/// `fut`, within `limit` when there is one; `None` when it ran out.
async fn bounded<T>(
    limit: Option<Duration>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, fut).await.ok(),
        None => Some(fut.await),
    }
}
