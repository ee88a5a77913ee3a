//! A connection worker: one keep-alive HTTP/1.1 connection, one request at a time.

use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::timeout_at;

use crate::collect::{Event, Sample};
use crate::corpus::Corpus;
use crate::queue::{Job, JobQueue};
use crate::report::Outcome;
use crate::spec::Target;

type Body = Full<Bytes>;
type Driver = Pin<Box<Connection<TokioIo<TcpStream>, Body>>>;

/// What every worker of a run shares, read-only.
#[derive(Debug)]
pub(crate) struct Shared {
    pub target: Target,
    pub addr: SocketAddr,
    pub corpus: Arc<Corpus>,
    pub queue: Arc<JobQueue>,
    pub timeout: Duration,
}

/// An open connection. The connection future (`driver`) is polled by the worker itself, in
/// the same task as the request, instead of being spawned: one task per connection and no
/// cross-task wake-up per request.
struct Conn {
    tx: SendRequest<Body>,
    /// `None` once the connection has finished (closed or failed).
    driver: Option<Driver>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (tx, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        Ok(Conn {
            tx,
            driver: Some(Box::pin(driver)),
        })
    }

    /// False if the peer closed the connection while it was idle (checked without waiting).
    async fn usable(&mut self) -> bool {
        let Some(driver) = self.driver.as_mut() else {
            return false;
        };
        let finished = poll_fn(|cx| Poll::Ready(driver.as_mut().poll(cx).is_ready())).await;
        if finished {
            self.driver = None;
            return false;
        }
        !self.tx.is_closed()
    }

    /// Sends one request and reads the whole answer; returns its status code.
    async fn exchange(&mut self, req: Request<Body>) -> Result<u16, hyper::Error> {
        let Conn { tx, driver } = self;
        let call = async move {
            tx.ready().await?;
            let resp = tx.send_request(req).await?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                frame?;
            }
            Ok(status)
        };
        let mut call = pin!(call);
        loop {
            let Some(d) = driver.as_mut() else {
                // The connection is gone: the call resolves with what was already received,
                // or with hyper's "connection closed" error.
                return call.await;
            };
            tokio::select! {
                biased;
                r = &mut call => return r,
                _ = d.as_mut() => {}
            }
            // The connection future finished first. Dropping it releases the call.
            *driver = None;
        }
    }
}

/// Runs one worker until the queue is closed and drained. Signals `ready` once its first
/// connection attempt is over, so the schedule starts with warm connections.
pub(crate) async fn worker(
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    ready: mpsc::Sender<()>,
) {
    let mut conn = match tokio::time::timeout(shared.timeout, Conn::open(shared.addr)).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    };
    let _ = ready.send(()).await;
    drop(ready);
    while let Some(job) = shared.queue.pop().await {
        let (outcome, service, ended) = serve(&shared, &mut conn, &job).await;
        let sample = Sample {
            slot: job.slot,
            scheduled: job.scheduled,
            ended,
            outcome,
            service,
        };
        if events.send(Event::Done(sample)).is_err() {
            return;
        }
    }
}

/// One job: reuse or open the connection, send, read, classify.
async fn serve(
    shared: &Shared,
    conn: &mut Option<Conn>,
    job: &Job,
) -> (Outcome, Option<Duration>, Instant) {
    let deadline = job.scheduled + shared.timeout;
    let now = Instant::now();
    if now >= deadline {
        // Waited in the queue for a free connection past its whole budget.
        return (Outcome::Dropped, None, now);
    }
    let deadline_t = tokio::time::Instant::from_std(deadline);

    let reusable = match conn.as_mut() {
        Some(c) => c.usable().await,
        None => false,
    };
    if !reusable {
        *conn = None;
        match timeout_at(deadline_t, Conn::open(shared.addr)).await {
            Ok(Ok(c)) => *conn = Some(c),
            Ok(Err(_)) | Err(_) => return (Outcome::ConnectError, None, Instant::now()),
        }
    }
    let Some(c) = conn.as_mut() else {
        return (Outcome::OtherError, None, Instant::now());
    };

    let req = build_request(shared, job.seq);
    let sent_at = Instant::now();
    let result = timeout_at(deadline_t, c.exchange(req)).await;
    let ended = Instant::now();
    match result {
        Ok(Ok(code)) => {
            if c.driver.is_none() {
                // Answered, then closed (e.g. `Connection: close`): reconnect next time.
                *conn = None;
            }
            (Outcome::Answered(code), Some(ended - sent_at), ended)
        }
        Ok(Err(_)) => {
            *conn = None;
            (Outcome::OtherError, None, ended)
        }
        Err(_) => {
            // The answer may still come: this connection cannot be reused.
            *conn = None;
            (Outcome::Timeout, None, ended)
        }
    }
}

fn build_request(shared: &Shared, seq: u64) -> Request<Body> {
    let mut req = Request::new(Full::new(shared.corpus.body(seq)));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = shared.target.path.clone();
    let headers = req.headers_mut();
    headers.insert(HOST, shared.target.host_header.clone());
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    req
}
