//! Hostile input at the exchange's door, over raw TCP: malformed framing (RFC 9112 rules for
//! Content-Length and Transfer-Encoding), oversized headers and bodies, JSON bombs, slowloris
//! and connection floods. Each case must end in a 4xx or a closed connection, never smuggle a
//! second request, and leave the server serving others: their auctions still get their bids,
//! which the exchange only returns from bidders that answered inside the deadline. Latency
//! figures are printed (`cargo test -- --nocapture`), not asserted: on a loaded two-core machine
//! they measure the machine; BENCHMARKS.md holds the measured ones.
//!
//! Its own test binary, not a module of `tests/it`: its memory bound reads this process's peak
//! resident memory, which another file's test would move.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use exchange::metrics::RequestOutcome;
use serde_json::json;
use support::*;
use testkit::http::{raw, statuses};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A request that, if the server were fooled about where the first request ends, it would
/// answer as a second response: `GET /healthz` answers `ok`.
const SMUGGLED: &str = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

fn post(headers: &str, body: &str) -> String {
    format!("POST /openrtb2/auction HTTP/1.1\r\nHost: x\r\n{headers}\r\n{body}")
}

#[tokio::test]
async fn malformed_framing_is_refused_and_never_smuggles_a_second_request() {
    let ex = exchange("[http]\nread_timeout_ms = 1000\n", &[]).await;
    let body = r#"{"id":"1","imp":[{"id":"1","banner":{"w":1,"h":1}}]}"#;
    let n = body.len();
    let cases: Vec<(&str, String)> = vec![
        (
            "conflicting Content-Length",
            post(
                &format!("Content-Length: {n}\r\nContent-Length: 5\r\n"),
                body,
            ) + SMUGGLED,
        ),
        (
            "duplicate Content-Length in one field",
            post(&format!("Content-Length: {n}, 5\r\n"), body) + SMUGGLED,
        ),
        (
            "signed Content-Length",
            post(&format!("Content-Length: +{n}\r\n"), body) + SMUGGLED,
        ),
        (
            "negative Content-Length",
            post("Content-Length: -1\r\n", body) + SMUGGLED,
        ),
        (
            "non-numeric Content-Length",
            post("Content-Length: ten\r\n", body) + SMUGGLED,
        ),
        (
            "huge Content-Length",
            post("Content-Length: 99999999999999999999999\r\n", body) + SMUGGLED,
        ),
        (
            "Content-Length with Transfer-Encoding",
            post(
                "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                &format!("{n:x}\r\n{body}\r\n0\r\n\r\n"),
            ) + SMUGGLED,
        ),
        (
            "Transfer-Encoding that is not chunked",
            post("Transfer-Encoding: gzip\r\n", body) + SMUGGLED,
        ),
        (
            "chunk size garbage",
            post("Transfer-Encoding: chunked\r\n", "zz\r\nhello\r\n0\r\n\r\n") + SMUGGLED,
        ),
        (
            "garbage request line",
            format!("\x16\x03\x01\x02\x00 hello\r\n\r\n{SMUGGLED}"),
        ),
        (
            "request line without version",
            format!("GET /\r\n\r\n{SMUGGLED}"),
        ),
        (
            "header without colon",
            format!("GET /healthz HTTP/1.1\r\nHost x\r\n\r\n{SMUGGLED}"),
        ),
        (
            "oversized header",
            format!(
                "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n{SMUGGLED}",
                "a".repeat(64 * 1024)
            ),
        ),
        (
            "body longer than its Content-Length",
            // The extra bytes are not a request: whatever they are, the server must not
            // answer two requests from this connection unless the extra is a whole request.
            post(
                "Content-Length: 5\r\n",
                "{\"id\"garbage-after-the-body\r\n\r\n",
            ),
        ),
    ];
    for (name, bytes) in &cases {
        let (text, closed) = raw(ex.addr, bytes.as_bytes(), Duration::from_secs(2)).await;
        let codes = statuses(&text);
        println!("{name}: statuses {codes:?}, closed {closed}");
        if name.starts_with("body longer") {
            // The bytes past Content-Length are the next request on the connection; here they
            // are garbage, so: the 5-byte body's 400, the garbage's 400, and a close.
            assert_eq!(codes, vec![400, 400], "{name}\n{text}");
            assert!(closed, "{name}");
            continue;
        }
        assert!(
            codes.len() <= 1,
            "{name}: more than one response ({codes:?}): a request was smuggled\n{text}"
        );
        assert!(
            !text.contains("\r\n\r\nok\n"),
            "{name}: the smuggled GET /healthz was answered\n{text}"
        );
        match codes.first() {
            // RFC 9112 6.3: with both, Transfer-Encoding decides the framing and the server
            // must close the connection after answering; hyper does exactly that, so nothing
            // after the chunked body can be read as a request.
            Some(_) if name.contains("with Transfer-Encoding") => {
                assert!(
                    closed,
                    "{name}: answered but the connection stayed open\n{text}"
                );
                assert!(text.contains("connection: close"), "{name}\n{text}");
            }
            Some(code) => assert!(
                (400..500).contains(code),
                "{name}: answered {code}, expected a 4xx\n{text}"
            ),
            None => assert!(closed, "{name}: neither answered nor closed"),
        }
    }
    // A short body: the server waits for the rest, then gives up and closes.
    let short = post(&format!("Content-Length: {}\r\n", n + 10), body);
    let started = Instant::now();
    let (text, closed) = raw(ex.addr, short.as_bytes(), Duration::from_secs(8)).await;
    println!(
        "short body: statuses {:?}, closed {closed} after {:?}",
        statuses(&text),
        started.elapsed()
    );
    assert!(
        closed,
        "a body that never completes must not hold the connection forever"
    );
    assert!(statuses(&text).iter().all(|c| (400..500).contains(c)));
    // Still serving.
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn framing_a_proxy_might_read_otherwise_is_refused_on_every_port() {
    let ex = exchange("", &[]).await;
    testkit::http::assert_strict_framing(ex.addr, "/openrtb2/auction").await;
    testkit::http::assert_strict_framing(ex.admin, "/admin/reload").await;
    // Still serving.
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn a_well_formed_pipelined_pair_is_answered_in_order() {
    // The control case for the corpus above: two whole requests on one connection are two
    // answers, so the smuggling check does detect a second response.
    // The second asks the server to close after answering, so the read ends on the close, not
    // on a timer that a loaded machine could outrun.
    let ex = exchange("", &[]).await;
    let last = SMUGGLED.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let (text, closed) = raw(
        ex.addr,
        format!("{SMUGGLED}{last}").as_bytes(),
        Duration::from_secs(10),
    )
    .await;
    assert!(closed, "the server closes after the second answer\n{text}");
    assert_eq!(statuses(&text), vec![200, 200]);
}

/// Latency percentiles of `n` sequential auctions on a fresh connection each time, and how
/// many did not get their bid. The probes carry the exchange's largest `tmax` (1 s), so that
/// "got its bid" means "was served", not "was fast on a machine that runs the whole suite":
/// the percentiles are printed as a figure, never asserted.
async fn probe(addr: SocketAddr, n: usize) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(n);
    let mut failed = 0;
    let mut request = banner_request(0.1);
    request["tmax"] = json!(1000);
    for _ in 0..n {
        let started = Instant::now();
        let (status, _) = auction(addr, &request).await;
        times.push(started.elapsed());
        if status != 200 {
            failed += 1;
        }
    }
    times.sort();
    (times[n / 2], times[n * 99 / 100], failed)
}

#[tokio::test]
async fn slowloris_connections_are_cut_and_do_not_slow_legitimate_auctions() {
    let bidder = ScriptedBidder::start(|r| {
        bids(r, "a", |imp| json!({"id": "a", "impid": imp, "price": 1.0}))
    })
    .await;
    let ex = exchange(
        "[http]\nread_timeout_ms = 500\n",
        &[("a", bidder.endpoint())],
    )
    .await;
    let (base_p50, base_p99, failed) = probe(ex.addr, 200).await;
    assert_eq!(failed, 0);
    let accepted = || ex.exchange.connections().accepted.load(Relaxed);
    let before = accepted();
    // 300 connections, each sending a header byte every 100 ms and never finishing.
    let mut trickles = Vec::new();
    for _ in 0..300 {
        let addr = ex.addr;
        trickles.push(tokio::spawn(async move {
            let Ok(mut s) = TcpStream::connect(addr).await else {
                return false;
            };
            let line =
                b"POST /openrtb2/auction HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            for byte in line.iter().cycle().take(40) {
                if s.write_all(&[*byte]).await.is_err() {
                    return true; // cut by the server
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        }));
    }
    // Probe once every trickling connection has been accepted (the first are cut 500 ms in).
    testkit::time::wait_until(Duration::from_secs(10), "300 trickling connections", || {
        accepted() >= before + 300
    })
    .await;
    let (p50, p99, failed) = probe(ex.addr, 200).await;
    let mut cut = 0;
    for t in trickles {
        if t.await.unwrap() {
            cut += 1;
        }
    }
    let timeouts = ex.exchange.connections().header_timeouts.load(Relaxed);
    println!(
        "slowloris: legitimate p50 {base_p50:?} -> {p50:?}, p99 {base_p99:?} -> {p99:?}; \
         {cut}/300 trickling connections cut, {timeouts} header timeouts"
    );
    // A bid comes back only from a bidder that answered inside the deadline.
    assert_eq!(failed, 0, "every legitimate auction got its bid");
    assert_eq!(timeouts, 300, "every trickling connection was cut");
    assert_eq!(cut, 300);
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_at_once_and_others_still_served() {
    let ex = exchange("[http]\nmax_connections = 20\n", &[]).await;
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(TcpStream::connect(ex.addr).await.unwrap());
    }
    let open = || ex.exchange.connections().open.load(Relaxed);
    testkit::time::wait_until(Duration::from_secs(10), "20 connections open", || {
        open() == 20
    })
    .await;
    let (text, closed) = raw(ex.addr, SMUGGLED.as_bytes(), Duration::from_secs(10)).await;
    assert!(closed && text.is_empty(), "the 21st connection: {text:?}");
    assert_eq!(ex.exchange.connections().refused.load(Relaxed), 1);
    drop(held);
    testkit::time::wait_until(Duration::from_secs(10), "all closed", || open() == 0).await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204, "served again once connections closed");
}

#[tokio::test]
async fn a_connection_that_never_sends_a_request_is_closed_at_the_header_timeout() {
    // The idle timeout (60 s) is for kept-alive clients between requests, not for sockets
    // opened to hold a slot.
    let ex = exchange(
        "[http]\nread_timeout_ms = 200\nidle_timeout_ms = 60000\n",
        &[],
    )
    .await;
    let mut s = TcpStream::connect(ex.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("closed long before the idle timeout")
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");
    assert_eq!(ex.exchange.connections().header_timeouts.load(Relaxed), 1);
}

#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let ex = exchange(
        "[http]\nmax_connections = 100\nmax_connections_per_ip = 5\n",
        &[],
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(TcpStream::connect(ex.addr).await.unwrap());
    }
    let open = || ex.exchange.connections().open.load(Relaxed);
    testkit::time::wait_until(Duration::from_secs(10), "5 connections open", || {
        open() == 5
    })
    .await;
    let (text, closed) = raw(ex.addr, SMUGGLED.as_bytes(), Duration::from_secs(10)).await;
    assert!(
        closed && text.is_empty(),
        "a sixth from 127.0.0.1: {text:?}"
    );
    assert_eq!(ex.exchange.connections().refused_per_ip.load(Relaxed), 1);
    assert_eq!(
        ex.exchange.connections().refused.load(Relaxed),
        0,
        "the overall cap is far"
    );
    held.pop();
    testkit::time::wait_until(Duration::from_secs(10), "one closed", || open() == 4).await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204, "a slot given back is taken again");
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout_but_not_before() {
    let ex = exchange(
        "[http]\nidle_timeout_ms = 300\nread_timeout_ms = 5000\n",
        &[],
    )
    .await;
    let mut s = TcpStream::connect(ex.addr).await.unwrap();
    // The idle clock starts once the answer is sent, after this: a lower bound on the wait
    // that needs no fast machine.
    let started = Instant::now();
    s.write_all(SMUGGLED.as_bytes()).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf))
        .await
        .expect("closed within the idle timeout")
        .unwrap_or(0);
    assert_eq!(n, 0, "closed, not answered");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(ex.exchange.connections().idle_closed.load(Relaxed), 1);
}

/// The peak resident memory of this process so far (`VmHWM`), in KiB: a buffer that came and
/// went between two readings still shows.
///
/// # Panics
/// When it cannot be read: a memory bound that reads 0 would pass without measuring anything.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bombs_and_huge_bodies_are_refused_quickly_with_memory_bounded() {
    let bidder = ScriptedBidder::start(|r| {
        bids(r, "a", |imp| json!({"id": "a", "impid": imp, "price": 1.0}))
    })
    .await;
    let ex = exchange("", &[("a", bidder.endpoint())]).await;
    let peak_before = peak_rss_kib();

    // A background of legitimate auctions while the bombs land.
    let addr = ex.addr;
    let background = tokio::spawn(async move { probe(addr, 300).await });

    // 100 MB announced: refused before a byte of it is read.
    let started = Instant::now();
    let (text, _) = raw(
        ex.addr,
        post("Content-Length: 104857600\r\n", "{").as_bytes(),
        Duration::from_secs(2),
    )
    .await;
    println!(
        "100 MB announced: {:?} in {:?}",
        statuses(&text),
        started.elapsed()
    );
    assert_eq!(statuses(&text), vec![413]);

    // 100 MB streamed chunked: cut at the limit, not buffered.
    let started = Instant::now();
    let mut s = TcpStream::connect(ex.addr).await.unwrap();
    s.write_all(post("Transfer-Encoding: chunked\r\n", "").as_bytes())
        .await
        .unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 1 << 20, "[".repeat(1 << 20));
    let mut sent = 0usize;
    for _ in 0..100 {
        if s.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
        sent += 1;
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    println!(
        "100 MB chunked: {:?} after {sent} MiB sent, in {:?}",
        statuses(&answer),
        started.elapsed()
    );
    assert_eq!(statuses(&answer), vec![413]);
    assert!(
        sent < 100,
        "the server read all 100 MiB instead of cutting at the limit"
    );

    // 10^4-deep nesting inside the size limit: a 400 from the parser's depth limit.
    let deep = format!(
        r#"{{"id":"1","imp":[{{"id":"1","banner":{{"w":1,"h":1}}}}],"ext":{}{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let started = Instant::now();
    let (status, _, body) = send(ex.addr, "POST", exchange::AUCTION_PATH, deep).await;
    println!(
        "10^4 nesting: {status} in {:?}: {}",
        started.elapsed(),
        String::from_utf8_lossy(&body)
    );
    assert_eq!(status, 400);

    // 10^6-element array: 2 MB, over the 256 KiB body limit.
    let mut huge = String::from(r#"{"id":"1","imp":[{"id":"1","banner":{"w":1,"h":1}}],"ext":["#);
    huge.push_str(&"0,".repeat(999_999));
    huge.push_str("0]}");
    let started = Instant::now();
    // Raw, because the server answers 413 from the Content-Length and closes while a client
    // library would still be writing (and fail on the broken pipe).
    let request = post(&format!("Content-Length: {}\r\n", huge.len()), &huge);
    let (text, _) = raw(ex.addr, request.as_bytes(), Duration::from_secs(2)).await;
    println!(
        "10^6 array: {:?} in {:?}",
        statuses(&text),
        started.elapsed()
    );
    assert_eq!(statuses(&text), vec![413]);

    // An imp array as large as the body limit allows: refused by validation, not processed.
    let mut many = String::from(r#"{"id":"1","imp":["#);
    let imp = r#"{"id":"1","banner":{"w":1,"h":1}},"#;
    many.push_str(&imp.repeat((200 * 1024) / imp.len()));
    many.push_str(r#"{"id":"x","banner":{"w":1,"h":1}}]}"#);
    let (status, _, body) = send(ex.addr, "POST", exchange::AUCTION_PATH, many).await;
    println!("~6,000 imps: {status}: {}", String::from_utf8_lossy(&body));
    assert_eq!(status, 400);

    let (p50, p99, failed) = background.await.unwrap();
    // The peak is this whole test process's, other tests included: 64 MiB is far below the
    // 100 MB a server buffering the bombs would add, and far above what the rest allocate.
    let grown_mib = (peak_rss_kib() - peak_before) / 1024;
    println!(
        "legitimate auctions meanwhile: p50 {p50:?}, p99 {p99:?}; peak RSS grew {grown_mib} MiB"
    );
    assert_eq!(failed, 0, "every legitimate auction got its bid");
    assert!(grown_mib < 64, "peak memory grew {grown_mib} MiB");
}

/// `POST /openrtb2/auction` with `body` and these extra header lines, on a fresh connection:
/// the status and the body of the answer.
async fn post_coded(addr: SocketAddr, headers: &str, body: &[u8]) -> (u16, String) {
    let mut wire = format!(
        "POST /openrtb2/auction HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{headers}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    wire.extend_from_slice(body);
    let (answer, _) = raw(addr, &wire, Duration::from_secs(5)).await;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

/// Issue 45: a gzip request body got 400 "invalid bid request", and `Content-Encoding: br`
/// over plain JSON got 200. A gzip body is inflated within the body limit (a bomb: 413,
/// counted as too large); another coding is 415, naming it; a body that is not the gzip it
/// claims is 400.
#[tokio::test]
async fn request_encodings_gzip_inflated_within_the_limit_others_refused() {
    let bidder = ScriptedBidder::start(|r| {
        bids(
            r,
            "gz",
            |imp| json!({"id": "b", "impid": imp, "price": 1.0}),
        )
    })
    .await;
    let ex = exchange(
        "[http]\nmax_body_bytes = 65536\n",
        &[("gz", bidder.endpoint())],
    )
    .await;
    let request = banner_request(0.1).to_string();
    let gzipped = upstream::gzip::compress(request.as_bytes()).unwrap();

    let (status, body) = post_coded(ex.addr, "Content-Encoding: gzip\r\n", &gzipped).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"seat\":\"gz\""), "{body}");
    let (status, _) = post_coded(ex.addr, "Content-Encoding: GZIP\r\n", &gzipped).await;
    assert_eq!(status, 200, "the coding's name is case-insensitive");

    // 8 MB of spaces in 8 KB: it inflates past the 64 KB limit.
    let bomb = upstream::gzip::compress(&vec![b' '; 8 * 1024 * 1024]).unwrap();
    assert!(bomb.len() < 65536);
    let too_large = ex.metrics.request_count(RequestOutcome::TooLarge);
    let (status, body) = post_coded(ex.addr, "Content-Encoding: gzip\r\n", &bomb).await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body.contains("inflates past the limit of 65536 bytes"),
        "{body}"
    );
    assert_eq!(
        ex.metrics.request_count(RequestOutcome::TooLarge),
        too_large + 1
    );

    for (headers, named) in [
        ("Content-Encoding: br\r\n", "\\\"br\\\""),
        ("Content-Encoding: deflate\r\n", "\\\"deflate\\\""),
        ("Content-Encoding: gzip, br\r\n", "gzip, br"),
        (
            "Content-Encoding: gzip\r\nContent-Encoding: gzip\r\n",
            "gzip, ...",
        ),
    ] {
        let (status, body) = post_coded(ex.addr, headers, request.as_bytes()).await;
        assert_eq!(status, 415, "{headers}: {body}");
        assert!(body.contains(named), "{headers}: {body}");
    }
    let (status, body) =
        post_coded(ex.addr, "Content-Encoding: gzip\r\n", request.as_bytes()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("gzip"), "{body}");
    let mut cut = gzipped.to_vec();
    cut.truncate(cut.len() - 4);
    let (status, body) = post_coded(ex.addr, "Content-Encoding: gzip\r\n", &cut).await;
    assert_eq!(status, 400, "{body}");
    // Plain and identity still go through.
    let (status, _) = post_coded(
        ex.addr,
        "Content-Encoding: identity\r\n",
        request.as_bytes(),
    )
    .await;
    assert_eq!(status, 200);
}
