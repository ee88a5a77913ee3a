#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Rate steps, ramps, closed loop, the response check, live progress and the capacity search,
//! each against a real hyper server on 127.0.0.1. They need real time (the generator's clock is
//! what is tested); bounds are wide, and percentiles are compared within one run.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{ok_json, serve, serve_counted, status};
use http::Response;
use http_body_util::Full;
use loadgen::capacity::{CapacitySpec, Stop, find_capacity};
use loadgen::{Arrivals, Corpus, LoadSpec, Progress, ResponseCheck, run, run_with_progress};

fn spec(url: String, arrivals: Arrivals, secs: f64) -> LoadSpec {
    let mut s = LoadSpec::new(url, 1.0, Duration::from_secs_f64(secs));
    s.arrivals = arrivals;
    s.connections = 8;
    s
}

fn corpus() -> Arc<Corpus> {
    Arc::new(Corpus::from_bodies(vec![Bytes::from_static(
        b"{\"id\":\"x\",\"imp\":[]}",
    )]))
}

/// A server that notes when each request arrived, relative to the first.
async fn recording_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<Instant>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let addr = serve(move |_| {
        s2.lock().unwrap().push(Instant::now());
        async { status(204) }
    })
    .await;
    (addr, seen)
}

/// Three steps of 0.5 s: exact counts per step, each step with its own figures, and the
/// server sees the rate change at the step boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_steps_have_their_own_figures() {
    let (addr, seen) = recording_server().await;
    let arrivals = Arrivals::Steps {
        from: 200.0,
        to: 600.0,
        step: 200.0,
    };
    let r = run(&spec(format!("http://{addr}/"), arrivals, 1.5), corpus())
        .await
        .unwrap();
    assert_eq!(r.sent, 100 + 200 + 300);
    assert_eq!(r.status.no_content_204, 600);
    assert_eq!(r.phases.len(), 3);
    let sent: Vec<u64> = r.phases.iter().map(|p| p.sent).collect();
    assert_eq!(sent, vec![100, 200, 300]);
    let offered: Vec<f64> = r.phases.iter().map(|p| p.rate_offered).collect();
    assert_eq!(offered, vec![200.0, 400.0, 600.0]);
    for p in &r.phases {
        assert_eq!(p.latency.len(), p.sent);
        assert!((p.rate_achieved() - p.rate_offered).abs() < 1e-6);
        assert!((p.success_share() - 1.0).abs() < 1e-9);
    }
    // Server side: more arrivals in the middle of each step than in the one before. Counts
    // rather than a tolerance around the expected 60/120/180, because a scheduler stall on a
    // loaded machine shifts arrivals by its length; it takes a stall of 0.1 s, right at a
    // window's end, to shift as many as separate two steps.
    let times = seen.lock().unwrap().clone();
    let t0 = times[0];
    let in_window = |a: f64, b: f64| {
        times
            .iter()
            .filter(|t| {
                let s = t.duration_since(t0).as_secs_f64();
                s >= a && s < b
            })
            .count()
    };
    // The middle of each step, away from the boundaries: 0.1..0.4 s of each.
    let middles: Vec<usize> = (0..3)
        .map(|k| {
            let base = 0.5 * f64::from(k);
            in_window(base + 0.1, base + 0.4)
        })
        .collect();
    assert!(
        middles[0] < middles[1] && middles[1] < middles[2],
        "arrivals in the middle of each step: {middles:?}, expected about [60, 120, 180]"
    );
    let json = r.to_json();
    assert_eq!(json["steps"].as_array().unwrap().len(), 3);
    assert_eq!(json["steps"][2]["sent"], 300);
    assert!(json["steps"][1]["latency_ms"]["p99"].is_f64());
    assert!(r.render_text().contains("offered/s"), "{}", r.render_text());
    // The HTML report has a row per step and stays well-formed.
    let html = loadgen::render_html(&r, "steps", &[]);
    let opt = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(&html, opt).unwrap();
    assert!(html.contains("Rate steps"));
    let rows: Vec<Vec<String>> = doc
        .descendants()
        .filter(|n| n.has_tag_name("tr"))
        .map(|tr| {
            tr.children()
                .filter(|c| c.has_tag_name("td"))
                .map(|td| td.text().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|cells| cells.len() == 8)
        .collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[2][..3], ["1", "600", "600"], "{rows:?}");
}

/// A ramp from 100/s to 500/s over 2 s sends the area under the line, more in its second
/// second than in its first: 200 then 400 by the schedule, which the timeline counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ramp_rises() {
    let (addr, seen) = recording_server().await;
    let arrivals = Arrivals::Ramp {
        from: 100.0,
        to: 500.0,
    };
    let r = run(&spec(format!("http://{addr}/"), arrivals, 2.0), corpus())
        .await
        .unwrap();
    assert_eq!(r.sent, 600);
    assert_eq!(r.completed, 600);
    assert!(r.phases.is_empty());
    let per_second: Vec<u64> = r.timeline.iter().map(|s| s.sent).collect();
    assert_eq!(per_second, [200, 400]);
    assert_eq!(seen.lock().unwrap().len(), 600);
}

/// Closed loop: no schedule, every connection sends back to back; nothing is dropped and the
/// offered rate is not defined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_sends_back_to_back() {
    let (addr, seen) = recording_server().await;
    let mut s = spec(format!("http://{addr}/"), Arrivals::Closed, 0.5);
    s.connections = 4;
    s.warmup = Duration::from_millis(200);
    let r = run(&s, corpus()).await.unwrap();
    assert!(r.sent > 100, "{r:?}");
    assert_eq!(r.completed, r.sent);
    assert_eq!(r.status.dropped, 0);
    assert_eq!(r.rate_offered, None);
    assert_eq!(r.latency.len(), r.sent);
    // The server saw the warm-up requests too.
    assert!(seen.lock().unwrap().len() as u64 > r.sent);
    assert!(r.to_json()["rate_offered"].is_null());
    assert!(
        r.render_text().contains("closed loop"),
        "{}",
        r.render_text()
    );
}

/// A server that stalls once for 1 s, 200 ms after its first request.
async fn stalls_once() -> std::net::SocketAddr {
    let start = Arc::new(std::sync::OnceLock::<Instant>::new());
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    serve(move |_| {
        let t0 = *start.get_or_init(Instant::now);
        let stall = t0.elapsed() >= Duration::from_millis(200)
            && !stalled.swap(true, std::sync::atomic::Ordering::SeqCst);
        async move {
            if stall {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            ok_json()
        }
    })
    .await
}

/// The contrast behind open loop: one 1 s stall, one connection. Closed loop waits politely
/// and its p99 stays small; open loop counts every request that was due during the stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_hides_a_stall_that_open_loop_shows() {
    let addr = stalls_once().await;
    let mut s = spec(format!("http://{addr}/"), Arrivals::Closed, 2.0);
    s.connections = 1;
    s.timeout = Duration::from_secs(5);
    let closed = run(&s, corpus()).await.unwrap();
    assert!(closed.percentile_ms(100.0) >= 950.0, "{closed:?}");

    // Same server shape, open loop at 300/s on that one connection (no growth: the stall
    // holds the only one, as it holds a whole server that stalls): a third of a second's
    // worth waited the stall out.
    let addr = stalls_once().await;
    s.url = format!("http://{addr}/");
    s.arrivals = Arrivals::Rate(300.0);
    s.max_connections = Some(1);
    let open = run(&s, corpus()).await.unwrap();
    assert!(open.percentile_ms(99.0) >= 500.0, "{open:?}");
    assert!(open.percentile_ms(99.9) >= 900.0, "{open:?}");
    // Closed loop's p99 stays far below open loop's: the stall hides in one request.
    assert!(
        closed.percentile_ms(99.0) * 5.0 < open.percentile_ms(99.0),
        "closed p99 {} against open p99 {}",
        closed.percentile_ms(99.0),
        open.percentile_ms(99.0)
    );
}

/// The BidResponse check counts valid and invalid 200s and ignores 204s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_check_counts_invalid_answers() {
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let n2 = Arc::clone(&n);
    let addr = serve(move |_| {
        let i = n2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move {
            match i % 4 {
                0 => Response::new(Full::new(Bytes::from_static(
                    b"{\"id\":\"1\",\"seatbid\":[{\"bid\":[{\"id\":\"b\",\"impid\":\"1\",\"price\":1.5}]}]}",
                ))),
                1 => Response::new(Full::new(Bytes::from_static(b"{\"id\":\"1\"}"))),
                2 => Response::new(Full::new(Bytes::from_static(
                    b"{\"seatbid\":[{\"bid\":[{\"id\":\"b\",\"price\":1}]}]}",
                ))),
                _ => status(204),
            }
        }
    })
    .await;
    let mut s = spec(format!("http://{addr}/"), Arrivals::Rate(400.0), 0.5);
    s.connections = 1;
    s.check = ResponseCheck::BidResponse;
    let r = run(&s, corpus()).await.unwrap();
    assert_eq!(r.sent, 200);
    let c = r.check.clone().unwrap();
    assert_eq!((c.checked, c.valid, c.invalid), (150, 100, 50));
    let why = c.first_error.unwrap();
    assert!(why.contains("BidResponse"), "{why}");
    // 2xx answers that failed the check are not successes.
    assert!((r.success_share() - 0.75).abs() < 1e-9);
    assert_eq!(r.to_json()["check"]["invalid"], 50);
    assert!(r.render_text().contains("50 invalid"));

    // Without a check, nothing is counted.
    s.check = ResponseCheck::None;
    let r = run(&s, corpus()).await.unwrap();
    assert!(r.check.is_none());
    assert!(r.to_json()["check"].is_null());
}

/// The live counters end consistent with the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_counts_everything() {
    let addr = serve(|_| async { ok_json() }).await;
    let mut s = spec(format!("http://{addr}/"), Arrivals::Rate(500.0), 0.4);
    s.warmup = Duration::from_millis(200);
    let progress = Progress::new();
    let r = run_with_progress(&s, corpus(), Arc::clone(&progress))
        .await
        .unwrap();
    let snap = progress.snapshot();
    assert_eq!(r.sent, 200);
    assert_eq!(snap.issued, 300, "warm-up included");
    assert_eq!(snap.ended, 300);
    assert_eq!(snap.in_flight, 0);
    assert_eq!(snap.errors, 0);
    assert!(snap.measuring);
    assert!(snap.p99_ms.is_some());
}

fn quick_capacity(slo_ms: u64) -> CapacitySpec {
    let mut c = CapacitySpec::new(Duration::from_millis(slo_ms));
    c.start_rate = 100.0;
    c.max_rate = 400.0;
    c.min_rate = 50.0;
    c.pause = Duration::from_millis(50);
    c
}

/// A fast server passes every rate up to the ceiling: 100, 200, 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_search_climbs_to_the_ceiling() {
    let addr = serve(|_| async { status(204) }).await;
    let base = spec(format!("http://{addr}/"), Arrivals::Rate(1.0), 0.3);
    let mut lines = Vec::new();
    // A 5 s p99 SLO: a loopback 204 meets it even on a machine busy with the whole suite, so
    // the climb is decided by the ceiling alone.
    let result = find_capacity(&base, corpus(), &quick_capacity(5000), |t| {
        lines.push(t.rate);
    })
    .await
    .unwrap();
    assert_eq!(lines, vec![100.0, 200.0, 400.0]);
    assert_eq!(result.capacity, Some(400.0));
    assert_eq!(result.at_capacity().unwrap().report.sent, 120);
    let json = result.to_json();
    assert_eq!(json["capacity"], 400.0);
    assert_eq!(json["trials"].as_array().unwrap().len(), 3);
    assert_eq!(json["at_capacity"]["sent"], 120);
    assert!(result.render_text().contains("capacity: 400/s"));
}

/// A server that fails every request has no capacity: the search walks down to the floor,
/// trying each failed rate twice, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_search_reports_none_when_everything_fails() {
    let addr = serve(|_| async { status(503) }).await;
    let base = spec(format!("http://{addr}/"), Arrivals::Rate(1.0), 0.2);
    let result = find_capacity(&base, corpus(), &quick_capacity(500), |_| {})
        .await
        .unwrap();
    let rates: Vec<f64> = result.trials.iter().map(|t| t.rate).collect();
    assert_eq!(rates, vec![100.0, 100.0, 50.0, 50.0]);
    assert_eq!(result.capacity, None);
    assert!(result.at_capacity().is_none());
    assert!(result.to_json()["capacity"].is_null());
    assert!(result.render_text().contains("none found"));
}

/// A timed-out request keeps its connection: the late answer is read and discarded, so an
/// overloaded target does not make the generator reconnect once per timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_keep_their_connections() {
    let (addr, accepted) = serve_counted(|_| async {
        tokio::time::sleep(Duration::from_millis(60)).await;
        ok_json()
    })
    .await;
    let mut s = spec(format!("http://{addr}/"), Arrivals::Rate(40.0), 0.5);
    s.connections = 4;
    s.timeout = Duration::from_millis(30);
    let r = run(&s, corpus()).await.unwrap();
    assert_eq!(r.sent, 20);
    assert_eq!(r.status.timeout + r.status.dropped, 20, "{r:?}");
    assert!(r.status.timeout > 0, "{r:?}");
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::Relaxed),
        4,
        "no reconnection after a timeout"
    );
}

/// A target 150 ms slow whatever the load, under a 5 ms SLO: the search walks down three rates
/// (each tried twice), sees the p99 stay put, and stops saying so, instead of halving down to
/// its lowest rate. The delay is long against the machine's stalls: "stays put" means falling
/// by less than `FLOOR_FALL` (10%), and at 30 ms a 3 ms stall in both trials of the first rate
/// made the walk look like it was falling (seen under parallel builds). Enough connections
/// that the delay never queues (64 at 150 ms: 426/s against 100/s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_search_stops_at_a_latency_floor() {
    let addr = serve(|_| async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        status(204)
    })
    .await;
    let mut base = spec(format!("http://{addr}/"), Arrivals::Rate(1.0), 0.2);
    base.connections = 64;
    let mut cap = quick_capacity(5);
    cap.min_rate = 1.0;
    let result = find_capacity(&base, corpus(), &cap, |_| {}).await.unwrap();
    let rates: Vec<f64> = result.trials.iter().map(|t| t.rate).collect();
    assert_eq!(rates, vec![100.0, 100.0, 50.0, 50.0, 25.0, 25.0]);
    assert_eq!(result.capacity, None);
    let Stop::LatencyFloor { rates, p99_ms } = &result.stop else {
        panic!("expected a latency floor, got {:?}", result.stop);
    };
    assert_eq!(rates, &[100.0, 50.0, 25.0]);
    assert!(p99_ms.iter().all(|p| *p >= 150.0), "{p99_ms:?}");
    assert!(result.render_text().contains("did not fall with the rate"));
    assert_eq!(result.to_json()["stop"]["reason"], "latency_floor");
}
