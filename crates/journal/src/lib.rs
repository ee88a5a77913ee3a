//! Writes a server's [`records`] off the request path. The request path hands a [`Record`] to
//! [`Journal::record`], which never waits: the record goes into a bounded queue or, when the
//! queue is full, is dropped and counted. A writer task ([`Writer`]) encodes what is queued in
//! batches and writes it to the sink of `[records]` ([`Config`]): rotating NDJSON files
//! ([`FileSink`]) or NATS JetStream. [`read`] reads the files back.
//!
//! | file | job |
//! | --- | --- |
//! | `config.rs` | the `[records]` section |
//! | `sink.rs` | the [`Sink`] trait the writer writes through |
//! | `any.rs` | [`AnySink`]: the sink the configuration chose |
//! | `writer.rs` | the writer task: batches, encoding, shutdown |
//! | `file.rs` | [`FileSink`]: files, rotation, compression |
//! | `layout.rs` | file names and when a file is complete (pure) |
//! | `metrics.rs` | `gavel_{exchange,bidder}_records_*` |
//! | `read.rs` | reading record files back |

mod any;
pub mod config;
pub mod file;
pub mod layout;
pub mod metrics;
pub mod nats;
pub mod read;
pub mod sink;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::RngExt;
use rand::rngs::StdRng;
use records::Record;
use thiserror::Error;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use any::AnySink;
pub use config::{Config, SinkKind};
pub use file::{FileConfig, FileSink};
pub use metrics::{DropReason, Metrics};
pub use sink::{Line, Sink, SinkError};
pub use writer::BATCH;

/// Which server writes: it names the metrics (`gavel_exchange_records_*`) and the files
/// (`exchange-{node}-...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Exchange,
    Bidder,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Exchange => "exchange",
            Server::Bidder => "bidder",
        }
    }
}

/// Why the journal could not start.
#[derive(Debug, Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] settings::ConfigError),
    #[error("records sink: {0}")]
    Sink(#[from] SinkError),
}

/// The handle the request path writes through: cheap to clone, never blocks.
#[derive(Clone, Debug, Default)]
pub struct Journal {
    queue: Option<mpsc::Sender<Record>>,
    metrics: Option<Arc<Metrics>>,
}

impl Journal {
    /// A journal that keeps nothing and shows no metrics.
    pub fn off() -> Journal {
        Journal::default()
    }

    /// Whether records are kept: callers skip building them when not.
    pub fn is_on(&self) -> bool {
        self.queue.is_some()
    }

    /// Queues `record` for writing; drops and counts it when the queue is full (or the writer
    /// has shut down). Never waits; allocates nothing beyond the queue's slot.
    pub fn record(&self, record: Record) {
        let (Some(queue), Some(metrics)) = (&self.queue, &self.metrics) else {
            return;
        };
        match queue.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => metrics.dropped.inc(DropReason::QueueFull),
            Err(TrySendError::Closed(_)) => metrics.dropped.inc(DropReason::Shutdown),
        }
    }

    /// Records waiting to be written.
    pub fn queue_depth(&self) -> usize {
        self.queue
            .as_ref()
            .map_or(0, |q| q.max_capacity() - q.capacity())
    }

    /// The journal's metrics, when it has any (every journal but [`Journal::off`]).
    pub fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_deref()
    }

    /// Appends the journal's metric families to a `/metrics` text (nothing when off).
    pub fn render(&self, out: &mut String) {
        if let Some(metrics) = &self.metrics {
            metrics.queue_depth.set(self.queue_depth() as u64);
            metrics.render(out);
        }
    }
}

/// The writer task: owns the sink. [`Writer::shutdown`] drains it.
#[derive(Debug)]
pub struct Writer {
    task: Option<(oneshot::Sender<Instant>, JoinHandle<u64>)>,
}

impl Writer {
    /// Closes the queue, writes what it holds and closes the sink (the file sink completes its
    /// file), all by `deadline`. Returns how many records were not written (counted as
    /// `dropped{reason="shutdown"}` or `"sink_error"`).
    pub async fn shutdown(self, deadline: Instant) -> u64 {
        let Some((stop, task)) = self.task else {
            return 0;
        };
        let _ = stop.send(deadline);
        match task.await {
            Ok(lost) => lost,
            Err(e) => {
                tracing::error!(error = %e, "records: the writer task failed");
                0
            }
        }
    }
}

/// Starts the journal `config` describes for `server` on `node` (in file names and record ids).
/// `sink = "off"` gives a journal that keeps nothing but shows its metrics (all zero).
pub async fn start(
    config: &Config,
    server: Server,
    node: &str,
) -> Result<(Journal, Writer), StartError> {
    config.validate()?;
    let metrics = Arc::new(Metrics::new(server));
    let sink = match config.sink {
        SinkKind::Off => {
            let journal = Journal {
                queue: None,
                metrics: Some(metrics),
            };
            return Ok((journal, Writer { task: None }));
        }
        SinkKind::File => AnySink::File(Box::new(
            FileSink::open(
                FileConfig {
                    dir: PathBuf::from(&config.dir),
                    prefix: layout::prefix(server.name(), node),
                    limits: layout::Limits {
                        max_bytes: config.max_file_mb.saturating_mul(1024 * 1024),
                        max_age: Duration::from_secs(config.max_file_age_s),
                    },
                    retention: config.retention(),
                },
                metrics.clone(),
            )
            .await?,
        )),
        SinkKind::Nats => {
            let subject = format!("gavel.records.{}", server.name());
            let sink = nats::NatsSink::connect(config, subject).await?;
            metrics.watch_nats(sink.handle());
            AnySink::Nats(sink)
        }
    };
    Ok(start_with(sink, config.queue, metrics, node))
}

/// Starts a journal over `sink` with a queue of `queue` records (at least 1), counting into
/// `metrics`. On the current tokio runtime.
pub fn start_with<S: Sink>(
    sink: S,
    queue: usize,
    metrics: Arc<Metrics>,
    node: &str,
) -> (Journal, Writer) {
    let (tx, rx) = mpsc::channel(queue.clamp(1, config::MAX_QUEUE));
    let (stop_tx, stop_rx) = oneshot::channel();
    let instance = format!(
        "{}-{:016x}",
        layout::node_name(node),
        rand::make_rng::<StdRng>().random::<u64>()
    );
    let task = tokio::spawn(writer::run(sink, rx, stop_rx, instance, metrics.clone()));
    let journal = Journal {
        queue: Some(tx),
        metrics: Some(metrics),
    };
    (
        journal,
        Writer {
            task: Some((stop_tx, task)),
        },
    )
}
