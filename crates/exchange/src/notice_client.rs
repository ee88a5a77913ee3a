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

use crate::h1::{Conn, H1Error};
use crate::outbound::{ByOrigin, Refusal, Scheme, Target, address_allowed};
use crate::pool::{Answer, dial};
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

struct Idle {
    conn: Conn,
    since: Instant,
}

/// Connection cache shared by the notice workers and the auction path.
pub struct NoticeClient {
    settings: ClientSettings,
    idle: Mutex<ByOrigin<Vec<Idle>>>,
}

impl std::fmt::Debug for NoticeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts = self.idle.lock().map_or(0, |m| m.len());
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
    ) -> Result<Answer, NoticeError> {
        if let Some(mut conn) = self.take(target) {
            // A cached connection may have been closed by the host since; then the request
            // never reached it, and one try on a fresh connection is safe.
            match send(&mut conn, target, max_bytes).await {
                Ok((answer, keep)) => {
                    if keep {
                        self.put(target, conn);
                    }
                    return Ok(answer);
                }
                Err(H1Error::ClosedBeforeAnswer) => {}
                Err(e) => return Err(NoticeError::Failed(e.to_string())),
            }
        }
        let addr = self.resolve(target).await?;
        let tls = match target.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let client = tls.ok_or_else(|| {
                    NoticeError::Failed("https notice host, but no CA roots are known".to_owned())
                })?;
                let name = server_name(&target.host).map_err(NoticeError::Failed)?;
                Some((client, name))
            }
        };
        let mut conn = dial(addr, tls)
            .await
            .map_err(|e| NoticeError::Failed(format!("{}: {e}", target.authority)))?;
        let (answer, keep) = send(&mut conn, target, max_bytes)
            .await
            .map_err(|e| NoticeError::Failed(e.to_string()))?;
        if keep {
            self.put(target, conn);
        }
        Ok(answer)
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
        let mut idle = self.idle.lock().ok()?;
        let conns = idle.get_mut(target)?;
        let fresh_after = Instant::now().checked_sub(self.settings.idle_timeout);
        while let Some(c) = conns.pop() {
            let stale = fresh_after.is_some_and(|t| c.since < t);
            if !stale {
                return Some(c.conn);
            }
        }
        None
    }

    fn put(&self, target: &Target, conn: Conn) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        if idle.len() >= MAX_HOSTS && !idle.contains(target) {
            idle.clear();
        }
        let conns = idle.entry(target, Vec::new);
        if conns.len() < self.settings.max_idle_per_host {
            conns.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    /// Closes connections idle longer than the idle timeout. Called every few seconds by the
    /// notice dispatcher, so a host that sees no more notices does not keep sockets open.
    pub fn close_idle(&self) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        let Some(fresh_after) = Instant::now().checked_sub(self.settings.idle_timeout) else {
            return;
        };
        idle.retain(|conns| {
            conns.retain(|c| c.since >= fresh_after);
            !conns.is_empty()
        });
    }

    /// Idle connections cached now (all hosts).
    pub fn idle_connections(&self) -> usize {
        self.idle
            .lock()
            .map_or(0, |m| m.values().map(Vec::len).sum())
    }
}

/// One GET on `conn`: the answer, and whether the connection may be kept.
async fn send(
    conn: &mut Conn,
    target: &Target,
    max_bytes: usize,
) -> Result<(Answer, bool), H1Error> {
    let r = conn
        .get(&target.path_and_query, &target.authority, max_bytes)
        .await?;
    Ok((
        Answer {
            status: r.status,
            body: r.body,
        },
        r.keep_alive,
    ))
}
