//! The bidder's HTTP servers: routes. Bid requests come in through the edge's [`http_front::Door`]
//! (read, admit, run `bid_path`, observe); notices bypass its gate, ahead of bids.
//! `Bidder::start` wires the ledger, the campaigns and the background tasks;
//! `Bidder::serve(listener, shutdown)` serves bids and notices, and
//! `Bidder::serve_admin(listener, shutdown)` the admin endpoints, on their own listener
//! (`admin_listen`) behind the admin token.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use http_front::{Refused, json, json_error, method_not_allowed, no_content, plain};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::decision::{BidReply, NoticeResult};
use crate::metrics::{Metrics, NoticeKind, NoticeOutcome, RequestOutcome};
use crate::state::{Bidder, State};

/// Path of the bid endpoint.
pub const BID_PATH: &str = "/openrtb2/bid";

impl Bidder {
    pub fn metrics(&self) -> Arc<Metrics> {
        self.state.metrics.clone()
    }

    /// Reloads the campaign file now (what SIGHUP and `POST /admin/reload` do); returns how
    /// many campaigns serve, or why the last good set stays.
    pub async fn reload(&self) -> Result<usize, crate::reload::ReloadError> {
        crate::reload::reload(&self.state).await
    }

    /// Reads the price keys again (what SIGHUP and `POST /admin/reload` also do); the ids now
    /// accepted, or why the keys in force stay.
    pub async fn reload_price_keys(&self) -> Result<Vec<String>, settings::Invalid> {
        crate::reload::reload_price_keys(&self.state).await
    }

    /// Applies a change of the fleet bucket's key (what the `[fleet]` follower started by
    /// [`Bidder::watch`] hands over): a pushed campaign set, or the file again when the key was
    /// removed; how many campaigns serve, or why the set in force stays.
    pub async fn apply_pushed(
        &self,
        change: fleet::Change,
    ) -> Result<usize, crate::reload::ReloadError> {
        crate::reload::apply_pushed(&self.state, change).await
    }

    /// Follows the campaign file (and the price key file, and with `[fleet]` the bucket's
    /// key): reloads on each change, until the bidder is dropped.
    pub fn watch(&self) {
        crate::reload::watch(&self.state);
    }

    /// Serves until `shutdown` completes; then (not ready from then on) stops accepting, lets
    /// requests in flight finish (within `http.drain_timeout_ms`) and returns.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        let limits = state.config.limits();
        let connections = state.connections.clone();
        let readiness = state.readiness.clone();
        http_front::serve(
            listener,
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

    /// Whether the bidder is draining; the binary starts the drain on its stop signal.
    pub fn readiness(&self) -> Arc<http_front::Readiness> {
        self.state.readiness.clone()
    }

    /// Why `/readyz` answers 503 now, or `None` when it answers 200.
    pub fn not_ready(&self) -> Option<String> {
        crate::admin::not_ready(&self.state)
    }

    /// Connection counters of the bid listener (open connections while draining).
    pub fn connections(&self) -> &http_front::ConnStats {
        &self.state.connections
    }

    /// Serves the admin endpoints on `listener` (bound to `admin_listen`) until `shutdown`.
    pub async fn serve_admin(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        let limits = http_front::admin::admin_limits(state.config.limits());
        let connections = Arc::new(http_front::ConnStats::default());
        http_front::serve(listener, shutdown, limits, connections, move |req, peer| {
            let state = state.clone();
            async move { crate::admin::handle(&state, req, peer).await }
        })
        .await;
    }
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &state.metrics;
    // The hot route first: it takes the request by value, so route it before borrowing the
    // path for the others (no copy of the path on the bid path).
    if req.method() == Method::POST && req.uri().path() == BID_PATH {
        return bid(state, req).await;
    }
    let query = req.uri().query().unwrap_or("");
    let notice_kind = match req.uri().path() {
        "/notice/win" => Some(NoticeKind::Win),
        "/notice/bill" => Some(NoticeKind::Bill),
        "/notice/loss" => Some(NoticeKind::Loss),
        _ => None,
    };
    match (req.method(), req.uri().path(), notice_kind) {
        (&Method::GET | &Method::POST, _, Some(kind)) => notice(state, kind, query).await,
        (_, _, Some(_)) => method_not_allowed("GET, POST"),
        (_, BID_PATH, _) => {
            metrics.request(RequestOutcome::MethodNotAllowed);
            method_not_allowed("POST")
        }
        (&Method::GET, "/healthz", _) => plain(StatusCode::OK, "text/plain", "ok\n"),
        (_, "/healthz", _) => method_not_allowed("GET"),
        (method, "/readyz", _) => {
            http_front::readyz_answer(method, crate::admin::not_ready(state).as_deref())
        }
        // Campaigns' wins and spend: never on the port exchanges and notices reach.
        (_, "/metrics", _) => json_error(StatusCode::NOT_FOUND, http_front::METRICS_ELSEWHERE),
        (_, path, _) if path.starts_with("/admin") => json_error(
            StatusCode::NOT_FOUND,
            "admin endpoints are served on admin_listen only",
        ),
        _ => {
            metrics.request(RequestOutcome::NotFound);
            json_error(
                StatusCode::NOT_FOUND,
                "no such path; bid requests go to POST /openrtb2/bid",
            )
        }
    }
}

use crate::ledger_record;
use units::Nanos;

async fn notice(state: &State, kind: NoticeKind, query: &str) -> Response<Full<Bytes>> {
    // A gate of their own, apart from the bids': a flood of notices never sheds a bid, and
    // one past the limit is refused at once (503: the sender retries), never queued.
    let result = match NoticePlace::take(state) {
        Some(_place) => settle_notice(state, kind, query).await,
        None => NoticeResult::Shed,
    };
    crate::count::notice(&state.metrics, kind, &result);
    match result {
        NoticeResult::Shed => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many notices in flight; retry",
        ),
        NoticeResult::Invalid(message) => json_error(StatusCode::BAD_REQUEST, &message),
        NoticeResult::Refused(why) => json_error(StatusCode::FORBIDDEN, &why.to_string()),
        NoticeResult::Settled(settled) => match settled.status() {
            StatusCode::OK => no_content(),
            status => json_error(status, settled.outcome.label()),
        },
    }
}

/// Parses and checks a notice, and settles it in the ledger.
async fn settle_notice(state: &State, kind: NoticeKind, query: &str) -> NoticeResult {
    let parsed = match crate::notice::parse(kind, query) {
        Ok(n) => n,
        Err(e) => return NoticeResult::Invalid(e.to_string()),
    };
    let now = units::Timestamp::now();
    let prices = state.prices.load();
    let checks = crate::notice::Checks {
        keys: state.keys.as_ref(),
        prices: &prices,
        currency: &state.config.currency,
    };
    let price = match crate::notice::check(&checks, &parsed, now) {
        Ok(price) => price,
        Err(why) => {
            ledger_record::refused(
                &state.journal,
                &state.refusal_samples,
                &state.node,
                kind,
                &parsed,
                why,
                state.keys.is_some(),
            );
            return NoticeResult::Refused(why);
        }
    };
    drop(prices);
    let settled = crate::notice::settle(&state.ledger, state.charge_on, &parsed, price).await;
    let asked = Nanos::of_impression(price.unwrap_or_default());
    ledger_record::settled(
        &state.journal,
        &state.refusal_samples,
        &state.node,
        kind,
        &parsed,
        state.keys.is_some(),
        &settled,
        asked,
    );
    if let Some(earlier) = settled.earlier {
        // Anyone holding a URL can cause these: a few lines a second, the rest counted.
        static LIMIT: http_front::log_limit::LogLimit = http_front::log_limit::LogLimit::new(5);
        if let Some(suppressed) = LIMIT.admit_now() {
            tracing::warn!(
                reservation = %parsed.reservation,
                kind = kind.label(),
                charged_nanos = earlier.get(),
                asked_nanos = units::Nanos::of_impression(price.unwrap_or_default()).get(),
                suppressed,
                "conflicting notice: the reservation was already charged at another price; the first charge stands"
            );
        }
    }
    if let Some(campaign) = parsed.campaign.as_deref() {
        let snapshot = state.snapshot.load();
        if let Some(s) = snapshot.state(campaign) {
            // A won impression is counted once, by the notice that charged it (the win or the
            // billing notice, whichever came first).
            if matches!(
                settled.outcome,
                NoticeOutcome::Charged | NoticeOutcome::ChargedAfterRelease
            ) {
                s.wins.fetch_add(1, Relaxed);
                s.charged.fetch_add(settled.charged.get(), Relaxed);
            }
        }
    }
    NoticeResult::Settled(settled)
}

async fn bid(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &state.metrics;
    let refused = |why| {
        metrics.request(match why {
            Refused::TooLarge => RequestOutcome::TooLarge,
            Refused::BadBody => RequestOutcome::BadRequest,
            Refused::Shed => RequestOutcome::Shed,
        });
    };
    // Notices do not pass this gate: they have their own (`max_notices_in_flight`).
    state
        .door
        .take_in(
            req,
            metrics.decision_latency.histogram(),
            refused,
            |body, read_at| async move {
                let decision = crate::bid_path::run(state, &body, read_at).await;
                crate::count::count(metrics, &decision);
                match decision.answer {
                    BidReply::Bid { body, .. } => json(StatusCode::OK, body),
                    BidReply::NoBid(_) => no_content(),
                    BidReply::Invalid(message) => json_error(StatusCode::BAD_REQUEST, &message),
                }
            },
        )
        .await
}

/// A place among the notices handled at once; given back on drop.
struct NoticePlace<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> NoticePlace<'a> {
    fn take(state: &'a State) -> Option<NoticePlace<'a>> {
        let counter = &state.notices_in_flight;
        let before = counter.fetch_add(1, Relaxed);
        let place = NoticePlace(counter);
        (before < state.config.max_notices_in_flight).then_some(place)
    }
}

impl Drop for NoticePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
