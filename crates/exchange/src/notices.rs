//! Win, billing and loss notices, fired after the answer has gone out so they never delay it.
//!
//! Notices wait in one bounded queue served by a fixed set of workers; when the queue is full a
//! notice is dropped and counted rather than letting memory grow. The workers send through the
//! shared [`NoticeClient`], which keeps connections to notice hosts alive.

use std::sync::Arc;
use std::time::Duration;

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
        for _ in 0..workers {
            let (rx, client, metrics) = (rx.clone(), client.clone(), metrics.clone());
            tokio::spawn(async move { worker(rx, timeout, client, metrics).await });
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

async fn worker(
    rx: Arc<Mutex<mpsc::Receiver<Job>>>,
    timeout: Duration,
    client: Arc<NoticeClient>,
    metrics: Arc<Metrics>,
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
    }
}
