//! The bidder's HTTP server: routes, input limits, and the bid path. `Bidder::start` wires the
//! ledger, the campaigns and the background tasks; `Bidder::serve(listener, shutdown)` serves.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::config::{BidderConfig, ChargeOn};
use crate::ledger::Ledger;
use crate::metrics::{Metrics, NoticeKind, NoticeOutcome, RequestOutcome};
use crate::runtime::Snapshot;

/// Path of the bid endpoint.
pub const BID_PATH: &str = "/openrtb2/bid";

/// Shared state of a running bidder.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: BidderConfig,
    pub(crate) node: String,
    pub(crate) public_url: String,
    pub(crate) snapshot: ArcSwap<Snapshot>,
    pub(crate) ledger: Ledger,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) charge_on: ChargeOn,
    pub(crate) seq: AtomicU64,
    /// Serializes reloads (the watcher and the admin call) so two never race to swap.
    pub(crate) reload_lock: tokio::sync::Mutex<()>,
    /// The ledger has not yet been told the limits of the campaigns in force.
    pub(crate) limits_pending: AtomicBool,
}

impl State {
    /// A reservation id unique across instances: `{node}-{sequence}`.
    pub(crate) fn next_reservation_id(&self) -> String {
        format!("{}-{:x}", self.node, self.seq.fetch_add(1, Relaxed))
    }
}

/// A running bidder.
#[derive(Debug, Clone)]
pub struct Bidder {
    pub(crate) state: Arc<State>,
}

pub(crate) fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(body.into()))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

pub(crate) fn json_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, serde_json::json!({ "error": message }).to_string())
}

fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(body.into()))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn no_content() -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Full::new(Bytes::new()))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut r = json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("method not allowed; use {allow}"),
    );
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    r
}

impl Bidder {
    pub fn metrics(&self) -> Arc<Metrics> {
        self.state.metrics.clone()
    }

    /// Serves until `shutdown` completes; then stops accepting (in-flight requests finish on
    /// their own connections).
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut shutdown => return,
            };
            let (stream, _peer) = match accepted {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let state = self.state.clone();
            tokio::spawn(async move {
                let read_timeout = state.config.read_timeout();
                let service = service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(&state, req).await) }
                });
                let mut builder = http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(read_timeout)
                    .keep_alive(true);
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &state.metrics;
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::POST, BID_PATH) => bid(state, req).await,
        (_, BID_PATH) => {
            metrics.request(RequestOutcome::MethodNotAllowed);
            method_not_allowed("POST")
        }
        (&Method::GET | &Method::POST, "/notice/win" | "/notice/bill" | "/notice/loss") => {
            let kind = match path.as_str() {
                "/notice/win" => NoticeKind::Win,
                "/notice/bill" => NoticeKind::Bill,
                _ => NoticeKind::Loss,
            };
            notice(state, kind, req.uri().query().unwrap_or("")).await
        }
        (_, "/notice/win" | "/notice/bill" | "/notice/loss") => method_not_allowed("GET, POST"),
        (&Method::GET, "/admin/campaigns") => crate::admin::campaigns(state).await,
        (_, "/admin/campaigns") => method_not_allowed("GET"),
        (&Method::POST, "/admin/reload") => crate::admin::reload(state).await,
        (_, "/admin/reload") => method_not_allowed("POST"),
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
                "no such path; bid requests go to POST /openrtb2/bid",
            )
        }
    }
}

async fn notice(state: &State, kind: NoticeKind, query: &str) -> Response<Full<Bytes>> {
    let parsed = match crate::notice::parse(kind, query) {
        Ok(n) => n,
        Err(e) => {
            state.metrics.notice(kind, NoticeOutcome::Invalid);
            return json_error(StatusCode::BAD_REQUEST, &e.to_string());
        }
    };
    let settled = crate::notice::settle(&state.ledger, state.charge_on, &parsed).await;
    state.metrics.notice(kind, settled.outcome);
    if let Some(campaign) = parsed.campaign.as_deref() {
        let snapshot = state.snapshot.load();
        if let Some(s) = snapshot.state(campaign) {
            // A won impression is counted once, by the notice that charged it (the win or the
            // billing notice, whichever came first).
            if settled.outcome == NoticeOutcome::Charged {
                s.wins.fetch_add(1, Relaxed);
                s.charged.fetch_add(settled.charged.get(), Relaxed);
            }
        }
    }
    let status = settled.status();
    if status == StatusCode::OK {
        no_content()
    } else {
        json_error(status, settled.outcome.label())
    }
}

/// Reads the body within the size limit and the read timeout.
async fn read_body(state: &State, req: Request<Incoming>) -> Result<Bytes, Response<Full<Bytes>>> {
    let limit = state.config.http.max_body_bytes;
    let too_large = || {
        state.metrics.request(RequestOutcome::TooLarge);
        json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("body exceeds the limit of {limit} bytes"),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let collect = Limited::new(req.into_body(), limit).collect();
    match tokio::time::timeout(state.config.read_timeout(), collect).await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => {
            state.metrics.request(RequestOutcome::BadRequest);
            Err(json_error(
                StatusCode::BAD_REQUEST,
                &format!("reading the body failed: {e}"),
            ))
        }
        Err(_) => {
            state.metrics.request(RequestOutcome::BadRequest);
            Err(json_error(
                StatusCode::REQUEST_TIMEOUT,
                "body not received in time",
            ))
        }
    }
}

async fn bid(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match read_body(state, req).await {
        Ok(b) => b,
        Err(response) => return response,
    };
    let read_at = Instant::now();
    let response = match crate::bid_path::run(state, &body, read_at).await {
        Ok(Some(encoded)) => {
            state.metrics.request(RequestOutcome::Bid);
            json(StatusCode::OK, encoded)
        }
        Ok(None) => {
            state.metrics.request(RequestOutcome::NoBid);
            no_content()
        }
        Err(message) => {
            state.metrics.request(RequestOutcome::BadRequest);
            json_error(StatusCode::BAD_REQUEST, &message)
        }
    };
    state.metrics.decision_latency.observe(read_at.elapsed());
    response
}
