//! One HTTP/1.1 keep-alive connection pool per bidder, so that a slow bidder can use up only its
//! own connections and never delay or starve another.
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

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::config::Endpoint;
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
    #[error("HTTP error: {0}")]
    Http(#[from] hyper::Error),
    #[error("response body larger than {0} bytes")]
    TooLarge(usize),
    #[error("reading the response body failed: {0}")]
    Body(String),
}

impl CallError {
    /// Bounded label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            CallError::PoolExhausted(_) => "pool_exhausted",
            CallError::Connect(_) => "connect",
            CallError::Tls(_) => "tls",
            CallError::Http(_) => "http",
            CallError::TooLarge(_) => "too_large",
            CallError::Body(_) => "body",
        }
    }
}

/// A call in flight; it holds its connection permit until it completes or is dropped.
pub struct Call {
    future: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Answer, CallError>> + Send>>,
    drain: Duration,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}

impl std::future::Future for Call {
    type Output = Result<Answer, CallError>;

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

/// A bidder's answer: status and complete body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

/// The connection pool of one bidder.
#[derive(Debug)]
pub struct BidderPool {
    endpoint: Endpoint,
    max_connections: u32,
    max_response_bytes: usize,
    drain: Duration,
    permits: Arc<Semaphore>,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl BidderPool {
    pub fn new(
        endpoint: Endpoint,
        max_connections: u32,
        max_response_bytes: usize,
        drain: Duration,
    ) -> Self {
        BidderPool {
            endpoint,
            max_connections,
            max_response_bytes,
            drain,
            permits: Arc::new(Semaphore::new(max_connections as usize)),
            idle: Mutex::new(Vec::new()),
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Starts a POST of `body`: takes a connection permit now, or fails at once with
    /// `PoolExhausted` (never waits for one). The returned [`Call`] does the I/O when polled.
    pub fn start(self: &Arc<Self>, body: Bytes) -> Result<Call, CallError> {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return Err(CallError::PoolExhausted(self.max_connections));
        };
        let pool = Arc::clone(self);
        let drain = self.drain;
        Ok(Call {
            future: Box::pin(async move {
                let _permit = permit;
                pool.call(body).await
            }),
            drain,
        })
    }

    /// One request on an idle or new connection; the connection returns to the pool only after a
    /// complete answer (anything else may leave it mid-message).
    async fn call(&self, body: Bytes) -> Result<Answer, CallError> {
        let (mut conn, reused) = match self.take_idle() {
            Some(conn) => (conn, true),
            None => (self.dial().await?, false),
        };
        let result = match self.exchange(&mut conn, body.clone()).await {
            // A kept-alive connection may have been closed by the bidder just before we used it;
            // the request never reached it, so one retry on a fresh connection is safe.
            Err(CallError::Http(e))
                if reused && (e.is_canceled() || e.is_closed() || e.is_incomplete_message()) =>
            {
                conn = self.dial().await?;
                self.exchange(&mut conn, body).await
            }
            other => other,
        };
        if result.is_ok() {
            self.put_idle(conn);
        }
        result
    }

    async fn exchange(
        &self,
        conn: &mut SendRequest<Full<Bytes>>,
        body: Bytes,
    ) -> Result<Answer, CallError> {
        conn.ready().await?;
        let request = Request::post(self.endpoint.path.as_str())
            .header(header::HOST, self.endpoint.authority.as_str())
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-openrtb-version", "2.6")
            .body(Full::new(body))
            .map_err(|e| CallError::Body(e.to_string()))?;
        let response = conn.send_request(request).await?;
        let status = response.status();
        let limited = Limited::new(response.into_body(), self.max_response_bytes);
        let body = match limited.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(CallError::TooLarge(self.max_response_bytes));
            }
            Err(e) => return Err(CallError::Body(e.to_string())),
        };
        Ok(Answer { status, body })
    }

    fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(conn) = idle.pop() {
            if !conn.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    fn put_idle(&self, conn: SendRequest<Full<Bytes>>) {
        if conn.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }

    async fn dial(&self) -> Result<SendRequest<Full<Bytes>>, CallError> {
        let tls = self
            .endpoint
            .tls
            .as_ref()
            .map(|t| (&t.client, t.server_name.clone()));
        connect(self.endpoint.addr, tls).await
    }
}

/// Opens a kept-alive HTTP/1.1 connection to `addr`, over TLS when `tls` names the verifier and
/// the name the peer's certificate must carry; its I/O runs on a task of its own that ends when
/// the returned sender is dropped or the peer closes.
pub(crate) async fn connect(
    addr: SocketAddr,
    tls: Option<(&ClientTls, ServerName<'static>)>,
) -> Result<SendRequest<Full<Bytes>>, CallError> {
    let stream = TcpStream::connect(addr).await.map_err(CallError::Connect)?;
    // Bid requests and notices are small and latency-bound: never wait for Nagle.
    stream.set_nodelay(true).map_err(CallError::Connect)?;
    match tls {
        None => handshake(stream).await,
        Some((client, name)) => {
            let stream = client.connect(name, stream).await.map_err(CallError::Tls)?;
            handshake(stream).await
        }
    }
}

async fn handshake<S>(stream: S) -> Result<SendRequest<Full<Bytes>>, CallError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // Its error, if any, surfaces as the error of the request in flight.
        let _ = connection.await;
    });
    Ok(sender)
}
