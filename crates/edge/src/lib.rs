//! The HTTP edge shared by Gavel's servers (the exchange and the bidder): the accept loop, body
//! reads bounded in size and time, and the small answers every route needs. What a server does
//! with a request is its own business; how bytes come in and errors go out is the same for all,
//! so input limits are enforced in one place.
//!
//! Invariants: a body larger than the limit is refused before it is read when it announces its
//! length, and as soon as it passes the limit otherwise; a body that does not arrive within the
//! read timeout is refused; no answer built here panics.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

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
    /// The connection failed or the framing was broken.
    Read(String),
    /// Not complete within the read timeout.
    Timeout,
}

impl BodyError {
    /// The answer: 413, 400 or 408, naming the problem.
    pub fn response(&self) -> Response<Body> {
        match self {
            BodyError::TooLarge { limit } => json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("body exceeds the limit of {limit} bytes"),
            ),
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

/// Reads a request body of at most `limit` bytes within `timeout`.
pub async fn read_body(
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

/// Accepts connections until `shutdown` completes, serving each over HTTP/1.1 keep-alive with
/// `handler`; then stops accepting (requests in flight finish on their own connections).
/// `header_timeout` bounds the wait for a request's headers (slowloris).
pub async fn serve<H, F>(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    header_timeout: Duration,
    handler: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return,
        };
        let (stream, _peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let answer = handler(req);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true);
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
