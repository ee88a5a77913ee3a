//! The HTTP edge shared by Gavel's servers (the exchange and the bidder): the accept loop, body
//! reads bounded in size and time, and the small answers every route needs. What a server does
//! with a request is its own business; how bytes come in and errors go out is the same for all,
//! so input limits are enforced in one place.
//!
//! | piece | job |
//! | --- | --- |
//! | [`serve`] | the accept loop: a cap on connections, a header timeout against slowloris, an idle timeout, a header size limit, a graceful stop (in-flight requests answered within `drain_timeout`) |
//! | [`Readiness`], [`readyz_answer`] | `/readyz`: 503 from the moment a drain starts, or while the server's own check fails |
//! | [`Door`] | the shape of a working route: read the body, admit, run, observe (both servers) |
//! | [`read_body`] | a body bounded in size and time |
//! | [`json`], [`json_error`], [`no_bid`], [`shed_answer`], ... | the small answers every route needs |
//! | [`log_limit`] | rate-limited logging of what clients can provoke |
//! | [`process`] | `gavel_build_info` and the process metrics (CPU, memory, files) on every `/metrics` |
//! | [`AdminDoor`] | admin access: bearer token, audit lines, loopback unless asked otherwise |
//! | [`ServerTls`], [`SniCerts`] | TLS on a listener: one certificate reloaded on change, or one per server name from a directory |
//!
//! Invariants: a body larger than the limit is refused before it is read when it announces its
//! length, and as soon as it passes the limit otherwise; a body that does not arrive within the
//! read timeout is refused; no answer built here panics.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

pub mod admin;
mod certificate;
pub mod cors;
mod door;
pub mod framing;
mod front;
pub mod log_limit;
pub mod process;
mod ready;
mod serve;
pub mod sni;
pub mod tls;

pub use admin::{
    AdminDoor, AdminError, AdminSettings, Caller, Denied, METRICS_ELSEWHERE, bearer_token,
    metrics_answer,
};
pub use admission::NoBidStyle;
pub use certificate::CertificateError;
pub use door::{Door, Refused};
pub use front::{FRONT_KEYS, Front, SecuritySection};
pub use ready::{DRAINING, Readiness, readyz_answer, render_ready};
pub use serve::{
    AnswerBody, ConnStats, DEFAULT_MAX_BODY_BYTES, HttpSection, Limits, MIN_HEADER_BYTES,
    MOVED_SHUTDOWN_GRACE, serve, serve_with_tls,
};
pub use sni::SniCerts;
pub use tls::{ServerTls, Tls};

/// The body type of every answer.
pub type Body = Full<Bytes>;

fn build(status: StatusCode, content_type: Option<&'static str>, body: Bytes) -> Response<Body> {
    let mut builder = Response::builder().status(status);
    if let Some(ct) = content_type {
        builder = builder.header(header::CONTENT_TYPE, ct);
    }
    // Only a bad header value can fail the builder, and these are constants.
    builder
        .body(Full::new(body))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// A JSON answer.
pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    build(status, Some("application/json"), body.into())
}

/// `{"error": message}` with `status`; the message must be safe to show the client.
pub fn json_error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, serde_json::json!({ "error": message }).to_string())
}

/// A plain answer with its content type.
pub fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    build(status, Some(content_type), body.into())
}

/// 204 with no body (an OpenRTB no-bid, an applied notice).
pub fn no_content() -> Response<Body> {
    build(StatusCode::NO_CONTENT, None, Bytes::new())
}

/// The no-bid for a request answered without being worked on (shed, or too late): 204, or with
/// [`NoBidStyle::Nbr`] a 200 carrying the request's `id` and `nbr`. Reading the id scans the
/// body but builds nothing else; a body without a readable id gets the 204.
pub fn no_bid(style: NoBidStyle, body: &[u8], nbr: i32) -> Response<Body> {
    #[derive(serde::Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: std::borrow::Cow<'a, str>,
    }
    if style == NoBidStyle::Nbr
        && let Ok(req) = serde_json::from_slice::<IdOnly<'_>>(body)
    {
        let answer = serde_json::json!({ "id": req.id, "nbr": nbr });
        return json(StatusCode::OK, answer.to_string());
    }
    no_content()
}

/// The answer to a request the admission gate refused: a no-bid in the gate's configured
/// style, `nbr` 1 ("Technical Error", OpenRTB 2.6 list 5.24).
pub fn shed_answer(gate: &admission::Admission, body: &[u8]) -> Response<Body> {
    no_bid(gate.config().no_bid, body, 1)
}

/// Counts and answers a request with too little time left to work on: `nbr` 15 ("Insufficient
/// Auction Time").
pub fn too_late_answer(gate: &admission::Admission, body: &[u8]) -> Response<Body> {
    gate.count_late();
    no_bid(gate.config().no_bid, body, 15)
}

/// 405 naming the methods the path accepts, with `Allow`.
pub fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("method not allowed; use {allow}"),
    );
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    r
}

/// Why a request body was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Larger than the limit (announced or read).
    TooLarge { limit: usize },
    /// A gzip body that inflates past the limit (a zip bomb, or just too large).
    InflatesTooLarge { limit: usize },
    /// A `Content-Encoding` other than gzip or identity, or several.
    UnsupportedEncoding(String),
    /// The connection failed, the framing was broken, or a gzip body is not gzip.
    Read(String),
    /// Not complete within the read timeout.
    Timeout,
}

impl BodyError {
    /// The answer: 413, 415, 400 or 408, naming the problem.
    pub fn response(&self) -> Response<Body> {
        match self {
            BodyError::TooLarge { limit } => json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("body exceeds the limit of {limit} bytes"),
            ),
            BodyError::InflatesTooLarge { limit } => json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the gzip body inflates past the limit of {limit} bytes"),
            ),
            BodyError::UnsupportedEncoding(coding) => {
                let mut r = json_error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    &format!(
                        "Content-Encoding {coding:?} is not supported; send the body plain or gzip"
                    ),
                );
                r.headers_mut().insert(
                    header::ACCEPT_ENCODING,
                    header::HeaderValue::from_static("gzip"),
                );
                r
            }
            BodyError::Read(e) => json_error(
                StatusCode::BAD_REQUEST,
                &format!("reading the body failed: {e}"),
            ),
            BodyError::Timeout => {
                json_error(StatusCode::REQUEST_TIMEOUT, "body not received in time")
            }
        }
    }
}

/// How a request body is encoded: plain, or gzip (what exchanges and Prebid send to save
/// bandwidth). Anything else, or several codings, is refused (415) before a byte is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Identity,
    Gzip,
}

/// The request's `Content-Encoding`; its value named when it is not one we read. Longest
/// value quoted back to the caller. Without the header, `gzip=1` in the query (how Prebid.js
/// marks a compressed body) means gzip.
fn coding(headers: &http::HeaderMap, query: Option<&str>) -> Result<Coding, BodyError> {
    const MAX_SHOWN: usize = 64;
    let all = headers.get_all(header::CONTENT_ENCODING);
    let mut values = all.iter();
    let Some(value) = values.next() else {
        let marked = query.is_some_and(|q| q.split('&').any(|pair| pair == "gzip=1"));
        return Ok(if marked {
            Coding::Gzip
        } else {
            Coding::Identity
        });
    };
    let several = values.next().is_some();
    let text = value.to_str().unwrap_or("?").trim();
    let shown = || {
        let mut s: String = text.chars().take(MAX_SHOWN).collect();
        if several {
            s.push_str(", ...");
        }
        s
    };
    if several {
        return Err(BodyError::UnsupportedEncoding(shown()));
    }
    if text.is_empty() || text.eq_ignore_ascii_case("identity") {
        Ok(Coding::Identity)
    } else if text.eq_ignore_ascii_case("gzip") || text.eq_ignore_ascii_case("x-gzip") {
        Ok(Coding::Gzip)
    } else {
        Err(BodyError::UnsupportedEncoding(shown()))
    }
}

/// Reads a request body of at most `limit` bytes within `timeout`; a gzip body
/// (`Content-Encoding: gzip`, or Prebid's `?gzip=1`) is inflated, and must inflate to at most
/// `limit` bytes too.
pub async fn read_body(
    req: Request<Incoming>,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    let coding = coding(req.headers(), req.uri().query())?;
    let raw = read_raw(req, limit, timeout).await?;
    let inflate = move |raw: Bytes| {
        upstream::gzip::inflate(&raw, limit)
            .map(Bytes::from)
            .map_err(|e| match e {
                upstream::gzip::InflateError::TooLarge(_) => BodyError::InflatesTooLarge { limit },
                other => BodyError::Read(other.to_string()),
            })
    };
    match coding {
        Coding::Identity => Ok(raw),
        // A bid-sized body inflates in tens of microseconds; a larger one (up to the limit,
        // megabytes for a store put) goes to the blocking pool, off the runtime's workers.
        Coding::Gzip if raw.len() <= INFLATE_INLINE_BYTES => inflate(raw),
        Coding::Gzip => tokio::task::spawn_blocking(move || inflate(raw))
            .await
            .unwrap_or_else(|e| Err(BodyError::Read(format!("inflating stopped: {e}")))),
    }
}

/// Largest gzip body inflated on the runtime's own thread.
const INFLATE_INLINE_BYTES: usize = 16 * 1024;

/// The body as sent, at most `limit` bytes, within `timeout`.
async fn read_raw(
    req: Request<Incoming>,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    // Refuse at once what announces itself as too large, before reading a byte of it.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let collect = Limited::new(req.into_body(), limit).collect();
    match tokio::time::timeout(timeout, collect).await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(BodyError::TooLarge { limit })
        }
        Ok(Err(e)) => Err(BodyError::Read(e.to_string())),
        Err(_) => Err(BodyError::Timeout),
    }
}
