//! The accept loop and the life of one connection: a cap on open connections, a header timeout
//! (slowloris), an idle timeout between requests, a bound on header size, and a graceful stop
//! that lets requests in flight finish.
//!
//! Timeouts are enforced by one watchdog per connection rather than by hyper's header timer,
//! because hyper's timer runs from the moment it starts waiting for a request, so it cannot tell
//! a client that is slow to send its headers (close it quickly) from a kept-alive connection
//! that is merely idle between requests (keep it much longer). The watchdog reads three facts the
//! connection publishes: whether a request is being served, when the last one ended, and when
//! the first byte after it arrived.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::tls::Tls;

/// What a server accepts from its clients' connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections at most; more are closed as soon as they are accepted.
    pub max_connections: u32,
    /// Time from the first byte of a request to the end of its headers.
    pub header_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Largest request line plus headers, in bytes (431 beyond).
    pub max_header_bytes: usize,
    /// Once the listener closes, how long requests in flight may take before their
    /// connections are dropped.
    pub drain_timeout: Duration,
    /// Open connections from one IP address at most; more are closed as soon as accepted.
    pub max_connections_per_ip: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 4_096,
            header_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            drain_timeout: Duration::from_secs(10),
            max_connections_per_ip: 1_024,
        }
    }
}

/// `[http]`: what a server accepts from its clients, the same keys in the exchange's, the
/// bidder's and the creative edge's files, in their configured units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSection {
    /// Largest accepted request body in bytes (413 beyond). Default 256 KiB for the exchange
    /// and the bidder; unset, the creative edge allows what its `[store]` limits make a put.
    pub max_body_bytes: Option<usize>,
    /// Time allowed to receive a request's headers, then its body, before the connection is
    /// closed (slowloris defence), in milliseconds. Default 5000.
    pub read_timeout_ms: u64,
    /// Open client connections at most; more are closed as soon as accepted. Default 4096.
    pub max_connections: u32,
    /// How long a kept-alive connection may wait for its next request, in ms. Default 60000.
    pub idle_timeout_ms: u64,
    /// Largest request line plus headers, in bytes (431 beyond). Default 16384.
    pub max_header_bytes: usize,
    /// On SIGTERM or SIGINT, how long the listener keeps accepting (and answering as usual)
    /// after `/readyz` turned 503, so that a load balancer stops sending first, in ms.
    /// Default 5000; 0 closes the listener at once.
    pub drain_grace_ms: u64,
    /// Once the listener closes, how long requests in flight may take to finish before their
    /// connections are dropped, in ms. Default 10000.
    pub drain_timeout_ms: u64,
    /// Open client connections from one IP address at most. Default 1024.
    pub max_connections_per_ip: u32,
}

impl Default for HttpSection {
    fn default() -> Self {
        HttpSection {
            max_body_bytes: None,
            read_timeout_ms: 5_000,
            max_connections: 4_096,
            idle_timeout_ms: 60_000,
            max_header_bytes: 16 * 1024,
            drain_grace_ms: 5_000,
            drain_timeout_ms: 10_000,
            max_connections_per_ip: 1_024,
        }
    }
}

/// The body limit of the exchange and the bidder when `http.max_body_bytes` is not set.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;

impl HttpSection {
    /// The body limit: `http.max_body_bytes`, else `default`.
    pub fn body_limit(&self, default: usize) -> usize {
        self.max_body_bytes.unwrap_or(default)
    }

    /// How long a request's headers, then its body, may take to arrive.
    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.read_timeout_ms)
    }

    /// Checks every key; the error names the key (`http.*`) and the rule.
    pub fn check(&self) -> Result<(), settings::Invalid> {
        if self
            .max_body_bytes
            .is_some_and(|n| n == 0 || n > 64 * 1024 * 1024)
        {
            return Err(settings::Invalid::new(
                "http.max_body_bytes",
                "must be 1..=67108864",
            ));
        }
        settings::check_range("http.read_timeout_ms", self.read_timeout_ms, 1..=600_000)?;
        settings::check_range("http.max_connections", self.max_connections, 1..=1_000_000)?;
        settings::check_range("http.idle_timeout_ms", self.idle_timeout_ms, 1..=3_600_000)?;
        settings::check_range(
            "http.max_header_bytes",
            self.max_header_bytes,
            MIN_HEADER_BYTES..=1024 * 1024,
        )?;
        if self.drain_grace_ms > 600_000 {
            return Err(settings::Invalid::new(
                "http.drain_grace_ms",
                "must be at most 600000",
            ));
        }
        if self.drain_timeout_ms > 600_000 {
            return Err(settings::Invalid::new(
                "http.drain_timeout_ms",
                "must be at most 600000",
            ));
        }
        settings::check_range(
            "http.max_connections_per_ip",
            self.max_connections_per_ip,
            1..=1_000_000,
        )?;
        Ok(())
    }

    /// The limits as the accept loop uses them; the header timeout is the read timeout.
    pub fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections,
            header_timeout: Duration::from_millis(self.read_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_header_bytes: self.max_header_bytes,
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
            max_connections_per_ip: self.max_connections_per_ip,
        }
    }

    /// How long the listener keeps accepting once a drain starts.
    pub fn drain_grace(&self) -> Duration {
        Duration::from_millis(self.drain_grace_ms)
    }
}

/// The key `[http] shutdown_grace_ms` moved to, for each server's moved keys.
pub const MOVED_SHUTDOWN_GRACE: (&str, &str) = ("http.shutdown_grace_ms", "http.drain_timeout_ms");

/// Smallest header bound hyper accepts for its read buffer.
pub const MIN_HEADER_BYTES: usize = 8 * 1024;

/// Counters of the connection layer, rendered by each server under its own metric prefix.
#[derive(Debug, Default)]
pub struct ConnStats {
    pub open: AtomicU64,
    pub accepted: AtomicU64,
    /// Closed at once because `max_connections` were open.
    pub refused: AtomicU64,
    /// Closed at once because `max_connections_per_ip` were open from the same address.
    pub refused_per_ip: AtomicU64,
    /// Closed because the TLS handshake failed or did not end within the header timeout.
    pub tls_failed: AtomicU64,
    /// Closed because a request's headers did not arrive within the header timeout.
    pub header_timeouts: AtomicU64,
    /// Closed after waiting longer than the idle timeout for a request.
    pub idle_closed: AtomicU64,
    /// Ended by a protocol error (malformed request line, bad Content-Length, headers too big).
    pub protocol_errors: AtomicU64,
}

impl ConnStats {
    /// Appends these counters as `{prefix}_connections_*`.
    pub fn render(&self, prefix: &str, out: &mut String) {
        telemetry::single(
            out,
            &format!("{prefix}_connections_open"),
            "gauge",
            "Client connections open now.",
            self.open.load(Relaxed),
        );
        let total = format!("{prefix}_connections_total");
        telemetry::family(
            out,
            &total,
            "counter",
            "Client connections by how they were taken or ended.",
        );
        for (outcome, v) in [
            ("accepted", &self.accepted),
            ("refused", &self.refused),
            ("refused_per_ip", &self.refused_per_ip),
            ("tls_failed", &self.tls_failed),
            ("header_timeout", &self.header_timeouts),
            ("idle_closed", &self.idle_closed),
            ("protocol_error", &self.protocol_errors),
        ] {
            telemetry::sample(out, &total, &[("outcome", outcome)], v.load(Relaxed));
        }
    }
}

/// Accepts connections until `shutdown` completes, serving each over HTTP/1.1 keep-alive with
/// `handler` (given each request and its peer's address) within `limits`. Then it stops
/// accepting, asks every connection to close after its request in flight (an idle kept-alive
/// connection closes now, a busy one answers with `Connection: close`), and returns once all
/// are closed or `limits.drain_timeout` has passed. A drain's grace (accepting on while not
/// ready) is the caller's: `shutdown` completes when it is over.
pub async fn serve<H, F, B>(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
    stats: Arc<ConnStats>,
    handler: H,
) where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: AnswerBody,
{
    serve_with_tls(listener, None, shutdown, limits, stats, handler).await;
}

/// [`serve`], over TLS when `tls` is given: the handshake must end within the header timeout.
pub async fn serve_with_tls<H, F, B>(
    listener: TcpListener,
    tls: Option<Tls>,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
    stats: Arc<ConnStats>,
    handler: H,
) where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: AnswerBody,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let per_ip = Arc::new(PerIp::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                crate::log_limit::warn("accept", &e);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Refuse at once rather than leave it waiting in a queue: the client can try
            // another server now instead of timing out later.
            stats.refused.fetch_add(1, Relaxed);
            drop(stream);
            continue;
        };
        let Some(ip_slot) = PerIp::take(&per_ip, peer.ip(), limits.max_connections_per_ip) else {
            stats.refused_per_ip.fetch_add(1, Relaxed);
            drop(stream);
            continue;
        };
        stats.accepted.fetch_add(1, Relaxed);
        stats.open.fetch_add(1, Relaxed);
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let stats = stats.clone();
        let stop = stop_rx.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => connection(stream, peer, limits, &stats, stop, handler).await,
                Some(tls) => {
                    match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            connection(stream, peer, limits, &stats, stop, handler).await;
                        }
                        Ok(Err(_)) | Err(_) => {
                            stats.tls_failed.fetch_add(1, Relaxed);
                        }
                    }
                }
            }
            stats.open.fetch_sub(1, Relaxed);
            drop(ip_slot);
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds one slot: all slots back means all connections are closed.
    let _ = tokio::time::timeout(
        limits.drain_timeout,
        slots.acquire_many(limits.max_connections),
    )
    .await;
}

/// Open connections by peer address. Short critical sections (one map update); an address
/// leaves the map with its last connection, so the map holds only addresses connected now.
#[derive(Debug, Default)]
struct PerIp {
    open: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, u32>>,
}

/// One connection's place in [`PerIp`], given back when dropped.
struct IpSlot {
    table: Arc<PerIp>,
    ip: std::net::IpAddr,
}

impl PerIp {
    fn take(table: &Arc<PerIp>, ip: std::net::IpAddr, max: u32) -> Option<IpSlot> {
        let mut open = telemetry::locks::lock(&table.open);
        let n = open.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            table: table.clone(),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut open = telemetry::locks::lock(&self.table.open);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// What one connection publishes to its watchdog. Times are milliseconds since `born`.
#[derive(Debug)]
struct Activity {
    born: Instant,
    serving: AtomicU32,
    /// Requests answered on this connection so far.
    served: AtomicU32,
    /// When the last request ended (or the connection opened).
    quiet_since_ms: AtomicU64,
    /// No byte has arrived since `quiet_since_ms`.
    quiet: AtomicBool,
    /// When the first byte after `quiet_since_ms` arrived.
    first_byte_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            born: Instant::now(),
            serving: AtomicU32::new(0),
            served: AtomicU32::new(0),
            quiet_since_ms: AtomicU64::new(0),
            quiet: AtomicBool::new(true),
            first_byte_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        self.born + Duration::from_millis(ms)
    }
}

enum Verdict {
    Healthy { recheck_at: Instant },
    HeaderTimeout,
    Idle,
}

/// 400 and `Connection: close` for a request whose framing [`crate::framing`] refused: what
/// follows it on the connection cannot be trusted to be a request.
fn framing_refused(why: crate::framing::FramingError) -> Response<crate::Body> {
    let mut r = crate::json_error(http::StatusCode::BAD_REQUEST, &why.to_string());
    r.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    r
}

/// What a server's answers may carry as a body: any HTTP body of bytes (whole, or streamed).
pub trait AnswerBody:
    hyper::body::Body<Data = bytes::Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
    + Send
    + Unpin
    + 'static
{
}

impl<B> AnswerBody for B where
    B: hyper::body::Body<
            Data = bytes::Bytes,
            Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        > + Send
        + Unpin
        + 'static
{
}

/// An answer's body that marks its request served when it is dropped: once sent in full,
/// or when the connection ends.
struct Tracked<B> {
    body: B,
    activity: Option<Arc<Activity>>,
}

impl<B: AnswerBody> hyper::body::Body for Tracked<B> {
    type Data = bytes::Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.quiet_since_ms.store(activity.now_ms(), Relaxed);
            activity.quiet.store(true, Relaxed);
            activity.served.fetch_add(1, Relaxed);
            activity.serving.fetch_sub(1, Relaxed);
        }
    }
}

/// Pure reading of a connection's activity against the limits at `now_ms`.
fn judge(a: &Activity, limits: &Limits, now_ms: u64) -> Verdict {
    let header_ms = u64::try_from(limits.header_timeout.as_millis()).unwrap_or(u64::MAX);
    let idle_ms = u64::try_from(limits.idle_timeout.as_millis()).unwrap_or(u64::MAX);
    if a.serving.load(Relaxed) > 0 {
        // The handler bounds its own work (body read timeout, the request's deadline).
        return Verdict::Healthy {
            recheck_at: a.at(now_ms.saturating_add(header_ms)),
        };
    }
    if a.quiet.load(Relaxed) {
        // A connection that has not sent a first request is not a kept-alive client at rest:
        // it gets the header timeout, so silent connections cannot hold slots for a minute.
        let first = a.served.load(Relaxed) == 0;
        let wait_ms = if first {
            header_ms.min(idle_ms)
        } else {
            idle_ms
        };
        let due = a.quiet_since_ms.load(Relaxed).saturating_add(wait_ms);
        if now_ms >= due {
            return if first {
                Verdict::HeaderTimeout
            } else {
                Verdict::Idle
            };
        }
        // A request may start at any moment without waking the watchdog: look again within a
        // header timeout, so a slow header is cut within twice that.
        return Verdict::Healthy {
            recheck_at: a.at(due.min(now_ms.saturating_add(header_ms))),
        };
    }
    let due = a.first_byte_ms.load(Relaxed).saturating_add(header_ms);
    if now_ms >= due {
        return Verdict::HeaderTimeout;
    }
    Verdict::Healthy {
        recheck_at: a.at(due),
    }
}

async fn connection<S, H, F, B>(
    stream: S,
    peer: SocketAddr,
    limits: Limits,
    stats: &Arc<ConnStats>,
    mut stop: watch::Receiver<bool>,
    handler: H,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: AnswerBody,
{
    let activity = Arc::new(Activity::new());
    let heads = Arc::new(std::sync::Mutex::new(crate::framing::HeadScanner::default()));
    let io = WatchedIo {
        inner: stream,
        activity: activity.clone(),
        heads: heads.clone(),
    };
    let service_activity = activity.clone();
    let service_stats = stats.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let activity = service_activity.clone();
        activity.serving.fetch_add(1, Relaxed);
        let answer = match framing_of(&heads, &req) {
            Ok(()) => Either::Left(handler(req, peer)),
            Err(why) => {
                service_stats.protocol_errors.fetch_add(1, Relaxed);
                Either::Right(std::future::ready(framing_refused(why)))
            }
        };
        async move {
            // The request is served until its body is sent (or dropped): a long streamed
            // answer is work in progress, not an idle connection.
            let response = match answer {
                Either::Left(handled) => handled.await.map(|body| Tracked {
                    body: Either::Left(body),
                    activity: Some(activity),
                }),
                Either::Right(refused) => refused.await.map(|body| Tracked {
                    body: Either::Right(body),
                    activity: Some(activity),
                }),
            };
            Ok::<_, Infallible>(response)
        }
    });
    let conn = builder(&limits).serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let watchdog = tokio::time::sleep(limits.header_timeout.min(limits.idle_timeout));
    tokio::pin!(watchdog);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if result.is_err() {
                    stats.protocol_errors.fetch_add(1, Relaxed);
                }
                return;
            }
            () = &mut watchdog => {
                match judge(&activity, &limits, activity.now_ms()) {
                    Verdict::Healthy { recheck_at } => {
                        watchdog.as_mut().reset(recheck_at.into());
                    }
                    Verdict::HeaderTimeout => {
                        stats.header_timeouts.fetch_add(1, Relaxed);
                        return;
                    }
                    Verdict::Idle => {
                        stats.idle_closed.fetch_add(1, Relaxed);
                        conn.as_mut().graceful_shutdown();
                        // Gives the (idle) connection a moment to close cleanly, then drops it.
                        watchdog.as_mut().reset((Instant::now() + limits.header_timeout).into());
                        let _ = tokio::time::timeout(limits.header_timeout, conn.as_mut()).await;
                        return;
                    }
                }
            }
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Framing that a proxy in front might read otherwise never reaches a handler. A second
/// Content-Length equal to the first is folded away by hyper: the bytes tell.
fn framing_of(
    heads: &std::sync::Mutex<crate::framing::HeadScanner>,
    req: &Request<Incoming>,
) -> Result<(), crate::framing::FramingError> {
    let head = telemetry::locks::lock(heads).next_head();
    match (crate::framing::check(req.version(), req.headers()), head) {
        (Ok(()), crate::framing::Head::RepeatedLength) => {
            Err(crate::framing::FramingError::ContentLength)
        }
        (Ok(()), crate::framing::Head::Unknown) => Err(crate::framing::FramingError::Unfollowed),
        (other, _) => other,
    }
}

/// hyper's HTTP/1.1 server settings for one connection.
fn builder(limits: &Limits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The connection's watchdog enforces header and idle timeouts.
        .header_read_timeout(None)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .max_header_size(limits.max_header_bytes)
        .keep_alive(true);
    builder
}

/// A client stream (TCP or TLS) that notes when the first byte of a request arrives.
struct WatchedIo<S> {
    inner: S,
    activity: Arc<Activity>,
    /// Follows the request heads read, for what hyper folds away (`framing::HeadScanner`).
    heads: Arc<std::sync::Mutex<crate::framing::HeadScanner>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for WatchedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Some(new) = buf.filled().get(before..)
            && !new.is_empty()
        {
            telemetry::locks::lock(&self.heads).feed(new);
        }
        if buf.filled().len() > before && self.activity.quiet.load(Relaxed) {
            let now = self.activity.now_ms();
            self.activity.first_byte_ms.store(now, Relaxed);
            self.activity.quiet.store(false, Relaxed);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WatchedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity() -> Activity {
        Activity::new()
    }

    #[test]
    fn http_limits_name_their_key_and_convert_milliseconds() {
        let good = HttpSection {
            max_body_bytes: None,
            max_connections: 10,
            read_timeout_ms: 100,
            idle_timeout_ms: 1_000,
            max_header_bytes: 8192,
            drain_grace_ms: 0,
            drain_timeout_ms: 100,
            max_connections_per_ip: 1_024,
        };
        assert_eq!(good.check(), Ok(()));
        assert_eq!(good.limits(), LIMITS);
        for (bad, key) in [
            (
                HttpSection {
                    max_connections: 0,
                    ..good
                },
                "http.max_connections",
            ),
            (
                HttpSection {
                    idle_timeout_ms: 0,
                    ..good
                },
                "http.idle_timeout_ms",
            ),
            (
                HttpSection {
                    max_header_bytes: 100,
                    ..good
                },
                "http.max_header_bytes",
            ),
            (
                HttpSection {
                    drain_grace_ms: 600_001,
                    ..good
                },
                "http.drain_grace_ms",
            ),
            (
                HttpSection {
                    drain_timeout_ms: 600_001,
                    ..good
                },
                "http.drain_timeout_ms",
            ),
        ] {
            assert_eq!(bad.check().map_err(|e| e.key), Err(key.to_owned()));
        }
    }

    const LIMITS: Limits = Limits {
        max_connections: 10,
        header_timeout: Duration::from_millis(100),
        idle_timeout: Duration::from_millis(1_000),
        max_header_bytes: 8192,
        drain_timeout: Duration::from_millis(100),
        max_connections_per_ip: 1_024,
    };

    #[test]
    fn an_idle_connection_lives_until_the_idle_timeout() {
        let a = activity();
        a.served.store(1, Relaxed);
        a.quiet_since_ms.store(500, Relaxed);
        assert!(
            matches!(judge(&a, &LIMITS, 1_499), Verdict::Healthy { recheck_at } if recheck_at == a.at(1_500))
        );
        assert!(matches!(judge(&a, &LIMITS, 1_500), Verdict::Idle));
    }

    #[test]
    fn a_connection_that_never_sent_a_request_has_only_the_header_timeout() {
        let a = activity();
        assert!(
            matches!(judge(&a, &LIMITS, 99), Verdict::Healthy { recheck_at } if recheck_at == a.at(100))
        );
        assert!(matches!(judge(&a, &LIMITS, 100), Verdict::HeaderTimeout));
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_connections() {
        let table = Arc::new(PerIp::default());
        let (a, b): (std::net::IpAddr, std::net::IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = PerIp::take(&table, a, 2).unwrap();
        let _second = PerIp::take(&table, a, 2).unwrap();
        assert!(
            PerIp::take(&table, a, 2).is_none(),
            "a third from a is refused"
        );
        let _other = PerIp::take(&table, b, 2).unwrap();
        drop(first);
        assert!(
            PerIp::take(&table, a, 2).is_some(),
            "a closed slot is given back"
        );
        drop(_other);
        assert!(
            !table.open.lock().unwrap().contains_key(&b),
            "no entry for gone addresses"
        );
    }

    #[test]
    fn a_started_request_has_only_the_header_timeout() {
        let a = activity();
        a.quiet.store(false, Relaxed);
        a.first_byte_ms.store(2_000, Relaxed);
        assert!(matches!(judge(&a, &LIMITS, 2_099), Verdict::Healthy { .. }));
        assert!(matches!(judge(&a, &LIMITS, 2_100), Verdict::HeaderTimeout));
    }

    #[test]
    fn a_request_being_served_is_left_to_its_handler() {
        let a = activity();
        a.quiet.store(false, Relaxed);
        a.serving.store(1, Relaxed);
        assert!(matches!(
            judge(&a, &LIMITS, 1_000_000),
            Verdict::Healthy { .. }
        ));
    }
}
