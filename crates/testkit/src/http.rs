//! HTTP/1.1 clients for tests, each on a fresh loopback connection:
//! - [`call`], [`call_blocking`] and [`raw`] write the bytes as given and read until the server
//!   closes: no client library between the test and the wire, so a test sees exactly what the
//!   server sent (and can send what no well-behaved client would);
//! - [`send`] goes through hyper's client, a well-behaved peer, and returns the parsed answer.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer read by [`send`].
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// One request (`Content-Type: application/json`) through hyper's HTTP/1.1 client on a fresh
/// connection; the error says which step failed (connect, the exchange, the body).
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: impl Into<Bytes>,
) -> Result<Answer, String> {
    send_with(
        addr,
        method,
        path,
        &[("content-type", "application/json")],
        body,
    )
    .await
}

/// [`send`] with exactly these headers besides `Host` (a browser's `Origin`, a
/// `Content-Type` of its own, `Content-Encoding`).
pub async fn send_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Result<Answer, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req
        .body(Full::new(body.into()))
        .map_err(|e| format!("request: {e}"))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("exchange: {e}"))?;
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// The request line and headers of a `Connection: close` request with a JSON body.
fn head_with(
    method: &str,
    path: &str,
    addr: SocketAddr,
    body_len: usize,
    token: Option<&str>,
) -> String {
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         {auth}Content-Length: {body_len}\r\nConnection: close\r\n\r\n"
    )
}

/// The path of `target`, which may be a whole URL (`http://host:port/path?query`).
fn path_of(target: &str) -> &str {
    match target.find("://") {
        Some(i) => {
            let rest = target.get(i + 3..).unwrap_or_default();
            rest.find('/').and_then(|j| rest.get(j..)).unwrap_or("/")
        }
        None => target,
    }
}

/// Status code and body of a whole HTTP/1.1 answer; status 0 when there is none.
pub fn split_answer(text: &str) -> (u16, String) {
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// Status codes of every response in a byte stream (pipelined answers, or a smuggled one).
pub fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

/// Sends one request (`target` a path or a whole URL) on a fresh connection and reads the
/// whole answer: its status and body. A connection refused or reset before an answer is
/// status 0 with an empty body, so that load tests can count it as a failure.
pub async fn call(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, String) {
    call_as(addr, method, target, None, body).await
}

/// [`call`] with `Authorization: Bearer {token}` when a token is given (admin endpoints).
pub async fn call_as(
    addr: SocketAddr,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let head = head_with(method, path_of(target), addr, body.len(), token);
    if stream.write_all(head.as_bytes()).await.is_err()
        || stream.write_all(body.as_bytes()).await.is_err()
    {
        return (0, String::new());
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    split_answer(&String::from_utf8_lossy(&raw))
}

/// How long [`call_retrying`] keeps asking: generous, because a test on a machine whose cores
/// are busy with other work must still pass.
pub const RETRY_FOR: Duration = Duration::from_secs(30);

/// [`call_as`], asked again while the answer is 503, the servers' documented "try again" (a
/// bidder whose Redis answered later than `redis_timeout_ms`, say: on a loaded machine that is
/// a correct answer, not a failure). Backs off as the exchange's notice senders do, from 20 ms
/// doubling to 500 ms, for at most [`RETRY_FOR`]; then returns the last answer. Only for what the
/// servers make safe to repeat: notices (a second one is a duplicate) and reads.
pub async fn call_retrying(
    addr: SocketAddr,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let until = tokio::time::Instant::now() + RETRY_FOR;
    let mut pause = Duration::from_millis(20);
    loop {
        let answer = call_as(addr, method, target, token, body).await;
        if answer.0 != 503 || tokio::time::Instant::now() + pause > until {
            return answer;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// A notice (`GET` of a whole notice URL or its path) through [`call_retrying`].
pub async fn notice(addr: SocketAddr, target: &str) -> (u16, String) {
    call_retrying(addr, "GET", target, None, "").await
}

/// [`call`] from a thread outside any runtime (a test driving a child process), reading for
/// at most 30 s (generous: the machine may be busy with other work).
pub fn call_blocking(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, String) {
    call_blocking_as(addr, method, target, None, body)
}

/// [`call_blocking`] with `Authorization: Bearer {token}` when a token is given.
pub fn call_blocking_as(
    addr: SocketAddr,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(RETRY_FOR));
    let head = head_with(method, path_of(target), addr, body.len(), token);
    if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    split_answer(&String::from_utf8_lossy(&raw))
}

/// Sends `bytes` as they are on a fresh connection and reads until the server closes or
/// `wait` passes. Returns what was read and whether the server closed the connection.
///
/// # Panics
/// When the connection cannot be opened.
pub async fn raw(addr: SocketAddr, bytes: &[u8], wait: Duration) -> (String, bool) {
    let mut stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) => panic!("cannot connect to {addr}: {e}"),
    };
    // The server may answer and close before it has read everything; that is fine.
    let _ = stream.write_all(bytes).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    let closed = loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(n)) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

/// What every Gavel server must refuse under RFC 9112, whatever the route: each case is a
/// request to `path` with a small JSON body, followed by a well-formed `GET /healthz` that the
/// server must not answer (it would be a smuggled request). For [`assert_strict_framing`].
pub fn strict_framing_cases(path: &str) -> Vec<(&'static str, String)> {
    const NEXT: &str = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    let body = r#"{"id":"1"}"#;
    let n = body.len();
    let chunked = format!("{n:x}\r\n{body}\r\n0\r\n\r\n");
    let post =
        |headers: &str, body: &str| format!("POST {path} HTTP/1.1\r\n{headers}\r\n{body}{NEXT}");
    vec![
        ("no Host", post(&format!("Content-Length: {n}\r\n"), body)),
        (
            "two different Hosts",
            post(
                &format!("Host: a\r\nHost: b\r\nContent-Length: {n}\r\n"),
                body,
            ),
        ),
        (
            "two equal Hosts",
            post(
                &format!("Host: a\r\nHost: a\r\nContent-Length: {n}\r\n"),
                body,
            ),
        ),
        (
            "Transfer-Encoding: identity, chunked",
            post(
                "Host: a\r\nTransfer-Encoding: identity, chunked\r\n",
                &chunked,
            ),
        ),
        (
            "Transfer-Encoding: chunked, chunked",
            post(
                "Host: a\r\nTransfer-Encoding: chunked, chunked\r\n",
                &chunked,
            ),
        ),
        (
            "a Content-Length padded past what the scanner reads",
            post(
                &format!("Host: a\r\nContent-Length:{}{n}\r\n", " ".repeat(200)),
                body,
            ),
        ),
        (
            "two equal Content-Lengths",
            post(
                &format!("Host: a\r\nContent-Length: {n}\r\nContent-Length: {n}\r\n"),
                body,
            ),
        ),
    ]
}

/// Sends every [`strict_framing_cases`] case to `addr` on its own connection: each must get
/// exactly one 400 and a closed connection, and the request after it no answer.
///
/// # Panics
/// Naming the case that was not refused.
pub async fn assert_strict_framing(addr: SocketAddr, path: &str) {
    for (name, bytes) in strict_framing_cases(path) {
        let (text, closed) = raw(addr, bytes.as_bytes(), Duration::from_secs(5)).await;
        assert_eq!(
            statuses(&text),
            vec![400],
            "{name}: one 400 and nothing more\n{text}"
        );
        assert!(closed, "{name}: the connection stayed open\n{text}");
        assert!(
            !text.contains("\r\n\r\nok\n"),
            "{name}: a request was smuggled\n{text}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_split_into_status_and_body() {
        assert_eq!(
            split_answer("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"),
            (204, String::new())
        );
        assert_eq!(
            split_answer("HTTP/1.1 400 Bad Request\r\nx: y\r\n\r\n{\"error\":\"e\"}"),
            (400, "{\"error\":\"e\"}".to_owned())
        );
        assert_eq!(split_answer(""), (0, String::new()));
        assert_eq!(
            statuses("HTTP/1.1 200 OK\r\n\r\nokHTTP/1.1 400 Bad\r\n\r\n"),
            [200, 400]
        );
        assert_eq!(
            path_of("http://127.0.0.1:9/notice/win?r=1"),
            "/notice/win?r=1"
        );
        assert_eq!(path_of("http://h"), "/");
        assert_eq!(path_of("/healthz"), "/healthz");
    }

    #[tokio::test]
    async fn a_call_reads_what_a_real_server_wrote() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = vec![0u8; 1024];
            let n = s.read(&mut got).await.unwrap();
            let text = String::from_utf8_lossy(&got[..n]).into_owned();
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await
                .unwrap();
            text
        });
        assert_eq!(call(addr, "POST", "/x", "{}").await, (200, "ok".to_owned()));
        let seen = server.await.unwrap();
        assert!(seen.starts_with("POST /x HTTP/1.1\r\n"), "{seen}");
        assert!(seen.ends_with("\r\n\r\n{}"), "{seen}");
    }
}
