//! One module per subcommand.

mod baseline;
mod bidder;
mod check_config;
mod config_push;
mod demo;
mod demo_bidder;
mod drain;
mod edge;
mod exchange;
mod ledger;
pub mod load;
mod probe;
pub mod reconcile;
mod records_sink;
mod replay;
mod sim;

use crate::cli::Command;

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Exchange(args) => exchange::run(args).await,
        Command::Bidder(args) => bidder::run(args).await,
        Command::Sim(args) => sim::run(args).await,
        Command::Edge(args) => edge::run(args).await,
        Command::Load(args) => load::run(*args).await,
        Command::Demo(args) => demo::run(args).await,
        Command::CheckConfig(args) => check_config::run(&args).await,
        Command::Ledger(args) => ledger::run(args).await,
        Command::Config(args) => config_push::run(args).await,
        Command::Baseline(args) => baseline::run(args).await,
        Command::Replay(args) => replay::run(args).await,
        Command::Reconcile(args) => reconcile::run(args).await,
        Command::Probe(args) => probe::run(&args).await,
    }
}

/// A command's verdict as its exit status, when it is not plain success or failure
/// (`gavel reconcile`: 1 on a mismatch, 2 on a read error). The command has already said why.
#[derive(Debug)]
pub struct Exit(pub u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// Runs `reload` each time the process gets SIGHUP (one at a time), for as long as it runs.
pub(crate) fn on_hangup<F, Fut>(mut reload: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP cannot be handled; reloads follow file changes only");
                return;
            }
        };
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading");
            reload().await;
        }
    });
    #[cfg(not(unix))]
    drop(reload);
}

/// Where a server's configuration comes from, for its messages: the file, or the environment.
pub(crate) fn config_source(file: Option<&std::path::Path>) -> String {
    file.map_or_else(
        || "the environment (no --config)".to_owned(),
        |f| f.display().to_string(),
    )
}

/// Completes on Ctrl-C or SIGTERM (the servers drain instead: `drain.rs`).
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
