//! [`AnySink`]: the sink `[records]` chose, one variant per kind. Adding a sink is a variant
//! here and one arm in each method.

use crate::file::FileSink;
use crate::nats::NatsSink;
use crate::sink::{Line, Sink, SinkError};

/// The sink of `records.sink`.
#[derive(Debug)]
pub enum AnySink {
    /// Boxed: the file sink carries its configuration and buffers, the NATS sink a handle.
    File(Box<FileSink>),
    Nats(NatsSink),
}

impl Sink for AnySink {
    async fn write(&mut self, lines: &[Line]) -> Result<(), SinkError> {
        match self {
            AnySink::File(s) => s.write(lines).await,
            AnySink::Nats(s) => s.write(lines).await,
        }
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        match self {
            AnySink::File(s) => s.flush().await,
            AnySink::Nats(s) => s.flush().await,
        }
    }

    async fn tick(&mut self) -> Result<(), SinkError> {
        match self {
            AnySink::File(s) => s.tick().await,
            AnySink::Nats(s) => s.tick().await,
        }
    }

    async fn close(&mut self) -> Result<(), SinkError> {
        match self {
            AnySink::File(s) => s.close().await,
            AnySink::Nats(s) => s.close().await,
        }
    }
}
