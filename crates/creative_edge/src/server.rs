//! The routes of `gavel edge`: `/assets/...`, `/cache`, `/healthz`, `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use crate::answer;
use crate::assets::Assets;
use crate::body::EdgeBody;
use crate::metrics::{ORIGIN_CONNECTIONS, ORIGIN_FETCHES};
use crate::store::{self, MarkupStore};

/// What every request shares.
#[derive(Debug)]
pub struct State {
    pub assets: Arc<Assets>,
    pub store: MarkupStore,
    pub conns: Arc<edge::ConnStats>,
    pub max_request_bytes: usize,
    pub read_timeout: Duration,
    pub tls: Option<Arc<edge::SniCerts>>,
}

/// Answers one request.
pub async fn route(state: Arc<State>, request: Request<Incoming>) -> Response<EdgeBody> {
    let path = request.uri().path();
    if path.starts_with("/assets/") {
        return crate::proxy::serve(&state.assets, request).await;
    }
    match path {
        "/cache" => cache(&state, request).await,
        "/healthz" => plain(StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
        "/metrics" => plain(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            Bytes::from(render_metrics(&state)),
        ),
        _ => answer::refuse(
            StatusCode::NOT_FOUND,
            "no such path; see /assets/{origin}/{path} and /cache",
        ),
    }
}

async fn cache(state: &State, request: Request<Incoming>) -> Response<EdgeBody> {
    let metrics = &state.assets.common.metrics;
    let now = state.assets.clock.now_ms();
    let response = match *request.method() {
        Method::GET => {
            let id = request
                .uri()
                .query()
                .unwrap_or("")
                .split('&')
                .find_map(|pair| pair.strip_prefix("uuid="));
            match id {
                Some(id) if store::is_id(id) => match state.store.get(id, now, metrics) {
                    Some((content_type, value)) => plain(StatusCode::OK, content_type, value),
                    None => answer::refuse(
                        StatusCode::NOT_FOUND,
                        "no stored value under that uuid (never stored, or expired)",
                    ),
                },
                Some(_) => {
                    answer::refuse(StatusCode::BAD_REQUEST, "uuid: not an id this store makes")
                }
                None => {
                    answer::refuse(StatusCode::BAD_REQUEST, "uuid: missing; GET /cache?uuid=ID")
                }
            }
        }
        Method::POST => {
            let body =
                match edge::read_body(request, state.max_request_bytes, state.read_timeout).await {
                    Ok(body) => body,
                    Err(edge::BodyError::TooLarge { limit }) => {
                        return answer::refuse(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            &format!("body exceeds the limit of {limit} bytes"),
                        );
                    }
                    Err(edge::BodyError::Timeout) => {
                        return answer::refuse(
                            StatusCode::REQUEST_TIMEOUT,
                            "body not received in time",
                        );
                    }
                    Err(edge::BodyError::Read(_)) => {
                        return answer::refuse(StatusCode::BAD_REQUEST, "reading the body failed");
                    }
                };
            match state.store.put(&body, now, metrics) {
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
        // The preflight of a browser's POST (Prebid.js writes VAST from the page).
        Method::OPTIONS => {
            let mut r = plain(StatusCode::NO_CONTENT, "text/plain", Bytes::new());
            let h = r.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("Content-Type"),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            r
        }
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

fn render_metrics(state: &State) -> String {
    let mut out = String::with_capacity(8 * 1024);
    state.assets.common.metrics.render(&mut out);
    let mut origins: Vec<_> = state.assets.origins.values().collect();
    origins.sort_by(|a, b| a.name.cmp(&b.name));
    telemetry::family(
        &mut out,
        ORIGIN_FETCHES,
        "counter",
        "Origin fetches by origin and outcome.",
    );
    for o in &origins {
        o.stats.render_fetches(&o.name, &mut out);
    }
    telemetry::family(
        &mut out,
        ORIGIN_CONNECTIONS,
        "counter",
        "Connections opened to each origin.",
    );
    for o in &origins {
        o.stats.render_connections(&o.name, &mut out);
    }
    telemetry::single(
        &mut out,
        "gavel_edge_fills_in_flight",
        "gauge",
        "Fills running now.",
        state.assets.flights.in_flight(),
    );
    if let Some(tls) = &state.tls {
        tls.render("gavel_edge", &mut out);
    }
    state.conns.render("gavel_edge", &mut out);
    out
}
