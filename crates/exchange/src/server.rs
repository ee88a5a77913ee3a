//! The exchange's HTTP server: accepts connections, routes, enforces input limits, and runs the
//! auction path of [`crate::auction_path`]. `Exchange::serve(listener, shutdown)` is all a binary
//! or a test needs.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use admission::Admission;
use arc_swap::ArcSwap;
use auction::AuctionConfig;
use bytes::Bytes;
use edge::ConnStats;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::config::Validated;
use crate::metrics::{Metrics, RequestOutcome};
use crate::notice_client::NoticeClient;
use crate::notices::Notifier;
use crate::roster::{PoolSettings, Roster};
use admission::DeadlinePolicy;

/// Path of the auction endpoint.
pub const AUCTION_PATH: &str = "/openrtb2/auction";

/// Shared state of a running exchange; immutable but for atomics.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: Validated,
    pub(crate) policy: DeadlinePolicy,
    pub(crate) auction: AuctionConfig,
    /// The bidders now; `config.bidders` is only the list the exchange started with.
    pub(crate) roster: ArcSwap<Roster>,
    /// What a reload builds the roster with: the startup values, which only a restart changes.
    pub(crate) pool_settings: PoolSettings,
    /// Serializes reloads (the watcher and SIGHUP) so two never race to swap.
    pub(crate) reload_lock: tokio::sync::Mutex<()>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) notifier: Notifier,
    pub(crate) notice_client: Arc<NoticeClient>,
    pub(crate) admission: Arc<Admission>,
    pub(crate) connections: Arc<ConnStats>,
    auction_seq: AtomicU64,
    /// Makes auction ids unique across restarts of the same node.
    id_prefix: String,
}

impl State {
    pub(crate) fn next_auction_id(&self) -> String {
        let n = self.auction_seq.fetch_add(1, Relaxed);
        format!("{}-{n:x}", self.id_prefix)
    }
}

/// A configured exchange, ready to serve.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub(crate) state: Arc<State>,
}

impl Exchange {
    /// Builds pools, starts the notice workers and the admission controller; must run inside a
    /// tokio runtime.
    pub fn new(config: Validated) -> Exchange {
        let pool_settings = PoolSettings::new(&config.config.http, &config.config.breaker);
        let (roster, _) = Roster::build(
            &config.config.bidders,
            &config.endpoints,
            &pool_settings,
            &Roster::default(),
            Instant::now(),
        );
        let metrics = Arc::new(Metrics::new(Vec::new()));
        metrics.set_bidders(roster.table.clone());
        let n = &config.config.notices;
        let notice_client = Arc::new(NoticeClient::default());
        let notifier = Notifier::start(
            n.workers,
            n.queue,
            std::time::Duration::from_millis(n.timeout_ms),
            notice_client.clone(),
            metrics.clone(),
        );
        let admission = Arc::new(Admission::new(config.config.admission.clone()));
        tokio::spawn(Admission::run_controller(Arc::downgrade(&admission)));
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let state = State {
            policy: config.config.deadline.policy(),
            auction: AuctionConfig {
                second_price_increment: config.second_price_increment,
            },
            id_prefix: format!("{}-{started_ms:x}", config.config.node),
            roster: ArcSwap::from_pointee(roster),
            pool_settings,
            reload_lock: tokio::sync::Mutex::new(()),
            metrics,
            notifier,
            notice_client,
            admission,
            connections: Arc::new(ConnStats::default()),
            auction_seq: AtomicU64::new(0),
            config,
        };
        Exchange {
            state: Arc::new(state),
        }
    }

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
        &self.state.admission
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
        edge::serve(listener, shutdown, limits, connections, move |req| {
            let state = state.clone();
            async move { handle(&state, req).await }
        })
        .await;
    }
}

pub(crate) use edge::json_error;
use edge::{method_not_allowed, plain};

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
            state.admission.render("gavel_exchange", &mut text);
            state.connections.render("gavel_exchange", &mut text);
            plain(StatusCode::OK, "text/plain; version=0.0.4", text)
        }
        (_, "/healthz" | "/metrics") => method_not_allowed("GET"),
        _ => {
            metrics.request(RequestOutcome::NotFound);
            json_error(
                StatusCode::NOT_FOUND,
                "no such path; bid requests go to POST /openrtb2/auction",
            )
        }
    }
}

/// Reads the body within the size limit and the read timeout.
async fn read_body(state: &State, req: Request<Incoming>) -> Result<Bytes, Response<Full<Bytes>>> {
    let limit = state.config.config.http.max_body_bytes;
    edge::read_body(req, limit, state.config.read_timeout())
        .await
        .map_err(|e| {
            state.metrics.request(match e {
                edge::BodyError::TooLarge { .. } => RequestOutcome::TooLarge,
                edge::BodyError::Read(_) | edge::BodyError::Timeout => RequestOutcome::BadRequest,
            });
            e.response()
        })
}

async fn auction(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match read_body(state, req).await {
        Ok(b) => b,
        Err(response) => return response,
    };
    let read_at = Instant::now();
    // The body is read (so the connection stays usable) before the gate: a slow sender must
    // not hold a place meant for auctions.
    let Some(_ticket) = state.admission.try_enter() else {
        state.metrics.request(RequestOutcome::Shed);
        return edge::shed_answer(&state.admission, &body);
    };
    let response = crate::auction_path::run(state, &body, read_at).await;
    let elapsed = read_at.elapsed();
    state.metrics.auction_latency.observe(elapsed);
    response
}
