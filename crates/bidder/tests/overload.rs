//! The bidder under more bid requests than it admits, over real loopback sockets: win notices
//! sent meanwhile skip the admission gate, so every one is answered and charged while bids are
//! being shed; and the bid port refuses malformed HTTP like the exchange's (same edge code).
//! Figures are printed (`cargo test -p bidder --test overload -- --nocapture`).
//!
//! Its own test binary, not a module of `tests/it`: its runtime spins on purpose and its shed
//! counts assume no other test competes for the process's cores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bidder::metrics::RequestOutcome;
use common::{ADMIN_TOKEN, TestBidder, banner_request, call, call_retrying, campaign_json};
use serde_json::Value;
use testkit::http::raw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn win_notices_are_answered_and_charged_while_bids_are_shed() {
    // One bid decision at a time: two workers deciding at once already sheds.
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 1000.0, 2.0, "asap")),
        "[admission]\nmode = \"fixed\"\nmax_in_flight = 1\n",
    )
    .await;
    let metrics = b.bidder.metrics();
    // Bids won earlier, whose win notices arrive during the flood.
    let mut wins = Vec::new();
    for i in 0..60 {
        let (status, body) = b
            .post_bid(&banner_request(&format!("w{i}"), 300, 250, 0.1))
            .await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        let nurl = v["seatbid"][0]["bid"][0]["nurl"].as_str().unwrap();
        wins.push(nurl.replace("${AUCTION_PRICE}", "1.5"));
    }
    let shed_before = metrics.request_count(RequestOutcome::Shed);

    // The flood: 64 senders, each sending its next bid request as soon as the last is answered.
    let stop = Arc::new(AtomicBool::new(false));
    let mut flood = tokio::task::JoinSet::new();
    for s in 0..64 {
        let (stop, addr) = (stop.clone(), b.addr);
        flood.spawn(async move {
            let mut times = Vec::new();
            let mut n = 0u32;
            while !stop.load(Relaxed) {
                n += 1;
                let started = Instant::now();
                let (status, _) = call(
                    addr,
                    "POST",
                    bidder::BID_PATH,
                    &banner_request(&format!("f{s}-{n}"), 300, 250, 0.1),
                )
                .await;
                assert!(status == 200 || status == 204, "a flooded bid got {status}");
                times.push(started.elapsed());
            }
            times
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The notices, spread over the flood.
    let mut notice_times = Vec::new();
    for url in &wins {
        let started = Instant::now();
        let (status, body) = b.notice(url).await;
        assert_eq!(
            status, 204,
            "a win notice during the flood: {status} {body}"
        );
        notice_times.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    stop.store(true, Relaxed);
    let mut bid_times = Vec::new();
    while let Some(times) = flood.join_next().await {
        bid_times.extend(times.unwrap());
    }
    bid_times.sort();
    notice_times.sort();
    let shed = metrics.request_count(RequestOutcome::Shed) - shed_before;
    println!(
        "flood: {} bid requests, {shed} shed; bid p50 {:?} p99 {:?}; {} win notices all 204, p50 {:?} p99 {:?}",
        bid_times.len(),
        percentile(&bid_times, 0.5),
        percentile(&bid_times, 0.99),
        notice_times.len(),
        percentile(&notice_times, 0.5),
        percentile(&notice_times, 0.99),
    );
    assert!(
        shed > 0,
        "the flood never overloaded the gate; the test proves nothing"
    );
    let c = b.campaign("c1").await;
    assert_eq!(c["wins"], 60);
    assert_eq!(c["nanos"]["spent"], 60 * 1_500_000);
}

#[tokio::test]
async fn the_bid_port_refuses_malformed_http_and_keeps_serving() {
    let b = TestBidder::start(
        &format!("[{}]", campaign_json("c1", 1000.0, 2.0, "asap")),
        "[http]\nread_timeout_ms = 500\n",
    )
    .await;
    let body = banner_request("h", 300, 250, 0.1);
    let post = |headers: &str, body: &str| {
        format!("POST /openrtb2/bid HTTP/1.1\r\nHost: x\r\n{headers}\r\n{body}").into_bytes()
    };
    let smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "conflicting Content-Length",
            post("Content-Length: 5\r\nContent-Length: 6\r\n", "abcdef"),
        ),
        (
            "signed Content-Length",
            post("Content-Length: +5\r\n", "abcde"),
        ),
        (
            "negative Content-Length",
            post("Content-Length: -5\r\n", ""),
        ),
        (
            "non-numeric Content-Length",
            post("Content-Length: five\r\n", ""),
        ),
        (
            "listed Content-Length",
            post("Content-Length: 5, 5\r\n", "abcde"),
        ),
        (
            "unknown Transfer-Encoding",
            post("Transfer-Encoding: gzip\r\n", "abcde"),
        ),
        (
            "bad chunk size",
            post(
                "Transfer-Encoding: chunked\r\n",
                &format!("zz\r\nabc\r\n0\r\n\r\n{smuggled}"),
            ),
        ),
        (
            "garbage request line",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
        ),
        ("no version", b"POST /openrtb2/bid\r\n\r\n".to_vec()),
        ("header without colon", post("Bogus header line\r\n", "")),
        (
            "64 KiB header",
            post(&format!("X-Big: {}\r\n", "a".repeat(64 * 1024)), ""),
        ),
        ("short body", post("Content-Length: 100\r\n", "{}")),
        (
            "100 MB announced",
            post("Content-Length: 100000000\r\n", ""),
        ),
    ];
    for (what, bytes) in &cases {
        let (answer, _) = raw(b.addr, bytes, Duration::from_secs(3)).await;
        let status: u16 = answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        assert!(
            answer.is_empty() || (400..500).contains(&status),
            "{what}: answered {answer:?}"
        );
        assert!(
            !answer.contains("ok\n"),
            "{what}: a smuggled request was answered"
        );
        println!(
            "{what}: {}",
            if answer.is_empty() {
                "closed".to_owned()
            } else {
                status.to_string()
            }
        );
    }
    // A pipelined pair that is well formed gets two answers: the check above can fail.
    let pair = [
        post(&format!("Content-Length: {}\r\n", body.len()), &body),
        smuggled.as_bytes().to_vec(),
    ]
    .concat();
    let (answer, _) = raw(
        b.addr,
        &[
            pair,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
        ]
        .concat(),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 3, "{answer}");
    // And it still bids.
    assert_eq!(b.post_bid(&body).await.0, 200);
}

/// Reads `n` pipelined answers from `s`; returns their status codes.
async fn read_answers(s: &mut TcpStream, n: usize) -> Vec<u16> {
    let mut buf = Vec::new();
    let mut statuses = Vec::new();
    while statuses.len() < n {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                statuses.push(status);
                continue;
            }
        }
        let mut chunk = [0u8; 16 * 1024];
        let k = tokio::time::timeout(Duration::from_secs(20), s.read(&mut chunk))
            .await
            .expect("answers within 20 s")
            .unwrap();
        assert!(k > 0, "closed after {} of {n} answers", statuses.len());
        buf.extend_from_slice(&chunk[..k]);
    }
    statuses
}

/// What a burst of bid requests queued behind a busy runtime got.
#[derive(Debug)]
struct Burst {
    bids: u64,
    no_bids: u64,
    shed: u64,
    /// `gavel_bidder_admission_busy_streak_sheds_total` after the burst.
    streak_sheds: u64,
    /// A lone bid request's status once the runtime has been idle.
    lone: u16,
    /// The campaign's reserved nanos at the end: no notice is sent, so every bid made is
    /// still reserved, and nothing else may be.
    reserved: i64,
}

/// A bidder on its own one-thread runtime (as `gavel bidder --threads 1` runs it), with
/// `admission` as its config: 200 keep-alive connections each get 5 pipelined bid requests
/// while the runtime is held busy, so all 1,000 wait unread in socket buffers, where no count
/// of requests in flight can see them, and are then served in one run without a pause.
fn burst_behind_a_busy_runtime(admission: &str) -> Burst {
    const CONNECTIONS: usize = 200;
    const PIPELINED: usize = 5;
    type Spin = (Duration, std::sync::mpsc::Sender<()>);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let extra = admission.to_owned();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let b = TestBidder::start(
                &format!("[{}]", campaign_json("c1", 1000.0, 2.0, "asap")),
                &extra,
            )
            .await;
            let (spin_tx, mut spin_rx) = tokio::sync::mpsc::unbounded_channel::<Spin>();
            ready_tx
                .send((b.addr, b.admin_addr, b.bidder.metrics(), spin_tx))
                .unwrap();
            // Holds the runtime without yielding, as a burst of decisions would.
            while let Some((hold, started)) = spin_rx.recv().await {
                started.send(()).unwrap();
                let t = Instant::now();
                while t.elapsed() < hold {
                    std::hint::spin_loop();
                }
            }
        });
    });
    let (addr, admin, metrics, spin) = ready_rx.recv().unwrap();
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let burst = client.block_on(async move {
        let request = |id: String| {
            let body = banner_request(&id, 300, 250, 0.1);
            format!(
                "POST {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                bidder::BID_PATH,
                body.len()
            )
        };
        // Every connection open and served once, so its task is waiting on its socket.
        let mut conns = Vec::new();
        for c in 0..CONNECTIONS {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(request(format!("warm{c}")).as_bytes())
                .await
                .unwrap();
            assert_eq!(read_answers(&mut s, 1).await, [200]);
            conns.push(s);
        }
        let before = |o| metrics.request_count(o);
        let (bids0, no_bids0, shed0) = (
            before(RequestOutcome::Bid),
            before(RequestOutcome::NoBid),
            before(RequestOutcome::Shed),
        );
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        spin.send((Duration::from_millis(300), started_tx)).unwrap();
        started_rx.recv().unwrap();
        for (c, s) in conns.iter_mut().enumerate() {
            let burst: String = (0..PIPELINED)
                .map(|k| request(format!("b{c}-{k}")))
                .collect();
            s.write_all(burst.as_bytes()).await.unwrap();
        }
        for s in &mut conns {
            for status in read_answers(s, PIPELINED).await {
                assert!(status == 200 || status == 204, "a queued bid got {status}");
            }
        }
        let (bids, no_bids, shed) = (
            metrics.request_count(RequestOutcome::Bid) - bids0,
            metrics.request_count(RequestOutcome::NoBid) - no_bids0,
            metrics.request_count(RequestOutcome::Shed) - shed0,
        );
        let (_, text) = call(admin, "GET", "/metrics", "").await;
        let streak_sheds = text
            .lines()
            .find_map(|l| l.strip_prefix("gavel_bidder_admission_busy_streak_sheds_total "))
            .expect("the busy-streak counter is exported")
            .parse()
            .unwrap();
        // Idle long enough to park: the streak is over.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (lone, _) = call(
            addr,
            "POST",
            bidder::BID_PATH,
            &banner_request("lone", 300, 250, 0.1),
        )
        .await;
        let (status, body) = call_retrying(admin, "GET", "/admin/campaigns", Some(ADMIN_TOKEN), "").await;
        assert_eq!(status, 200, "{body}");
        let all: Value = serde_json::from_str(&body).unwrap();
        let reserved = all["campaigns"][0]["nanos"]["reserved"].as_i64().unwrap();
        Burst {
            bids,
            no_bids,
            shed,
            streak_sheds,
            lone,
            reserved,
        }
    });
    // The client's runtime dropped `spin`, which ends the server's loop.
    server.join().unwrap();
    burst
}

/// The bound on requests in flight never binds here (a one-poll decision has at most one in
/// flight), so what is refused, is refused for the runtime having run 2 ms without a pause.
#[test]
fn requests_queued_behind_a_busy_runtime_are_refused_once_it_has_run_max_busy_without_a_pause() {
    let checked = burst_behind_a_busy_runtime(
        "[admission]\nmode = \"fixed\"\nmax_in_flight = 1024\nmax_busy_ms = 2\n",
    );
    let unchecked = burst_behind_a_busy_runtime(
        "[admission]\nmode = \"fixed\"\nmax_in_flight = 1024\nmax_busy_ms = 0\n",
    );
    println!("1,000 queued bid requests: with max_busy_ms = 2 {checked:?}; with 0 {unchecked:?}");
    for b in [&checked, &unchecked] {
        assert_eq!(
            b.bids + b.no_bids + b.shed,
            1_000,
            "every request counted once"
        );
        assert_eq!(
            b.lone, 200,
            "after the burst a lone request is decided again"
        );
        // CPM 2: 2,000,000 nanos per bid. The 200 warm-up bids, the burst's and the lone one
        // are reserved; a shed request reserved nothing.
        let bids = i64::try_from(200 + b.bids + 1).unwrap();
        assert_eq!(b.reserved, bids * 2_000_000, "{b:?}");
    }
    assert!(
        checked.bids >= 1,
        "the first requests after a pause are decided"
    );
    assert!(
        checked.shed >= 1,
        "1,000 decisions in one run take well over 2 ms, so some must be refused"
    );
    assert_eq!(
        checked.streak_sheds, checked.shed,
        "each refusal was the pause check's"
    );
    assert_eq!(unchecked.shed, 0, "with the check off nothing is refused");
    assert_eq!(unchecked.streak_sheds, 0);
}
