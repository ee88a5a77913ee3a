//! Per-bidder connection pools over real sockets: the cap holds, excess is refused at once, and
//! a late answer keeps its connection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use exchange::metrics::{BidderOutcome, SkipReason};
use serde_json::json;
use support::*;

fn slow_bid(r: &openrtb::BidRequest, delay: Duration) -> Script {
    let mut s = bids(
        r,
        "slow",
        |imp| json!({"id": "s", "impid": imp, "price": 1.0}),
    );
    s.delay = delay;
    s
}

#[tokio::test]
async fn a_full_pool_skips_its_bidder_without_waiting_and_never_exceeds_the_cap() {
    // Generous times so that a loaded CI machine cannot make the fast bidder miss the
    // deadline (it happened with tmax 60 ms in a debug build): the slow bidder answers long
    // after the deadline, the fast one at once.
    let slow = ScriptedBidder::start(|r| slow_bid(r, Duration::from_millis(1500))).await;
    let fast = ScriptedBidder::start(|r| {
        bids(
            r,
            "fast",
            |imp| json!({"id": "f", "impid": imp, "price": 0.5}),
        )
    })
    .await;
    // The fan-out ends 80 ms before tmax (at the slow bidder's timeout), leaving the answer
    // 80 ms to be built and written: "not late" is then the code's doing on a loaded machine.
    let ex = exchange_from_toml(&format!(
        "[upstream]\ndrain_ms = 500\n[deadline]\nanswer_margin_ms = 80\n\
         [[bidders]]\nname = \"slow\"\nendpoint = \"{}\"\nmax_connections = 2\n\
         [[bidders]]\nname = \"fast\"\nendpoint = \"{}\"\nmax_connections = 16\n",
        slow.endpoint(),
        fast.endpoint()
    ))
    .await;
    let mut req = banner_request(0.1);
    req["tmax"] = json!(250);
    let started = Instant::now();
    let answers = futures_util::future::join_all((0..5).map(|_| auction(ex.addr, &req))).await;
    let took = started.elapsed();
    for (status, body) in &answers {
        assert_eq!(*status, 200);
        assert_eq!(body.as_ref().unwrap()["seatbid"][0]["seat"], "fast");
    }
    // Server side, measured from when each request was read: no answer after its tmax.
    assert_eq!(ex.metrics.late_answers.get(), 0);
    // Client side, with slack for a loaded test machine: nobody waited for the 1.5 s bidder.
    assert!(
        took < Duration::from_millis(1000),
        "5 concurrent auctions took {took:?}"
    );
    let m = &ex.metrics.bidder(0).unwrap();
    assert_eq!(
        m.outcome_count(BidderOutcome::Timeout),
        2,
        "two calls got a connection"
    );
    assert_eq!(
        m.outcome_count(BidderOutcome::Skipped),
        3,
        "three found the pool full"
    );
    assert!(
        slow.connections.load(SeqCst) <= 2,
        "opened {} connections, cap 2",
        slow.connections.load(SeqCst)
    );
    assert_eq!(
        ex.metrics
            .bidder(1)
            .unwrap()
            .outcome_count(BidderOutcome::Bid),
        5,
        "the other bidder is untouched"
    );
}

/// The busy gauge counts a late call while it drains and lets go once it ends: what an
/// operator reads to see a pool filling before it skips, and what the next test waits on.
#[tokio::test]
async fn a_draining_late_call_counts_as_busy_until_its_answer_is_read() {
    let held = ScriptedBidder::start(|r| slow_bid(r, Duration::ZERO)).await;
    let ex = exchange(
        "[upstream]\ndrain_ms = 60000\n",
        &[("held", held.endpoint())],
    )
    .await;
    held.hold();
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204, "the only bidder is held past the deadline");
    let busy = &ex.metrics.bidder(0).unwrap().connections_busy;
    assert_eq!(busy.get(), 1, "the late call drains on its connection");
    let text = ex.metrics.render();
    assert!(
        text.contains("gavel_exchange_bidder_connections_busy{bidder=\"held\"} 1"),
        "{text}"
    );
    held.release();
    testkit::time::wait_until(Duration::from_secs(10), "the late call to end", || {
        busy.get() == 0
    })
    .await;
    let mut roomy = banner_request(0.1);
    roomy["tmax"] = json!(1000);
    let (status, _) = auction(ex.addr, &roomy).await;
    assert_eq!(status, 200);
    assert_eq!(held.connections.load(SeqCst), 1, "its connection was kept");
    assert_eq!(busy.get(), 0);
}

#[tokio::test]
async fn a_late_answer_keeps_its_connection_for_the_next_auction() {
    let late = ScriptedBidder::start(|r| slow_bid(r, Duration::from_millis(60))).await;
    let ex = exchange("", &[("late", late.endpoint())]).await;
    let mut req = banner_request(0.1);
    req["tmax"] = json!(40);
    for _ in 0..3 {
        let (status, _) = auction(ex.addr, &req).await;
        assert_eq!(status, 204, "the only bid arrives after the deadline");
        // The late answer arrives and its connection goes back to the pool; the call lets go
        // of the pool's gauge only after that.
        let busy = &ex.metrics.bidder(0).unwrap().connections_busy;
        testkit::time::wait_until(Duration::from_secs(10), "the late call to end", || {
            busy.get() == 0
        })
        .await;
    }
    assert_eq!(
        ex.metrics
            .bidder(0)
            .unwrap()
            .outcome_count(BidderOutcome::Timeout),
        3
    );
    assert_eq!(
        late.connections.load(SeqCst),
        1,
        "one kept-alive connection served all three"
    );
}

#[tokio::test]
async fn connections_are_reused_across_auctions() {
    let a = ScriptedBidder::start(|r| {
        bids(r, "a", |imp| json!({"id": "a", "impid": imp, "price": 1.0}))
    })
    .await;
    let ex = exchange("", &[("a", a.endpoint())]).await;
    for _ in 0..20 {
        let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
        assert_eq!(status, 200);
    }
    assert_eq!(a.connections.load(SeqCst), 1);
}

/// A notice host, and a bidder `a` whose bids carry win and billing URLs on it.
async fn notice_sink_and_bidder() -> (ScriptedBidder, ScriptedBidder) {
    let sink = ScriptedBidder::start(|_| no_bid()).await;
    let host = sink.addr;
    let a = ScriptedBidder::start(move |r| {
        bids(r, "a", |imp| {
            json!({"id": "a", "impid": imp, "price": 1.0, "adm": "<div/>",
                   "nurl": format!("http://{host}/win?p=${{AUCTION_PRICE}}"),
                   "burl": format!("http://{host}/bill?p=${{AUCTION_PRICE}}")})
        })
    })
    .await;
    (sink, a)
}

#[tokio::test]
async fn notices_reuse_kept_alive_connections() {
    let (sink, a) = notice_sink_and_bidder().await;
    let host = sink.addr;
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\n[[bidders]]\nname = \"a\"\nendpoint = \"{}\"\nnotice_hosts = [\"{host}\"]\n",
        a.endpoint()
    ))
    .await;
    for i in 1..=10 {
        let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
        assert_eq!(status, 200);
        // Let this auction's two notices finish before the next, as in steady traffic:
        // answered and counted, so their connections are back in the cache. (Waiting only
        // for the sink to receive them raced the answers under load: a next notice found its
        // connection still reading and opened a third.)
        let sent = || {
            use exchange::metrics::{NoticeKind, NoticeOutcome};
            ex.metrics
                .notice_count(NoticeKind::Win, NoticeOutcome::Sent)
                + ex.metrics
                    .notice_count(NoticeKind::Billing, NoticeOutcome::Sent)
        };
        testkit::time::wait_until(Duration::from_secs(10), "both notices answered", || {
            sent() == 2 * i as u64
        })
        .await;
    }
    assert_eq!(sink.notices.lock().unwrap().len(), 20);
    // Two notices per auction may go out at once on two connections; never one per notice.
    let opened = sink.connections.load(SeqCst);
    assert!(opened <= 2, "20 notices opened {opened} connections");
}

/// Notices to one host that come together go out together: twenty auctions at once owe the
/// host forty notices, and within the linger they leave pipelined on one connection (eight
/// senders sending one each would open up to eight).
#[tokio::test]
async fn notices_to_one_host_go_out_pipelined_on_one_connection() {
    let (sink, a) = notice_sink_and_bidder().await;
    let host = sink.addr;
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\nbatch_linger_ms = 500\nbatch_max = 64\n\
         [[bidders]]\nname = \"a\"\nendpoint = \"{}\"\nnotice_hosts = [\"{host}\"]\nmax_connections = 32\n",
        a.endpoint()
    ))
    .await;
    let request = banner_request(0.1);
    let auctions: Vec<_> = (0..20).map(|_| auction(ex.addr, &request)).collect();
    for (status, _) in futures_util::future::join_all(auctions).await {
        assert_eq!(status, 200);
    }
    let m = ex.metrics.bidder_named("a").unwrap();
    testkit::time::wait_until(Duration::from_secs(10), "40 notices sent", || {
        m.notices.get(exchange::metrics::NoticeOutcome::Sent) == 40
    })
    .await;
    assert_eq!(sink.notices.lock().unwrap().len(), 40);
    assert_eq!(
        sink.connections.load(SeqCst),
        1,
        "one connection for the batch"
    );
}

/// The exchange's per-bidder rate cap is what protects a bidder that cannot refuse its own
/// overload fast enough (a one-poll bidder past about twice its capacity: BENCHMARKS.md,
/// "Overload"): whatever the exchange is offered, the capped bidder sees at most its rate plus a
/// one-second burst, the excess skips it without waiting, and the other bidders see everything.
#[tokio::test]
async fn a_rate_capped_bidder_sees_at_most_its_rate_and_the_others_see_every_auction() {
    let capped = ScriptedBidder::start(|r| {
        bids(
            r,
            "capped",
            |imp| json!({"id": "c", "impid": imp, "price": 2.0}),
        )
    })
    .await;
    let open = ScriptedBidder::start(|r| {
        bids(
            r,
            "open",
            |imp| json!({"id": "o", "impid": imp, "price": 1.0}),
        )
    })
    .await;
    let ex = exchange_from_toml(&format!(
        "[[bidders]]\nname = \"capped\"\nendpoint = \"{}\"\nmax_qps = 20\n\
         [[bidders]]\nname = \"open\"\nendpoint = \"{}\"\n",
        capped.endpoint(),
        open.endpoint()
    ))
    .await;
    // Both bidders answer at once; a 1 s tmax keeps "every auction has the open bidder's bid"
    // and "not late" true on a machine busy with the rest of the suite.
    let mut req = banner_request(0.1);
    req["tmax"] = json!(1000);
    let auctions = 200;
    let started = Instant::now();
    let mut winners = std::collections::HashMap::<String, usize>::new();
    for _ in 0..auctions / 10 {
        for (status, body) in
            futures_util::future::join_all((0..10).map(|_| auction(ex.addr, &req))).await
        {
            assert_eq!(
                status, 200,
                "every auction has the open bidder's bid at least"
            );
            let seat = body.unwrap()["seatbid"][0]["seat"]
                .as_str()
                .unwrap()
                .to_owned();
            *winners.entry(seat).or_default() += 1;
        }
    }
    let took = started.elapsed().as_secs_f64();
    let reached = capped.requests.lock().unwrap().len();
    // The bucket starts full (20) and refills 20 a second.
    let allowed = 20 + (20.0 * took).ceil() as usize;
    assert!(
        (20..=allowed).contains(&reached),
        "the capped bidder saw {reached} of {auctions} auctions in {took:.2} s; cap allows {allowed}"
    );
    assert!(
        reached < auctions,
        "{auctions} auctions in {took:.2} s never reached the cap; the test proves nothing"
    );
    let m = ex.metrics.bidder(0).unwrap();
    assert_eq!(
        m.skip_count(SkipReason::QpsCap) as usize,
        auctions - reached,
        "every auction the cap kept from the bidder is counted"
    );
    assert_eq!(m.outcome_count(BidderOutcome::Bid) as usize, reached);
    assert_eq!(winners.get("capped").copied().unwrap_or(0), reached);
    assert_eq!(
        winners.get("open").copied().unwrap_or(0),
        auctions - reached
    );
    assert_eq!(open.requests.lock().unwrap().len(), auctions);
    assert_eq!(ex.metrics.late_answers.get(), 0);
}

#[tokio::test]
async fn idle_notice_connections_are_bounded_and_closed_after_their_timeout() {
    use exchange::notice_client::{ClientSettings, NoticeClient};
    use exchange::outbound::NoticeHosts;
    let sink = ScriptedBidder::start(|_| no_bid()).await;
    let hosts = NoticeHosts::new("127.0.0.1", sink.addr.port(), &[]).unwrap();
    let target = hosts.check(&format!("http://{}/win", sink.addr)).unwrap();
    let settings = |max_idle_per_host| ClientSettings {
        allow_private_addresses: true,
        idle_timeout: Duration::from_millis(200),
        max_idle_per_host,
    };
    let client = NoticeClient::new(settings(4));
    client.get(&target, None, 1024).await.unwrap();
    assert_eq!(client.idle_connections(), 1, "kept for the next notice");
    client.close_idle();
    assert_eq!(client.idle_connections(), 1, "not idle long enough yet");
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.close_idle();
    assert_eq!(
        client.idle_connections(),
        0,
        "closed after the idle timeout"
    );
    let none_kept = NoticeClient::new(settings(0));
    none_kept.get(&target, None, 1024).await.unwrap();
    assert_eq!(
        none_kept.idle_connections(),
        0,
        "max_idle_per_host = 0 keeps none"
    );
}

/// A bidder that answers each request (chunked, as many servers do) and then closes the
/// connection without saying so: the exchange keeps it as idle, and finds it closed on the
/// next auction. The request never reached the bidder, so it is sent again on a fresh
/// connection: every auction gets its bid.
#[tokio::test]
async fn a_kept_connection_the_bidder_closed_is_replaced_without_losing_the_call() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            count.fetch_add(1, SeqCst);
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            let body = loop {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed before a whole request");
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).into_owned();
                let Some(end) = text.find("\r\n\r\n") else {
                    continue;
                };
                let length: usize = text[..end]
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                if got.len() >= end + 4 + length {
                    break got[end + 4..end + 4 + length].to_vec();
                }
            };
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let answer = json!({"id": request["id"], "seatbid": [{"seat": "c", "bid": [
                {"id": "c", "impid": request["imp"][0]["id"], "price": 1.0, "adm": "<div/>"}]}]})
            .to_string();
            let chunked = format!(
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{answer}\r\n0\r\n\r\n",
                answer.len()
            );
            s.write_all(chunked.as_bytes()).await.unwrap();
            drop(s);
        }
    });
    let ex = exchange("", &[("closing", format!("http://{addr}/bid"))]).await;
    for _ in 0..3 {
        let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
        assert_eq!(status, 200);
        assert_eq!(body.unwrap()["seatbid"][0]["seat"], "c");
    }
    assert_eq!(accepted.load(SeqCst), 3, "one fresh connection per auction");
    let m = ex.metrics.bidder(0).unwrap();
    assert_eq!(m.outcome_count(BidderOutcome::Bid), 3);
}
