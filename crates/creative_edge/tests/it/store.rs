//! The markup store over real sockets, as Prebid Server and Prebid.js call it: puts behind a
//! writer's key (or, when allowed, anonymous puts limited per client), reads open to anyone
//! holding an id, and each writer's entries in a share no other writer's flood can evict.

use crate::common;

use std::sync::Arc;

use common::{Got, config_in, get, post_with, request, start_edge};
use creative_edge::{ManualClock, SystemClock};
use testkit::TempDir;

const EXCHANGE_KEY: &str = "store-writer-exchange-0123456789abcdef0123456789";

/// A store with one writer (`exchange`, its key in `dir`) and `extra` keys of `[store]`
/// (by default: values of 2,000 bytes at most, 3 puts a request).
fn store_config(dir: &TempDir, extra: &str) -> creative_edge::Config {
    testkit::secrets::write_private(&dir.join("exchange.key"), EXCHANGE_KEY);
    let limits = if extra.is_empty() {
        "max_value_bytes = 2000\nmax_puts = 3\n"
    } else {
        extra
    };
    let toml = format!(
        "[store]\n{limits}\n\
         [[store.writers]]\nname = \"exchange\"\nkey_file = \"exchange.key\"\n"
    );
    config_in(&toml, "127.0.0.1:1".parse().expect("addr"), dir.path())
}

async fn put(addr: std::net::SocketAddr, body: &str, key: Option<&str>) -> Got {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    post_with(addr, "/cache", body, &headers).await
}

fn uuids(answer: &Got) -> Vec<String> {
    let parsed: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
    parsed["responses"]
        .as_array()
        .expect("responses")
        .iter()
        .map(|r| r["uuid"].as_str().expect("uuid").to_owned())
        .collect()
}

#[tokio::test]
async fn prebid_cache_round_trip_of_vast_and_json() {
    let dir = TempDir::new("edge-store");
    let edge = start_edge(&store_config(&dir, ""), Arc::new(SystemClock)).await;
    let vast =
        r#"<VAST version="4.2"><Ad id="1"><InLine><AdTitle>t</AdTitle></InLine></Ad></VAST>"#;
    let body = serde_json::json!({ "puts": [
        { "type": "xml", "value": vast, "ttlseconds": 300 },
        { "type": "json", "value": { "adm": "<div>ad</div>", "w": 300, "h": 250 } },
    ]});
    let answer = put(edge.addr, &body.to_string(), Some(EXCHANGE_KEY)).await;
    assert_eq!(answer.status.as_u16(), 200);
    let ids = uuids(&answer);
    assert_eq!(ids.len(), 2);
    // Reads need no key.
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
    let dir = TempDir::new("edge-store");
    let edge = start_edge(&store_config(&dir, ""), Arc::new(SystemClock)).await;
    let key = Some(EXCHANGE_KEY);
    let four = serde_json::json!({ "puts": [
        { "type": "xml", "value": "<a/>" }, { "type": "xml", "value": "<a/>" },
        { "type": "xml", "value": "<a/>" }, { "type": "xml", "value": "<a/>" },
    ]});
    let refused = put(edge.addr, &four.to_string(), key).await;
    assert_eq!(refused.status.as_u16(), 400);
    assert!(String::from_utf8_lossy(&refused.body).contains("the limit is 3"));
    let big = serde_json::json!({ "puts": [{ "type": "xml", "value": "x".repeat(2_001) }] });
    let refused = put(edge.addr, &big.to_string(), key).await;
    assert!(String::from_utf8_lossy(&refused.body).contains("puts[0].value"));
    let huge = "x".repeat(100_000);
    assert_eq!(put(edge.addr, &huge, key).await.status.as_u16(), 413);
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

#[tokio::test]
async fn a_put_without_a_writers_key_is_refused_and_stores_nothing() {
    let dir = TempDir::new("edge-store");
    let edge = start_edge(&store_config(&dir, ""), Arc::new(SystemClock)).await;
    let body = r#"{"puts":[{"type":"xml","value":"<VAST/>"}]}"#;
    for key in [None, Some("a-guess-that-is-long-enough-0123456789abcdef")] {
        let refused = put(edge.addr, body, key).await;
        assert_eq!(refused.status.as_u16(), 401, "{key:?}");
        assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
        assert!(
            String::from_utf8_lossy(&refused.body).contains("writer"),
            "{key:?}"
        );
    }
    // The public port shows no metrics; the admin listener does.
    assert_eq!(get(edge.addr, "/metrics").await.status.as_u16(), 404);
    let page = get(edge.admin, "/metrics").await;
    let text = String::from_utf8_lossy(&page.body);
    for (reason, n) in [("no_key", 1), ("unknown_key", 1), ("rate_limited", 0)] {
        let line = format!("gavel_edge_store_puts_refused_total{{reason=\"{reason}\"}} {n}");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
    assert!(text.contains("gavel_edge_store_entries 0"), "{text}");
    edge.stop().await;
}

/// Ten puts of 100 KiB: one request of the finding's flood.
fn flood_body() -> String {
    let value = "x".repeat(100 * 1024);
    serde_json::json!({ "puts": vec![serde_json::json!({ "type": "xml", "value": value }); 10] })
        .to_string()
}

/// The finding: twelve puts of 10 x 100 KiB evicted a VAST stored for an hour. Now the
/// stranger's puts land in the anonymous share, limited per client, and the exchange's VAST
/// stays.
#[tokio::test]
async fn a_strangers_flood_neither_passes_its_rate_nor_evicts_the_exchanges_markup() {
    let dir = TempDir::new("edge-store");
    let config = store_config(
        &dir,
        "max_bytes = 2097152\nmax_value_bytes = 102400\nmax_puts = 10\n\
         anonymous_puts = true\nanonymous_share = 0.5\n",
    );
    // Time stands still: the rate is the store's decision, not the machine's speed.
    let clock = Arc::new(ManualClock::at(1_800_000_000_000));
    let edge = start_edge(&config, clock.clone()).await;
    let vast = r#"{"puts":[{"type":"xml","value":"<VAST version=\"4.2\"/>","ttlseconds":3600}]}"#;
    let kept = uuids(&put(edge.addr, vast, Some(EXCHANGE_KEY)).await);
    let flood = flood_body();
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let answer = put(edge.addr, &flood, None).await;
        if answer.status.as_u16() == 429 {
            let retry = answer.header("retry-after").map(str::to_owned);
            assert!(
                retry
                    .as_deref()
                    .and_then(|s| s.parse::<u64>().ok())
                    .is_some_and(|s| s >= 1),
                "{retry:?}"
            );
        }
        statuses.push(answer.status.as_u16());
    }
    // One 1 MiB request passes a full bucket (256 KiB a second) and leaves it in debt; the
    // eleven sent in the same instant wait.
    assert_eq!(statuses[0], 200, "{statuses:?}");
    assert!(statuses[1..].iter().all(|s| *s == 429), "{statuses:?}");
    // The debt (about 750 KiB) and a full second's worth are paid back in under four seconds,
    // what Retry-After said.
    let again = put(edge.addr, &flood, None).await;
    assert_eq!(again.header("retry-after"), Some("4"));
    clock.advance(std::time::Duration::from_secs(3));
    assert_eq!(put(edge.addr, &flood, None).await.status.as_u16(), 429);
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(put(edge.addr, &flood, None).await.status.as_u16(), 200);
    let still = get(edge.addr, &format!("/cache?uuid={}", kept[0])).await;
    assert_eq!(
        still.status.as_u16(),
        200,
        "the exchange's VAST was evicted"
    );
    edge.stop().await;
}

/// The share alone protects it too: a stranger with no rate limit to speak of, whose puts
/// overflow the anonymous share many times over, evicts only anonymous entries.
#[tokio::test]
async fn each_share_evicts_only_its_own_entries() {
    let dir = TempDir::new("edge-store");
    let config = store_config(
        &dir,
        "max_bytes = 2097152\nmax_value_bytes = 102400\nmax_puts = 10\n\
         anonymous_puts = true\nanonymous_share = 0.5\n\
         anonymous_puts_per_s = 1000\nanonymous_bytes_per_s = 1073741824\n",
    );
    let edge = start_edge(&config, Arc::new(SystemClock)).await;
    let vast = r#"{"puts":[{"type":"xml","value":"<VAST version=\"4.2\"/>","ttlseconds":3600}]}"#;
    let kept = uuids(&put(edge.addr, vast, Some(EXCHANGE_KEY)).await);
    let flood = flood_body();
    let mut first_anonymous = Vec::new();
    for n in 0..12 {
        let answer = put(edge.addr, &flood, None).await;
        assert_eq!(answer.status.as_u16(), 200);
        if n == 0 {
            first_anonymous = uuids(&answer);
        }
    }
    assert_eq!(
        get(edge.addr, &format!("/cache?uuid={}", kept[0]))
            .await
            .status
            .as_u16(),
        200
    );
    assert_eq!(
        get(edge.addr, &format!("/cache?uuid={}", first_anonymous[0]))
            .await
            .status
            .as_u16(),
        404,
        "the flood evicted its own oldest entries"
    );
    let page = get(edge.admin, "/metrics").await;
    let text = String::from_utf8_lossy(&page.body);
    assert!(
        text.contains("gavel_edge_store_share_budget_bytes{writer=\"anonymous\"} 1048576"),
        "{text}"
    );
    edge.stop().await;
}
