//! `gavel`: one binary for the exchange, the simulated DSP fleet, the load generator and the
//! demo that runs all three in one process. Thin: parsing and wiring only; the work lives in the
//! library crates.

mod cli;
mod commands;
mod logging;

use std::process::ExitCode;

use clap::Parser;

/// The request path allocates many short-lived buffers across runtime threads; mimalloc's
/// thread-local free lists cost far less there than glibc malloc (measured: BENCHMARKS.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    logging::init(cli.log, cli.log_format);
    // Every server's `/metrics` says which build runs (`gavel_build_info`); build.rs learnt
    // the commit and the compiler when it could.
    http_front::process::set_build_info(http_front::process::BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        git_sha: option_env!("GAVEL_GIT_SHA"),
        rustc: option_env!("GAVEL_RUSTC"),
    });
    // Thousands of connections (the load generator's pool, a server's clients) need more than
    // the usual 1024 open files; take what the hard limit allows, as Go's runtime does.
    let _ = loadgen::raise_open_file_limit();
    let runtime = match build_runtime(cli.threads) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gavel: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The command runs as a spawned task, on a runtime worker: `block_on` would run it on the
    // main thread instead, and every wake-up between it and the tasks it spawns would cross
    // threads (measured: a futex round trip per request in `gavel load`).
    let outcome = runtime.block_on(async { tokio::spawn(commands::run(cli.command)).await });
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        // A status of its own: `gavel load`'s verdicts (one line per reason), and commands
        // that printed their own verdict (`gavel reconcile`).
        Ok(Err(e)) => {
            if let Some(failed) = e.downcast_ref::<commands::load::verdict::Failed>() {
                for reason in &failed.reasons {
                    eprintln!("gavel: {reason}");
                }
                return ExitCode::from(failed.code);
            }
            if let Some(exit) = e.downcast_ref::<commands::Exit>() {
                return ExitCode::from(exit.0);
            }
            eprintln!("gavel: {e:#}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("gavel: internal error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--threads 1` gets a current-thread runtime: everything on one thread, no cross-thread
/// wake-ups at all, which is what a process pinned to one core wants.
fn build_runtime(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all();
    builder.build()
}
