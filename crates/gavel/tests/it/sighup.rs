//! SIGHUP reloads on real `gavel exchange` and `gavel bidder` processes. Each test rewrites the
//! watched file with the same length and puts its modification time back, so the file watcher
//! cannot see the change: only the signal can apply it. A garbage file sent the same way is
//! refused and the process keeps serving what it had. Then SIGTERM, and exit 0.
// The processes are driven from plain threads (a #[test] or spawn_blocking), never from a
// runtime thread, so blocking sleeps are fine here; prices compared are exact decimals.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::float_cmp
)]

use crate::common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use testkit::TempDir;
use testkit::http::call_blocking as call;
use testkit::time::eventually_blocking as eventually;
use tokio::net::TcpListener;

/// A bidder that always bids 1.0 without naming a seat (the exchange then names its seat).
async fn bidder() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<Incoming>| async move {
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let r: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let answer = json!({"id": r["id"], "seatbid": [{"bid": [{
                        "id": "b", "impid": "1", "price": 1.0, "adm": "<div/>"}]}]});
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(answer.to_string()))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// Replaces the file's content without changing its length or modification time.
fn rewrite_unseen(path: &Path, text: &str) {
    let before = std::fs::metadata(path).unwrap();
    assert_eq!(
        before.len(),
        text.len() as u64,
        "the rewrite must keep the length"
    );
    std::fs::write(path, text).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

fn metric(addr: SocketAddr, line_prefix: &str) -> u64 {
    let text = call(addr, "GET", "/metrics", "").1;
    text.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn stop(mut child: Child) {
    signal(&child, "TERM");
    let exit = child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
}

const AUCTION: &str = r#"{"id": "r", "tmax": 200, "imp": [{"id": "1", "banner": {"w": 300, "h": 250}}], "site": {"domain": "a.example"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_exchange_bidder_list() {
    let first = bidder().await;
    let second = bidder().await;
    let dir = TempDir::new("exchange");
    let config = dir.join("exchange.toml");
    let text = |name: &str, addr: SocketAddr| {
        format!(
            "open_to_all_sellers = true\n[[bidders]]\nname = \"{name}\"\nendpoint = \"http://{addr}/bid\"\n"
        )
    };
    std::fs::write(&config, text("one", first)).unwrap();
    let (child, addr, admin, _) = common::spawn_listening_admin("exchange", &config);
    let seat = move || {
        let (status, body) = call(addr, "POST", "/openrtb2/auction", AUCTION);
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["seatbid"][0]["seat"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    tokio::task::spawn_blocking(move || {
        assert_eq!(seat(), "one");
        // Same length (ephemeral ports have five digits), same mtime: the watcher cannot tell.
        rewrite_unseen(&config, &text("two", second));
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(seat(), "one", "the watcher saw a change it cannot see");
        signal(&child, "HUP");
        assert!(eventually(Duration::from_secs(3), || seat() == "two"));

        // Garbage by SIGHUP: refused, counted, and the list stays.
        let garbage = "x".repeat(std::fs::metadata(&config).unwrap().len() as usize);
        rewrite_unseen(&config, &garbage);
        signal(&child, "HUP");
        let refused = "gavel_exchange_config_reloads_total{outcome=\"invalid\"}";
        assert!(eventually(Duration::from_secs(3), || metric(
            admin, refused
        ) >= 1));
        assert_eq!(seat(), "two");
        stop(child);
    })
    .await
    .unwrap();
}

#[test]
fn sighup_reloads_the_bidder_campaigns() {
    let dir = TempDir::new("bidder");
    let campaigns = dir.join("campaigns.json");
    let campaign = |cpm: &str| {
        format!(
            r#"[{{"id": "c1", "budget": {{"total": 100}}, "bid": {{"cpm": {cpm}}}, "pacing": "asap",
  "creatives": [{{"id": "cr1", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["shop.example"]}}]}}]"#
        )
    };
    std::fs::write(&campaigns, campaign("2.0")).unwrap();
    let config = dir.join("bidder.toml");
    let security = testkit::secrets::security_toml(dir.path());
    std::fs::write(
        &config,
        format!("campaigns = \"campaigns.json\"\n{security}"),
    )
    .unwrap();
    let (child, addr, admin, _) = common::spawn_listening_admin("bidder", &config);
    let price = || {
        let (status, body) = call(addr, "POST", "/openrtb2/bid", AUCTION);
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["seatbid"][0]["bid"][0]["price"]
            .as_f64()
            .unwrap_or_default()
    };
    assert_eq!(price(), 2.0);
    rewrite_unseen(&campaigns, &campaign("3.0"));
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(price(), 2.0, "the watcher saw a change it cannot see");
    signal(&child, "HUP");
    assert!(eventually(Duration::from_secs(3), || price() == 3.0));

    // A negative budget by SIGHUP: refused, counted, and the campaigns stay.
    rewrite_unseen(
        &campaigns,
        &campaign("3.0").replace("\"total\": 100", "\"total\": -10"),
    );
    signal(&child, "HUP");
    let refused = "gavel_bidder_campaign_reloads_total{outcome=\"failed\"}";
    assert!(eventually(Duration::from_secs(3), || metric(
        admin, refused
    ) >= 1));
    assert_eq!(price(), 3.0);
    stop(child);
}
