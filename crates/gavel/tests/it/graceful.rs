//! Graceful shutdown of a real `gavel exchange` process: on SIGTERM it stops accepting at once,
//! finishes the auctions in flight within their deadlines, sends the win and billing notices
//! they produced, and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use testkit::TempDir;
use tokio::net::{TcpListener, TcpStream};

/// A bidder that bids after `delay`, with notice URLs pointing back to itself; it counts the
/// bid requests it has read and records the notices it receives.
async fn slow_bidder(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let notices = Arc::new(Mutex::new(Vec::new()));
    let requests = Arc::new(AtomicUsize::new(0));
    let (seen, read) = (notices.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let (seen, read) = (seen.clone(), read.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (seen, read) = (seen.clone(), read.clone());
                    async move {
                        if req.method() == http::Method::GET {
                            seen.lock().unwrap().push(req.uri().to_string());
                            return Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())));
                        }
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let r: Value = serde_json::from_slice(&body).unwrap();
                        read.fetch_add(1, SeqCst);
                        tokio::time::sleep(delay).await;
                        let answer = json!({"id": r["id"], "seatbid": [{"bid": [{
                            "id": "b", "impid": "1", "price": 1.0, "adm": "<div/>",
                            "nurl": format!("http://{addr}/win?p=${{AUCTION_PRICE}}"),
                            "burl": format!("http://{addr}/bill?p=${{AUCTION_PRICE}}")}]}]});
                        Ok(Response::new(Full::new(Bytes::from(answer.to_string()))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (addr, requests, notices)
}

async fn auction(addr: SocketAddr, tmax: u64) -> (u16, Option<Value>) {
    let body = json!({"id": "r", "tmax": tmax,
        "imp": [{"id": "1", "banner": {"w": 300, "h": 250}}], "site": {"domain": "a.example"}});
    let a = testkit::http::send(addr, "POST", "/openrtb2/auction", body.to_string())
        .await
        .unwrap_or_else(|e| panic!("auction: {e}"));
    (a.status.as_u16(), serde_json::from_slice(&a.body).ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_auctions_in_flight_flushes_notices_and_exits_zero() {
    let (bidder, requests, notices) = slow_bidder(Duration::from_millis(800)).await;
    let dir = TempDir::new("graceful");
    let config = dir.join("exchange.toml");
    std::fs::write(
        &config,
        format!(
            "open_to_all_sellers = true\n[deadline]\nmax_tmax_ms = 2000\n\
             [notices]\nfire_burl = true\nallow_private_addresses = true\n\
             [[bidders]]\nname = \"slow\"\nendpoint = \"http://{bidder}/bid\"\n"
        ),
    )
    .unwrap();
    let (mut child, addr, lines) = common::spawn_listening("exchange", &config);

    let in_flight: Vec<_> = (0..5).map(|_| tokio::spawn(auction(addr, 1500))).collect();
    // All five are at the bidder, which holds each for 800 ms: they are in flight.
    testkit::time::wait_until(
        Duration::from_secs(10),
        "5 bid requests at the bidder",
        || requests.load(SeqCst) == 5,
    )
    .await;
    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    testkit::time::eventually(
        Duration::from_secs(5),
        "connections refused after SIGTERM",
        || async { TcpStream::connect(addr).await.is_err() },
    )
    .await;
    for call in in_flight {
        let (status, body) = call.await.unwrap();
        assert_eq!(status, 200, "an auction in flight was cut");
        assert_eq!(body.unwrap()["seatbid"][0]["bid"][0]["adm"], "<div/>");
    }
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    let took = signalled.elapsed();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    println!("exited {exit:?} {took:?} after SIGTERM; said {rest:?}");
    assert!(exit.success(), "exit status {exit:?}");
    assert!(took < Duration::from_secs(5), "took {took:?} to stop");
    assert!(rest.iter().any(|l| l.contains("stopped")));
    let notices = notices.lock().unwrap().clone();
    let wins = notices.iter().filter(|n| n.starts_with("/win")).count();
    let bills = notices.iter().filter(|n| n.starts_with("/bill")).count();
    assert_eq!(
        (wins, bills),
        (5, 5),
        "notices sent before exit: {notices:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
