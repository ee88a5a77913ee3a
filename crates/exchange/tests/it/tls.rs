//! TLS both ways over real loopback sockets, with certificates made by `openssl`: an HTTPS
//! bidder (its endpoint and its notices) verified against a CA file, a bidder whose certificate
//! the configured CA did not sign, and the exchange's own HTTPS listener, whose certificate is
//! replaced while it serves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use bytes::Bytes;
use exchange::metrics::{BidderOutcome, NoticeKind, NoticeOutcome};
use exchange::tls::{ClientTls, server_name};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::json;
use support::*;
use testkit::TempDir;
use tokio::net::TcpStream;

/// One HTTPS POST of an auction request, trusting `ca` and expecting `localhost`.
async fn https_auction(
    addr: std::net::SocketAddr,
    ca: &std::path::Path,
    body: &str,
) -> Result<(u16, String), String> {
    let tls = ClientTls::from_ca_file(ca)?;
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let stream = tls
        .connect(server_name("localhost")?, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = http::Request::post(exchange::AUCTION_PATH)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn tls_bidder_answer(
    port: Arc<std::sync::OnceLock<u16>>,
) -> impl Fn(&openrtb::BidRequest) -> Script + Send + Sync {
    move |r| {
        let port = *port.get().unwrap();
        bids(r, "secure", |imp| {
            json!({"id": "s", "impid": imp, "price": 1.0, "adm": "<div/>",
                   "nurl": format!("https://127.0.0.1:{port}/win?p=${{AUCTION_PRICE}}"),
                   "burl": format!("https://127.0.0.1:{port}/bill?p=${{AUCTION_PRICE}}")})
        })
    }
}

#[tokio::test]
async fn an_https_bidder_is_called_and_notified_over_verified_tls() {
    let dir = TempDir::new("tls-bidder");
    let bidder_certs = testkit::tls::generate(dir.path(), "bidder");
    let other_ca = testkit::tls::generate(dir.path(), "other").ca;
    let tls = Arc::new(http_front::ServerTls::load(&bidder_certs.cert, &bidder_certs.key).unwrap());
    let port = Arc::new(std::sync::OnceLock::new());
    let secure = ScriptedBidder::start_tls(tls.clone(), tls_bidder_answer(port.clone())).await;
    port.set(secure.addr.port()).unwrap();
    let p = secure.addr.port();
    // The same bidder twice: once trusting its CA (and naming it as the certificate does),
    // once trusting another CA, which must fail the handshake.
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\n\
         [[bidders]]\nname = \"trusted\"\nendpoint = \"https://127.0.0.1:{p}/bid\"\n\
         ca_file = {:?}\ntls_server_name = \"localhost\"\n\
         [[bidders]]\nname = \"untrusted\"\nendpoint = \"https://127.0.0.1:{p}/bid\"\n\
         ca_file = {:?}\n",
        bidder_certs.ca.display().to_string(),
        other_ca.display().to_string(),
    ))
    .await;
    // A second of tmax: a TLS handshake on a machine busy with other tests once took more
    // than the default 100 ms, and the point here is trust, not speed.
    let mut request = banner_request(0.1);
    request["tmax"] = serde_json::json!(1000);
    for _ in 0..3 {
        let (status, body) = auction(ex.addr, &request).await;
        assert_eq!(status, 200, "{body:?}");
    }
    let trusted = ex.metrics.bidder_named("trusted").unwrap();
    let untrusted = ex.metrics.bidder_named("untrusted").unwrap();
    assert_eq!(trusted.outcome_count(BidderOutcome::Bid), 3);
    assert_eq!(
        untrusted.outcome_count(BidderOutcome::Error),
        3,
        "bad CA: no call"
    );
    assert_eq!(
        secure.requests.lock().unwrap().len(),
        3,
        "only the trusted calls arrived"
    );
    // Win and billing notices over HTTPS to the bidder's own host, verified the same way.
    // Handshakes of a debug build take a while: allow seconds, not a fixed sleep.
    // Handshakes of a debug build take a while: allow seconds, not a fixed sleep. The count is
    // waited for (a notice is counted after its answer arrives).
    let sent = |kind| ex.metrics.notice_count(kind, NoticeOutcome::Sent);
    testkit::time::wait_until(std::time::Duration::from_secs(15), "6 notices sent", || {
        sent(NoticeKind::Win) == 3 && sent(NoticeKind::Billing) == 3
    })
    .await;
    let notices = secure.notices.lock().unwrap().clone();
    assert_eq!(
        notices.iter().filter(|n| n.starts_with("/win")).count(),
        3,
        "{notices:?}"
    );
    assert_eq!(
        notices.iter().filter(|n| n.starts_with("/bill")).count(),
        3,
        "{notices:?}"
    );
    assert_eq!(
        ex.metrics
            .notice_count(NoticeKind::Win, NoticeOutcome::Sent),
        3
    );
    assert_eq!(
        ex.metrics
            .notice_count(NoticeKind::Billing, NoticeOutcome::Sent),
        3
    );
}

#[tokio::test]
async fn the_listener_serves_https_and_takes_a_renewed_certificate() {
    let dir = TempDir::new("tls-listener");
    let first = testkit::tls::generate(dir.path(), "first");
    let second = testkit::tls::generate(dir.path(), "second");
    let cert = dir.join("exchange.crt");
    let key = dir.join("exchange.key");
    std::fs::copy(&first.cert, &cert).unwrap();
    std::fs::copy(&first.key, &key).unwrap();
    let a = ScriptedBidder::start(|r| {
        bids(r, "a", |imp| json!({"id": "a", "impid": imp, "price": 1.0}))
    })
    .await;
    let ex = exchange_from_toml(&format!(
        "[tls]\ncert_file = {:?}\nkey_file = {:?}\n[[bidders]]\nname = \"a\"\nendpoint = \"{}\"\n",
        cert.display().to_string(),
        key.display().to_string(),
        a.endpoint()
    ))
    .await;
    let request = banner_request(0.1).to_string();
    let (status, body) = https_auction(ex.addr, &first.ca, &request).await.unwrap();
    assert_eq!(status, 200, "{body}");
    // Plain HTTP to a TLS port is not an auction.
    let (plain, _) = testkit::http::call(ex.addr, "POST", exchange::AUCTION_PATH, &request).await;
    assert_ne!(plain, 200);

    // Renewal: new files, read again (what the file watcher does on a change). A client
    // trusting only the new CA gets in.
    std::fs::copy(&second.key, &key).unwrap();
    std::fs::copy(&second.cert, &cert).unwrap();
    let tls = ex.exchange.listener_tls().unwrap();
    tls.reload().unwrap();
    let (status, _) = https_auction(ex.addr, &second.ca, &request).await.unwrap();
    assert_eq!(status, 200);
    assert!(
        https_auction(ex.addr, &first.ca, &request).await.is_err(),
        "old certificate gone"
    );

    // A broken renewal (key of another certificate) keeps the good one.
    std::fs::copy(&first.key, &key).unwrap();
    assert!(tls.reload().is_err());
    let (status, _) = https_auction(ex.addr, &second.ca, &request).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        tls.reload_failures
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
