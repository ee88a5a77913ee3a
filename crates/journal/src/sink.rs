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
    /// Makes what was written durable; called when the queue runs dry.
    fn flush(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send;
    /// Called about once a second while the writer waits for records, for work that is due
    /// with time rather than writes (the file sink completes a file past its age). By default,
    /// nothing.
    fn tick(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send {
        async { Ok(()) }
    }
    /// Called once, last, at shutdown (under the shutdown deadline): makes everything durable
    /// and finishes work in flight (the file sink completes its file). By default, `flush`.
    fn close(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send {
        self.flush()
    }
}
