//! A connection worker: one keep-alive HTTP/1.1 connection, one request at a time.

use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio::time::timeout_at;

use crate::collect::{Event, Sample};
use crate::corpus::Corpus;
use crate::progress::Progress;
use crate::queue::{Job, JobQueue};
use crate::report::Outcome;
use crate::service_time::ServiceTime;
use crate::spec::{ResponseCheck, Target};
use crate::stream::{Stream, TlsTarget};

/// Shortest time a timed-out request's late answer is waited for before its connection is
/// given up.
const MIN_DRAIN: Duration = Duration::from_secs(1);

/// Largest answer body kept for the response check; a longer one fails the check.
const MAX_CHECKED_BODY: usize = 1 << 20;

type Body = Full<Bytes>;
type Driver = Pin<Box<Connection<TokioIo<Stream>, Body>>>;

/// What every worker of a run shares, read-only.
#[derive(Debug)]
pub(crate) struct Shared {
    pub target: Target,
    pub addr: SocketAddr,
    /// Set for an `https` target.
    pub tls: Option<TlsTarget>,
    pub method: Method,
    /// Extra headers of every request, checked before the run.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub corpus: Arc<Corpus>,
    pub queue: Arc<JobQueue>,
    pub timeout: Duration,
    pub check: ResponseCheck,
    /// The `Authorization` header of every request, if any.
    pub authorization: Option<HeaderValue>,
    pub progress: Arc<Progress>,
    /// Turns true once every request of the run has ended; workers keep their connections
    /// open until then (see [`linger`]).
    pub finished: tokio::sync::watch::Receiver<bool>,
    /// Connections opened so far (reconnections included).
    pub opened: AtomicU64,
    /// Typical service time of answered requests, which the pool grows by.
    pub service: ServiceTime,
}

impl Shared {
    /// When request `seq`, due at `scheduled`, stops being worth sending: its body's `tmax`
    /// after `scheduled` (the auction is over by then), or the timeout, whichever is first.
    pub fn send_by(&self, seq: u64, scheduled: Instant) -> Instant {
        let budget = self
            .corpus
            .tmax(seq)
            .map_or(self.timeout, |t| t.min(self.timeout));
        scheduled + budget
    }

    /// Opens a connection and counts it.
    async fn open(&self) -> std::io::Result<Conn> {
        let conn = Conn::open(self.addr, self.tls.as_ref()).await?;
        self.opened.fetch_add(1, Relaxed);
        Ok(conn)
    }
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
    async fn open(addr: SocketAddr, tls: Option<&TlsTarget>) -> std::io::Result<Conn> {
        let stream = crate::stream::connect(addr, tls).await?;
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

    /// Sends one request and reads the whole answer; returns its status code and, when
    /// `keep` is true, its body (`Err` with the reason when the body is too long to keep).
    async fn exchange(
        &mut self,
        req: Request<Body>,
        keep: bool,
    ) -> Result<(u16, Option<Result<Vec<u8>, String>>), hyper::Error> {
        let Conn { tx, driver } = self;
        let call = async move {
            tx.ready().await?;
            let resp = tx.send_request(req).await?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let mut kept = keep.then(|| Ok(Vec::new()));
            while let Some(frame) = body.frame().await {
                let frame = frame?;
                if let (Some(Ok(buf)), Some(data)) = (kept.as_mut(), frame.data_ref()) {
                    if buf.len() + data.len() > MAX_CHECKED_BODY {
                        kept = Some(Err(format!("body over {MAX_CHECKED_BODY} bytes")));
                    } else {
                        buf.extend_from_slice(data);
                    }
                }
            }
            Ok((status, kept))
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

/// Runs one worker until the queue is closed and drained. Signals `ready` (when given) once
/// its first connection attempt is over, so the schedule starts with warm connections.
pub(crate) async fn worker(
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    ready: Option<mpsc::Sender<()>>,
) {
    let mut conn = match tokio::time::timeout(shared.timeout, shared.open()).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    };
    if let Some(ready) = ready {
        let _ = ready.send(()).await;
    }
    while let Some(job) = shared.queue.pop().await {
        if !serve(&shared, &mut conn, &job, &events).await {
            return;
        }
    }
    linger(&shared, events, conn).await;
}

/// Holds a finished worker's connection open until every request of the run has ended. Idle
/// workers that closed theirs as soon as the schedule ran out would land hundreds of closes on
/// the server under test, and on this process, while the last requests still wait for their
/// answers: a latency spike in the run's last second that is the generator's own doing.
async fn linger(shared: &Shared, events: mpsc::UnboundedSender<Event>, conn: Option<Conn>) {
    // The collector ends, and the run signals `finished`, once every sender is gone.
    drop(events);
    let mut finished = shared.finished.clone();
    let _ = finished.wait_for(|done| *done).await;
    drop(conn);
}

/// When a closed-loop run sends and what it measures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClosedWindow {
    pub start: Instant,
    pub measure_start: Instant,
    pub end: Instant,
    /// Seconds in the measured window (the last one takes any overrun).
    pub seconds: u32,
}

/// A closed-loop worker: after connecting, waits for the start, then sends each request as
/// soon as the previous one has ended, until the window ends. Each request counts as
/// scheduled at the instant it is sent.
pub(crate) async fn closed_worker(
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    ready: mpsc::Sender<()>,
    mut start: tokio::sync::watch::Receiver<Option<ClosedWindow>>,
    seq: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut conn = match tokio::time::timeout(shared.timeout, shared.open()).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    };
    let _ = ready.send(()).await;
    drop(ready);
    let Ok(window) = start.wait_for(Option::is_some).await.map(|w| *w) else {
        return;
    };
    let Some(window) = window else { return };
    tokio::time::sleep_until(tokio::time::Instant::from_std(window.start)).await;
    let mut measuring = false;
    loop {
        let now = Instant::now();
        if now >= window.end {
            break;
        }
        let slot = now.checked_duration_since(window.measure_start).map(|d| {
            u32::try_from(d.as_secs())
                .unwrap_or(u32::MAX)
                .min(window.seconds - 1)
        });
        if slot.is_some() && !measuring {
            measuring = true;
            shared.progress.set_measuring();
        }
        let job = Job {
            seq: seq.fetch_add(1, Relaxed),
            scheduled: now,
            // Sent at once: closed loop never waits for a connection.
            send_by: now + shared.timeout,
            slot,
        };
        shared.progress.add_issued(1);
        if !serve(&shared, &mut conn, &job, &events).await {
            return;
        }
    }
    linger(&shared, events, conn).await;
}

/// One job: reuse or open the connection, send, read, classify, report. False once the
/// collector is gone.
async fn serve(
    shared: &Shared,
    conn: &mut Option<Conn>,
    job: &Job,
    events: &mpsc::UnboundedSender<Event>,
) -> bool {
    let report = |(outcome, service, ended, check): Attempt| {
        let sample = Sample {
            slot: job.slot,
            scheduled: job.scheduled,
            ended,
            outcome,
            service,
            check,
        };
        events.send(Event::Done(sample)).is_ok()
    };
    let (timeout, call) = match attempt(shared, &mut *conn, job).await {
        Ok(done) => return report(done),
        Err(Late { timeout, call }) => (timeout, call),
    };
    // Timed out: the request counts as a timeout now. Its answer is still read and discarded,
    // for up to one more timeout (at least 1 s), so that the connection survives: under overload, closing a
    // connection per timeout turns into a storm of reconnections that starves the generator
    // and collapses the rate it can offer.
    let ok = report(timeout);
    let reusable = tokio::time::timeout(shared.timeout.max(MIN_DRAIN), call)
        .await
        .unwrap_or(false);
    if !reusable {
        *conn = None;
    }
    ok
}

/// A request that timed out, with its connection still reading the answer: `call` ends true
/// if the connection is reusable afterwards.
struct Late<'c> {
    timeout: Attempt,
    call: Pin<Box<dyn Future<Output = bool> + Send + 'c>>,
}

type Attempt = (
    Outcome,
    Option<Duration>,
    Instant,
    Option<Result<(), String>>,
);

async fn attempt<'c>(
    shared: &Shared,
    conn: &'c mut Option<Conn>,
    job: &Job,
) -> Result<Attempt, Late<'c>> {
    let deadline = job.scheduled + shared.timeout;
    let now = Instant::now();
    if now >= job.send_by {
        // Waited for a free connection until its answer could be of no use (its `tmax`, or
        // the whole timeout): sending it would only load the target with dead work, and keep
        // this connection from a request that can still make it.
        return Ok((Outcome::Dropped, None, now, None));
    }
    let deadline_t = tokio::time::Instant::from_std(deadline);

    let reusable = match conn.as_mut() {
        Some(c) => c.usable().await,
        None => false,
    };
    if !reusable {
        *conn = None;
        match timeout_at(deadline_t, shared.open()).await {
            Ok(Ok(c)) => *conn = Some(c),
            Ok(Err(_)) | Err(_) => {
                return Ok((Outcome::ConnectError, None, Instant::now(), None));
            }
        }
    }
    if conn.is_none() {
        return Ok((Outcome::OtherError, None, Instant::now(), None));
    }

    let req = build_request(shared, job.seq);
    let keep = shared.check != ResponseCheck::None;
    let sent_at = Instant::now();
    // The call owns the connection while it runs, and hands it back (or not) when it ends;
    // boxed so that a timed-out call can outlive this function and be drained.
    let mut call: Pin<Box<dyn Future<Output = CallEnd> + Send + 'c>> = Box::pin(async move {
        let Some(c) = conn.as_mut() else {
            return CallEnd::Failed;
        };
        let result = c.exchange(req, keep).await;
        let closed = c.driver.is_none();
        match result {
            Ok((code, body)) => {
                if closed {
                    // Answered, then closed (e.g. `Connection: close`): reconnect next time.
                    *conn = None;
                }
                CallEnd::Answered(code, body)
            }
            Err(_) => {
                *conn = None;
                CallEnd::Failed
            }
        }
    });
    let result = timeout_at(deadline_t, &mut call).await;
    let ended = Instant::now();
    match result {
        Ok(CallEnd::Answered(code, body)) => {
            let check = check(shared.check, code, body);
            shared.service.record(ended - sent_at);
            Ok((Outcome::Answered(code), Some(ended - sent_at), ended, check))
        }
        Ok(CallEnd::Failed) => Ok((Outcome::OtherError, None, ended, None)),
        Err(_) => Err(Late {
            timeout: (Outcome::Timeout, None, ended, None),
            call: Box::pin(async move { matches!(call.await, CallEnd::Answered(..)) }),
        }),
    }
}

/// How a call on a connection ended.
enum CallEnd {
    Answered(u16, Option<Result<Vec<u8>, String>>),
    Failed,
}

/// Applies the response check to one answer; `None` when the answer is not subject to it.
fn check(
    kind: ResponseCheck,
    code: u16,
    body: Option<Result<Vec<u8>, String>>,
) -> Option<Result<(), String>> {
    match kind {
        ResponseCheck::None => None,
        ResponseCheck::BidResponse if code != 200 => None,
        ResponseCheck::BidResponse => Some(match body {
            Some(Ok(bytes)) => openrtb::decode::<openrtb::BidResponse>(&bytes)
                .map(drop)
                .map_err(|e| format!("not a valid BidResponse: {e}")),
            Some(Err(why)) => Err(why),
            None => Err("body not kept".to_owned()),
        }),
    }
}

fn build_request(shared: &Shared, seq: u64) -> Request<Body> {
    let body = shared.corpus.body(seq);
    let has_body = !body.is_empty();
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = shared.method.clone();
    *req.uri_mut() = shared.target.path.clone();
    let headers = req.headers_mut();
    headers.insert(HOST, shared.target.host_header.clone());
    if has_body {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    if let Some(a) = &shared.authorization {
        headers.insert(http::header::AUTHORIZATION, a.clone());
    }
    // Given ones last: a `Content-Type` or `Authorization` here replaces the default.
    for (name, value) in &shared.headers {
        headers.insert(name.clone(), value.clone());
    }
    req
}
