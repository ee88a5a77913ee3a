//! Win, billing and loss notices, fired after the answer has gone out so they never delay it.
//!
//! Notices wait in one bounded queue served by a fixed set of workers; when the queue is full a
//! notice is dropped and counted rather than letting memory grow. The workers send through the
//! shared [`NoticeClient`], which keeps connections to notice hosts alive.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, mpsc};

use crate::metrics::{Metrics, NoticeKind, NoticeOutcome};
use crate::notice_client::NoticeClient;

/// Answers to notices are read and discarded; a win notice may return markup, so allow some.
const MAX_NOTICE_ANSWER: usize = 64 * 1024;

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
    /// Notices queued or being sent.
    pending: Arc<AtomicU64>,
}

impl Notifier {
    /// Starts `workers` notice senders on the current runtime.
    pub fn start(
        workers: usize,
        queue: usize,
        timeout: Duration,
        client: Arc<NoticeClient>,
        metrics: Arc<Metrics>,
    ) -> Notifier {
        let (tx, rx) = mpsc::channel(queue);
        let rx = Arc::new(Mutex::new(rx));
        let pending = Arc::new(AtomicU64::new(0));
        for _ in 0..workers {
            let (rx, client, metrics) = (rx.clone(), client.clone(), metrics.clone());
            let pending = pending.clone();
            tokio::spawn(async move { worker(rx, timeout, client, metrics, &pending).await });
        }
        Notifier {
            queue: tx,
            metrics,
            pending,
        }
    }

    /// Queues one notice; never waits.
    pub fn fire(&self, kind: NoticeKind, url: String) {
        self.pending.fetch_add(1, Relaxed);
        if self.queue.try_send(Job { kind, url }).is_err() {
            self.pending.fetch_sub(1, Relaxed);
            self.metrics.notice(kind, NoticeOutcome::Dropped);
        }
    }

    /// Notices queued or being sent now.
    pub fn pending(&self) -> u64 {
        self.pending.load(Relaxed)
    }

    /// Waits until every queued notice has been sent (or has failed), or `within` has passed;
    /// returns how many were still pending. For shutdown: call once no auction can fire more.
    pub async fn flush(&self, within: Duration) -> u64 {
        let until = Instant::now() + within;
        while self.pending() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.pending()
    }
}

async fn worker(
    rx: Arc<Mutex<mpsc::Receiver<Job>>>,
    timeout: Duration,
    client: Arc<NoticeClient>,
    metrics: Arc<Metrics>,
    pending: &AtomicU64,
) {
    loop {
        // The lock is held only while waiting for the next job, never while sending.
        let job = { rx.lock().await.recv().await };
        let Some(job) = job else { return };
        let outcome =
            match tokio::time::timeout(timeout, client.get(&job.url, MAX_NOTICE_ANSWER)).await {
                Ok(Ok(answer)) if answer.status.is_success() => NoticeOutcome::Sent,
                Ok(Ok(answer)) => {
                    tracing::debug!(url = %job.url, status = %answer.status, "notice refused");
                    NoticeOutcome::Failed
                }
                Ok(Err(e)) => {
                    tracing::debug!(url = %job.url, error = %e, "notice failed");
                    NoticeOutcome::Failed
                }
                Err(_) => NoticeOutcome::Failed,
            };
        metrics.notice(job.kind, outcome);
        pending.fetch_sub(1, Relaxed);
    }
}
