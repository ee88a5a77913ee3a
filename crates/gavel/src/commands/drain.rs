//! How a serving command (`exchange`, `bidder`, `edge`) stops: the first SIGTERM or SIGINT
//! starts a drain, a second one exits at once.
//!
//! The drain, one log line per phase: `/readyz` turns 503 at once while the listener keeps
//! accepting and answering as usual for `http.drain_grace_ms` (a load balancer needs that long
//! to stop sending); then the listener closes and the requests in flight are answered (kept-alive
//! connections get `Connection: close` and close once idle) within `http.drain_timeout_ms`; then
//! the server's own shutdown runs (notices and records flushed, leases handed back).

use std::sync::Arc;
use std::time::Duration;

use http_front::{ConnStats, HttpSection, Readiness};

/// The exit status of a process stopped by a second signal, mid-drain.
pub(crate) const EXIT_ON_SECOND_SIGNAL: i32 = 1;

/// One server's drain, as its `[http]` section sets it.
pub(crate) struct Drain {
    server: &'static str,
    grace: Duration,
    timeout: Duration,
    /// Installed when the drain is made, before the server says it listens: a signal sent as
    /// soon as the address is printed must start the drain, not kill the process (the default
    /// action while no handler is installed).
    signals: Option<StopSignals>,
}

impl Drain {
    pub(crate) fn new(server: &'static str, http: &HttpSection) -> Drain {
        Drain {
            server,
            grace: http.drain_grace(),
            timeout: http.limits().drain_timeout,
            signals: Some(StopSignals::new()),
        }
    }

    /// Completes when the listener is to close: a stop signal came, `readiness` turned to
    /// draining, and the grace passed. From then on a second signal exits the process.
    pub(crate) async fn until_listener_closes(&mut self, readiness: Arc<Readiness>) {
        let mut signals = self.signals.take().unwrap_or_else(StopSignals::new);
        let signal = signals.next().await;
        readiness.start_draining();
        tracing::info!(
            server = self.server,
            signal,
            grace_ms = self.grace.as_millis() as u64,
            "drain started: /readyz answers 503; the listener accepts and answers as usual for the grace"
        );
        tokio::spawn(async move {
            let second = signals.next().await;
            tracing::warn!(
                signal = second,
                "second signal: exiting now, without finishing the drain"
            );
            std::process::exit(EXIT_ON_SECOND_SIGNAL);
        });
        tokio::time::sleep(self.grace).await;
        tracing::info!(
            server = self.server,
            timeout_ms = self.timeout.as_millis() as u64,
            "drain: grace over, the listener closes; answering the requests in flight"
        );
    }

    /// Says how the requests in flight ended, once `serve` returned.
    pub(crate) fn report_in_flight(&self, connections: &ConnStats) {
        let open = connections.open.load(std::sync::atomic::Ordering::Relaxed);
        if open == 0 {
            tracing::info!(
                server = self.server,
                "drain: every request in flight answered"
            );
        } else {
            tracing::warn!(
                server = self.server,
                open,
                "drain: connections still busy after http.drain_timeout_ms are cut"
            );
        }
    }
}

/// SIGTERM and SIGINT, registered once so that none is missed between the first and the
/// second.
struct StopSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn new() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let term = signal(SignalKind::terminate())
                .inspect_err(|e| tracing::warn!(error = %e, "SIGTERM cannot be handled"))
                .ok();
            let int = signal(SignalKind::interrupt())
                .inspect_err(|e| tracing::warn!(error = %e, "SIGINT cannot be handled"))
                .ok();
            StopSignals { term, int }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// The name of the next stop signal; never completes when neither can be handled.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn recv(s: Option<&mut tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        if s.recv().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = recv(self.term.as_mut()) => "SIGTERM",
                () = recv(self.int.as_mut()) => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
