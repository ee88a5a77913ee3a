//! Origins that fail, over real sockets: stale copies within their window, failures
//! remembered briefly, revalidation, and the bounded, kept-alive pool.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Obj, TestOrigin, config, get, metric, pattern, request, start_edge};
use creative_edge::ManualClock;
use creative_edge::metrics::{Fetch, Served};

const T0_MS: u64 = 1_795_564_800_000;

const CONFIG: &str = r#"
    stale_if_error_s = 60
    negative_ttl_s = 5
    [[origins]]
    name = "cdn"
    url = "http://{origin}/c"
    connect_timeout_ms = 2000
"#;

fn served(edge: &common::Running, how: Served) -> u64 {
    edge.edge.metrics().served.get(how)
}

#[tokio::test]
async fn with_the_origin_down_a_stale_copy_is_served_within_its_window_and_the_failure_counted() {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/a.png",
        Obj::ok(pattern(3_000, 1), "image/png", "max-age=10"),
    );
    let clock = Arc::new(ManualClock::at(T0_MS));
    let edge = start_edge(&config(CONFIG, origin.addr), clock.clone()).await;
    assert_eq!(
        get(edge.addr, "/assets/cdn/a.png").await.header("x-cache"),
        Some("miss")
    );
    origin.stop();
    clock.advance(Duration::from_secs(11));

    let stale = get(edge.addr, "/assets/cdn/a.png").await;
    assert_eq!(
        (stale.status.as_u16(), stale.header("x-cache")),
        (200, Some("stale_memory"))
    );
    assert_eq!(stale.body, pattern(3_000, 1));
    assert_eq!(
        edge.edge.origin_fetches("cdn", Fetch::ConnectFailed),
        1,
        "the failed fetch is counted"
    );
    // Within the negative window the origin is not asked again; the stale copy still answers.
    let again = get(edge.addr, "/assets/cdn/a.png").await;
    assert_eq!(again.header("x-cache"), Some("stale_memory"));
    assert_eq!(edge.edge.origin_fetches("cdn", Fetch::ConnectFailed), 1);
    assert_eq!(served(&edge, Served::StaleMemory), 2);

    // Past lifetime (10 s) + stale window (60 s): no copy may stand in.
    clock.advance(Duration::from_secs(60));
    let gone = get(edge.addr, "/assets/cdn/a.png").await;
    assert_eq!(
        (gone.status.as_u16(), gone.header("x-cache")),
        (502, Some("origin_error"))
    );
    assert_eq!(edge.edge.origin_fetches("cdn", Fetch::ConnectFailed), 2);
    edge.stop().await;
}

#[tokio::test]
async fn missing_objects_and_origin_errors_are_remembered_for_the_negative_ttl() {
    let origin = TestOrigin::start().await;
    origin.put("/c/broken.png", Obj::status(503));
    let clock = Arc::new(ManualClock::at(T0_MS));
    let edge = start_edge(&config(CONFIG, origin.addr), clock.clone()).await;

    let first = get(edge.addr, "/assets/cdn/nothing.png").await;
    assert_eq!(
        (first.status.as_u16(), first.header("x-cache")),
        (404, Some("origin_error"))
    );
    let second = get(edge.addr, "/assets/cdn/nothing.png").await;
    assert_eq!(
        (second.status.as_u16(), second.header("x-cache")),
        (404, Some("negative"))
    );
    assert_eq!(origin.requests("/c/nothing.png"), 1);

    let first = get(edge.addr, "/assets/cdn/broken.png").await;
    assert_eq!(
        (first.status.as_u16(), first.header("x-cache")),
        (502, Some("origin_error"))
    );
    let second = get(edge.addr, "/assets/cdn/broken.png").await;
    assert_eq!(
        (second.status.as_u16(), second.header("x-cache")),
        (502, Some("negative"))
    );
    assert_eq!(origin.requests("/c/broken.png"), 1);
    assert_eq!(served(&edge, Served::Negative), 2);

    clock.advance(Duration::from_secs(5));
    origin.put(
        "/c/nothing.png",
        Obj::ok(pattern(10, 2), "image/png", "max-age=60"),
    );
    let now_there = get(edge.addr, "/assets/cdn/nothing.png").await;
    assert_eq!(
        (now_there.status.as_u16(), now_there.header("x-cache")),
        (200, Some("miss"))
    );
    assert_eq!(origin.requests("/c/nothing.png"), 2);
    assert_eq!(edge.edge.origin_fetches("cdn", Fetch::NotFound), 1);
    assert_eq!(edge.edge.origin_fetches("cdn", Fetch::ErrorStatus), 1);
    edge.stop().await;
}

#[tokio::test]
async fn a_stale_copy_with_a_validator_is_revalidated_with_a_304_not_fetched_whole() {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/v.xml",
        Obj::ok("<VAST version=\"4.2\"/>", "application/xml", "max-age=10").with("etag", "\"v7\""),
    );
    let clock = Arc::new(ManualClock::at(T0_MS));
    let edge = start_edge(&config(CONFIG, origin.addr), clock.clone()).await;
    get(edge.addr, "/assets/cdn/v.xml").await;
    clock.advance(Duration::from_secs(11));
    let got = get(edge.addr, "/assets/cdn/v.xml").await;
    assert_eq!(
        (got.status.as_u16(), got.header("x-cache")),
        (200, Some("revalidated"))
    );
    assert_eq!(&got.body[..], b"<VAST version=\"4.2\"/>");
    let asked = origin.last_headers("/c/v.xml").expect("asked");
    assert_eq!(
        asked.get("if-none-match").and_then(|v| v.to_str().ok()),
        Some("\"v7\"")
    );
    assert_eq!(edge.edge.origin_fetches("cdn", Fetch::NotModified), 1);
    // Fresh again for another 10 s.
    clock.advance(Duration::from_secs(9));
    assert_eq!(
        get(edge.addr, "/assets/cdn/v.xml").await.header("x-cache"),
        Some("hit_memory")
    );
    edge.stop().await;
}

#[tokio::test]
async fn the_origin_pool_is_bounded_and_its_connections_are_kept_alive() {
    let origin = TestOrigin::start().await;
    for i in 0..10u8 {
        origin.put(
            &format!("/c/{i}.png"),
            Obj {
                hold_after: Some(10),
                ..Obj::ok(pattern(1_000, i), "image/png", "max-age=600")
            },
        );
    }
    let toml = r#"
        [[origins]]
        name = "cdn"
        url = "http://{origin}/c"
        max_connections = 2
        response_timeout_ms = 60000
    "#;
    let edge = start_edge(&config(toml, origin.addr), Arc::new(ManualClock::at(T0_MS))).await;
    let clients: Vec<_> = (0..10u8)
        .map(|i| {
            tokio::spawn(async move { (i, get(edge.addr, &format!("/assets/cdn/{i}.png")).await) })
        })
        .collect();
    // Two fetches hold both connections; the other eight wait for one.
    testkit::time::eventually(
        Duration::from_secs(10),
        "two fetches at the origin",
        || async {
            (0..10)
                .map(|i| origin.requests(&format!("/c/{i}.png")))
                .sum::<usize>()
                == 2
        },
    )
    .await;
    origin.release();
    for client in clients {
        let (i, got) = client.await.expect("client");
        assert_eq!(got.status.as_u16(), 200);
        assert_eq!(got.body, pattern(1_000, i));
    }
    let series = "gavel_edge_origin_connections_opened_total{origin=\"cdn\"}";
    assert_eq!(
        metric(edge.admin, series).await,
        2,
        "never more than max_connections"
    );
    for i in 0..10u8 {
        assert_eq!(
            request(edge.addr, "GET", &format!("/assets/cdn/{i}.png"), &[])
                .await
                .header("x-cache"),
            Some("hit_memory")
        );
    }
    origin.put(
        "/c/late.png",
        Obj::ok(pattern(10, 1), "image/png", "max-age=600"),
    );
    get(edge.addr, "/assets/cdn/late.png").await;
    assert_eq!(
        metric(edge.admin, series).await,
        2,
        "a kept-alive connection was reused"
    );
    let metrics = edge.edge.metrics().clone();
    testkit::time::wait_until(Duration::from_secs(5), "eleven fills landed", || {
        metrics.fills.get() == 11
    })
    .await;
    edge.stop().await;
}
