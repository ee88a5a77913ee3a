//! `[cache]`: winners' markup stored in the real creative edge before the answer, and a store
//! that is down or hangs costing the auction nothing but a counted failure.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use exchange::metrics::CacheOutcome;
use serde_json::json;
use support::*;
use tokio::net::TcpListener;

async fn bidder() -> ScriptedBidder {
    ScriptedBidder::start(|r| {
        bids(
            r,
            "a",
            |imp| json!({"id": "b1", "impid": imp, "price": 1.0, "adm": "<div>ad</div>"}),
        )
    })
    .await
}

fn cache_section(url: &str) -> String {
    format!(
        "[cache]\nurl = \"{url}\"\npublic_url = \"https://edge.example/cache\"\ntimeout_ms = 50\n"
    )
}

/// A banner request with a 1 s `tmax`: the store's own `timeout_ms` (50) then decides when it
/// is given up on, and "not late" holds with the rest of the second to spare on a loaded
/// machine, so a late answer can only be the exchange waiting out the store.
fn roomy_request() -> serde_json::Value {
    let mut request = banner_request(0.1);
    request["tmax"] = json!(1000);
    request
}

fn the_bid(body: &serde_json::Value) -> &serde_json::Value {
    &body["seatbid"][0]["bid"][0]
}

const WRITER_KEY: &str = "exchange-writer-key-0123456789abcdef0123456789";

/// The real creative edge, whose store takes puts from one writer, `exchange`, holding the key
/// in `dir`; its address.
async fn edge_with_writer(dir: &testkit::TempDir) -> std::net::SocketAddr {
    testkit::secrets::write_private(&dir.join("writer.key"), WRITER_KEY);
    let config = creative_edge::Config::parse(
        "[[store.writers]]\nname = \"exchange\"\nkey_file = \"writer.key\"\n",
    )
    .and_then(|c| c.validate_in(Some(dir.path())))
    .expect("edge config");
    let edge =
        creative_edge::Edge::new(&config, Arc::new(creative_edge::SystemClock)).expect("edge");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let edge_addr = listener.local_addr().expect("addr");
    let serving = edge.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    edge_addr
}

#[tokio::test]
async fn each_winners_markup_is_stored_before_the_answer_and_the_bid_names_it() {
    let dir = testkit::TempDir::new("markup-cache");
    let edge_addr = edge_with_writer(&dir).await;
    let a = bidder().await;
    let section = format!(
        "{}key_file = {:?}\n",
        cache_section(&format!("http://{edge_addr}/cache")),
        dir.join("writer.key").display().to_string()
    );
    let ex = exchange(&section, &[("a", a.endpoint())]).await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    let body = body.expect("a bid");
    let cached = &the_bid(&body)["ext"]["prebid"]["cache"]["bids"];
    let id = cached["cacheId"].as_str().expect("a cache id");
    assert_eq!(
        cached["url"],
        json!(format!("https://edge.example/cache?uuid={id}"))
    );
    assert!(
        the_bid(&body)["ext"]["origbidprice"].is_number(),
        "the rest of ext is kept"
    );

    // The store holds the whole bid, as Prebid Server stores it.
    let stored = testkit::http::send(edge_addr, "GET", &format!("/cache?uuid={id}"), "")
        .await
        .expect("get");
    assert_eq!(stored.status.as_u16(), 200);
    let stored: serde_json::Value = serde_json::from_slice(&stored.body).expect("json");
    assert_eq!(stored["adm"], json!("<div>ad</div>"));
    assert_eq!(stored["impid"], json!("1"));
    assert_eq!(ex.metrics.cache_count(CacheOutcome::Stored), 1);
}

#[tokio::test]
async fn an_exchange_without_the_writer_key_is_refused_by_the_store_and_still_answers() {
    let dir = testkit::TempDir::new("markup-cache");
    let edge_addr = edge_with_writer(&dir).await;
    let a = bidder().await;
    let ex = exchange(
        &cache_section(&format!("http://{edge_addr}/cache")),
        &[("a", a.endpoint())],
    )
    .await;
    let (status, body) = auction(ex.addr, &roomy_request()).await;
    assert_eq!(status, 200);
    assert!(the_bid(&body.expect("a bid"))["ext"]["prebid"].is_null());
    assert_eq!(ex.metrics.cache_count(CacheOutcome::Refused), 1);
}

#[tokio::test]
async fn a_cache_that_is_down_costs_the_auction_nothing_but_a_counted_failure() {
    // A port nobody listens on: the connection is refused.
    let unused = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let down = unused.local_addr().expect("addr");
    drop(unused);
    let a = bidder().await;
    let ex = exchange(
        &cache_section(&format!("http://{down}/cache")),
        &[("a", a.endpoint())],
    )
    .await;
    let (status, body) = auction(ex.addr, &roomy_request()).await;
    assert_eq!(status, 200);
    let body = body.expect("the bid is still answered");
    assert!(
        the_bid(&body)["ext"]["prebid"].is_null(),
        "no cache member without a store"
    );
    assert_eq!(the_bid(&body)["adm"], json!("<div>ad</div>"));
    assert_eq!(ex.metrics.cache_count(CacheOutcome::Failed), 1);
    assert_eq!(ex.metrics.late_answers.get(), 0);
}

#[tokio::test]
async fn a_cache_that_hangs_is_given_up_on_within_the_deadline() {
    // Accepts connections and never answers.
    let hang = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hang_addr = hang.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hang.accept().await {
            held.push(stream);
        }
    });
    let a = bidder().await;
    let ex = exchange(
        &cache_section(&format!("http://{hang_addr}/cache")),
        &[("a", a.endpoint())],
    )
    .await;
    let started = Instant::now();
    let (status, body) = auction(ex.addr, &roomy_request()).await;
    assert_eq!(status, 200);
    assert!(the_bid(&body.expect("a bid"))["ext"]["prebid"].is_null());
    assert_eq!(ex.metrics.cache_count(CacheOutcome::Timeout), 1);
    // The exchange's own check: the answer was written before the request's tmax.
    assert_eq!(ex.metrics.late_answers.get(), 0);
    // Wide on purpose: the claim is that the hang is not waited out.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
