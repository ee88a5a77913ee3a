//! The lean HTTP server (`Transport::Lean`) over real sockets on 127.0.0.1: the same answers as
//! the hyper server, pipelining, and refusals that close the connection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use sim::{BidderProfile, Fleet, FleetConfig, Markup, PriceDist, SimError, Transport};
use testkit::http::{raw, send, statuses};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn banner_request(id: &str, floor: f64) -> String {
    format!(
        r#"{{"id":"{id}","at":2,"tmax":100,"cur":["USD"],
            "imp":[{{"id":"1","bidfloor":{floor},"banner":{{"h":250,"w":300}}}}],
            "site":{{"id":"102855","domain":"www.foobar.com"}}}}"#
    )
}

fn deal_request(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","at":1,"cur":["USD"],
            "imp":[{{"id":"1","bidfloor":0.03,"banner":{{"h":250,"w":300}},
                "pmp":{{"private_auction":1,"deals":[
                    {{"id":"AB-1","at":1,"bidfloor":2.5,"wseat":["Agency1"]}}]}}}}],
            "site":{{"id":"102855"}}}}"#
    )
}

async fn fleet(transport: Transport, profiles: Vec<BidderProfile>) -> Fleet {
    let config = FleetConfig {
        transport,
        ..FleetConfig::local(7, profiles)
    };
    sim::start(config, std::future::pending()).await.unwrap()
}

/// Profiles that between them take every kind of answer.
fn every_answer() -> Vec<BidderProfile> {
    let base = |name: &str| BidderProfile {
        price: PriceDist::Uniform { min: 0.5, max: 4.0 },
        deal_rate: 0.5,
        ..BidderProfile::instant(name, 1.0)
    };
    vec![
        base("bids"),
        BidderProfile {
            markup: Markup::OnWinNotice,
            ..base("on-win")
        },
        BidderProfile {
            bid_probability: 0.0,
            nbr_on_no_bid: true,
            ..base("nbr")
        },
        BidderProfile {
            bid_probability: 0.0,
            ..base("no-bid")
        },
        BidderProfile {
            error_rate: 1.0,
            ..base("error")
        },
        BidderProfile {
            garbage_rate: 1.0,
            ..base("garbage")
        },
    ]
}

/// Status, the headers a bidder's client reads, and the body with the bidder's own address
/// (in its notice URLs) made neutral.
async fn answer(fleet: &Fleet, i: usize, method: &str, target: &str, body: &str) -> String {
    let b = &fleet.bidders[i];
    let a = send(b.addr, method, target, body.to_owned()).await.unwrap();
    let header = |name: &str| a.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    format!(
        "{} {:?} {:?} {:?} {}",
        a.status,
        header("content-type"),
        header("x-openrtb-version"),
        header("allow"),
        String::from_utf8_lossy(&a.body).replace(&b.addr.to_string(), "ADDR")
    )
}

#[tokio::test]
async fn the_lean_server_answers_as_the_hyper_server_does() {
    let hyper = fleet(Transport::Hyper, every_answer()).await;
    let lean = fleet(Transport::Lean, every_answer()).await;
    let requests = [
        ("POST", "/openrtb2", banner_request("r1", 0.0)),
        ("POST", "/openrtb2", banner_request("r2", 1.5)),
        ("POST", "/openrtb2", deal_request("r3")),
        ("POST", "/openrtb2", "{not json".to_owned()),
        ("GET", "/health", String::new()),
        ("GET", "/openrtb2", String::new()),
        ("PUT", "/openrtb2", String::new()),
        ("POST", "/notice/win", String::new()),
        ("GET", "/notice/lose", String::new()),
        (
            "GET",
            "/notice/win?price=1.25&bid_price=1.5&bid=b1&adm=b-300x250-2",
            String::new(),
        ),
        (
            "GET",
            "/notice/bill?price=1.25&bid_price=1.0",
            String::new(),
        ),
        ("GET", "/notice/loss?price=1.25&loss=102", String::new()),
        (
            "GET",
            "/notice/win?price=%24%7BAUCTION_PRICE%7D",
            String::new(),
        ),
    ];
    let mut bodies_with_bids = 0;
    for i in 0..hyper.bidders.len() {
        for (method, target, body) in &requests {
            let h = answer(&hyper, i, method, target, body).await;
            let l = answer(&lean, i, method, target, body).await;
            assert_eq!(l, h, "bidder {i}: {method} {target}");
            bodies_with_bids += usize::from(h.contains("\"seatbid\""));
        }
    }
    // The comparison covered bids, not only refusals.
    assert!(bodies_with_bids >= 4, "{bodies_with_bids}");
    assert_eq!(lean.stats(), hyper.stats());
}

/// Writes `wire` to the first bidder on a fresh connection and reads until it closes (or 30 s,
/// a bound no passing run comes near).
async fn send_raw(fleet: &Fleet, wire: &str) -> (String, bool) {
    raw(
        fleet.bidders[0].addr,
        wire.as_bytes(),
        Duration::from_secs(30),
    )
    .await
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_then_the_connection_closes() {
    let lean = fleet(Transport::Lean, vec![BidderProfile::instant("p", 1.0)]).await;
    let body = banner_request("pipe", 0.0);
    let wire = format!(
        "GET /notice/win?price=1&bid_price=1 HTTP/1.1\r\nhost: a\r\n\r\n\
         POST /openrtb2 HTTP/1.1\r\nhost: a\r\ncontent-length: {}\r\n\r\n{body}\
         GET /nowhere HTTP/1.1\r\nhost: a\r\n\r\n\
         GET /health HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let (text, closed) = send_raw(&lean, &wire).await;
    assert_eq!(statuses(&text), [200, 200, 404, 200], "{text}");
    assert!(text.contains("\"id\":\"pipe\""), "{text}");
    assert!(text.ends_with("connection: close\r\n\r\nok"), "{text}");
    assert!(closed, "Connection: close was asked for");
    let s = &lean.stats()[0];
    assert_eq!((s.win_notices, s.requests, s.bids), (1, 1, 1));
}

#[tokio::test]
async fn refusals_are_answered_then_the_connection_closes() {
    let lean = fleet(Transport::Lean, vec![BidderProfile::instant("r", 1.0)]).await;
    let addr = lean.bidders[0].addr;
    let too_long = format!(
        "POST /openrtb2 HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
        sim::MAX_BODY_BYTES + 1
    );
    let long_head = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(20_000));
    let cases = [
        (too_long.as_str(), 413),
        (
            "POST /openrtb2 HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        ("POST /openrtb2 HTTP/1.1\r\ncontent-length: x\r\n\r\n", 400),
        (long_head.as_str(), 431),
        ("NOT HTTP\r\n\r\n", 400),
    ];
    for (wire, status) in cases {
        // A request sent after a refusal is not read: the stream cannot be framed past it.
        let wire = format!("{wire}GET /health HTTP/1.1\r\n\r\n");
        let (text, closed) = raw(addr, wire.as_bytes(), Duration::from_secs(30)).await;
        assert_eq!(statuses(&text), [status], "{text}");
        assert!(
            closed,
            "{wire:.40}: the connection stays open after a refusal"
        );
    }
    // The oversized bid request was counted as one, and refused.
    let s = &lean.stats()[0];
    assert_eq!((s.requests, s.rejected), (1, 1));
}

#[tokio::test]
async fn a_no_answer_decision_closes_the_connection_without_a_response() {
    let mute = BidderProfile {
        no_answer_rate: 1.0,
        hang_ms: 20,
        ..BidderProfile::instant("mute", 1.0)
    };
    let lean = fleet(Transport::Lean, vec![mute]).await;
    let body = banner_request("m", 0.0);
    let wire = format!(
        "POST /openrtb2 HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (text, closed) = send_raw(&lean, &wire).await;
    assert_eq!((text.as_str(), closed), ("", true));
    assert_eq!(lean.stats()[0].no_answer, 1);
}

#[tokio::test]
async fn shutdown_closes_an_idle_kept_alive_connection() {
    let lean = fleet(Transport::Lean, vec![BidderProfile::instant("s", 1.0)]).await;
    let mut stream = TcpStream::connect(lean.bidders[0].addr).await.unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    // The whole answer, so the connection is now idle between requests.
    let mut got = Vec::new();
    while !got.ends_with(b"\r\n\r\nok") {
        let mut buf = [0u8; 512];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before the answer: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    lean.shutdown();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut rest))
        .await
        .expect("the idle connection was not closed at shutdown")
        .unwrap();
    assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&rest));
}

#[tokio::test]
async fn the_lean_server_refuses_tls() {
    let dir = testkit::temp::TempDir::new("lean-tls");
    let files = testkit::tls::generate(dir.path(), "lean");
    let tls = http_front::ServerTls::load(&files.cert, &files.key).unwrap();
    let config = FleetConfig {
        transport: Transport::Lean,
        tls: Some(std::sync::Arc::new(tls)),
        ..FleetConfig::local(1, vec![BidderProfile::instant("t", 1.0)])
    };
    let err = sim::start(config, std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(err, SimError::LeanWithTls), "{err}");
    assert!(err.to_string().contains("TLS"), "{err}");
}
