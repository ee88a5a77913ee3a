//! `gavel load` as a CI gate: the binary run against loopback servers, for a second or less
//! each, and its exit status, stderr and JSON verdict read. Statuses: 0 passed, 2 usage, 3 a
//! threshold missed, 4 limited by the generator, 5 nothing answered.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use testkit::TempDir;

/// What the test server saw: each request's method and its `X-Run` header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A loopback HTTP/1.1 server answering 200 `ok` after `delay`.
async fn server(delay: Duration) -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let x_run = req
                        .headers()
                        .get("x-run")
                        .map(|v| v.to_str().unwrap().to_owned());
                    log.lock().unwrap().push((req.method().to_string(), x_run));
                    async move {
                        tokio::time::sleep(delay).await;
                        Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                            Bytes::from_static(b"ok"),
                        )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// Runs `gavel load ARGS` off the runtime (the servers above keep serving meanwhile).
async fn load(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_gavel"))
            .arg("load")
            .arg("--no-progress")
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn text(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_run_that_meets_its_thresholds_exits_zero() {
    let (addr, seen) = server(Duration::ZERO).await;
    let dir = TempDir::new("load-gate-pass");
    let json = dir.join("run.json");
    let url = format!("http://{addr}/asset/logo.png");
    let out = load(&[
        // The tests share two cores: a scheduler stall would fail a run as LIMITED (the
        // 4 below), which is not what this one is about.
        "--allow-limited",
        "--url",
        &url,
        "--method",
        "GET",
        "--header",
        "X-Run: ci 7",
        "--rate",
        "100",
        "--duration",
        "500ms",
        // Bounds no loopback answer misses on a loaded machine: this checks the gate, not
        // the machine's speed.
        "--fail-if",
        "p99>5s",
        "--fail-if",
        "errors>0",
        "--fail-if",
        "rps<1",
        "--slo",
        "10s:100%",
        "--json",
        json.to_str().unwrap(),
    ])
    .await;
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("verdict     passed"), "{stdout}");
    assert!(stdout.contains("dropped     0 never sent"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["gate"]["passed"], true);
    assert_eq!(report["gate"]["fail_if"][1], "errors>0");
    assert_eq!(report["dropped"], 0);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 50);
    assert!(
        seen.iter()
            .all(|(m, x)| m == "GET" && x.as_deref() == Some("ci 7")),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_threshold_exits_3_with_one_line_per_reason() {
    // Every answer takes 30 ms: a 5 ms p99 and a 99% SLO at 5 ms are both missed.
    let (addr, _) = server(Duration::from_millis(30)).await;
    let dir = TempDir::new("load-gate-miss");
    let json = dir.join("run.json");
    let url = format!("http://{addr}/");
    let args = [
        "--allow-limited",
        "--url",
        &url,
        "--method",
        "get",
        "--rate",
        "50",
        "--duration",
        "400ms",
        "--fail-if",
        "p99>5ms",
        "--fail-if",
        "dropped>0",
        "--slo",
        "5ms",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = text(&load(&args).await);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("gavel: --slo: 0.000% of requests due"),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("gavel: --fail-if p99>5ms: p99 latency was"),
        "{stderr}"
    );
    assert!(stdout.contains("verdict     FAILED (--slo"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["gate"]["passed"], false);
    assert_eq!(report["gate"]["failures"][1]["kind"], "threshold");

    // --report-only: the same verdict, written and shown, and a zero status.
    let mut report_only = args.to_vec();
    report_only.push("--report-only");
    let (code, stdout, _) = text(&load(&report_only).await);
    assert_eq!(code, 0);
    assert!(stdout.contains("verdict     FAILED"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generator_short_of_connections_exits_4() {
    // 200/s on one connection to a 50 ms target needs ten: the generator's cap limits the
    // run, whatever the target could do.
    let (addr, _) = server(Duration::from_millis(50)).await;
    let url = format!("http://{addr}/");
    let (code, stdout, stderr) = text(
        &load(&[
            "--url",
            &url,
            "--rate",
            "200",
            "--duration",
            "500ms",
            "--connections",
            "1",
            "--max-connections",
            "1",
            "--fail-if",
            "dropped>0",
        ])
        .await,
    );
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(stdout.starts_with("LIMITED"), "{stdout}");
    assert!(
        stderr.starts_with("gavel: limited by the generator's connections:"),
        "{stderr}"
    );
    // The threshold missed too is still said, after the limit (and after the CPU's, when
    // the machine stalled the generator as well).
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("gavel: --fail-if dropped>0: dropped was"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_answered_exits_5() {
    // A port nobody listens on: every connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let (code, stdout, stderr) = text(
        &load(&[
            "--allow-limited",
            "--url",
            &url,
            "--rate",
            "20",
            "--duration",
            "250ms",
        ])
        .await,
    );
    assert_eq!(code, 5, "{stdout}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "gavel: nothing answered: none of 5 requests got an HTTP answer (connect error 5"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2_naming_what_is_wrong() {
    let dir = TempDir::new("load-gate-usage");
    let body = dir.file("one.json", "{\"id\":\"1\"}");
    let body = body.to_str().unwrap();
    let url = "http://127.0.0.1:9/";
    for (args, named) in [
        (vec!["--fail-if", "p98>5ms"], "unknown metric `p98`"),
        (vec!["--fail-if", "p99>5"], "needs a unit"),
        (vec!["--fail-if", "errors>1.5"], "neither a count"),
        (vec!["--slo", "100ms:99"], "percentage"),
        (vec!["--header", "Host: example.com"], "set by the client"),
        (vec!["--header", "no colon"], "Name: value"),
        (vec!["--method", "PUT"], "PUT"),
        (
            vec!["--method", "HEAD", "--requests", body],
            "HEAD request has no body",
        ),
        (
            vec!["--ca-file", body],
            "--ca-file: is for https:// URLs only",
        ),
        (
            vec![
                "--find-capacity",
                "--slo-p99",
                "5ms",
                "--fail-if",
                "p99>5ms",
            ],
            "--fail-if",
        ),
    ] {
        let mut all = vec!["--url", url, "--duration", "100ms"];
        all.extend(&args);
        let (code, stdout, stderr) = text(&load(&all).await);
        assert_eq!(code, 2, "{args:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing ran: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_target_with_its_private_ca() {
    let dir = TempDir::new("load-gate-tls");
    let certs = testkit::tls::generate(dir.path(), "gate");
    let tls = Arc::new(http_front::ServerTls::load(&certs.cert, &certs.key).unwrap());
    let config = sim::FleetConfig {
        tls: Some(tls),
        ..sim::FleetConfig::local(3, vec![sim::BidderProfile::instant("secure", 1.0)])
    };
    let fleet = sim::start(config, std::future::pending()).await.unwrap();
    let url = fleet.bidders[0].endpoint.clone();
    let ca = certs.ca.to_str().unwrap();
    let run = [
        "--allow-limited",
        "--url",
        &url,
        "--rate",
        "40",
        "--duration",
        "500ms",
    ];
    let mut trusted = run.to_vec();
    trusted.extend(["--ca-file", ca, "--fail-if", "errors>0"]);
    let (code, stdout, stderr) = text(&load(&trusted).await);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(fleet.stats_of("secure").unwrap().requests, 20);
    // The system's roots do not know the test CA: no handshake, nothing answered.
    let (code, _, stderr) = text(&load(&run).await);
    assert_eq!(code, 5, "{stderr}");
    assert_eq!(fleet.stats_of("secure").unwrap().requests, 20);
}
