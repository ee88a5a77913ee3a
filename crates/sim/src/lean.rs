//! A minimal HTTP/1.1 server for a simulated bidder (`Transport::Lean`, `gavel sim
//! --lean-http`): for benchmarks where the fleet must cost less CPU than the exchange it feeds.
//! The answers are the hyper server's (`handlers`); only the reading and writing differ.
//!
//! What it speaks: a request line and headers (`httparse`), a body framed by `Content-Length`,
//! kept-alive connections and pipelining (answers in order; those ready together go out in one
//! write), `Connection: close` and HTTP/1.0 (closed after the answer). No TLS, no chunked
//! bodies (501), no `Expect: 100-continue`. Limits: a 16 KiB head (431), 32 headers (431), a
//! 1 MiB body (413); a malformed head is answered 400. Each refusal closes the connection,
//! because what follows it on the stream cannot be framed.

use std::io::Write;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use bytes::BytesMut;
use http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ctx::{BidderCtx, shutdown_signalled};
use crate::handlers::{self, MAX_BODY_BYTES, Reply, Route};

/// The largest request head accepted.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most request headers accepted.
const MAX_HEADERS: usize = 32;
/// Read buffer kept per connection; it grows for a larger request, within the limits.
const READ_CHUNK: usize = 8 * 1024;

/// A complete request head.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: Method,
    /// Where the path and the query (after `?`, maybe empty) of the request target lie in the
    /// buffer.
    path: Range<usize>,
    query: Range<usize>,
    /// Bytes of the head, up to and including the blank line.
    len: usize,
    body_len: usize,
    keep_alive: bool,
}

/// Why a head was refused: the status and the message of the answer.
#[derive(Debug, PartialEq, Eq)]
struct Refusal(StatusCode, &'static str);

/// Parses the head at the start of `buf`: `Ok(None)` until it is complete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(Refusal(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "request head too large",
            ));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Refusal(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "too many request headers",
            ));
        }
        Err(_) => return Err(Refusal(StatusCode::BAD_REQUEST, "malformed request head")),
    };
    if len > MAX_HEAD_BYTES {
        return Err(Refusal(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request head too large",
        ));
    }
    let bad = |msg| Err(Refusal(StatusCode::BAD_REQUEST, msg));
    let Some(method) = req
        .method
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
    else {
        return bad("malformed method");
    };
    let Some(path) = req.path else {
        return bad("no request target");
    };
    // The target borrows from `buf`: its offset there lets the caller find it again.
    let start = path.as_ptr() as usize - buf.as_ptr() as usize;
    let end = start + path.len();
    let path_end = start + path.find('?').unwrap_or(path.len());
    let mut body_len: Option<usize> = None;
    let mut close = req.version != Some(1);
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let parsed = std::str::from_utf8(h.value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<usize>().ok());
            match (parsed, body_len) {
                (None, _) => return bad("invalid content-length"),
                (Some(n), Some(seen)) if n != seen => return bad("conflicting content-length"),
                (Some(n), _) => body_len = Some(n),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Refusal(
                StatusCode::NOT_IMPLEMENTED,
                "transfer-encoding is not supported; send content-length",
            ));
        } else if h.name.eq_ignore_ascii_case("connection") {
            let tokens = h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii);
            for token in tokens {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && req.version == Some(0) {
                    close = false;
                }
            }
        }
    }
    Ok(Some(Head {
        method,
        path: start..path_end,
        query: (path_end + 1).min(end)..end,
        len,
        body_len: body_len.unwrap_or(0),
        keep_alive: !close,
    }))
}

/// Appends `reply` as an HTTP/1.1 response.
fn encode(out: &mut Vec<u8>, reply: &Reply, keep_alive: bool) {
    let status = reply.status;
    let reason = status.canonical_reason().unwrap_or("");
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {} {reason}\r\ncontent-length: {}\r\n",
        status.as_u16(),
        reply.body.len()
    );
    if let Some(ct) = reply.content_type {
        let _ = write!(out, "content-type: {ct}\r\n");
    }
    if let Some(allow) = reply.allow {
        let _ = write!(out, "allow: {allow}\r\n");
    }
    if reply.openrtb {
        out.extend_from_slice(b"x-openrtb-version: 2.6\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&reply.body);
}

pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, ctx: Arc<BidderCtx>) {
    if let Err(e) = serve_connection(stream, &ctx).await {
        tracing::debug!(bidder = %ctx.profile.name, %peer, error = %e, "connection ended");
    }
}

/// Serves requests until the peer closes, a request asks to close, a request is refused, a
/// no-answer decision hangs up, or the fleet shuts down (between requests; one in flight is
/// answered at once).
async fn serve_connection(mut stream: TcpStream, ctx: &BidderCtx) -> std::io::Result<()> {
    let stop = shutdown_signalled(ctx.shutdown.clone());
    tokio::pin!(stop);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = Vec::with_capacity(1024);
    loop {
        let head = match parse_head(&buf) {
            Ok(Some(head)) => head,
            Ok(None) => {
                // Everything buffered is answered: send it before waiting for more.
                flush(&mut stream, &mut out).await?;
                if !read_more(&mut stream, &mut buf, &mut stop).await? {
                    return Ok(());
                }
                continue;
            }
            Err(Refusal(status, msg)) => {
                encode(&mut out, &handlers::answer_now(status, msg, None), false);
                return flush(&mut stream, &mut out).await;
            }
        };
        let route = handlers::route(&head.method, text(&buf, &head.path));
        if route == Route::BidRequest {
            handlers::count_bid_request(ctx);
        }
        if head.body_len > MAX_BODY_BYTES {
            let reply = match route {
                Route::BidRequest => Reply::too_large(ctx),
                _ => handlers::answer_now(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request body too large",
                    None,
                ),
            };
            encode(&mut out, &reply, false);
            return flush(&mut stream, &mut out).await;
        }
        while buf.len() < head.len + head.body_len {
            if !read_more(&mut stream, &mut buf, &mut stop).await? {
                return Ok(());
            }
        }
        let request = buf.split_to(head.len + head.body_len);
        let reply = match route {
            Route::Notice(kind) => handlers::answer_notice(ctx, kind, text(&request, &head.query)),
            Route::Now(status, msg, allow) => handlers::answer_now(status, msg, allow),
            Route::BidRequest => {
                // The answer may wait its latency: what is ready goes out first.
                flush(&mut stream, &mut out).await?;
                match handlers::answer_bid_request(ctx, &request[head.len..]).await {
                    Ok(reply) => reply,
                    Err(handlers::Hangup) => return Ok(()),
                }
            }
        };
        encode(&mut out, &reply, head.keep_alive);
        if !head.keep_alive {
            return flush(&mut stream, &mut out).await;
        }
    }
}

/// A part of the request head. httparse handed the target out as `&str` and the parts are cut
/// at `?`, so the bytes are UTF-8; the empty fallback is never taken.
fn text<'a>(buf: &'a [u8], range: &Range<usize>) -> &'a str {
    buf.get(range.clone())
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

async fn flush(stream: &mut TcpStream, out: &mut Vec<u8>) -> std::io::Result<()> {
    if !out.is_empty() {
        stream.write_all(out).await?;
        out.clear();
    }
    Ok(())
}

/// Reads more of the request; false when the peer closed or the fleet is shutting down.
async fn read_more(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    stop: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> std::io::Result<bool> {
    buf.reserve(READ_CHUNK);
    tokio::select! {
        biased;
        () = stop.as_mut() => Ok(false),
        n = stream.read_buf(buf) => Ok(n? > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, Refusal> {
        parse_head(text.as_bytes())
    }

    #[test]
    fn a_complete_head_gives_its_target_and_body_length() {
        let text = "POST /openrtb2?x=1 HTTP/1.1\r\nhost: a\r\ncontent-length: 12\r\n\r\n{";
        let h = head(text).unwrap().unwrap();
        assert_eq!(h.method, Method::POST);
        assert_eq!(&text[h.path.clone()], "/openrtb2");
        assert_eq!(&text[h.query.clone()], "x=1");
        assert_eq!(h.len, text.len() - 1);
        assert_eq!((h.body_len, h.keep_alive), (12, true));
    }

    #[test]
    fn a_partial_head_waits_until_it_is_too_large() {
        assert_eq!(head("GET /health HTTP/1.1\r\nhost: a\r\n"), Ok(None));
        let long = format!("GET /health HTTP/1.1\r\nx: {}", "a".repeat(MAX_HEAD_BYTES));
        assert_eq!(
            head(&long).unwrap_err().0,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
    }

    #[test]
    fn refusals_name_the_problem() {
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x{i}: 1\r\n")).collect();
        let cases = [
            (
                format!("GET / HTTP/1.1\r\n{many}\r\n"),
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ),
            (
                "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n".into(),
                StatusCode::NOT_IMPLEMENTED,
            ),
            (
                "POST / HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n".into(),
                StatusCode::BAD_REQUEST,
            ),
            (
                "POST / HTTP/1.1\r\ncontent-length: -1\r\n\r\n".into(),
                StatusCode::BAD_REQUEST,
            ),
            (
                "GET / HTTP/1.1\r\nbad header\r\n\r\n".into(),
                StatusCode::BAD_REQUEST,
            ),
        ];
        for (text, status) in cases {
            assert_eq!(head(&text).unwrap_err().0, status, "{text:?}");
        }
    }

    #[test]
    fn close_and_http_1_0_end_the_connection_after_the_answer() {
        let keep = |text: &str| head(text).unwrap().unwrap().keep_alive;
        assert!(!keep(
            "GET / HTTP/1.1\r\nconnection: keep-alive, Close\r\n\r\n"
        ));
        assert!(!keep("GET / HTTP/1.0\r\n\r\n"));
        assert!(keep("GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"));
        assert!(keep("GET / HTTP/1.1\r\n\r\n"));
    }

    #[test]
    fn an_answer_is_framed_by_its_length() {
        let mut out = Vec::new();
        let mut reply = handlers::answer_now(StatusCode::METHOD_NOT_ALLOWED, "no", Some("GET"));
        reply.openrtb = true;
        encode(&mut out, &reply, false);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 2\r\n\
             content-type: text/plain; charset=utf-8\r\nallow: GET\r\n\
             x-openrtb-version: 2.6\r\nconnection: close\r\n\r\nno"
        );
    }
}
