//! What the writer task writes to: a [`Sink`] takes encoded records in order.

use std::future::Future;

use thiserror::Error;

/// One encoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Unique per record and stable across retries (`{instance}-{seq}`): NATS JetStream's
    /// `Nats-Msg-Id`, so a publish sent twice is kept once.
    pub id: String,
    /// The record as one JSON object, without the newline.
    pub bytes: Vec<u8>,
}

/// Why a sink could not keep records.
#[derive(Debug, Error)]
pub enum SinkError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// Where records go. Writes are in order; `write` returns once the lines are kept (written,
/// published and acknowledged, or spilled to disk to be sent later) or fails naming why.
pub trait Sink: Send + 'static {
    fn write(&mut self, lines: &[Line]) -> impl Future<Output = Result<(), SinkError>> + Send;
    /// Makes what was written durable; called at shutdown and when the queue runs dry.
    fn flush(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send;
}
