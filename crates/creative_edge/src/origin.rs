//! One configured origin: a bounded pool of kept-alive HTTP/1.1 connections and the fetch of
//! one object over it, with a timeout on connecting, on the answer's head and between body
//! chunks.
//!
//! The pool holds at most `max_connections`, busy or idle. A fetch takes an idle connection,
//! or opens one while under the cap, or waits (within the answer timeout) for one to come back.
//! A connection goes back to the pool only after its answer's body was read to the end; one
//! idle longer than `idle_timeout` is closed instead of reused. A request that fails at once on
//! a reused connection (the origin closed it while idle) is retried once on a new one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use upstream::conn_pool::ConnPool;

use crate::config::OriginConfig;
use crate::metrics::{Fetch, OriginStats};

/// The timeouts of one origin.
#[derive(Debug, Clone, Copy)]
pub struct OriginTimeouts {
    pub connect: Duration,
    /// From taking a connection to the answer's head.
    pub response: Duration,
    /// Between two body chunks.
    pub read: Duration,
}

/// A configured origin.
#[derive(Debug)]
pub struct Origin {
    pub name: String,
    host: String,
    port: u16,
    /// Path prefix of the origin's URL, without a trailing `/`.
    prefix: String,
    host_header: HeaderValue,
    timeouts: OriginTimeouts,
    pool: Arc<Pool>,
    pub stats: OriginStats,
}

/// Validators of a stale copy, sent so the origin can answer 304.
#[derive(Debug, Default, Clone)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// An answer whose body is being read; its connection returns to the pool at the body's end.
#[derive(Debug)]
pub struct Fetched {
    pub head: http::response::Parts,
    body: Incoming,
    conn: Option<Conn>,
    pool: Arc<Pool>,
    read_timeout: Duration,
}

impl Fetched {
    /// The next chunk of the body, `None` at its end.
    ///
    /// # Errors
    /// `Timeout` when no chunk arrives within the read timeout, `BrokenBody` when the
    /// connection fails mid-body.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Fetch> {
        loop {
            let frame = tokio::time::timeout(self.read_timeout, self.body.frame()).await;
            match frame {
                Err(_) => return Err(Fetch::Timeout),
                Ok(None) => {
                    if let Some(conn) = self.conn.take() {
                        self.pool.put_back(conn);
                    }
                    return Ok(None);
                }
                Ok(Some(Err(_))) => return Err(Fetch::BrokenBody),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}

impl Origin {
    /// Builds the origin from its validated configuration (the URL was checked there).
    pub fn new(config: &OriginConfig) -> Origin {
        let url = &config.parsed;
        Origin {
            name: config.name.clone(),
            host_header: HeaderValue::from_str(&url.authority)
                .unwrap_or_else(|_| HeaderValue::from_static("localhost")),
            host: url.host.clone(),
            port: url.port,
            prefix: url.path.trim_end_matches('/').to_owned(),
            timeouts: OriginTimeouts {
                connect: Duration::from_millis(config.connect_timeout_ms),
                response: Duration::from_millis(config.response_timeout_ms),
                read: Duration::from_millis(config.read_timeout_ms),
            },
            pool: Arc::new(Pool {
                conns: ConnPool::new(
                    config.max_connections as usize,
                    Some(Duration::from_millis(config.idle_timeout_ms)),
                ),
                returned: Notify::new(),
            }),
            stats: OriginStats::default(),
        }
    }

    /// Sends `GET {prefix}/{path}` and waits for the answer's head. The caller counts the
    /// outcome once the whole fetch is over.
    ///
    /// # Errors
    /// What failed: the pool stayed full, the connection failed, or no head came in time.
    pub async fn get(&self, path: &str, validators: &Validators) -> Result<Fetched, Fetch> {
        let deadline = Instant::now() + self.timeouts.response;
        let target = format!("{}/{}", self.prefix, path);
        for attempt in 0..2 {
            let (mut conn, reused) = self.checkout(deadline).await?;
            let mut request = Request::get(target.as_str())
                .header(header::HOST, self.host_header.clone())
                .header(header::USER_AGENT, "gavel-edge")
                // Bodies are stored and served as the origin sent them: ask for them plain, so
                // a client that cannot decode gzip is never sent a gzipped copy.
                .header(header::ACCEPT_ENCODING, "identity");
            if let Some(etag) = &validators.etag {
                request = request.header(header::IF_NONE_MATCH, etag.as_str());
            }
            if let Some(lm) = &validators.last_modified {
                request = request.header(header::IF_MODIFIED_SINCE, lm.as_str());
            }
            let Ok(request) = request.body(Empty::<Bytes>::new()) else {
                return Err(Fetch::ConnectFailed);
            };
            let sent = tokio::time::timeout_at(deadline.into(), async {
                conn.sender.ready().await?;
                conn.sender.send_request(request).await
            });
            match sent.await {
                Err(_) => return Err(Fetch::Timeout),
                Ok(Ok(answer)) => return Ok(self.fetched(answer, conn)),
                // The origin closed an idle connection as it was reused: once more, fresh.
                Ok(Err(_)) if reused && attempt == 0 => {}
                Ok(Err(_)) => return Err(Fetch::ConnectFailed),
            }
        }
        Err(Fetch::ConnectFailed)
    }

    fn fetched(&self, answer: Response<Incoming>, conn: Conn) -> Fetched {
        let (head, body) = answer.into_parts();
        Fetched {
            head,
            body,
            conn: Some(conn),
            pool: self.pool.clone(),
            read_timeout: self.timeouts.read,
        }
    }

    /// A connection and whether it was reused.
    async fn checkout(&self, deadline: Instant) -> Result<(Conn, bool), Fetch> {
        loop {
            if let Some(conn) = self.pool.take_idle() {
                return Ok((conn, true));
            }
            if let Some(slot) = self.pool.conns.try_permit() {
                return Ok((self.connect(slot, deadline).await?, false));
            }
            let returned = self.pool.returned.notified();
            tokio::select! {
                slot = self.pool.conns.permit() => {
                    let Ok(slot) = slot else { return Err(Fetch::PoolFull) };
                    return Ok((self.connect(slot, deadline).await?, false));
                }
                () = returned => {}
                () = tokio::time::sleep_until(deadline.into()) => return Err(Fetch::PoolFull),
            }
        }
    }

    async fn connect(&self, slot: OwnedSemaphorePermit, deadline: Instant) -> Result<Conn, Fetch> {
        let by = deadline.min(Instant::now() + self.timeouts.connect);
        let connect = TcpStream::connect((self.host.as_str(), self.port));
        let stream = match tokio::time::timeout_at(by.into(), connect).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(_)) => return Err(Fetch::ConnectFailed),
            Err(_) => return Err(Fetch::Timeout),
        };
        let _ = stream.set_nodelay(true);
        let handshake = http1::Builder::new().handshake(TokioIo::new(stream));
        let Ok((sender, connection)) = handshake.await else {
            return Err(Fetch::ConnectFailed);
        };
        tokio::spawn(async move {
            let _ = connection.await;
        });
        self.stats.connections_opened.inc();
        Ok(Conn {
            sender,
            _slot: slot,
        })
    }
}

/// A connection and its place under the pool's cap.
#[derive(Debug)]
struct Conn {
    sender: SendRequest<Empty<Bytes>>,
    /// Held as long as the connection is open, busy or idle.
    _slot: OwnedSemaphorePermit,
}

#[derive(Debug)]
struct Pool {
    /// One permit per open connection, busy or idle; the idle ones, closed past the idle
    /// timeout.
    conns: ConnPool<Conn>,
    /// Wakes one fetch waiting for a connection when one comes back.
    returned: Notify,
}

impl Pool {
    /// The most recently returned idle connection still usable; older ones are closed.
    fn take_idle(&self) -> Option<Conn> {
        // Readiness is awaited before sending: the connection's task may not have seen the
        // last body end yet.
        self.conns.take(|c| !c.sender.is_closed())
    }

    fn put_back(&self, conn: Conn) {
        if conn.sender.is_closed() {
            // Dropping it gives its slot back: a waiting fetch may open a new one.
            return;
        }
        self.conns.put(conn);
        self.returned.notify_one();
    }
}
