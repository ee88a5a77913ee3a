//! Win, billing and loss notices, fired after the answer has gone out so they never delay it.
//!
//! Each notice host has its own bounded queue and its own senders, so a host that hangs or
//! refuses delays and drops only the notices addressed to it: another bidder's win and billing
//! notices never wait behind it. A sender takes what its host's queue holds, waiting up to
//! `notices.batch_linger_ms` for more, and sends the batch pipelined on one connection: one
//! write and a read or two for many notices, where one each cost as much as a bid call. A URL
//! is checked against its bidder's allowlist before it is queued ([`crate::outbound`]); a
//! refused one is counted and never sent.
//!
//! A notice that failed to connect, timed out or got 5xx/429 is tried again, up to
//! `notices.max_attempts`, after a backoff that doubles each time with jitter, so that a host
//! coming back is not hit by every retry at once. The retry waits outside the host's senders,
//! then queues again (and is dropped if the queue is full). Retrying is safe because notices
//! are idempotent on the bidder's side (docs/security.md has the table per kind).
//!
//! With `[records]` on, each notice that names its bid ([`NoticeAbout`]) is recorded once,
//! when its fate is known: sent, failed after its attempts, dropped or refused.
// A request or notice path: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use journal::Journal;
use records::{NoticeRecord, Record};
use tokio::sync::mpsc;

use crate::outcome::{NoticeKind, NoticeOutcome};
use upstream::notice_client::{NoticeClient, NoticeError};
use upstream::outbound::{ByOrigin, NoticeHosts, NoticeRefusal, Refusal, Target};
use upstream::pool::HttpAnswer;
use upstream::tls::ClientTls;

/// Answers to notices are read and discarded; a win notice may return markup, so allow some.
const MAX_NOTICE_ANSWER: usize = 64 * 1024;
/// Host queues kept at most; hosts come from allowlists, so this is only a backstop.
const MAX_HOST_QUEUES: usize = 4096;
/// Longest wait before a retry.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often idle notice connections are looked at.
const IDLE_SWEEP: Duration = Duration::from_secs(1);

/// Where the outcomes of one bidder's notices are counted (the metrics implement it): the
/// notices say what happened, never how it is counted.
pub trait NoticeTally: Send + Sync + std::fmt::Debug {
    /// A notice of `kind` ended with `outcome`.
    fn notice(&self, kind: NoticeKind, outcome: NoticeOutcome);
    /// An attempt of `kind` failed and was queued again.
    fn retried(&self, kind: NoticeKind);
    /// A notice or markup URL was refused before it was sent.
    fn refused(&self, reason: NoticeRefusal);
}

/// Where one bidder's notices may go, how they are verified, and where they are counted.
#[derive(Debug)]
pub struct NoticeRoute {
    /// The bidder's name, for the log lines of its refusals.
    pub bidder: String,
    pub hosts: NoticeHosts,
    pub tls: Option<ClientTls>,
    pub tally: Arc<dyn NoticeTally>,
}

impl NoticeRoute {
    /// Counts a refused notice or markup fetch under this bidder and its reason, and says
    /// (a few lines a second at most) which bidder and which setting: a refused notice is an
    /// impression nobody is billed for.
    pub fn refused(&self, what: &str, refusal: &Refusal) {
        self.tally.refused(refusal.reason());
        static LIMIT: http_front::log_limit::LogLimit = http_front::log_limit::LogLimit::new(5);
        let Some(suppressed) = LIMIT.admit_now() else {
            return;
        };
        let fix = match refusal {
            Refusal::Address(_) | Refusal::NoAddress(_) => {
                "if this bidder really lives there, set notices.allow_private_addresses = true"
            }
            Refusal::HostNotAllowed(_) => "add the host to the bidder's notice_hosts",
            Refusal::BadUrl => "the bidder sent a URL that is not absolute http(s)",
        };
        tracing::warn!(
            bidder = %self.bidder,
            reason = refusal.label(),
            suppressed,
            "{what} to bidder {} refused: {refusal}; {fix}",
            self.bidder
        );
    }
}

/// Sizes and timings of the notice queues (`[notices]`).
#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    /// Notices waiting per host.
    pub queue: usize,
    /// Concurrent senders per host.
    pub workers: usize,
    /// Time allowed for one attempt's connection, and for each answer.
    pub timeout: Duration,
    pub max_attempts: u32,
    pub retry_base: Duration,
    /// Notices sent together, pipelined on one connection, at most.
    pub batch_max: usize,
    /// How long a sender waits for more notices to its host before sending a batch.
    pub batch_linger: Duration,
}

/// The bid a notice is about, for its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeAbout {
    /// The exchange's auction id.
    pub auction: String,
    pub imp: String,
    pub bid: String,
    /// A winner's clearing price in its bid's currency; none for a loss notice.
    pub price_micros: Option<i64>,
}

#[derive(Debug)]
struct Job {
    kind: NoticeKind,
    target: Target,
    route: Arc<NoticeRoute>,
    attempt: u32,
    /// Boxed: only kept when records are on.
    about: Option<Box<NoticeAbout>>,
    /// The status of the last attempt's answer.
    status: Option<u16>,
}

#[derive(Debug)]
struct Inner {
    settings: QueueSettings,
    client: Arc<NoticeClient>,
    /// Read on every notice; written only when a host is seen for the first time.
    hosts: RwLock<ByOrigin<mpsc::Sender<Job>>>,
    /// Notices queued, being sent or waiting to be retried.
    pending: AtomicU64,
    /// Seeds the retry jitter.
    jitter: AtomicU64,
    journal: Journal,
}

/// Handle used by the auction path to queue notices.
#[derive(Debug, Clone)]
pub struct Notifier {
    inner: Arc<Inner>,
}

impl Notifier {
    /// Must run inside a tokio runtime: host queues start their senders when first used, and
    /// one task closes idle connections until the notifier is dropped.
    pub fn start(settings: QueueSettings, client: Arc<NoticeClient>, journal: Journal) -> Notifier {
        let inner = Arc::new(Inner {
            settings,
            client,
            hosts: RwLock::new(ByOrigin::default()),
            pending: AtomicU64::new(0),
            jitter: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
            journal,
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(IDLE_SWEEP).await;
                let Some(inner) = weak.upgrade() else { return };
                inner.client.close_idle();
            }
        });
        Notifier { inner }
    }

    /// Checks `url` against `route`'s hosts and queues it on its host's queue; never waits. A
    /// refused URL or a full queue is counted, for the kind and for the bidder, and recorded
    /// when `about` names the bid.
    pub fn fire(
        &self,
        kind: NoticeKind,
        url: &str,
        route: &Arc<NoticeRoute>,
        about: Option<NoticeAbout>,
    ) {
        match route.hosts.check(url) {
            Ok(target) => {
                self.inner.pending.fetch_add(1, Relaxed);
                let job = Job {
                    kind,
                    target,
                    route: route.clone(),
                    attempt: 1,
                    about: about.map(Box::new),
                    status: None,
                };
                push(&self.inner, job);
            }
            Err(refusal) => {
                route.refused(kind.label(), &refusal);
                route.tally.notice(kind, NoticeOutcome::Refused);
                if let Some(about) = about {
                    record(
                        &self.inner.journal,
                        kind,
                        NoticeOutcome::Refused,
                        &route.bidder,
                        &about,
                        0,
                        None,
                    );
                }
            }
        }
    }

    /// Notices queued, being sent or waiting for a retry now.
    pub fn pending(&self) -> u64 {
        self.inner.pending.load(Relaxed)
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

/// Queues a job already counted in `pending` on its host's queue, starting the host's senders
/// on first use. A full queue drops the job.
fn push(inner: &Arc<Inner>, job: Job) {
    let sender = queue_for(inner, &job.target);
    let rejected = match sender {
        Some(tx) => tx.try_send(job).err().map(|e| match e {
            mpsc::error::TrySendError::Full(job) | mpsc::error::TrySendError::Closed(job) => job,
        }),
        None => Some(job),
    };
    if let Some(job) = rejected {
        inner.pending.fetch_sub(1, Relaxed);
        job.route.tally.notice(job.kind, NoticeOutcome::Dropped);
        concluded(inner, &job, NoticeOutcome::Dropped);
    }
}

/// Records a notice's fate, when it names its bid.
fn concluded(inner: &Inner, job: &Job, outcome: NoticeOutcome) {
    if let Some(about) = &job.about {
        let attempts = match outcome {
            NoticeOutcome::Dropped => job.attempt.saturating_sub(1),
            _ => job.attempt,
        };
        record(
            &inner.journal,
            job.kind,
            outcome,
            &job.route.bidder,
            about,
            attempts,
            job.status,
        );
    }
}

fn record(
    journal: &Journal,
    kind: NoticeKind,
    outcome: NoticeOutcome,
    bidder: &str,
    about: &NoticeAbout,
    attempts: u32,
    status: Option<u16>,
) {
    journal.record(Record::Notice(NoticeRecord {
        v: records::VERSION,
        auction: about.auction.clone(),
        bidder: bidder.to_owned(),
        notice: kind.label().into(),
        outcome: outcome.label().into(),
        at_ms: crate::clock::wall_ms(),
        imp: Some(about.imp.clone()),
        bid: Some(about.bid.clone()),
        price_micros: about.price_micros,
        status,
        attempts,
    }));
}

fn queue_for(inner: &Arc<Inner>, target: &Target) -> Option<mpsc::Sender<Job>> {
    if let Some(tx) = telemetry::locks::read(&inner.hosts).get(target) {
        return Some(tx.clone());
    }
    let mut hosts = telemetry::locks::write(&inner.hosts);
    if !hosts.contains(target) && hosts.len() >= MAX_HOST_QUEUES {
        return None;
    }
    let tx = hosts.entry(target, || {
        let (tx, rx) = mpsc::channel(inner.settings.queue);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..inner.settings.workers {
            tokio::spawn(sender(rx.clone(), Arc::downgrade(inner)));
        }
        tx
    });
    Some(tx.clone())
}

/// One of a host's senders. It holds the notifier weakly: when the exchange is dropped, the
/// host's queue closes and the sender ends.
async fn sender(rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Job>>>, inner: Weak<Inner>) {
    loop {
        let batch = {
            let Some(s) = inner.upgrade().map(|i| i.settings) else {
                return;
            };
            // The lock is held only while gathering a batch, never while sending it.
            let mut rx = rx.lock().await;
            next_batch(&mut rx, s.batch_max, s.batch_linger).await
        };
        if batch.is_empty() {
            return;
        }
        let Some(inner) = inner.upgrade() else { return };
        let s = inner.settings;
        let targets: Vec<&Target> = batch.iter().map(|j| &j.target).collect();
        let tls = batch.first().and_then(|j| j.route.tls.as_ref());
        // One result per target, in order (`get_batch`), timeouts included.
        let results = inner
            .client
            .get_batch(&targets, tls, MAX_NOTICE_ANSWER, Some(s.timeout))
            .await;
        for (job, result) in batch.into_iter().zip(results) {
            conclude(&inner, job, result);
        }
    }
}

/// The next jobs of a host's queue: the first one to come, then whatever else comes within
/// `linger`, up to `max`. Empty once the queue is closed.
async fn next_batch(rx: &mut mpsc::Receiver<Job>, max: usize, linger: Duration) -> Vec<Job> {
    let Some(first) = rx.recv().await else {
        return Vec::new();
    };
    let mut batch = vec![first];
    let until = tokio::time::Instant::now() + linger;
    while batch.len() < max {
        match rx.try_recv() {
            Ok(job) => batch.push(job),
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(job)) => batch.push(job),
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
    batch
}

/// Counts a notice's attempt, or queues it again after a backoff when the failure may pass
/// and attempts are left.
fn conclude(inner: &Arc<Inner>, mut job: Job, result: Result<HttpAnswer, NoticeError>) {
    let s = inner.settings;
    if let Ok(answer) = &result {
        job.status = Some(answer.status.as_u16());
    }
    let (outcome, retry) = match result {
        Ok(answer) if answer.status.is_success() => (NoticeOutcome::Sent, false),
        Ok(answer) => {
            let status = answer.status;
            tracing::debug!(host = %job.target.authority, %status, "notice refused by its host");
            let transient = status.is_server_error() || status.as_u16() == 429;
            (NoticeOutcome::Failed, transient)
        }
        Err(NoticeError::Refused(refusal)) => {
            job.route.refused(job.kind.label(), &refusal);
            (NoticeOutcome::Refused, false)
        }
        Err(NoticeError::Failed(e)) => {
            tracing::debug!(host = %job.target.authority, error = %e, "notice failed");
            (NoticeOutcome::Failed, true)
        }
    };
    if retry && job.attempt < s.max_attempts {
        job.route.tally.retried(job.kind);
        let delay = backoff(
            s.retry_base,
            job.attempt,
            inner.jitter.fetch_add(1, Relaxed),
        );
        let weak = Arc::downgrade(inner);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(inner) = weak.upgrade() {
                let next = Job {
                    attempt: job.attempt + 1,
                    ..job
                };
                push(&inner, next);
            }
        });
        return;
    }
    job.route.tally.notice(job.kind, outcome);
    concluded(inner, &job, outcome);
    inner.pending.fetch_sub(1, Relaxed);
}

/// Wait before attempt `attempt + 1`: `base` doubled per attempt made, capped, then a random
/// point in its upper half (from `seed`), so retries of many notices spread out.
fn backoff(base: Duration, attempt: u32, seed: u64) -> Duration {
    let doubled = base.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    let full = doubled.min(MAX_BACKOFF);
    let half = full / 2;
    let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
    half + Duration::from_micros(mix(seed) % spread)
}

/// splitmix64: a well-spread number from a counter (jitter needs no better randomness).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_its_upper_half_and_is_capped() {
        let base = Duration::from_millis(200);
        for seed in 0..1_000 {
            let first = backoff(base, 1, seed);
            assert!(
                first >= Duration::from_millis(100) && first < base,
                "{first:?}"
            );
            let second = backoff(base, 2, seed);
            assert!(second >= base && second < base * 2, "{second:?}");
            let late = backoff(base, 30, seed);
            assert!(late >= MAX_BACKOFF / 2 && late < MAX_BACKOFF, "{late:?}");
        }
        let spread: std::collections::HashSet<_> = (0..100).map(|s| backoff(base, 1, s)).collect();
        assert!(
            spread.len() > 90,
            "jitter spreads retries: {}",
            spread.len()
        );
    }
}
