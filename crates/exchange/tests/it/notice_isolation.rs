//! One bidder's notice host accepts connections and never answers. At 2,000 auctions/s the
//! other bidder still gets every one of its notices, and the hanging host's notices are the
//! only ones that fail or are dropped, each of them counted.
//!
//! One healthy bidder, not several: exchange, bidders and load generator share one debug-built
//! process on two cores here, which sends about 2,000 notices/s to loopback besides the
//! auctions; more healthy notice traffic than that overflows healthy queues for want of CPU,
//! which says nothing about isolation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use exchange::metrics::{NoticeKind, NoticeOutcome};
use loadgen::{Corpus, LoadSpec};
use serde_json::json;
use support::*;

/// A bidder bidding `price` on every imp, with all three notice URLs at `host`.
async fn bidder(
    seat: &'static str,
    price: f64,
    host: Option<std::net::SocketAddr>,
) -> ScriptedBidder {
    let own = Arc::new(std::sync::OnceLock::new());
    let own_in = own.clone();
    let b = ScriptedBidder::start(move |r| {
        let host: std::net::SocketAddr = host.unwrap_or_else(|| *own_in.get().unwrap());
        bids(r, seat, |imp| {
            json!({"id": seat, "impid": imp, "price": price, "adm": "<div/>",
                   "nurl": format!("http://{host}/win/{seat}?p=${{AUCTION_PRICE}}"),
                   "burl": format!("http://{host}/bill/{seat}?p=${{AUCTION_PRICE}}"),
                   "lurl": format!("http://{host}/loss/{seat}?r=${{AUCTION_LOSS}}")})
        })
    })
    .await;
    own.set(b.addr).unwrap();
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_notice_host_costs_no_other_bidder_a_notice() {
    let hole = black_hole().await;
    // `hanging` outbids `healthy` on every imp, so its win and billing notices go to the black
    // hole, while `healthy` is owed a loss notice per bid (and a win and a billing notice for
    // the imps it takes when `hanging`'s bid is refused).
    let hanging = bidder("hanging", 3.0, Some(hole)).await;
    let healthy = bidder("healthy", 2.0, None).await;
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\nfire_lurl = true\ntimeout_ms = 500\nqueue = 20000\nworkers = 16\n\
         max_attempts = 1\n\
         [[bidders]]\nname = \"healthy\"\nendpoint = \"{}\"\nmax_connections = 256\n\
         [[bidders]]\nname = \"hanging\"\nendpoint = \"{}\"\nmax_connections = 256\nnotice_hosts = [\"{hole}\"]\n",
        healthy.endpoint(),
        hanging.endpoint()
    ))
    .await;

    let url = format!("http://{}{}", ex.addr, exchange::AUCTION_PATH);
    let mut spec = LoadSpec::new(url, 2_000.0, Duration::from_secs(2));
    spec.connections = 64;
    let corpus = Arc::new(Corpus::generated(7, 500, 200));
    let report = loadgen::run(&spec, corpus).await.unwrap();
    println!(
        "offered 2000/s, achieved {:.0}/s: {} sent, {} completed",
        report.rate_achieved, report.sent, report.completed
    );
    assert!(report.completed >= 1_000, "{} auctions", report.completed);

    // Owed: one notice per bid lost (loss), two per imp won (win and billing).
    let owed = |name: &str| {
        let m = ex.metrics.bidder_named(name).unwrap();
        let bids = m.bids.get();
        let wins = m.wins.get();
        (bids + wins) as usize
    };
    let received = |b: &ScriptedBidder| b.notices.lock().unwrap().len();
    // Counted as sent once the answer is read, which for a pipelined batch may come after
    // the bidder has recorded the notice: wait for both.
    let sent = |name: &str| {
        let m = ex.metrics.bidder_named(name).unwrap();
        m.notices.get(NoticeOutcome::Sent) as usize
    };
    testkit::time::wait_until(
        Duration::from_secs(30),
        "the healthy bidders' notices arrive and are counted",
        || received(&healthy) >= owed("healthy") && sent("healthy") >= owed("healthy"),
    )
    .await;
    for (name, b) in [("healthy", &healthy)] {
        let m = ex.metrics.bidder_named(name).unwrap();
        let n = |o: NoticeOutcome| m.notices.get(o);
        assert!(owed(name) > 0, "{name} has notices owed");
        assert_eq!(
            received(b),
            owed(name),
            "{name}: every notice arrived, once"
        );
        assert_eq!(n(NoticeOutcome::Sent), owed(name) as u64, "{name}");
        for o in [
            NoticeOutcome::Dropped,
            NoticeOutcome::Failed,
            NoticeOutcome::Refused,
        ] {
            assert_eq!(n(o), 0, "{name}: no notice {}", o.label());
        }
    }
    // The hanging host's notices time out and are counted as failed; none is sent.
    let h = ex.metrics.bidder_named("hanging").unwrap();
    testkit::time::wait_until(Duration::from_secs(10), "hanging notices fail", || {
        h.notices.get(NoticeOutcome::Failed) > 0
    })
    .await;
    assert_eq!(h.notices.get(NoticeOutcome::Sent), 0);
}

/// A small queue in front of the hanging host overflows: its notices are dropped and counted,
/// and the healthy bidder, on its own queue, loses none.
#[tokio::test]
async fn an_overflowing_queue_drops_only_its_own_hosts_notices() {
    let hole = black_hole().await;
    let hanging = bidder("hanging", 3.0, Some(hole)).await;
    let healthy = bidder("healthy", 2.0, None).await;
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\nfire_lurl = true\ntimeout_ms = 10000\nqueue = 4\nworkers = 1\n\
         max_attempts = 1\nbatch_max = 1\nbatch_linger_ms = 0\n\
         [[bidders]]\nname = \"healthy\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"hanging\"\nendpoint = \"{}\"\nnotice_hosts = [\"{hole}\"]\n",
        healthy.endpoint(),
        hanging.endpoint()
    ))
    .await;
    for _ in 0..20 {
        let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
        assert_eq!(status, 200);
    }
    // 20 wins owe the hanging host 40 notices: one in flight, four queued, the rest dropped.
    let h = ex.metrics.bidder_named("hanging").unwrap();
    assert_eq!(h.notices.get(NoticeOutcome::Dropped), 35);
    let dropped = |k| ex.metrics.notice_count(k, NoticeOutcome::Dropped);
    assert_eq!(dropped(NoticeKind::Win) + dropped(NoticeKind::Billing), 35);
    assert_eq!(dropped(NoticeKind::Loss), 0);
    // All 20 answers came while the first notice to the hanging host was still waiting for
    // its answer (10 s timeout): no answer waited for a notice.
    assert_eq!(h.notices.get(NoticeOutcome::Sent), 0);
    assert_eq!(h.notices.get(NoticeOutcome::Failed), 0);
    let m = ex.metrics.bidder_named("healthy").unwrap();
    testkit::time::wait_until(Duration::from_secs(5), "20 loss notices sent", || {
        m.notices.get(NoticeOutcome::Sent) == 20
    })
    .await;
    assert_eq!(healthy.notices.lock().unwrap().len(), 20);
    assert_eq!(m.notices.get(NoticeOutcome::Dropped), 0);
}
