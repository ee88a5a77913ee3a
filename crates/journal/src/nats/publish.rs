//! Publishing to JetStream: the stream the records go to, created when missing, and a batch of
//! lines published pipelined (a window sent, then its acks awaited in order), each with its
//! `Nats-Msg-Id` so a line sent twice is stored once.

use std::time::Duration;

use async_nats::jetstream::context::Context;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{Config as StreamConfig, StorageType};
use bytes::Bytes;
use tokio::time::{Instant, timeout_at};

use crate::sink::Line;

/// The subjects the records stream holds: `gavel.records.<source>`.
pub const SUBJECTS: &str = "gavel.records.>";

/// How long JetStream remembers a message id to drop a second copy. A retry (a replay of the
/// spill after an ack that never came) arrives well within it: the spill is replayed as soon
/// as the server is back. A line whose first copy reached the server and whose replay comes
/// later than this (the server away longer) would be stored twice; readers see both.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Lines in flight at once: sent, their acks not yet awaited. Below the client's
/// `max_ack_inflight` (5,000), whose permits are held until an ack is awaited.
pub const WINDOW: usize = 1024;

/// The stream a journal publishes to, and the limits it is created with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    pub name: String,
    /// `max_bytes`: past it the stream discards its oldest messages (`records.max_total_mb`).
    pub max_bytes: u64,
    /// `max_age` (`records.max_age_days`).
    pub max_age: Duration,
}

/// The stream's configuration: file storage, so records survive a server restart, and both
/// limits, so that nothing a flood sends grows it without a bound.
pub fn stream_config(spec: &StreamSpec) -> StreamConfig {
    StreamConfig {
        name: spec.name.clone(),
        subjects: vec![SUBJECTS.to_owned()],
        storage: StorageType::File,
        duplicate_window: DUPLICATE_WINDOW,
        max_bytes: i64::try_from(spec.max_bytes).unwrap_or(i64::MAX),
        max_age: spec.max_age,
        discard: async_nats::jetstream::stream::DiscardPolicy::Old,
        ..StreamConfig::default()
    }
}

/// How an existing stream's limits differ from `spec`'s, if they do (a stream made by hand, or
/// by a node with other settings): what is said when it is found.
pub fn limits_differ(spec: &StreamSpec, existing: &StreamConfig) -> Option<String> {
    let want_bytes = i64::try_from(spec.max_bytes).unwrap_or(i64::MAX);
    let shown = |bytes: i64| {
        if bytes < 0 {
            "unlimited".to_owned()
        } else {
            format!("{bytes} bytes")
        }
    };
    let shown_age = |age: Duration| {
        if age.is_zero() {
            "unlimited".to_owned()
        } else {
            format!("{} s", age.as_secs())
        }
    };
    let mut diffs = Vec::new();
    if existing.max_bytes != want_bytes {
        diffs.push(format!(
            "max_bytes {} (records.max_total_mb wants {})",
            shown(existing.max_bytes),
            shown(want_bytes)
        ));
    }
    if existing.max_age != spec.max_age {
        diffs.push(format!(
            "max_age {} (records.max_age_days wants {})",
            shown_age(existing.max_age),
            shown_age(spec.max_age)
        ));
    }
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

/// Creates the stream when missing; an existing one is used as it is, and when its limits
/// differ from `spec`'s that is logged (once per call: at start and after a reconnection).
pub async fn ensure_stream(
    js: &Context,
    spec: &StreamSpec,
    within: Duration,
) -> Result<(), String> {
    let name = &spec.name;
    match tokio::time::timeout(within, js.get_or_create_stream(stream_config(spec))).await {
        Ok(Ok(stream)) => {
            if let Some(diff) = limits_differ(spec, &stream.cached_info().config) {
                tracing::warn!(target: "journal", stream = %name, "the JetStream stream exists with other limits: {diff}; it keeps its own (change them with `nats stream edit`)");
            }
            Ok(())
        }
        Ok(Err(e)) => Err(format!("cannot create the JetStream stream {name}: {e}")),
        Err(_) => Err(format!(
            "the JetStream stream {name} was not created within {within:?}"
        )),
    }
}

/// What publishing a batch did.
#[derive(Debug, Default)]
pub struct Sent {
    /// The leading lines acknowledged: stored, or found already stored (`duplicates`).
    pub kept: usize,
    pub duplicates: u64,
    /// Why line `kept` was not acknowledged, when it was not.
    pub failure: Option<String>,
}

/// Publishes `lines` to `subject` in windows of [`WINDOW`]; each window must be sent and
/// acknowledged within `per_window`. Stops at the first line not acknowledged: it and the
/// lines after it are the caller's to spill (those acknowledged after it were stored and
/// their retry will be dropped as duplicates).
pub async fn publish_batch(
    js: &Context,
    subject: &str,
    lines: &[Line],
    per_window: Duration,
) -> Sent {
    let mut sent = Sent::default();
    for window in lines.chunks(WINDOW) {
        let deadline = Instant::now() + per_window;
        let mut acks = Vec::with_capacity(window.len());
        let mut failure = None;
        for line in window {
            let message = PublishMessage::build()
                .payload(Bytes::copy_from_slice(&line.bytes))
                .message_id(&line.id);
            match timeout_at(deadline, js.send_publish(subject.to_owned(), message)).await {
                Ok(Ok(ack)) => acks.push(ack),
                Ok(Err(e)) => {
                    failure = Some(format!("publish refused: {e}"));
                    break;
                }
                Err(_) => {
                    failure = Some(format!("publish not sent within {per_window:?}"));
                    break;
                }
            }
        }
        for ack in acks {
            match timeout_at(deadline, ack).await {
                Ok(Ok(ack)) => {
                    sent.kept += 1;
                    sent.duplicates += u64::from(ack.duplicate);
                }
                Ok(Err(e)) => {
                    sent.failure = Some(format!("publish not acknowledged: {e}"));
                    return sent;
                }
                Err(_) => {
                    sent.failure = Some(format!("publish not acknowledged within {per_window:?}"));
                    return sent;
                }
            }
        }
        if failure.is_some() {
            sent.failure = failure;
            return sent;
        }
    }
    sent
}
