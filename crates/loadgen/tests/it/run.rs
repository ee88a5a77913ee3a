#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end runs against a real hyper server on 127.0.0.1. These test a clock (the
//! generator's latency accounting), so they need real time: stalls are a second long and the
//! bounds on them are wide, and "fast" is judged against the stall in the same run, never as
//! an absolute figure a loaded machine could miss.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{ok_json, serve, serve_watched, status};
use loadgen::{Corpus, LoadError, LoadSpec, run};

fn spec(url: String, rate: f64, secs: f64) -> LoadSpec {
    let mut s = LoadSpec::new(url, rate, Duration::from_secs_f64(secs));
    s.connections = 8;
    s.timeout = Duration::from_secs(2);
    s
}

fn tiny_corpus() -> Arc<Corpus> {
    Arc::new(Corpus::from_bodies(vec![Bytes::from_static(
        b"{\"id\":\"x\",\"imp\":[]}",
    )]))
}

/// The schedule is deterministic: 2000/s for 1 s is exactly 2000 requests, all answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_is_exact() {
    let served = Arc::new(AtomicU64::new(0));
    let s2 = Arc::clone(&served);
    let addr = serve(move |_| {
        s2.fetch_add(1, Ordering::Relaxed);
        async { status(204) }
    })
    .await;
    let started = Instant::now();
    let r = run(
        &spec(format!("http://{addr}/auction"), 2000.0, 1.0),
        tiny_corpus(),
    )
    .await
    .unwrap();
    let wall = started.elapsed();
    assert_eq!(r.sent, 2000);
    assert_eq!(r.completed, r.sent);
    assert_eq!(r.status.no_content_204, 2000);
    assert_eq!(served.load(Ordering::Relaxed), 2000);
    assert_eq!(r.latency.len(), 2000);
    assert_eq!(r.timeline.len(), 1);
    assert_eq!((r.timeline[0].sent, r.timeline[0].completed), (2000, 2000));
    assert!(
        (r.rate_achieved - 2000.0).abs() < 1e-9,
        "{}",
        r.rate_achieved
    );
    assert!(r.elapsed >= Duration::from_millis(990), "{:?}", r.elapsed);
    assert!(wall < Duration::from_secs(3), "{wall:?}");
}

/// A server that holds its only connection for ~1 s once. Open-loop latency must show the
/// stall in p99; the naive service time (send to answer) must not, beyond its single max.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_shows_in_percentiles() {
    let first = Arc::new(std::sync::OnceLock::<Instant>::new());
    let stalled = Arc::new(AtomicBool::new(false));
    let addr = {
        let (first, stalled) = (Arc::clone(&first), Arc::clone(&stalled));
        serve(move |_| {
            let t0 = *first.get_or_init(Instant::now);
            let stall =
                t0.elapsed() >= Duration::from_millis(300) && !stalled.swap(true, Ordering::SeqCst);
            async move {
                if stall {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                ok_json()
            }
        })
        .await
    };
    let mut s = spec(format!("http://{addr}/"), 500.0, 2.0);
    s.connections = 1;
    // One connection, never more: the stall holds it, as a whole server that stalls would.
    s.max_connections = Some(1);
    s.timeout = Duration::from_secs(5);
    let r = run(&s, tiny_corpus()).await.unwrap();
    eprint!("{}", r.render_text());
    assert_eq!(r.sent, 1000);
    assert_eq!(r.completed, 1000);
    // About half of the requests were due during the stall and waited for it.
    assert!(
        r.percentile_ms(99.0) >= 500.0,
        "p99 {}",
        r.percentile_ms(99.0)
    );
    assert!(
        r.percentile_ms(90.0) >= 300.0,
        "p90 {}",
        r.percentile_ms(90.0)
    );
    assert!(
        r.percentile_ms(100.0) >= 950.0,
        "max {}",
        r.percentile_ms(100.0)
    );
    // Measured per request, only the stalled one was slow: p99 stays small.
    let naive_p99 = r.service_time.value_at_percentile(99.0) as f64 / 1000.0;
    let naive_max = r.service_time.max() as f64 / 1000.0;
    assert!(
        r.percentile_ms(99.0) > 5.0 * naive_p99,
        "open-loop p99 {} against naive p99 {naive_p99}",
        r.percentile_ms(99.0)
    );
    assert!(naive_max >= 950.0, "naive max {naive_max}");
    // The timeline puts the stall in the second the requests were scheduled in.
    assert!(r.timeline[0].p99_ms >= 500.0, "{:?}", r.timeline);
    assert!(r.share_within(Duration::from_millis(100)) < 0.8);
}

/// Bodies say which status to answer; every class lands in its counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_are_classified() {
    let addr = serve(|req| {
        let code: u16 = std::str::from_utf8(&req.body).unwrap().parse().unwrap();
        async move { status(code) }
    })
    .await;
    let codes = [200u16, 201, 204, 302, 404, 503];
    let corpus = Corpus::from_bodies(codes.iter().map(|c| Bytes::from(c.to_string())).collect());
    let r = run(
        &spec(format!("http://{addr}/"), 300.0, 0.2),
        Arc::new(corpus),
    )
    .await
    .unwrap();
    let s = &r.status;
    assert_eq!(r.sent, 60);
    assert_eq!(
        (
            s.ok_200,
            s.other_2xx,
            s.no_content_204,
            s.other_status,
            s.client_4xx,
            s.server_5xx
        ),
        (10, 10, 10, 10, 10, 10)
    );
    assert_eq!(s.by_code.len(), 6);
    assert!(s.by_code.values().all(|&n| n == 10));
    assert_eq!(s.failed(), 0);
    assert_eq!(r.completed, 60);
}

/// An answer later than the timeout is a timeout, recorded at the timeout in the latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_time_out() {
    let addr = serve(|req| {
        let slow = req.body.as_ref() == b"slow";
        async move {
            if slow {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            ok_json()
        }
    })
    .await;
    let corpus = Corpus::from_bodies(vec![
        Bytes::from_static(b"fast"),
        Bytes::from_static(b"slow"),
    ]);
    // A 1 s timeout: the fast answers come within it even on a machine busy with the whole
    // suite, and the slow ones (30 s) never do.
    let mut s = spec(format!("http://{addr}/"), 20.0, 0.5);
    s.timeout = Duration::from_secs(1);
    s.connections = 10;
    let started = Instant::now();
    let r = run(&s, Arc::new(corpus)).await.unwrap();
    // The run ends by duration + timeout + one timeout of draining, never waiting out 30 s.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(r.sent, 10);
    assert_eq!((r.status.ok_200, r.status.timeout), (5, 5));
    assert_eq!(r.completed, 5);
    assert_eq!(r.latency.len(), 10);
    // Timeouts count at exactly the timeout.
    let max = r.percentile_ms(100.0);
    assert!((999.0..=1001.0).contains(&max), "max {max}");
    assert!((r.share_within(Duration::from_millis(500)) - 0.5).abs() < 1e-9);
    assert_eq!(r.timeline[0].errors, 5);
}

/// Nobody listening: every request is a connection error, and the run still ends on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_are_counted() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let r = run(
        &spec(format!("http://127.0.0.1:{port}/"), 50.0, 0.2),
        tiny_corpus(),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(r.sent, 10);
    assert_eq!(r.status.connect_error, 10);
    assert_eq!(r.completed, 0);
    assert!(r.latency.is_empty());
    assert!(r.share_within(Duration::from_secs(1)).abs() < 1e-12);
    // Every format gives the dropped requests their own figure.
    let text = r.render_text();
    let line = format!("dropped     {} never sent", r.status.dropped);
    assert!(text.contains(&line), "{text}");
    let j = r.to_json();
    assert_eq!(j["dropped"], r.status.dropped);
    let share = r.status.dropped as f64 / 300.0;
    assert!((j["dropped_share"].as_f64().unwrap() - share).abs() < 1e-12);
    let html = loadgen::render_html(&r, "overload", &[]);
    assert!(html.contains("dropped, never sent"), "{html}");
}

/// More load than one slow connection can carry. A request that gets the connection with
/// little budget left is sent and times out; several requests that come due while the
/// connection is held past their deadline are dropped unsent. Every one is accounted for,
/// and the run ends within duration + timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_drops_and_accounts_for_everything() {
    let addr = serve(|_| async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ok_json()
    })
    .await;
    let mut s = spec(format!("http://{addr}/"), 1000.0, 0.3);
    s.connections = 1;
    s.timeout = Duration::from_millis(50);
    let started = Instant::now();
    let r = run(&s, tiny_corpus()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(r.sent, 300);
    assert_eq!(r.status.answered() + r.status.failed(), r.sent);
    assert_eq!(r.completed, 0, "{:?}", r.status);
    assert!(r.status.timeout > 0, "{:?}", r.status);
    assert!(r.status.dropped > 0, "{:?}", r.status);
    assert_eq!(r.status.timeout + r.status.dropped, 300, "{:?}", r.status);
    // Timed-out requests sit at the timeout in the histogram; dropped ones, never sent, are
    // in no latency figure.
    assert_eq!(r.latency.len(), r.status.timeout);
    assert!((49.9..=50.1).contains(&r.percentile_ms(50.0)));
    assert!(r.share_within(Duration::from_secs(1)).abs() < 1e-12);
}

/// Warm-up requests are sent but excluded from every figure; the warm-up runs at the first
/// rate, or at its own (400/s for 0.5 s here, before the measured 200/s for 0.5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_is_excluded() {
    let served = Arc::new(AtomicU64::new(0));
    let s2 = Arc::clone(&served);
    let addr = serve(move |_| {
        s2.fetch_add(1, Ordering::Relaxed);
        async { ok_json() }
    })
    .await;
    for (warmup_rate, all_served) in [(None, 200), (Some(400.0), 300)] {
        served.store(0, Ordering::Relaxed);
        let mut s = spec(format!("http://{addr}/"), 200.0, 0.5);
        s.warmup = Duration::from_millis(500);
        s.warmup_rate = warmup_rate;
        let r = run(&s, tiny_corpus()).await.unwrap();
        assert_eq!(
            served.load(Ordering::Relaxed),
            all_served,
            "{warmup_rate:?}"
        );
        assert_eq!(r.sent, 100);
        assert_eq!(r.completed, 100);
        assert_eq!(r.latency.len(), 100);
        assert_eq!(r.timeline.len(), 1);
        assert_eq!(r.timeline[0].sent, 100);
    }
}

/// One timeline entry per second, attributed by scheduled time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_has_every_second() {
    let addr = serve(|_| async { ok_json() }).await;
    let r = run(&spec(format!("http://{addr}/"), 50.0, 2.5), tiny_corpus())
        .await
        .unwrap();
    let per: Vec<(u32, u64, u64)> = r
        .timeline
        .iter()
        .map(|s| (s.second, s.sent, s.completed))
        .collect();
    assert_eq!(per, vec![(0, 50, 50), (1, 50, 50), (2, 25, 25)]);
    assert!(
        r.timeline
            .iter()
            .all(|s| s.p50_ms > 0.0 && s.p99_ms >= s.p50_ms)
    );
}

/// A server that closes after every answer: the worker reconnects, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_connection_close() {
    let addr = serve(|_| async {
        let mut r = ok_json();
        r.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
        r
    })
    .await;
    let mut s = spec(format!("http://{addr}/"), 200.0, 0.5);
    s.connections = 2;
    let r = run(&s, tiny_corpus()).await.unwrap();
    assert_eq!(r.sent, 100);
    assert_eq!(r.status.ok_200, 100, "{:?}", r.status);
}

/// Bodies are sent as given, round robin, as JSON POSTs to the URL's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_corpus_round_robin() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = serve(move |req| {
        assert_eq!(req.head.method, http::Method::POST);
        assert_eq!(req.head.uri.path(), "/openrtb2/auction");
        assert_eq!(req.head.uri.query(), Some("src=test"));
        assert_eq!(
            req.head.headers[http::header::CONTENT_TYPE],
            "application/json"
        );
        assert!(req.head.headers.contains_key(http::header::HOST));
        seen2.lock().unwrap().push(req.body);
        async { ok_json() }
    })
    .await;
    let corpus = Corpus::from_bodies(vec![
        Bytes::from_static(b"{\"n\":0}"),
        Bytes::from_static(b"{\"n\":1}"),
        Bytes::from_static(b"{\"n\":2}"),
    ]);
    let mut s = spec(
        format!("http://{addr}/openrtb2/auction?src=test"),
        100.0,
        0.3,
    );
    s.connections = 1;
    let r = run(&s, Arc::new(corpus)).await.unwrap();
    assert_eq!(r.status.ok_200, 30);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 30);
    for (i, body) in seen.iter().enumerate() {
        assert_eq!(body.as_ref(), format!("{{\"n\":{}}}", i % 3).as_bytes());
    }
}

#[tokio::test]
async fn refuses_bad_input() {
    let mut s = spec("http://127.0.0.1:9/".into(), 0.0, 1.0);
    let e = run(&s, tiny_corpus()).await.unwrap_err();
    assert!(
        matches!(e, LoadError::InvalidSpec { field: "rate", .. }),
        "{e}"
    );
    s.arrivals = loadgen::Arrivals::Rate(10.0);
    s.connections = 0;
    let e = run(&s, tiny_corpus()).await.unwrap_err();
    assert!(e.to_string().contains("connections"), "{e}");
    s.connections = 1;
    let e = run(&s, Arc::new(Corpus::from_bodies(vec![])))
        .await
        .unwrap_err();
    assert!(matches!(e, LoadError::EmptyCorpus { .. }), "{e}");
    s.url = "ftp://127.0.0.1:9/".into();
    let e = run(&s, tiny_corpus()).await.unwrap_err();
    assert!(matches!(e, LoadError::BadUrl { .. }), "{e}");
}

/// The JSON report has the documented keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_report_keys() {
    let addr = serve(|_| async { ok_json() }).await;
    let r = run(&spec(format!("http://{addr}/"), 100.0, 0.2), tiny_corpus())
        .await
        .unwrap();
    let j = r.to_json();
    for k in [
        "sent",
        "completed",
        "dropped",
        "dropped_share",
        "rate_achieved",
        "status",
        "latency_ms",
        "timeline",
    ] {
        assert!(j.get(k).is_some(), "missing {k} in {j}");
    }
    assert_eq!(j["sent"], 20);
    assert_eq!(j["completed"], 20);
    for k in [
        "ok_200",
        "no_content_204",
        "other_2xx",
        "client_4xx",
        "server_5xx",
        "timeout",
        "connect_error",
        "other_error",
        "dropped",
        "by_code",
    ] {
        assert!(j["status"].get(k).is_some(), "missing status.{k} in {j}");
    }
    assert_eq!(j["status"]["by_code"]["200"], 20);
    for k in ["p50", "p90", "p99", "p999", "p9999", "max"] {
        assert!(j["latency_ms"][k].is_f64(), "missing latency_ms.{k} in {j}");
    }
    let t0 = &j["timeline"][0];
    for k in [
        "second",
        "sent",
        "completed",
        "errors",
        "p50_ms",
        "p99_ms",
        "max_ms",
    ] {
        assert!(t0.get(k).is_some(), "missing timeline[0].{k} in {j}");
    }
    let text = r.render_text();
    // After any LIMITED line (a loaded machine may make the generator late: not asserted).
    assert!(
        text.contains("\nsent 20  completed 20  rate 100.0/s")
            || text.starts_with("sent 20  completed 20  rate 100.0/s"),
        "{text}"
    );
    assert!(text.contains("status      200: 20\n"), "{text}");
}

/// Connections stay open until the run's last answer: workers left idle when the schedule runs
/// out do not close theirs while others still wait, which would put hundreds of closes on the
/// server in the run's last moments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_connection_closes_before_the_last_answer() {
    let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let a2 = Arc::clone(&answered);
    let server = serve_watched(move |_| {
        let a2 = Arc::clone(&a2);
        async move {
            // Long enough that the idle workers have long seen the end of the schedule.
            tokio::time::sleep(Duration::from_millis(150)).await;
            a2.lock().unwrap().push(Instant::now());
            status(204)
        }
    })
    .await;
    let r = run(
        &spec(format!("http://{}/auction", server.addr), 20.0, 0.5),
        tiny_corpus(),
    )
    .await
    .unwrap();
    assert_eq!(r.completed, 10);
    let last_answer = *answered.lock().unwrap().iter().max().unwrap();
    // The run has returned, so every worker has dropped its connection; give the server's
    // connection tasks a moment to see it.
    let mut waited = 0;
    while server.closed.lock().unwrap().len() < 8 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    let closed = server.closed.lock().unwrap().clone();
    assert_eq!(closed.len(), 8, "all 8 connections closed at the end");
    let early = closed.iter().filter(|c| **c < last_answer).count();
    assert_eq!(
        early, 0,
        "{early} of 8 connections closed before the last answer"
    );
}
