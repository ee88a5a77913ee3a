//! Win, billing and loss notices, fired after the answer has gone out so they never delay it.
//!
//! Notices wait in one bounded queue served by a fixed set of workers; when the queue is full a
//! notice is dropped and counted rather than letting memory grow. Each worker keeps one
//! kept-alive connection per notice host: a connection per notice would exhaust ephemeral ports
//! within a minute at a few thousand wins per second.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};

use crate::metrics::{Metrics, NoticeKind, NoticeOutcome};

/// Answers to notices are read and discarded; a win notice may return markup, so allow some.
const MAX_NOTICE_ANSWER: usize = 64 * 1024;
/// Hosts a worker keeps a connection to; beyond this the cache is cleared (bounded memory).
const MAX_HOSTS_PER_WORKER: usize = 256;

#[derive(Debug)]
struct Job {
    kind: NoticeKind,
    url: String,
}

/// Handle used by the auction path to queue notices.
#[derive(Debug, Clone)]
pub struct Notifier {
    queue: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
}

impl Notifier {
    /// Starts `workers` notice senders on the current runtime.
    pub fn start(
        workers: usize,
        queue: usize,
        timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Notifier {
        let (tx, rx) = mpsc::channel(queue);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..workers {
            let rx = rx.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move { worker(rx, timeout, metrics).await });
        }
        Notifier { queue: tx, metrics }
    }

    /// Queues one notice; never waits.
    pub fn fire(&self, kind: NoticeKind, url: String) {
        if self.queue.try_send(Job { kind, url }).is_err() {
            self.metrics.notice(kind, NoticeOutcome::Dropped);
        }
    }
}

async fn worker(rx: Arc<Mutex<mpsc::Receiver<Job>>>, timeout: Duration, metrics: Arc<Metrics>) {
    let mut connections: HashMap<String, SendRequest<Full<Bytes>>> = HashMap::new();
    loop {
        // The lock is held only while waiting for the next job, never while sending.
        let job = { rx.lock().await.recv().await };
        let Some(job) = job else { return };
        let outcome = match tokio::time::timeout(timeout, send(&mut connections, &job.url)).await {
            Ok(Ok(())) => NoticeOutcome::Sent,
            Ok(Err(e)) => {
                tracing::debug!(url = %job.url, error = %e, "notice failed");
                NoticeOutcome::Failed
            }
            Err(_) => NoticeOutcome::Failed,
        };
        if outcome == NoticeOutcome::Failed {
            // The connection may be mid-answer or broken; start afresh next time.
            if let Some(a) = job
                .url
                .parse::<Uri>()
                .ok()
                .as_ref()
                .and_then(Uri::authority)
            {
                connections.remove(a.as_str());
            }
        }
        metrics.notice(job.kind, outcome);
    }
}

async fn send(
    connections: &mut HashMap<String, SendRequest<Full<Bytes>>>,
    url: &str,
) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|e| format!("bad notice URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err("only http:// notice URLs are supported".to_owned());
    }
    let authority = uri
        .authority()
        .ok_or("notice URL has no host")?
        .as_str()
        .to_owned();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let mut conn = match connections.remove(&authority) {
        Some(c) if !c.is_closed() => c,
        _ => dial(&uri).await?,
    };
    conn.ready().await.map_err(|e| e.to_string())?;
    let request = Request::get(path)
        .header(header::HOST, authority.as_str())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let response = conn
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let ok = response.status().is_success();
    let status = response.status();
    Limited::new(response.into_body(), MAX_NOTICE_ANSWER)
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    if connections.len() >= MAX_HOSTS_PER_WORKER {
        connections.clear();
    }
    connections.insert(authority, conn);
    if ok {
        Ok(())
    } else {
        Err(format!("status {status}"))
    }
}

async fn dial(uri: &Uri) -> Result<SendRequest<Full<Bytes>>, String> {
    let host = uri.host().ok_or("no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connect {host}:{port}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}
