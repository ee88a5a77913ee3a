//! The exchange's HTTP server: routes. Auction requests come in through the edge's
//! [`edge::Door`] (read, admit, run `auction_path.rs`, observe).
//! `Exchange::serve(listener, shutdown)` is all a binary or a test needs.

use std::future::Future;
use std::sync::Arc;

use admission::Admission;
use bytes::Bytes;
use edge::{ConnStats, Refused, json_error, method_not_allowed, plain};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::metrics::{Metrics, RequestOutcome};
use crate::state::{Exchange, State};

/// Path of the auction endpoint.
pub const AUCTION_PATH: &str = "/openrtb2/auction";

impl Exchange {
    pub fn metrics(&self) -> Arc<Metrics> {
        self.state.metrics.clone()
    }

    /// Sends the notices still queued (after `serve` has returned, no auction adds more),
    /// waiting at most `within`; returns how many could not be sent in time.
    pub async fn flush_notices(&self, within: std::time::Duration) -> u64 {
        self.state.notifier.flush(within).await
    }

    /// The admission gate, for tests and reports.
    pub fn admission(&self) -> &Admission {
        self.state.door.admission()
    }

    /// Connection counters, for tests and reports.
    pub fn connections(&self) -> &ConnStats {
        &self.state.connections
    }

    /// Serves until `shutdown` completes; then stops accepting, lets auctions in flight finish
    /// (within `http.shutdown_grace_ms`) and returns. Queued notices are the notifier's: see
    /// [`Exchange::flush_notices`].
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        let limits = state.config.limits();
        let connections = state.connections.clone();
        edge::serve(
            listener,
            shutdown,
            limits,
            connections,
            move |req, _peer| {
                let state = state.clone();
                async move { handle(&state, req).await }
            },
        )
        .await;
    }
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &state.metrics;
    match (req.method(), req.uri().path()) {
        (&Method::POST, AUCTION_PATH) => auction(state, req).await,
        (_, AUCTION_PATH) => {
            metrics.request(RequestOutcome::MethodNotAllowed);
            method_not_allowed("POST")
        }
        (&Method::GET, "/healthz") => plain(StatusCode::OK, "text/plain", "ok\n"),
        (&Method::GET, "/metrics") => {
            let mut text = metrics.render();
            state.door.admission().render("gavel_exchange", &mut text);
            state.connections.render("gavel_exchange", &mut text);
            plain(StatusCode::OK, "text/plain; version=0.0.4", text)
        }
        (_, "/healthz" | "/metrics") => method_not_allowed("GET"),
        (_, path) if path.starts_with("/admin") => json_error(
            StatusCode::NOT_FOUND,
            "admin endpoints are served on admin_listen only",
        ),
        _ => {
            metrics.request(RequestOutcome::NotFound);
            json_error(
                StatusCode::NOT_FOUND,
                "no such path; bid requests go to POST /openrtb2/auction",
            )
        }
    }
}

async fn auction(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &state.metrics;
    let refused = |why| {
        metrics.request(match why {
            Refused::TooLarge => RequestOutcome::TooLarge,
            Refused::BadBody => RequestOutcome::BadRequest,
            Refused::Shed => RequestOutcome::Shed,
        });
    };
    state
        .door
        .take_in(
            req,
            &metrics.auction_latency,
            refused,
            |body, read_at| async move { crate::auction_path::run(state, &body, read_at).await },
        )
        .await
}
