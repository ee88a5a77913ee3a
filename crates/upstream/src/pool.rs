//! One HTTP/1.1 keep-alive connection pool per bidder, so that a slow bidder can use up only its
//! own connections and never delay or starve another. Calls go through the lean client of
//! `h1.rs`, driven by the auction's own task; `dial` also opens the notice client's.
//!
//! Invariant: open connections (idle + busy) never exceed `max_connections`. A call holds a
//! semaphore permit for its whole life; it takes an idle connection or, only when there is none,
//! dials a new one. Since dialling happens only with the idle stack empty, idle + busy <= permits.
//! When every permit is taken the call is refused at once (no queue): the bidder is skipped for
//! that auction and counted, as the dispcount idea says.
//!
//! A call that misses the auction's deadline is not cut: it goes on in its own task, holding its
//! permit, for up to `drain` longer. A bidder that answers a little late thus keeps its kept-alive
//! connection instead of costing a new TCP handshake on every late answer; one that never answers
//! loses the connection after `drain`, and its pool, not anyone else's, runs dry meanwhile.
//!
//! gzip: a body the caller compressed goes out with `Content-Encoding: gzip`
//! ([`BidderPool::start_gzipped`]); a pool built `accept_gzip(true)` asks for gzip answers. Any
//! gzip answer is inflated, asked for or not, within the same `max_response_bytes` as the body
//! read; an answer in another coding is the call's error. The connection's fate is decided
//! before decoding: a complete answer that cannot be inflated still leaves it in the pool.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;

use crate::conn_pool::ConnPool;
use crate::endpoint::Endpoint;
use crate::gzip::{self, InflateError};
use crate::h1::{Conn, ContentCoding, H1Error, HeadFields, RequestHead};
use crate::stream::{ConnectError, Stream};
use crate::tls::ClientTls;
use rustls_pki_types::ServerName;

/// Why a call to a bidder produced no answer body.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("all {0} connections busy")]
    PoolExhausted(u32),
    #[error("connect failed: {0}")]
    Connect(std::io::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("the host has not resolved to an address")]
    Unresolved,
    #[error("HTTP error: {0}")]
    HttpAnswer(H1Error),
    #[error("response body larger than {0} bytes")]
    TooLarge(usize),
    #[error("reading the response body failed: {0}")]
    Body(String),
    #[error("answer in a content-coding other than gzip or identity")]
    BadEncoding,
    #[error("gzip answer inflates to more than {0} bytes")]
    InflatedTooLarge(usize),
    #[error("gzip answer cannot be inflated: {0}")]
    BadGzip(InflateError),
}

impl CallError {
    /// Bounded label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            CallError::PoolExhausted(_) => "pool_exhausted",
            CallError::Connect(_) => "connect",
            CallError::Tls(_) => "tls",
            CallError::Unresolved => "unresolved",
            CallError::HttpAnswer(_) => "http",
            CallError::TooLarge(_) => "too_large",
            CallError::Body(_) => "body",
            CallError::BadEncoding => "bad_encoding",
            CallError::InflatedTooLarge(_) => "inflated_too_large",
            CallError::BadGzip(_) => "bad_gzip",
        }
    }
}

impl From<InflateError> for CallError {
    fn from(e: InflateError) -> Self {
        match e {
            InflateError::TooLarge(max) => CallError::InflatedTooLarge(max),
            other => CallError::BadGzip(other),
        }
    }
}

/// A call in flight; it holds its connection permit until it completes or is dropped.
pub struct Call {
    future:
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<HttpAnswer, CallError>> + Send>>,
    drain: Duration,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}

impl std::future::Future for Call {
    type Output = Result<HttpAnswer, CallError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.future.as_mut().poll(cx)
    }
}

impl Call {
    /// Lets a call that missed its auction finish on its own task, for at most `drain` after
    /// `deadline`, so that a late answer leaves its connection in the pool.
    pub fn detach(self, deadline: Instant) {
        let give_up_at = deadline + self.drain;
        tokio::spawn(async move {
            let _ = tokio::time::timeout_at(give_up_at.into(), self.future).await;
        });
    }
}

/// A call's hold on its pool: counted in the pool's `busy` gauge until the call ends or is
/// dropped. It is the call's one reference to the pool, so counting costs no extra clone.
struct Busy(Arc<BidderPool>);

impl Busy {
    fn count(pool: &Arc<BidderPool>) -> Busy {
        pool.busy.fetch_add(1, Relaxed);
        Busy(Arc::clone(pool))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Relaxed);
    }
}

/// A bidder's answer: status and complete body, inflated if it came gzip-encoded.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: StatusCode,
    pub body: Bytes,
}

/// How big a pool is and how it treats answers: its own settings, apart from the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLimits {
    /// Open connections at most (idle and busy); a call beyond is refused, never queued.
    pub max_connections: u32,
    /// Largest answer read, in bytes; a larger one is the call's error.
    pub max_response_bytes: usize,
    /// How long after the caller's deadline a late answer is still read (and thrown away) so
    /// that its connection can be reused.
    pub drain: Duration,
}

/// The connection pool of one bidder.
#[derive(Debug)]
pub struct BidderPool {
    endpoint: Endpoint,
    max_connections: u32,
    max_response_bytes: usize,
    drain: Duration,
    /// Permits (refused at once when none is free) and the idle connections.
    conns: ConnPool<Conn>,
    /// Calls holding a permit now, late ones draining included (a gauge the owner renders).
    busy: Arc<AtomicU64>,
    /// The request line and fixed headers of every call, encoded once per body coding.
    heads: Heads,
    /// What the heads were built with, so that each builder keeps what the others set.
    token: Option<Box<str>>,
    accept_gzip: bool,
    /// Where new connections go: the host's latest address (`None` until it resolves).
    /// Followed by `resolver.rs`; idle connections to an old address are closed when it moves.
    addr: arc_swap::ArcSwapOption<SocketAddr>,
}

impl BidderPool {
    /// A pool of at most `limits.max_connections`; `busy` counts the calls holding one of them
    /// (it may be shared with the pool this one replaces, whose calls still finish).
    pub fn new(endpoint: Endpoint, limits: PoolLimits, busy: Arc<AtomicU64>) -> Self {
        let PoolLimits {
            max_connections,
            max_response_bytes,
            drain,
        } = limits;
        let heads = Heads::new(&endpoint, None, false);
        BidderPool {
            addr: arc_swap::ArcSwapOption::from(endpoint.addr.map(Arc::new)),
            endpoint,
            heads,
            token: None,
            accept_gzip: false,
            max_connections,
            max_response_bytes,
            drain,
            conns: ConnPool::new(max_connections as usize, None),
            busy,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The address new connections go to; `None` while the host has not resolved.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr.load().as_deref().copied()
    }

    /// Moves new connections to `addr`; when it differs from the one in use, the idle
    /// connections (to the old one) are closed. Whether it changed.
    pub fn set_addr(&self, addr: SocketAddr) -> bool {
        // One writer at a time (the resolver, a reload): a swap that lost a race is harmless,
        // the next look corrects it.
        if self.addr() == Some(addr) {
            return false;
        }
        self.addr.store(Some(Arc::new(addr)));
        self.conns.clear();
        true
    }

    /// The same pool, sending `Authorization: Bearer {token}` with every call (the markup
    /// store's writer key).
    pub fn authorized(mut self, token: &str) -> Self {
        self.token = Some(token.into());
        self.heads = Heads::new(&self.endpoint, self.token.as_deref(), self.accept_gzip);
        self
    }

    /// The same pool, sending `Accept-Encoding: gzip` with every call when `accept` (the
    /// bidder may then answer gzip-encoded; it is inflated either way).
    pub fn accept_gzip(mut self, accept: bool) -> Self {
        self.accept_gzip = accept;
        self.heads = Heads::new(&self.endpoint, self.token.as_deref(), self.accept_gzip);
        self
    }

    /// Whether the pool asks for gzip answers (a reload that changes it needs a new pool).
    pub fn accepts_gzip(&self) -> bool {
        self.accept_gzip
    }

    /// Starts a POST of `body`: takes a connection permit now, or fails at once with
    /// `PoolExhausted` (never waits for one). The returned [`Call`] does the I/O when polled.
    pub fn start(self: &Arc<Self>, body: Bytes) -> Result<Call, CallError> {
        self.start_with(body, BodyCoding::Identity)
    }

    /// [`BidderPool::start`] for a body already gzip-encoded (`gzip::compress`), sent with
    /// `Content-Encoding: gzip`; the same bytes may go to every bidder that takes gzip.
    pub fn start_gzipped(self: &Arc<Self>, gzipped_body: Bytes) -> Result<Call, CallError> {
        self.start_with(gzipped_body, BodyCoding::Gzip)
    }

    fn start_with(self: &Arc<Self>, body: Bytes, coding: BodyCoding) -> Result<Call, CallError> {
        let Some(permit) = self.conns.try_permit() else {
            return Err(CallError::PoolExhausted(self.max_connections));
        };
        let drain = self.drain;
        let held = Busy::count(self);
        Ok(Call {
            future: Box::pin(async move {
                // Both let go when the call ends, after the connection went back to the idle
                // stack.
                let _permit = permit;
                held.0.call(body, coding).await
            }),
            drain,
        })
    }

    /// One request on an idle or new connection; the connection returns to the pool only after a
    /// complete answer that lets it stay open (anything else may leave it mid-message).
    async fn call(&self, body: Bytes, coding: BodyCoding) -> Result<HttpAnswer, CallError> {
        let (mut conn, reused) = match self.take_idle() {
            Some(conn) => (conn, true),
            None => (self.dial().await?, false),
        };
        let head = self.heads.for_body(coding);
        let max = self.max_response_bytes;
        let result = match conn.post(head, &body, max).await {
            // A kept-alive connection may have been closed by the bidder just before we used it;
            // the request never reached it, so one retry on a fresh connection is safe.
            Err(H1Error::ClosedBeforeAnswer) if reused => {
                conn = self.dial().await?;
                conn.post(head, &body, max).await
            }
            other => other,
        };
        match result {
            Ok(answer) => {
                if answer.keep_alive && conn.idle_clean() {
                    self.put_idle(conn);
                }
                Ok(HttpAnswer {
                    status: answer.status,
                    body: decoded(answer.coding, answer.body, max)?,
                })
            }
            Err(H1Error::TooLarge(n)) => Err(CallError::TooLarge(n)),
            Err(e) => Err(CallError::HttpAnswer(e)),
        }
    }

    fn take_idle(&self) -> Option<Conn> {
        // A connection the bidder closed while idle is found out by the request on it, which is
        // then sent once more on a new one (`call`).
        self.conns.take(|_| true)
    }

    fn put_idle(&self, conn: Conn) {
        self.conns.put(conn);
    }

    async fn dial(&self) -> Result<Conn, CallError> {
        let tls = self
            .endpoint
            .tls
            .as_ref()
            .map(|t| (&t.client, t.server_name.clone()));
        let addr = self.addr().ok_or(CallError::Unresolved)?;
        dial(addr, tls).await
    }
}

/// How the body of a call is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyCoding {
    Identity,
    Gzip,
}

/// A pool's request heads, one per body coding, built with the pool.
#[derive(Debug)]
struct Heads {
    identity: RequestHead,
    gzip: RequestHead,
}

impl Heads {
    fn new(endpoint: &Endpoint, token: Option<&str>, accept_gzip: bool) -> Heads {
        let head = |gzip_body| {
            let fields = HeadFields {
                token,
                accept_gzip,
                gzip_body,
            };
            RequestHead::post_with(&endpoint.path, &endpoint.authority, fields)
        };
        Heads {
            identity: head(false),
            gzip: head(true),
        }
    }

    fn for_body(&self, coding: BodyCoding) -> &RequestHead {
        match coding {
            BodyCoding::Identity => &self.identity,
            BodyCoding::Gzip => &self.gzip,
        }
    }
}

/// An answer's body as the caller reads it: inflated from gzip (at most `max` bytes), as it
/// is with no coding, refused in a coding not spoken here.
fn decoded(coding: ContentCoding, body: Bytes, max: usize) -> Result<Bytes, CallError> {
    match coding {
        ContentCoding::Identity => Ok(body),
        // An empty body (a 204 no-bid, say) has nothing to decode, whatever the header says.
        _ if body.is_empty() => Ok(body),
        ContentCoding::Gzip => Ok(Bytes::from(gzip::inflate(&body, max)?)),
        ContentCoding::Unsupported => Err(CallError::BadEncoding),
    }
}

/// Opens a connection to `addr` for the lean client, over TLS when `tls` names the verifier
/// and the name the peer's certificate must carry.
pub(crate) async fn dial(
    addr: SocketAddr,
    tls: Option<(&ClientTls, ServerName<'static>)>,
) -> Result<Conn, CallError> {
    match Stream::connect(addr, tls).await {
        Ok(Stream::Plain(tcp)) => Ok(Conn::new(Box::new(tcp))),
        Ok(Stream::Tls(session)) => Ok(Conn::new(session)),
        Err(ConnectError::Connect(e)) => Err(CallError::Connect(e)),
        Err(ConnectError::Tls(e)) => Err(CallError::Tls(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A bidder on loopback that answers each request `{}`, keeping its connection open;
    /// counts the connections it accepted.
    async fn bidder() -> (SocketAddr, Arc<AtomicU64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Relaxed);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0_u8; 4096];
                    loop {
                        let Ok(n) = stream.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        // Every request of this test has a body of 2 bytes after its head.
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            if buf.len() < end + 4 + 2 {
                                break;
                            }
                            buf.drain(..end + 4 + 2);
                            let answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
                            if stream.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    #[tokio::test]
    async fn a_pool_whose_lock_a_panic_poisoned_keeps_serving_and_counts_it() {
        let (addr, accepted) = bidder().await;
        let endpoint = crate::endpoint::parse_endpoint(&format!("http://{addr}/bid")).unwrap();
        let limits = PoolLimits {
            max_connections: 2,
            max_response_bytes: 1024,
            drain: Duration::from_millis(100),
        };
        let pool = Arc::new(BidderPool::new(endpoint, limits, Arc::default()));
        let first = pool
            .start(Bytes::from_static(b"{}"))
            .unwrap()
            .await
            .unwrap();
        assert_eq!(first.status, StatusCode::OK);

        pool.conns.poison_for_test();

        let before = telemetry::locks::poisoned_total();
        let second = pool
            .start(Bytes::from_static(b"{}"))
            .unwrap()
            .await
            .unwrap();
        assert_eq!(second.status, StatusCode::OK);
        assert_eq!(second.body.as_ref(), b"{}");
        assert_eq!(
            accepted.load(Relaxed),
            1,
            "the idle connection was taken from the poisoned stack and reused"
        );
        assert!(
            telemetry::locks::poisoned_total() >= before + 2,
            "taking and returning the connection each counted the poisoned lock"
        );
    }
}
