//! The exchange's HTTP server: accepts connections, routes, enforces input limits, and runs the
//! auction path of [`crate::auction_path`]. `Exchange::serve(listener, shutdown)` is all a binary
//! or a test needs.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use auction::AuctionConfig;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::config::Validated;
use crate::deadline::DeadlinePolicy;
use crate::metrics::{Metrics, RequestOutcome};
use crate::notice_client::NoticeClient;
use crate::notices::Notifier;
use crate::pool::BidderPool;

/// Path of the auction endpoint.
pub const AUCTION_PATH: &str = "/openrtb2/auction";

/// A configured bidder with its own connection pool.
#[derive(Debug)]
pub(crate) struct Bidder {
    pub(crate) index: u32,
    pub(crate) enabled: bool,
    pub(crate) pool: Arc<BidderPool>,
}

/// Shared state of a running exchange; immutable but for atomics.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: Validated,
    pub(crate) policy: DeadlinePolicy,
    pub(crate) auction: AuctionConfig,
    pub(crate) bidders: Vec<Bidder>,
    pub(crate) bidder_names: Vec<String>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) notifier: Notifier,
    pub(crate) notice_client: Arc<NoticeClient>,
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
    state: Arc<State>,
}

impl Exchange {
    /// Builds pools and starts the notice workers; must run inside a tokio runtime.
    pub fn new(config: Validated) -> Exchange {
        let bidder_names: Vec<String> = config
            .config
            .bidders
            .iter()
            .map(|b| b.name.clone())
            .collect();
        let metrics = Arc::new(Metrics::new(bidder_names.clone()));
        let n = &config.config.notices;
        let notice_client = Arc::new(NoticeClient::default());
        let notifier = Notifier::start(
            n.workers,
            n.queue,
            std::time::Duration::from_millis(n.timeout_ms),
            notice_client.clone(),
            metrics.clone(),
        );
        let bidders = config
            .config
            .bidders
            .iter()
            .zip(&config.endpoints)
            .enumerate()
            .map(|(i, (b, e))| Bidder {
                index: u32::try_from(i).unwrap_or(u32::MAX),
                enabled: b.enabled,
                pool: Arc::new(BidderPool::new(
                    e.clone(),
                    b.max_connections,
                    config.config.http.max_bidder_response_bytes,
                    std::time::Duration::from_millis(config.config.http.bidder_drain_ms),
                )),
            })
            .collect();
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let state = State {
            policy: DeadlinePolicy {
                default_tmax: config.default_tmax(),
                max_tmax: config.max_tmax(),
                answer_margin: config.answer_margin(),
            },
            auction: AuctionConfig {
                second_price_increment: config.second_price_increment,
            },
            id_prefix: format!("{}-{started_ms:x}", config.config.node),
            bidders,
            bidder_names,
            metrics,
            notifier,
            notice_client,
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

    /// Serves until `shutdown` completes; then stops accepting (in-flight requests finish on
    /// their own connections).
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        let read_timeout = state.config.read_timeout();
        edge::serve(listener, shutdown, read_timeout, move |req| {
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
        (&Method::GET, "/metrics") => plain(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics.render(),
        ),
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
    let response = crate::auction_path::run(state, &body, read_at).await;
    let elapsed = read_at.elapsed();
    state.metrics.auction_latency.observe(elapsed);
    response
}
