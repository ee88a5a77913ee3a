//! The routes of `gavel edge`: `/assets/...`, `/cache`, `/healthz`, `/readyz`, `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use crate::answer;
use crate::assets::Assets;
use crate::body::EdgeBody;
use crate::metrics::OriginStats;
use crate::store::{self, MarkupStore};
use crate::writers::{PutRefusal, Writers};

/// What every request shares.
#[derive(Debug)]
pub struct State {
    pub assets: Arc<Assets>,
    pub store: MarkupStore,
    /// Who may put, and how fast.
    pub writers: Writers,
    pub conns: Arc<http_front::ConnStats>,
    pub max_request_bytes: usize,
    pub read_timeout: Duration,
    pub tls: Option<Arc<http_front::SniCerts>>,
    /// Who may scrape `/metrics` on the admin listener.
    pub admin: http_front::AdminDoor,
    /// Draining (`/readyz` 503) once the stop signal came.
    pub readiness: Arc<http_front::Readiness>,
}

/// Why the edge should get no traffic now, or `None`: only a drain (it answers `/readyz` only
/// once it listens, and its stores need nothing outside the process).
pub fn not_ready(state: &State) -> Option<String> {
    state.readiness.not_ready(|| None::<String>)
}

/// Answers one request.
pub async fn route(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: std::net::SocketAddr,
) -> Response<EdgeBody> {
    let path = request.uri().path();
    if path.starts_with("/assets/") {
        return crate::proxy::serve(&state.assets, request).await;
    }
    match path {
        "/cache" => cache(&state, request, peer).await,
        "/healthz" => plain(StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
        "/readyz" => {
            let (parts, body) =
                http_front::readyz_answer(request.method(), not_ready(&state).as_deref())
                    .into_parts();
            // A whole body: collecting it takes its one frame without waiting.
            let bytes = http_body_util::BodyExt::collect(body)
                .await
                .map(http_body_util::Collected::to_bytes)
                .unwrap_or_default();
            Response::from_parts(parts, EdgeBody::whole(bytes))
        }
        "/metrics" => answer::refuse(StatusCode::NOT_FOUND, http_front::METRICS_ELSEWHERE),
        _ => answer::refuse(
            StatusCode::NOT_FOUND,
            "no such path; see /assets/{origin}/{path} and /cache",
        ),
    }
}

async fn cache(
    state: &State,
    request: Request<Incoming>,
    peer: std::net::SocketAddr,
) -> Response<EdgeBody> {
    let response = match *request.method() {
        Method::GET => cache_get(state, &request),
        Method::POST => cache_put(state, request, peer).await,
        // The preflight of a browser's POST (Prebid.js writes VAST from the page).
        Method::OPTIONS => preflight(),
        _ => {
            let mut r = answer::refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed; use GET or POST",
            );
            r.headers_mut().insert(
                header::ALLOW,
                HeaderValue::from_static("GET, POST, OPTIONS"),
            );
            r
        }
    };
    with_cors(response, state)
}

/// `GET /cache?uuid=ID`: a stored value.
fn cache_get(state: &State, request: &Request<Incoming>) -> Response<EdgeBody> {
    let id = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("uuid="));
    let now = state.assets.clock.now_ms();
    match id {
        Some(id) if store::is_id(id) => {
            match state.store.get(id, now, &state.assets.common.metrics) {
                Some((content_type, value)) => plain(StatusCode::OK, content_type, value),
                None => answer::refuse(
                    StatusCode::NOT_FOUND,
                    "no stored value under that uuid (never stored, or expired)",
                ),
            }
        }
        Some(_) => answer::refuse(StatusCode::BAD_REQUEST, "uuid: not an id this store makes"),
        None => answer::refuse(StatusCode::BAD_REQUEST, "uuid: missing; GET /cache?uuid=ID"),
    }
}

/// `POST /cache`: a writer's values stored, their ids answered.
async fn cache_put(
    state: &State,
    request: Request<Incoming>,
    peer: std::net::SocketAddr,
) -> Response<EdgeBody> {
    // Who it is, before the body is read: a stranger costs a header parse.
    let writer = match state
        .writers
        .authenticate(http_front::bearer_token(request.headers()))
    {
        Ok(w) => w,
        Err(why) => return put_refused(state, why),
    };
    let body =
        match http_front::read_body(request, state.max_request_bytes, state.read_timeout).await {
            Ok(body) => body,
            Err(http_front::BodyError::TooLarge { limit }) => {
                return answer::refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("body exceeds the limit of {limit} bytes"),
                );
            }
            Err(http_front::BodyError::InflatesTooLarge { limit }) => {
                return answer::refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("the gzip body inflates past the limit of {limit} bytes"),
                );
            }
            Err(http_front::BodyError::UnsupportedEncoding(coding)) => {
                return answer::refuse(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    &format!(
                        "Content-Encoding {coding:?} is not supported; send the body plain or gzip"
                    ),
                );
            }
            Err(http_front::BodyError::Timeout) => {
                return answer::refuse(StatusCode::REQUEST_TIMEOUT, "body not received in time");
            }
            Err(http_front::BodyError::Read(_)) => {
                return answer::refuse(StatusCode::BAD_REQUEST, "reading the body failed");
            }
        };
    let now = state.assets.clock.now_ms();
    if let Err(why) = state
        .writers
        .admit(writer, peer.ip(), body.len() as u64, now)
    {
        return put_refused(state, why);
    }
    let share = state.writers.share_of(writer);
    match state
        .store
        .put(&body, share, now, &state.assets.common.metrics)
    {
        Ok(ids) => {
            let responses: Vec<_> = ids
                .iter()
                .map(|id| serde_json::json!({ "uuid": id }))
                .collect();
            let body = serde_json::json!({ "responses": responses }).to_string();
            plain(StatusCode::OK, "application/json", Bytes::from(body))
        }
        Err(e) => answer::refuse(StatusCode::BAD_REQUEST, &e.0),
    }
}

/// The answer to a browser's CORS preflight.
fn preflight() -> Response<EdgeBody> {
    let mut r = plain(StatusCode::NO_CONTENT, "text/plain", Bytes::new());
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type, Authorization"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    r
}

/// A refused put: 401 (with the scheme to use) or 429 (with when to come back); counted.
fn put_refused(state: &State, why: PutRefusal) -> Response<EdgeBody> {
    let metrics = &state.assets.common.metrics;
    let label = match why {
        PutRefusal::NoKey => crate::metrics::PutRefused::NoKey,
        PutRefusal::UnknownKey => crate::metrics::PutRefused::UnknownKey,
        PutRefusal::RateLimited { .. } => crate::metrics::PutRefused::RateLimited,
    };
    metrics.store_puts_refused.inc(label);
    match why {
        PutRefusal::RateLimited { retry_after_ms } => {
            let mut r = answer::refuse(StatusCode::TOO_MANY_REQUESTS, &why.to_string());
            let seconds = retry_after_ms.div_ceil(1000).max(1);
            if let Ok(v) = HeaderValue::from_str(&seconds.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            r
        }
        PutRefusal::NoKey | PutRefusal::UnknownKey => {
            let mut r = answer::refuse(StatusCode::UNAUTHORIZED, &why.to_string());
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
    }
}

fn with_cors(mut response: Response<EdgeBody>, state: &State) -> Response<EdgeBody> {
    if let Some(cors) = &state.assets.common.cors {
        response
            .headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, cors.clone());
    }
    response
}

fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<EdgeBody> {
    let mut r = Response::new(EdgeBody::whole(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The admin listener's routes: `/metrics` (through the admin door), `/healthz`, `/readyz`.
pub async fn admin_route(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: std::net::SocketAddr,
) -> Response<http_front::Body> {
    match request.uri().path() {
        "/metrics" => {
            http_front::metrics_answer(&state.admin, &request, peer, || render_metrics(&state))
        }
        "/healthz" => http_front::plain(StatusCode::OK, "text/plain", "ok\n"),
        "/readyz" => http_front::readyz_answer(request.method(), not_ready(&state).as_deref()),
        _ => http_front::json_error(
            StatusCode::NOT_FOUND,
            "the admin listener serves /metrics, /healthz and /readyz",
        ),
    }
}

fn render_metrics(state: &State) -> String {
    let mut out = String::with_capacity(8 * 1024);
    http_front::render_ready("gavel_edge", not_ready(state).is_none(), &mut out);
    state.assets.common.metrics.render(&mut out);
    let mut origins: Vec<_> = state.assets.origins.values().collect();
    origins.sort_by(|a, b| a.name.cmp(&b.name));
    telemetry::render_each(
        &mut out,
        "origin",
        &OriginStats::default(),
        origins.iter().map(|o| (o.name.as_str(), &o.stats)),
        &OriginStats::FAMILIES,
    );
    telemetry::single(
        &mut out,
        "gavel_edge_fills_in_flight",
        "gauge",
        "Fills running now.",
        state.assets.flights.in_flight(),
    );
    let shares = state.store.shares();
    for (name, help, budget) in [
        (
            "gavel_edge_store_share_bytes",
            "Bytes held in each writer's share of the markup store (anonymous: puts without a key).",
            false,
        ),
        (
            "gavel_edge_store_share_budget_bytes",
            "Each writer's share of the markup store's byte budget.",
            true,
        ),
    ] {
        telemetry::family(&mut out, name, "gauge", help);
        for (writer, limit, held) in &shares {
            let value = if budget { *limit } else { *held };
            telemetry::sample(&mut out, name, &[("writer", writer)], value);
        }
    }
    if let Some(tls) = &state.tls {
        tls.render("gavel_edge", &mut out);
    }
    state.conns.render("gavel_edge", &mut out);
    out
}
