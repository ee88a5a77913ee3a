//! The replayer: a background task that, while the spill holds records and the client is
//! connected, publishes them in order from the spill's cursor, moves the cursor past each run
//! acknowledged, and removes the file at the end, after which the writer publishes directly
//! again. The client reconnects by itself (async-nats retries forever); this task only
//! watches its state.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use async_nats::connection::State;

use super::publish::{self, publish_batch};
use super::{PUBLISH_TIMEOUT, Shared, blocking};

/// How often the replayer looks at the spill and the connection when nothing wakes it.
const IDLE: Duration = Duration::from_millis(200);
/// After a failed replay, the wait before the next try.
const BACKOFF: Duration = Duration::from_millis(500);
/// Lines read from the spill per publish.
const CHUNK_LINES: usize = publish::WINDOW;
const CHUNK_BYTES: u64 = 4 << 20;

pub async fn run(shared: Arc<Shared>) {
    let mut stream_ready = false;
    loop {
        tokio::select! {
            () = shared.wake.notified() => {}
            () = tokio::time::sleep(IDLE) => {}
        }
        while !shared.lock().is_empty() {
            if shared.js.client().connection_state() != State::Connected {
                break;
            }
            if !stream_ready {
                match publish::ensure_stream(&shared.js, &shared.stream, PUBLISH_TIMEOUT).await {
                    Ok(()) => stream_ready = true,
                    Err(e) => {
                        tracing::warn!(target: "journal", "record spill replay waits: {e}");
                        tokio::time::sleep(BACKOFF).await;
                        break;
                    }
                }
            }
            match replay_chunk(&shared).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(target: "journal", "record spill replay paused: {e}");
                    tokio::time::sleep(BACKOFF).await;
                    break;
                }
            }
        }
    }
}

/// Publishes the next run of the spill and moves the cursor past what was acknowledged.
async fn replay_chunk(shared: &Arc<Shared>) -> Result<(), String> {
    let reader = Arc::clone(shared);
    let chunk = blocking(move || reader.lock().read_chunk(CHUNK_LINES, CHUNK_BYTES))
        .await
        .map_err(|e| format!("cannot read the spill: {e}"))?;
    if chunk.skipped > 0 {
        shared.counters.dropped.fetch_add(chunk.skipped, Relaxed);
        tracing::error!(
            target: "journal",
            "record spill: {} damaged line(s) skipped (not id<TAB>json)", chunk.skipped
        );
    }
    let sent = publish_batch(&shared.js, &shared.subject, &chunk.lines, PUBLISH_TIMEOUT).await;
    shared
        .counters
        .replayed
        .fetch_add(sent.kept as u64, Relaxed);
    shared
        .counters
        .duplicates
        .fetch_add(sent.duplicates, Relaxed);
    let bytes = chunk.skipped_bytes + chunk.sizes.iter().take(sent.kept).sum::<u64>();
    let mover = Arc::clone(shared);
    blocking(move || mover.lock().advance(bytes))
        .await
        .map_err(|e| format!("cannot move the spill's cursor: {e}"))?;
    match sent.failure {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}
