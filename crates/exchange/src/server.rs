//! The exchange's HTTP server: routes. Auction requests come in through the edge's
//! [`http_front::Door`] (read, admit, run `auction_path.rs`, observe).
//! `Exchange::serve(listener, shutdown)` is all a binary or a test needs.

use std::future::Future;
use std::sync::Arc;

use admission::Admission;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use http_front::cors::{Cors, Verdict};
use http_front::{ConnStats, Refused, json_error, method_not_allowed, plain};
use hyper::body::Incoming;
use std::sync::atomic::Ordering::Relaxed;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::outcome::RequestOutcome;
use crate::sellers::KeyRefusal;
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

    /// The auction listener's certificate, when `[tls]` is configured.
    pub fn listener_tls(&self) -> Option<Arc<http_front::ServerTls>> {
        self.state.config.listener_tls.clone()
    }

    /// The admission gate, for tests and reports.
    pub fn admission(&self) -> &Admission {
        self.state.door.admission()
    }

    /// Whether the exchange is draining; the binary starts the drain on its stop signal.
    pub fn readiness(&self) -> Arc<http_front::Readiness> {
        self.state.readiness.clone()
    }

    /// Why `/readyz` answers 503 now, or `None` when it answers 200.
    pub fn not_ready(&self) -> Option<String> {
        not_ready(&self.state)
    }

    /// Connection counters, for tests and reports.
    pub fn connections(&self) -> &ConnStats {
        &self.state.connections
    }

    /// Serves until `shutdown` completes; then (not ready from then on) stops accepting, lets
    /// auctions in flight finish (within `http.drain_timeout_ms`) and returns. Queued notices are the notifier's: see
    /// [`Exchange::flush_notices`]. While serving, bidder hosts given by name are looked up
    /// again every `upstream.dns_refresh_ms` (`resolver.rs`).
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let every =
            std::time::Duration::from_millis(self.state.config.config.upstream.dns_refresh_ms);
        let resolver = tokio::spawn(crate::resolver::follow(Arc::downgrade(&self.state), every));
        self.serve_auctions(listener, shutdown).await;
        resolver.abort();
    }

    async fn serve_auctions(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        let limits = state.config.limits();
        let connections = state.connections.clone();
        let readiness = state.readiness.clone();
        http_front::serve_with_tls(
            listener,
            state
                .config
                .listener_tls
                .clone()
                .map(http_front::Tls::Single),
            async move {
                shutdown.await;
                readiness.start_draining();
            },
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
        (&Method::POST, AUCTION_PATH) => match state.cors.verdict(req.headers()) {
            Verdict::NoOrigin => auction(state, req).await,
            Verdict::Allowed(origin) => {
                let mut response = auction(state, req).await;
                Cors::decorate(&origin, &mut response);
                response
            }
            Verdict::Refused => origin_refused(metrics),
        },
        (&Method::OPTIONS, AUCTION_PATH) => {
            let response: Response<Full<Bytes>> = state.cors.preflight(req.headers());
            if response.status() == StatusCode::FORBIDDEN {
                metrics.request(RequestOutcome::OriginRefused);
            }
            response
        }
        (_, AUCTION_PATH) => {
            metrics.request(RequestOutcome::MethodNotAllowed);
            method_not_allowed("POST, OPTIONS")
        }
        (&Method::GET, "/healthz") => plain(StatusCode::OK, "text/plain", "ok\n"),
        (_, "/healthz") => method_not_allowed("GET"),
        (method, "/readyz") => http_front::readyz_answer(method, not_ready(state).as_deref()),
        // Sellers' names, bidders' wins and cleared revenue: never on the auction port.
        (_, "/metrics") => json_error(StatusCode::NOT_FOUND, http_front::METRICS_ELSEWHERE),
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

/// Why the exchange should get no traffic now, or `None`: only a drain. Its configuration
/// was loaded and its roster built before it could serve at all (`Exchange::new`).
pub(crate) fn not_ready(state: &State) -> Option<String> {
    state.readiness.not_ready(|| None::<String>)
}

/// The Prometheus page, served on the admin listener.
pub(crate) fn render_metrics(state: &State) -> String {
    let mut text = state.metrics.render();
    http_front::render_ready("gavel_exchange", not_ready(state).is_none(), &mut text);
    state.door.admission().render("gavel_exchange", &mut text);
    state.connections.render("gavel_exchange", &mut text);
    state.journal.render(&mut text);
    text
}

async fn auction(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &state.metrics;
    // Before the body is read: an unknown caller costs a header lookup, and no bidder sees it.
    let seller = match state
        .sellers
        .load()
        .authenticate(http_front::bearer_token(req.headers()))
    {
        Ok(seller) => seller.clone(),
        Err(why) => return unauthorized(metrics, why),
    };
    seller.requests.fetch_add(1, Relaxed);
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
            metrics.auction_latency.histogram(),
            refused,
            |body, read_at| async move {
                crate::auction_path::run(state, &seller, &body, read_at).await
            },
        )
        .await
}

/// 403 for a browser page whose origin may not call (`[cors]`); counted, body never read.
fn origin_refused(metrics: &Metrics) -> Response<Full<Bytes>> {
    metrics.request(RequestOutcome::OriginRefused);
    json_error(
        StatusCode::FORBIDDEN,
        "this page's origin may not call the exchange (cors.allowed_origins)",
    )
}

/// 401 for a request without a seller key the exchange knows; counted, body never read.
fn unauthorized(metrics: &Metrics, why: KeyRefusal) -> Response<Full<Bytes>> {
    metrics.request(RequestOutcome::Unauthorized);
    let message = match why {
        KeyRefusal::Missing => "a seller key is required: send Authorization: Bearer <key>",
        KeyRefusal::Unknown => "unknown seller key",
    };
    metrics.unauthorized.inc(why);
    let mut response = json_error(StatusCode::UNAUTHORIZED, message);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"gavel\""),
    );
    response
}
