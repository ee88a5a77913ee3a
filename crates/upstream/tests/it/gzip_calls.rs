//! gzip on a pool's calls, over real loopback sockets against a raw HTTP/1.1 server that sees
//! and writes every byte: a gzip request says so and inflates to the original; gzip answers
//! (asked for or not, `Content-Length` or chunked) are inflated; a zip bomb, a truncated
//! stream and an unknown coding are the call's errors, and the kept-alive connection serves
//! the next call all the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use upstream::gzip::{self, InflateError};
use upstream::pool::{BidderPool, CallError, HttpAnswer, PoolLimits};

const REQUEST: &[u8] = include_bytes!("../../benches/fixtures/bid_request.json");
const RESPONSE: &[u8] = include_bytes!("../../benches/fixtures/bid_response.json");
const MAX_ANSWER: usize = 1024 * 1024;

/// A request as the server read it: which connection it came on, its head, its body.
#[derive(Debug, Clone)]
struct Seen {
    conn: usize,
    head: String,
    body: Vec<u8>,
}

type Script = dyn Fn(usize, &Seen) -> Vec<u8> + Send + Sync;

/// A loopback HTTP/1.1 server answering each request (numbered from 0 across connections)
/// with the raw bytes its script gives, on kept-alive connections.
struct RawBidder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    accepted: Arc<AtomicUsize>,
}

impl RawBidder {
    async fn start(script: impl Fn(usize, &Seen) -> Vec<u8> + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let script: Arc<Script> = Arc::new(script);
        let (s, a) = (Arc::clone(&seen), Arc::clone(&accepted));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let conn = a.fetch_add(1, SeqCst);
                tokio::spawn(serve(stream, conn, Arc::clone(&s), Arc::clone(&script)));
            }
        });
        RawBidder {
            addr,
            seen,
            accepted,
        }
    }

    fn pool(&self) -> BidderPool {
        let endpoint = upstream::parse_endpoint(&format!("http://{}/bid", self.addr)).unwrap();
        let limits = PoolLimits {
            max_connections: 4,
            max_response_bytes: MAX_ANSWER,
            drain: Duration::from_secs(1),
        };
        BidderPool::new(endpoint, limits, Arc::default())
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    conn: usize,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Script>,
) {
    let mut buf = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let request = Seen { conn, head, body };
        let answer = {
            let mut all = seen.lock().unwrap();
            all.push(request.clone());
            script(all.len() - 1, &request)
        };
        if stream.write_all(&answer).await.is_err() {
            return;
        }
    }
}

/// The next request on the stream: its head (lower case) and its `Content-Length` body.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > 64 * 1024 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < end + length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[end..end + length].to_vec();
    buf.drain(..end + length);
    Some((head, body))
}

/// A 200 answer with `headers` (each ending in CRLF) and a `Content-Length` body.
fn answer(headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A 200 answer with `headers` and `body` sent chunked, `size` bytes a chunk.
fn chunked(headers: &str, body: &[u8], size: usize) -> Vec<u8> {
    let mut out =
        format!("HTTP/1.1 200 OK\r\n{headers}transfer-encoding: chunked\r\n\r\n").into_bytes();
    for piece in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// `body` gzip-encoded by flate2's encoder at `level`, as a bidder's own library would.
fn gzip_at(level: u32, body: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(body).unwrap();
    e.finish().unwrap()
}

/// `body` inflated by flate2's own decoder, not by the code under test.
fn gunzip(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .unwrap();
    out
}

async fn call(pool: &Arc<BidderPool>, body: &[u8]) -> Result<HttpAnswer, CallError> {
    let call = pool.start(Bytes::copy_from_slice(body)).unwrap();
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ends")
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[tokio::test]
async fn a_gzipped_request_says_so_and_inflates_to_the_original() {
    let bidder = RawBidder::start(|_, _| answer("", b"{\"id\":\"a\"}")).await;
    let pool = Arc::new(bidder.pool());
    let gz = gzip::compress(REQUEST).unwrap();
    let call = pool.start_gzipped(gz.clone()).unwrap();
    let got = call.await.unwrap();
    assert_eq!(&got.body[..], b"{\"id\":\"a\"}");
    // The same pool sends a plain body as before: no coding named either way.
    call_ok(&pool, REQUEST).await;

    let seen = bidder.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(header(&seen[0].head, "content-encoding"), Some("gzip"));
    assert_eq!(
        header(&seen[0].head, "content-length"),
        Some(gz.len().to_string().as_str())
    );
    assert_eq!(
        seen[0].body,
        gz.to_vec(),
        "the bytes given, sent as they are"
    );
    assert_eq!(gunzip(&seen[0].body), REQUEST);
    assert_eq!(header(&seen[1].head, "content-encoding"), None);
    assert_eq!(seen[1].body, REQUEST);
    assert!(
        seen.iter()
            .all(|s| header(&s.head, "accept-encoding").is_none()),
        "not asked for gzip answers"
    );
    assert_eq!(bidder.accepted.load(SeqCst), 1, "one kept-alive connection");
}

async fn call_ok(pool: &Arc<BidderPool>, body: &[u8]) -> HttpAnswer {
    call(pool, body).await.unwrap()
}

#[tokio::test]
async fn gzip_answers_are_inflated_asked_for_or_not() {
    let gz = gzip_at(6, RESPONSE);
    let bidder = RawBidder::start(move |_, _| answer("content-encoding: gzip\r\n", &gz)).await;
    let asking = Arc::new(bidder.pool().accept_gzip(true).authorized("tok3n"));
    let got = call_ok(&asking, REQUEST).await;
    assert_eq!(&got.body[..], RESPONSE);
    let not_asking = Arc::new(bidder.pool());
    let got = call_ok(&not_asking, REQUEST).await;
    assert_eq!(&got.body[..], RESPONSE, "inflated all the same");

    let seen = bidder.seen();
    assert_eq!(header(&seen[0].head, "accept-encoding"), Some("gzip"));
    assert_eq!(
        header(&seen[0].head, "authorization"),
        Some("bearer tok3n"),
        "both builders hold, whatever their order"
    );
    assert_eq!(header(&seen[1].head, "accept-encoding"), None);
}

#[tokio::test]
async fn chunked_gzip_answers_are_inflated() {
    let gz = gzip_at(6, RESPONSE);
    let bidder = RawBidder::start(move |n, _| {
        // Chunks smaller than the gzip header, then larger than the whole stream.
        let size = if n == 0 { 7 } else { 64 * 1024 };
        chunked("Content-Encoding: GZIP\r\n", &gz, size)
    })
    .await;
    let pool = Arc::new(bidder.pool().accept_gzip(true));
    for _ in 0..2 {
        let got = call_ok(&pool, REQUEST).await;
        assert_eq!(&got.body[..], RESPONSE);
    }
    assert_eq!(bidder.accepted.load(SeqCst), 1);
}

#[tokio::test]
async fn a_zip_bomb_is_the_calls_error_and_the_connection_serves_the_next_call() {
    // 10 MB of zeros gzip to about 10 KB, well inside the 1 MB answer limit.
    let bomb = gzip_at(9, &vec![0u8; 10 * 1024 * 1024]);
    assert!(bomb.len() < MAX_ANSWER / 50, "{}", bomb.len());
    let bidder = RawBidder::start(move |n, _| match n {
        0 => answer("content-encoding: gzip\r\n", &bomb),
        1 => chunked("content-encoding: gzip\r\n", &bomb, 4096),
        _ => answer("", RESPONSE),
    })
    .await;
    let pool = Arc::new(bidder.pool().accept_gzip(true));
    for _ in 0..2 {
        let r = call(&pool, REQUEST).await;
        let Err(e) = r else {
            panic!("a bomb inflated: {r:?}")
        };
        assert!(
            matches!(e, CallError::InflatedTooLarge(MAX_ANSWER)),
            "{e:?}"
        );
        assert_eq!(e.label(), "inflated_too_large");
    }
    let got = call_ok(&pool, REQUEST).await;
    assert_eq!(&got.body[..], RESPONSE);
    // The bombs were whole HTTP messages: the connection stayed in the pool.
    assert_eq!(bidder.accepted.load(SeqCst), 1);
    assert!(bidder.seen().iter().all(|s| s.conn == 0));
}

#[tokio::test]
async fn broken_gzip_and_unknown_codings_are_the_calls_errors() {
    let gz = gzip_at(6, RESPONSE);
    let half = gz[..gz.len() / 2].to_vec();
    let mut trailing = gz.clone();
    trailing.extend_from_slice(b"and then some garbage");
    let answers: Vec<(Vec<u8>, &str)> = vec![
        (answer("content-encoding: gzip\r\n", &half), "bad_gzip"),
        (
            chunked("content-encoding: gzip\r\n", &half, 100),
            "bad_gzip",
        ),
        (answer("content-encoding: gzip\r\n", &trailing), "bad_gzip"),
        (answer("content-encoding: gzip\r\n", RESPONSE), "bad_gzip"),
        (answer("content-encoding: br\r\n", &gz), "bad_encoding"),
        (answer("content-encoding: deflate\r\n", &gz), "bad_encoding"),
        (
            answer("content-encoding: gzip\r\ncontent-encoding: gzip\r\n", &gz),
            "bad_encoding",
        ),
    ];
    let expected: Vec<&str> = answers.iter().map(|(_, label)| *label).collect();
    let script: Vec<Vec<u8>> = answers.into_iter().map(|(bytes, _)| bytes).collect();
    let count = script.len();
    let bidder = RawBidder::start(move |n, _| {
        script
            .get(n)
            .cloned()
            .unwrap_or_else(|| b"HTTP/1.1 204 No Content\r\ncontent-encoding: br\r\n\r\n".to_vec())
    })
    .await;
    let pool = Arc::new(bidder.pool().accept_gzip(true));
    for (i, label) in expected.iter().enumerate() {
        let r = call(&pool, REQUEST).await;
        let Err(e) = r else {
            panic!("answer {i} was taken: {r:?}")
        };
        assert_eq!(e.label(), *label, "answer {i}: {e}");
        if *label == "bad_gzip" && i < 2 {
            assert!(
                matches!(e, CallError::BadGzip(InflateError::Truncated)),
                "answer {i}: {e:?}"
            );
        }
    }
    // A no-bid with nothing to decode is a no-bid, whatever coding it names.
    let got = call_ok(&pool, REQUEST).await;
    assert_eq!((got.status.as_u16(), got.body.len()), (204, 0));
    assert_eq!(bidder.seen().len(), count + 1);
    assert_eq!(bidder.accepted.load(SeqCst), 1, "every answer was whole");
}
