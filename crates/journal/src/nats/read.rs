//! Reading a records stream back (`gavel reconcile`): an ordered consumer from the stream's
//! first message to its last one at the time of the call, then stop. Messages published
//! meanwhile are not waited for, so a read of a busy stream ends.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::DeliverPolicy, consumer::pull::OrderedConfig};
use futures_util::StreamExt;
use records::identity::Distinct;
use records::{Record, RecordError, from_line};
use thiserror::Error;

use crate::read::ReadStats;

/// Longest a read waits for the server: to connect, to answer, to deliver the next message.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a stream could not be read.
#[derive(Debug, Error)]
pub enum ReadStreamError {
    #[error("NATS {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("JetStream stream {stream}: {reason}")]
    Stream { stream: String, reason: String },
    #[error("JetStream stream {stream} message {sequence}: {source}")]
    Record {
        stream: String,
        sequence: u64,
        #[source]
        source: RecordError,
    },
}

/// [`read_stream_with`] on its own: each record once.
pub async fn read_stream(
    url: &str,
    stream: &str,
    each: impl FnMut(Record),
) -> Result<ReadStats, ReadStreamError> {
    read_stream_with(url, stream, &mut Distinct::new(), each).await
}

/// Calls `each` with every record of the stream `stream` on the server at `url`, in stream
/// order, from the first message to the last one stored when the call began. A message that
/// is not a record stops the read, naming its sequence: a billing record is never skipped
/// silently. A record already in `seen` (read from files, or stored twice) is dropped and
/// counted in `duplicates`. `ReadStats::files` is 0; `records` counts the records handed over.
pub async fn read_stream_with(
    url: &str,
    stream: &str,
    seen: &mut Distinct,
    mut each: impl FnMut(Record),
) -> Result<ReadStats, ReadStreamError> {
    let fail = |reason: String| ReadStreamError::Stream {
        stream: stream.to_owned(),
        reason,
    };
    let client = tokio::time::timeout(
        READ_TIMEOUT,
        async_nats::ConnectOptions::new()
            .name("gavel-reconcile")
            .connection_timeout(READ_TIMEOUT)
            .connect(url),
    )
    .await
    .map_err(|_| format!("no connection within {READ_TIMEOUT:?}"))
    .and_then(|r| r.map_err(|e| e.to_string()))
    .map_err(|reason| ReadStreamError::Connect {
        url: url.to_owned(),
        reason,
    })?;
    let js = jetstream::ContextBuilder::new()
        .timeout(READ_TIMEOUT)
        .build(client);
    let handle = js
        .get_stream(stream)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let info = handle.get_info().await.map_err(|e| fail(e.to_string()))?;
    let last = info.state.last_sequence;
    let mut stats = ReadStats::default();
    if info.state.messages == 0 {
        return Ok(stats);
    }
    let consumer = handle
        .create_consumer(OrderedConfig {
            deliver_policy: DeliverPolicy::All,
            ..OrderedConfig::default()
        })
        .await
        .map_err(|e| fail(format!("cannot create a consumer: {e}")))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| fail(format!("cannot consume: {e}")))?;
    loop {
        let message = match tokio::time::timeout(READ_TIMEOUT, messages.next()).await {
            Ok(Some(Ok(message))) => message,
            Ok(Some(Err(e))) => return Err(fail(format!("delivery failed: {e}"))),
            Ok(None) => return Err(fail("the consumer ended early".to_owned())),
            Err(_) => {
                return Err(fail(format!(
                    "no message within {READ_TIMEOUT:?} before sequence {last}"
                )));
            }
        };
        let sequence = message
            .info()
            .map_err(|e| fail(format!("a message without its metadata: {e}")))?
            .stream_sequence;
        let record = from_line(&message.payload).map_err(|source| ReadStreamError::Record {
            stream: stream.to_owned(),
            sequence,
            source,
        })?;
        // A publish stored twice (its replay came after the duplicate window) is one record.
        let unchecked = seen.unchecked;
        let first = seen.first(&message.payload);
        stats.unchecked += seen.unchecked - unchecked;
        if first {
            stats.records += 1;
            each(record);
        } else {
            stats.duplicates += 1;
        }
        if sequence >= last {
            return Ok(stats);
        }
    }
}
