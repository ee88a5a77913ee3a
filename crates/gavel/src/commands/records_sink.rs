//! Starting a server's `[records]` journal: its directories relative to the configuration
//! file, like every other path in it; and flushing it at exit.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use journal::{Journal, Server, Writer};

/// How long a stopping server waits for its queued records to be written.
const FLUSH_WITHIN: Duration = Duration::from_secs(10);

/// Starts the journal of `config` for `server` on `node`; `dir` and `spill_dir` are read
/// relative to `config_file`'s directory.
pub(crate) async fn start(
    config: &journal::Config,
    config_file: Option<&Path>,
    server: Server,
    node: &str,
) -> anyhow::Result<(Journal, Writer)> {
    let base = config_file.and_then(Path::parent);
    let mut config = config.clone();
    for dir in [&mut config.dir, &mut config.spill_dir] {
        *dir = settings::relative_to(base, Path::new(dir.as_str()))
            .display()
            .to_string();
    }
    journal::start(&config, server, node)
        .await
        .with_context(|| format!("records ({:?} sink) could not start", config.sink))
}

/// Writes what the queue still holds; says what could not be.
pub(crate) async fn flush(writer: Writer) {
    let lost = writer
        .shutdown(tokio::time::Instant::now() + FLUSH_WITHIN)
        .await;
    if lost > 0 {
        tracing::warn!(lost, "records not written at exit");
    } else {
        tracing::info!("drain: records flushed");
    }
}
