//! The drain of a real `gavel exchange` process, in front of a `gavel sim` bidder, under
//! steady load: SIGTERM turns `/readyz` to
//! 503 at once while the listener still accepts; every request sent during the grace is
//! answered (no connect error, no failure), the auctions in flight when the listener closes
//! are answered (a kept-alive connection's with `Connection: close`), then connections are
//! refused and the process exits 0 within grace + timeout, saying each phase.
//!
//! The grace comes from the environment (`GAVEL_EXCHANGE__HTTP__DRAIN_GRACE_MS`) over a file
//! that says 0: the exchange's test that a variable wins over its file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader, Read as _};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use testkit::TempDir;
use tokio::net::TcpStream;

/// How long each auction stays at the bidder: longer than the gap between sends, so that
/// auctions are always in flight, and in flight when the listener closes.
const BIDDER_DELAY: Duration = Duration::from_millis(400);
const GRACE: Duration = Duration::from_millis(1_500);
const TIMEOUT: Duration = Duration::from_millis(3_000);
/// A steady 40 auctions a second, each on a fresh connection.
const SEND_EVERY: Duration = Duration::from_millis(25);
/// Requests sent this close to the end of the grace may meet the listener closing (a
/// connection the kernel took but the loop never accepted is reset); earlier ones may not.
const MARGIN: Duration = Duration::from_millis(100);

/// A `gavel sim` bidder that answers every request after [`BIDDER_DELAY`], with the exchange
/// configuration it writes (its `[[bidders]]` section) at `config`; the process is the caller's.
fn sim_fleet(dir: &TempDir, config: &std::path::Path) -> std::process::Child {
    let profiles = dir.file(
        "profiles.toml",
        &format!(
            "[[bidders]]\nname = \"steady\"\nprice = {{ kind = \"fixed\", cpm = 1.5 }}\n\
             latency = {{ kind = \"fixed\", ms = {} }}\n",
            BIDDER_DELAY.as_millis()
        ),
    );
    let mut sim = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(["sim", "--profiles"])
        .arg(&profiles)
        .arg("--write-bidders")
        .arg(config)
        // Ends by itself should the test fail before it stops it.
        .args(["--duration", "120s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(sim.stdout.take().unwrap()).lines();
    for line in lines {
        if line.unwrap().starts_with("wrote the [[bidders]] section") {
            return sim;
        }
    }
    let _ = sim.kill();
    let _ = sim.wait();
    panic!("gavel sim never wrote its bidders");
}

fn auction_body() -> String {
    json!({"id": "r", "tmax": 1500, "imp": [{"id": "1", "banner": {"w": 300, "h": 250}}],
        "site": {"domain": "a.example"}})
    .to_string()
}

/// An auction the load sent: when, and its outcome to come.
type Sent = (Instant, tokio::task::JoinHandle<Result<u16, String>>);

/// One auction on a fresh connection: its status, or the step that failed.
async fn auction(addr: SocketAddr) -> Result<u16, String> {
    let a = testkit::http::send(addr, "POST", "/openrtb2/auction", auction_body()).await?;
    let body: Value = serde_json::from_slice(&a.body).map_err(|e| format!("body: {e}"))?;
    if a.status == 200 && !body["seatbid"][0]["bid"][0]["adm"].is_string() {
        return Err(format!("200 without the bid: {body}"));
    }
    Ok(a.status.as_u16())
}

/// Auctions one after another on one kept-alive connection until the exchange closes it:
/// each answer's status and whether it said `Connection: close`.
async fn kept_alive(addr: SocketAddr) -> Vec<(u16, bool)> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut answers = Vec::new();
    loop {
        if sender.ready().await.is_err() {
            return answers;
        }
        let req = Request::post("/openrtb2/auction")
            .header("host", addr.to_string())
            .body(Full::new(Bytes::from(auction_body())))
            .unwrap();
        let Ok(resp) = sender.send_request(req).await else {
            return answers;
        };
        let close = resp
            .headers()
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        answers.push((status, close));
        if close {
            return answers;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_under_load_without_a_failed_request() {
    let dir = TempDir::new("drain");
    let config = dir.join("exchange.toml");
    let mut sim = sim_fleet(&dir, &config);
    let bidders = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{bidders}\n[deadline]\nmax_tmax_ms = 2000\n\
             [http]\ndrain_grace_ms = 0\ndrain_timeout_ms = {}\n",
            TIMEOUT.as_millis()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(["exchange", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .env(
            "GAVEL_EXCHANGE__HTTP__DRAIN_GRACE_MS",
            GRACE.as_millis().to_string(),
        )
        .env_remove("GAVEL_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr: SocketAddr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    let admin = common::admin_addr(&first);
    assert_eq!(
        testkit::http::call(admin, "GET", "/readyz", "").await,
        (200, "ready\n".to_owned())
    );
    assert_eq!(
        testkit::http::call(addr, "GET", "/readyz", "").await,
        (200, "ready\n".to_owned())
    );

    // The load: a steady rate of auctions, each on its own connection, until well after the
    // listener closed; and one kept-alive connection asking one auction after another.
    let sent: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let load = {
        let sent = sent.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SEND_EVERY);
            loop {
                tick.tick().await;
                let call = tokio::spawn(auction(addr));
                sent.lock().unwrap().push((Instant::now(), call));
            }
        })
    };
    let kept = tokio::spawn(kept_alive(addr));
    tokio::time::sleep(Duration::from_millis(600)).await;

    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Not ready at once, on both ports, while the auction port still accepts (its own
    // /readyz answers).
    testkit::time::eventually(Duration::from_secs(1), "/readyz 503", || async {
        testkit::http::call(admin, "GET", "/readyz", "").await
            == (503, "not ready: draining\n".to_owned())
    })
    .await;
    let readyz_turned = signalled.elapsed();
    assert_eq!(
        testkit::http::call(addr, "GET", "/readyz", "").await,
        (503, "not ready: draining\n".to_owned()),
        "the auction port must still accept and say it is draining"
    );
    let page = testkit::http::call(admin, "GET", "/metrics", "").await.1;
    assert!(page.contains("\ngavel_exchange_ready 0\n"), "{page}");

    // Connections are refused once the grace is over.
    testkit::time::eventually(
        GRACE + Duration::from_secs(2),
        "connections refused",
        || async { TcpStream::connect(addr).await.is_err() },
    )
    .await;
    // Keep sending a while: these find the port closed.
    tokio::time::sleep(Duration::from_millis(600)).await;
    load.abort();
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    let took = signalled.elapsed();

    let calls = std::mem::take(&mut *sent.lock().unwrap());
    let (mut before_close, mut in_flight_at_close, mut refused_after) = (0, 0, 0);
    for (at, call) in calls {
        let outcome = call.await.unwrap();
        let since = at.checked_duration_since(signalled);
        let in_grace = since.is_none_or(|s| s + MARGIN < GRACE);
        if in_grace {
            assert_eq!(
                outcome,
                Ok(200),
                "an auction sent {since:?} after SIGTERM, within the grace, failed"
            );
            before_close += 1;
            if since.is_some_and(|s| s + BIDDER_DELAY > GRACE) {
                in_flight_at_close += 1;
            }
        } else if since.is_some_and(|s| s > GRACE + Duration::from_millis(300))
            && outcome.as_ref().is_err_and(|e| e.starts_with("connect"))
        {
            refused_after += 1;
        }
    }
    let kept = kept.await.unwrap();
    println!(
        "readyz 503 after {readyz_turned:?}; {before_close} auctions answered before the close, \
         {in_flight_at_close} of them in flight when it closed; {refused_after} refused after; \
         kept-alive answers {kept:?}; exit {exit:?} after {took:?}"
    );
    assert!(
        in_flight_at_close >= 5,
        "too few auctions in flight at the close to tell"
    );
    assert!(refused_after > 0, "the listener never closed");
    assert!(kept.len() >= 3, "{kept:?}");
    assert!(
        kept.iter().all(|(status, _)| *status == 200),
        "a kept-alive auction failed: {kept:?}"
    );
    assert_eq!(
        kept.last().map(|k| k.1),
        Some(true),
        "the kept-alive connection's last answer says Connection: close"
    );
    assert!(exit.success(), "exit status {exit:?}");
    assert!(took < GRACE + TIMEOUT, "took {took:?} to stop");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
    let logs = logs.join().unwrap();
    for phase in [
        "drain started",
        "grace over, the listener closes",
        "every request in flight answered",
        "notice queues flushed",
        "records flushed",
    ] {
        assert!(logs.contains(phase), "no {phase:?} in the log:\n{logs}");
    }
    let _ = sim.kill();
    let _ = sim.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let dir = TempDir::new("drain-twice");
    let config = dir.file(
        "exchange.toml",
        "open_to_all_sellers = true\n[http]\ndrain_grace_ms = 60000\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(["exchange", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let admin = common::admin_addr(&first);
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    testkit::time::eventually(Duration::from_secs(2), "/readyz 503", || async {
        testkit::http::call(admin, "GET", "/readyz", "").await.0 == 503
    })
    .await;
    // A minute of grace is left: only the second signal can end it this soon.
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let waited = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if waited.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("still running 10 s after the second signal");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(exit.code(), Some(1), "{exit:?}");
}
