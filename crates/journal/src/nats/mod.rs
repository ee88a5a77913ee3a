//! The NATS JetStream sink: records published to a stream, each with its line id as
//! `Nats-Msg-Id` so a retry is stored once, and a disk spill while the server is away.
//!
//! | situation | what happens |
//! | --- | --- |
//! | server up, spill empty | a batch is published pipelined (`publish.rs`): a window of lines sent, then their acks awaited, at most [`PUBLISH_TIMEOUT`] per window; a duplicate ack counts as kept |
//! | an ack does not come, or the client is not connected | the line not acknowledged and every line after it go to the spill (`spill.rs`), fsynced, in order |
//! | spill not empty | new lines go behind it, never around it, so the stream keeps the order they were written in |
//! | server back | the replayer (`replay.rs`, a background task) publishes the spill in order, removes it, and direct publishing resumes |
//! | spill full (`max_spill_mb`) | lines are dropped, counted ([`NatsStats::dropped`]) and named in the error |
//! | a spill left by a crash | replayed at start |
//!
//! The writer is never held longer than [`PUBLISH_TIMEOUT`] per window of lines (plus an
//! fsync), whatever the server does. Reading a stream back: [`read_stream`].

mod publish;
mod read;
mod replay;
mod spill;
mod spill_line;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::{self, context::Context};
use tokio::sync::Notify;
use tokio::task::AbortHandle;

pub use publish::{DUPLICATE_WINDOW, SUBJECTS, StreamSpec, limits_differ, stream_config};
pub use read::{ReadStreamError, read_stream, read_stream_with};
pub use spill::SPILL_FILE;

use crate::config::Config;
use crate::sink::{Line, Sink, SinkError};
use spill::Spill;

/// Longest the writer waits for a window of lines to be sent and acknowledged before it
/// spills them; also the bound on connecting and creating the stream at start.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(2);

/// What the sink has done since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatsStats {
    /// Lines published and acknowledged directly.
    pub published: u64,
    /// Acknowledged as already stored (a retry): kept, not stored twice.
    pub duplicates: u64,
    /// Lines written to the spill.
    pub spilled: u64,
    /// Lines published from the spill and acknowledged.
    pub replayed: u64,
    /// Lines lost: the spill full, a line that cannot travel, a damaged spill line.
    pub dropped: u64,
    /// Bytes in the spill waiting to be replayed.
    pub spill_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    published: AtomicU64,
    duplicates: AtomicU64,
    spilled: AtomicU64,
    replayed: AtomicU64,
    dropped: AtomicU64,
}

/// What the writer and the replayer share.
#[derive(Debug)]
struct Shared {
    js: Context,
    stream: StreamSpec,
    subject: String,
    spill: Mutex<Spill>,
    /// Rings when lines are spilled, so the replayer looks at once.
    wake: Notify,
    counters: Counters,
}

impl Shared {
    /// The spill; a poisoned lock is taken as it is (every change to the spill leaves it
    /// consistent before anything that could panic).
    fn lock(&self) -> MutexGuard<'_, Spill> {
        telemetry::locks::lock(&self.spill)
    }
}

/// Runs blocking file work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(format!("spill task failed: {e}"))))
}

/// Reads a [`NatsSink`]'s figures.
#[derive(Debug, Clone)]
pub struct NatsHandle(Arc<Shared>);

impl NatsHandle {
    /// What the sink has done since it started.
    pub fn stats(&self) -> NatsStats {
        let c = &self.0.counters;
        NatsStats {
            published: c.published.load(Relaxed),
            duplicates: c.duplicates.load(Relaxed),
            spilled: c.spilled.load(Relaxed),
            replayed: c.replayed.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            spill_bytes: self.0.lock().pending_bytes(),
        }
    }
}

/// The NATS JetStream [`Sink`].
#[derive(Debug)]
pub struct NatsSink {
    shared: Arc<Shared>,
    replayer: AbortHandle,
    stream_ready: bool,
}

impl NatsSink {
    /// Connects to `config.nats_url` and publishes to `subject` (`gavel.records.<source>`,
    /// e.g. `gavel.records.exchange`) in the stream `config.nats_stream`, created over
    /// [`SUBJECTS`] when missing. A server that is not reachable now is not an error: records
    /// go to the spill in `config.spill_dir` until it is. A spill left by an earlier run is
    /// replayed as soon as the server answers.
    pub async fn connect(config: &Config, subject: String) -> Result<NatsSink, SinkError> {
        check_names(&config.nats_stream, &subject)?;
        let retention = config.retention();
        let stream = StreamSpec {
            name: config.nats_stream.clone(),
            max_bytes: retention.max_total_bytes,
            max_age: retention.max_age,
        };
        let spill_dir = std::path::PathBuf::from(&config.spill_dir);
        let max_bytes = config.max_spill_mb.saturating_mul(1024 * 1024);
        let spill = blocking(move || Spill::open(&spill_dir, max_bytes))
            .await
            .map_err(|source| SinkError::Io {
                what: format!("record spill in {}", config.spill_dir),
                source,
            })?;
        let client = async_nats::ConnectOptions::new()
            .name("gavel-journal")
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(PUBLISH_TIMEOUT)
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64).saturating_mul(100).min(1000))
            })
            .connect(config.nats_url.as_str())
            .await
            .map_err(|e| SinkError::Other(format!("records.nats_url {}: {e}", config.nats_url)))?;
        let js = jetstream::ContextBuilder::new()
            .timeout(PUBLISH_TIMEOUT)
            .ack_timeout(PUBLISH_TIMEOUT)
            .build(client);
        let shared = Arc::new(Shared {
            js,
            stream,
            subject,
            spill: Mutex::new(spill),
            wake: Notify::new(),
            counters: Counters::default(),
        });
        let mut sink = NatsSink {
            replayer: tokio::spawn(replay::run(Arc::clone(&shared))).abort_handle(),
            shared,
            stream_ready: false,
        };
        // Give the first connection a moment so the first batch need not be spilled; past it
        // the client keeps trying in the background.
        let until = tokio::time::Instant::now() + PUBLISH_TIMEOUT;
        while sink.state() != State::Connected && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if sink.state() == State::Connected {
            sink.ensure_stream().await;
        }
        Ok(sink)
    }

    /// What the sink has done since it started.
    pub fn stats(&self) -> NatsStats {
        self.handle().stats()
    }

    /// A handle that reads [`NatsSink::stats`] from elsewhere (the server's `/metrics`) while
    /// the writer task owns the sink.
    pub fn handle(&self) -> NatsHandle {
        NatsHandle(Arc::clone(&self.shared))
    }

    fn state(&self) -> State {
        self.shared.js.client().connection_state()
    }

    async fn ensure_stream(&mut self) {
        match publish::ensure_stream(&self.shared.js, &self.shared.stream, PUBLISH_TIMEOUT).await {
            Ok(()) => self.stream_ready = true,
            Err(e) => tracing::warn!(target: "journal", "{e}; records go to the spill"),
        }
    }

    /// Appends `lines` to the spill; an error when any was lost.
    async fn spill(&self, lines: &[Line]) -> Result<(), SinkError> {
        let shared = Arc::clone(&self.shared);
        let owned = lines.to_vec();
        let appended = blocking(move || shared.lock().append(&owned))
            .await
            .map_err(|source| SinkError::Io {
                what: format!("record spill {}", self.shared.lock().path().display()),
                source,
            })?;
        let c = &self.shared.counters;
        c.spilled.fetch_add(appended.kept, Relaxed);
        let dropped = appended.dropped_full + appended.dropped_bad;
        c.dropped.fetch_add(dropped, Relaxed);
        self.shared.wake.notify_one();
        match appended.bad {
            _ if dropped == 0 => Ok(()),
            Some(bad) if appended.dropped_full == 0 => Err(SinkError::Other(format!(
                "{dropped} record(s) dropped: {}",
                bad.label()
            ))),
            _ => Err(SinkError::Other(format!(
                "{dropped} record(s) dropped: the record spill is full (records.max_spill_mb \
                 reached) while the NATS server is away"
            ))),
        }
    }
}

impl Sink for NatsSink {
    async fn write(&mut self, lines: &[Line]) -> Result<(), SinkError> {
        if lines.is_empty() {
            return Ok(());
        }
        let direct = self.shared.lock().is_empty() && self.state() == State::Connected;
        if direct && !self.stream_ready {
            self.ensure_stream().await;
        }
        let rest = if direct && self.stream_ready {
            let sent = publish::publish_batch(
                &self.shared.js,
                &self.shared.subject,
                lines,
                PUBLISH_TIMEOUT,
            )
            .await;
            let c = &self.shared.counters;
            c.published.fetch_add(sent.kept as u64, Relaxed);
            c.duplicates.fetch_add(sent.duplicates, Relaxed);
            if let Some(failure) = &sent.failure {
                tracing::warn!(target: "journal", "NATS: {failure}; records go to the spill");
            }
            lines.get(sent.kept..).unwrap_or_default()
        } else {
            lines
        };
        if rest.is_empty() {
            return Ok(());
        }
        self.spill(rest).await
    }

    /// Acknowledged lines are stored and spilled ones fsynced when `write` returns: nothing
    /// is held back.
    async fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

impl Drop for NatsSink {
    fn drop(&mut self) {
        // The spill stays on disk; the next start replays what is left.
        self.replayer.abort();
    }
}

/// A stream name JetStream accepts, and a subject inside the stream's [`SUBJECTS`].
fn check_names(stream: &str, subject: &str) -> Result<(), SinkError> {
    let bad_stream = stream.is_empty()
        || stream.len() > 64
        || stream
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>' | '/' | '\\'));
    if bad_stream {
        return Err(SinkError::Other(format!(
            "records.nats_stream {stream:?}: must be 1 to 64 characters without spaces, '.', '*', '>', '/' or '\\'"
        )));
    }
    let prefix = SUBJECTS.trim_end_matches('>');
    let tail = subject.strip_prefix(prefix).unwrap_or("");
    let bad_subject = tail.is_empty()
        || tail.split('.').any(|t| {
            t.is_empty()
                || t.chars()
                    .any(|c| c.is_whitespace() || matches!(c, '*' | '>'))
        });
    if bad_subject {
        return Err(SinkError::Other(format!(
            "NATS subject {subject:?}: must be {prefix}<name> (the stream holds {SUBJECTS})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_outside_the_stream_are_refused() {
        assert!(check_names("GAVEL_RECORDS", "gavel.records.exchange").is_ok());
        assert!(check_names("GAVEL_RECORDS", "gavel.records.bidder.b1").is_ok());
        assert!(check_names("GAVEL.RECORDS", "gavel.records.exchange").is_err());
        assert!(check_names("", "gavel.records.exchange").is_err());
        assert!(check_names("S", "gavel.records.").is_err());
        assert!(check_names("S", "other.exchange").is_err());
        assert!(check_names("S", "gavel.records.a..b").is_err());
        assert!(check_names("S", "gavel.records.*").is_err());
    }
}
