//! The markup store over real sockets, as Prebid Server and Prebid.js call it.

mod common;

use std::sync::Arc;

use common::{config, get, request, start_edge};
use creative_edge::SystemClock;

const CONFIG: &str = r#"
    [store]
    max_value_bytes = 2000
    max_puts = 3
"#;

async fn post(addr: std::net::SocketAddr, body: &str) -> testkit::http::Answer {
    testkit::http::send(addr, "POST", "/cache", body.to_owned())
        .await
        .expect("post")
}

#[tokio::test]
async fn prebid_cache_round_trip_of_vast_and_json() {
    let edge = start_edge(
        &config(CONFIG, "127.0.0.1:1".parse().expect("addr")),
        Arc::new(SystemClock),
    )
    .await;
    let vast =
        r#"<VAST version="4.2"><Ad id="1"><InLine><AdTitle>t</AdTitle></InLine></Ad></VAST>"#;
    let body = serde_json::json!({ "puts": [
        { "type": "xml", "value": vast, "ttlseconds": 300 },
        { "type": "json", "value": { "adm": "<div>ad</div>", "w": 300, "h": 250 } },
    ]});
    let answer = post(edge.addr, &body.to_string()).await;
    assert_eq!(answer.status.as_u16(), 200);
    let parsed: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
    let ids: Vec<&str> = parsed["responses"]
        .as_array()
        .expect("responses")
        .iter()
        .map(|r| r["uuid"].as_str().expect("uuid"))
        .collect();
    assert_eq!(ids.len(), 2);
    let xml = get(edge.addr, &format!("/cache?uuid={}", ids[0])).await;
    assert_eq!(
        (xml.status.as_u16(), xml.header("content-type")),
        (200, Some("application/xml"))
    );
    assert_eq!(&xml.body[..], vast.as_bytes());
    assert_eq!(xml.header("access-control-allow-origin"), Some("*"));
    let json = get(edge.addr, &format!("/cache?uuid={}", ids[1])).await;
    assert_eq!(json.header("content-type"), Some("application/json"));
    let value: serde_json::Value = serde_json::from_slice(&json.body).expect("stored json");
    assert_eq!(
        value,
        serde_json::json!({ "adm": "<div>ad</div>", "w": 300, "h": 250 })
    );
    edge.stop().await;
}

#[tokio::test]
async fn the_stores_limits_and_bad_ids_get_clear_refusals() {
    let edge = start_edge(
        &config(CONFIG, "127.0.0.1:1".parse().expect("addr")),
        Arc::new(SystemClock),
    )
    .await;
    let four = serde_json::json!({ "puts": [
        { "type": "xml", "value": "<a/>" }, { "type": "xml", "value": "<a/>" },
        { "type": "xml", "value": "<a/>" }, { "type": "xml", "value": "<a/>" },
    ]});
    let refused = post(edge.addr, &four.to_string()).await;
    assert_eq!(refused.status.as_u16(), 400);
    assert!(String::from_utf8_lossy(&refused.body).contains("the limit is 3"));
    let big = serde_json::json!({ "puts": [{ "type": "xml", "value": "x".repeat(2_001) }] });
    let refused = post(edge.addr, &big.to_string()).await;
    assert!(String::from_utf8_lossy(&refused.body).contains("puts[0].value"));
    let huge = "x".repeat(100_000);
    assert_eq!(post(edge.addr, &huge).await.status.as_u16(), 413);
    assert_eq!(
        get(
            edge.addr,
            "/cache?uuid=00000000-0000-4000-8000-000000000000"
        )
        .await
        .status
        .as_u16(),
        404
    );
    assert_eq!(
        get(edge.addr, "/cache?uuid=../../etc")
            .await
            .status
            .as_u16(),
        400
    );
    assert_eq!(get(edge.addr, "/cache").await.status.as_u16(), 400);
    let preflight = request(edge.addr, "OPTIONS", "/cache", &[]).await;
    assert_eq!(preflight.status.as_u16(), 204);
    assert_eq!(
        preflight.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    edge.stop().await;
}
