//! What a failing bidder puts in the log, read from a real exchange's log over real sockets:
//! its breaker opening is logged once, naming the bidder, however many auctions skip it while
//! it stays open; each failed probe is a debug line, not another warning; its closing is logged
//! once; a failed call names the bidder, not only its address. The one test of this file owns
//! the process's subscriber, so every runtime thread's events reach the buffer: its own test
//! binary, not a module of `tests/it`, since other tests would log into that buffer and spend
//! the log lines' rate limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/support/mod.rs"]
mod support;

use std::io::Write;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;
use tokio::net::TcpListener;

/// Log lines written by the exchange, shared with the subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    /// Lines holding every one of `parts`.
    fn count(&self, parts: &[&str]) -> usize {
        self.text()
            .lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .count()
    }
}

const OPENED: &str = "bidder circuit breaker opened";
const PROBE_FAILED: &str = "bidder circuit breaker probe failed";
const CLOSED: &str = "bidder circuit breaker closed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opening_is_logged_once_naming_the_bidder_while_it_stays_open() {
    let log = Captured::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .init();

    // Fails (500) for its first 12 calls, then bids.
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let flaky = ScriptedBidder::start(move |r| {
        if counter.fetch_add(1, SeqCst) < 12 {
            Script {
                delay: Duration::ZERO,
                status: 500,
                body: String::new(),
            }
        } else {
            bids(
                r,
                "flaky",
                |imp| serde_json::json!({"id": "f", "impid": imp, "price": 1.0}),
            )
        }
    })
    .await;
    // A port that was open a moment ago: its calls fail to connect.
    let dead = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    // open_ms 500: the auctions right after the tenth find the breaker still open, even on a
    // loaded machine.
    let ex = exchange(
        "[breaker]\nmin_calls = 10\nopen_ms = 500\nprobes = 2\n",
        &[
            ("flaky", flaky.endpoint()),
            ("dead-dsp", format!("http://{dead}/bid")),
        ],
    )
    .await;
    let req = banner_request(0.1);
    for _ in 0..10 {
        auction(ex.addr, &req).await;
    }
    let flaky_metrics = ex.metrics.bidder(0).unwrap();
    assert_eq!(
        flaky_metrics.breaker_state.get(),
        1,
        "open after 10 failures"
    );
    // Skipped while open: no more lines about it.
    for _ in 0..5 {
        auction(ex.addr, &req).await;
    }
    assert_eq!(calls.load(SeqCst), 10);
    assert_eq!(
        log.count(&[OPENED, "bidder=flaky", "failures=10", "calls=10"]),
        1,
        "{}",
        log.text()
    );
    assert_eq!(log.count(&[CLOSED, "bidder=flaky"]), 0);

    // Probes once it has been open 500 ms: calls 11 and 12 fail and keep it open; the next
    // two bid, and it closes.
    let started = Instant::now();
    let mut won = 0;
    while won < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "only {won} bids in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        if auction(ex.addr, &req).await.0 == 200 {
            won += 1;
        }
    }
    assert_eq!(flaky_metrics.breaker_state.get(), 0, "closed again");
    assert_eq!(
        flaky_metrics.breaker_trips.get(),
        3,
        "opened, then two failed probes"
    );
    let text = log.text();
    assert_eq!(log.count(&[OPENED, "bidder=flaky"]), 1, "{text}");
    assert_eq!(log.count(&[PROBE_FAILED, "bidder=flaky"]), 2, "{text}");
    assert_eq!(log.count(&[CLOSED, "bidder=flaky"]), 1, "{text}");
    let at = |what: &str| text.find(what).unwrap();
    assert!(at(OPENED) < at(CLOSED));
    assert!(text.contains(" WARN ") && text.contains(" INFO "), "{text}");

    // The dead bidder: its failed calls name it (and its address), and its breaker opened
    // once as well.
    assert!(
        log.count(&["bidder call failed", "bidder=dead-dsp", &dead.to_string()]) >= 1,
        "{text}"
    );
    assert_eq!(log.count(&[OPENED, "bidder=dead-dsp"]), 1, "{text}");
}
