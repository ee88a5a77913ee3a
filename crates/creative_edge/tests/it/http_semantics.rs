//! What a client can ask of a stored object, over real sockets: conditional requests, ranges,
//! HEAD, CORS, and the refusals of bad requests.

use crate::common;

use std::sync::Arc;

use common::{Obj, TestOrigin, config, get, pattern, request, start_edge};
use creative_edge::ManualClock;

const CONFIG: &str = r#"
    [[origins]]
    name = "cdn"
    url = "http://{origin}/c"
"#;

async fn setup() -> (TestOrigin, common::Running) {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/a.png",
        Obj::ok(pattern(1_000, 1), "image/png", "max-age=600").with("etag", "\"a1\""),
    );
    origin.put(
        "/c/b.png",
        Obj::ok(pattern(1_000, 2), "image/png", "max-age=600")
            .with("last-modified", "Wed, 25 Nov 2026 10:00:00 GMT"),
    );
    let edge = start_edge(
        &config(CONFIG, origin.addr),
        Arc::new(ManualClock::at(1_795_564_800_000)),
    )
    .await;
    (origin, edge)
}

#[tokio::test]
async fn if_none_match_gets_a_304_on_a_stream_and_on_a_hit() {
    let (_origin, edge) = setup().await;
    let streamed = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("if-none-match", "\"a1\"")],
    )
    .await;
    assert_eq!(
        (streamed.status.as_u16(), streamed.header("etag")),
        (304, Some("\"a1\""))
    );
    assert!(streamed.body.is_empty());
    let hit = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("if-none-match", "W/\"zz\", W/\"a1\"")],
    )
    .await;
    assert_eq!(
        (hit.status.as_u16(), hit.header("x-cache")),
        (304, Some("hit_memory"))
    );
    let other = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("if-none-match", "\"zz\"")],
    )
    .await;
    assert_eq!(other.status.as_u16(), 200);
    // An origin without an ETag: the edge makes one from the body, and honours it.
    get(edge.addr, "/assets/cdn/b.png").await;
    let made = get(edge.addr, "/assets/cdn/b.png").await;
    let etag = made.header("etag").expect("an etag").to_owned();
    assert!(etag.starts_with("\"g-"), "{etag}");
    let cond = request(
        edge.addr,
        "GET",
        "/assets/cdn/b.png",
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(cond.status.as_u16(), 304);
    edge.stop().await;
}

#[tokio::test]
async fn ranges_get_206_or_416_and_a_stale_if_range_gets_the_whole_object() {
    let (_origin, edge) = setup().await;
    // A miss streams the whole object (ranges are cut from stored objects only).
    let first = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("range", "bytes=0-9")],
    )
    .await;
    assert_eq!((first.status.as_u16(), first.body.len()), (200, 1_000));
    let part = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("range", "bytes=100-199")],
    )
    .await;
    assert_eq!(part.status.as_u16(), 206);
    assert_eq!(part.header("content-range"), Some("bytes 100-199/1000"));
    assert_eq!(part.body, pattern(1_000, 1).slice(100..200));
    let tail = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("range", "bytes=-10")],
    )
    .await;
    assert_eq!((tail.status.as_u16(), tail.body.len()), (206, 10));
    let beyond = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("range", "bytes=5000-")],
    )
    .await;
    assert_eq!(
        (beyond.status.as_u16(), beyond.header("content-range")),
        (416, Some("bytes */1000"))
    );
    let held = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("range", "bytes=0-9"), ("if-range", "\"a1\"")],
    )
    .await;
    assert_eq!(held.status.as_u16(), 206);
    let changed = request(
        edge.addr,
        "GET",
        "/assets/cdn/a.png",
        &[("range", "bytes=0-9"), ("if-range", "\"old\"")],
    )
    .await;
    assert_eq!((changed.status.as_u16(), changed.body.len()), (200, 1_000));
    edge.stop().await;
}

#[tokio::test]
async fn head_answers_with_the_headers_and_no_body_and_fills_on_a_miss() {
    let (origin, edge) = setup().await;
    let miss = request(edge.addr, "HEAD", "/assets/cdn/a.png", &[]).await;
    assert_eq!(
        (miss.status.as_u16(), miss.header("content-length")),
        (200, Some("1000"))
    );
    assert!(miss.body.is_empty());
    let hit = request(edge.addr, "HEAD", "/assets/cdn/a.png", &[]).await;
    assert_eq!(hit.header("x-cache"), Some("hit_memory"));
    assert_eq!(hit.header("content-type"), Some("image/png"));
    assert_eq!(hit.header("content-length"), Some("1000"));
    assert_eq!(hit.header("accept-ranges"), Some("bytes"));
    assert_eq!(hit.header("access-control-allow-origin"), Some("*"));
    assert!(hit.body.is_empty());
    assert_eq!(origin.requests("/c/a.png"), 1);
    edge.stop().await;
}

#[tokio::test]
async fn bad_requests_are_refused_with_a_reason_and_never_reach_the_origin() {
    let (origin, edge) = setup().await;
    for (method, path, status) in [
        ("POST", "/assets/cdn/a.png", 405),
        ("DELETE", "/assets/cdn/a.png", 405),
        ("GET", "/assets/cdn/../secret", 400),
        ("GET", "/assets/cdn/x/%2e%2e/secret", 400),
        ("GET", "/assets/cdn/a%2Fb", 400),
        ("GET", "/assets/cdn/", 400),
        ("GET", "/assets/nope/a.png", 404),
        ("GET", "/elsewhere", 404),
        ("PUT", "/cache", 405),
    ] {
        let got = request(edge.addr, method, path, &[]).await;
        assert_eq!(got.status.as_u16(), status, "{method} {path}");
        let body = String::from_utf8_lossy(&got.body);
        assert!(body.contains("\"error\""), "{method} {path}: {body}");
    }
    let long = format!("/assets/cdn/{}", "a".repeat(3_000));
    assert_eq!(get(edge.addr, &long).await.status.as_u16(), 400);
    assert_eq!(origin.requests("/c/a.png") + origin.requests("/secret"), 0);
    edge.stop().await;
}

#[tokio::test]
async fn framing_a_proxy_might_read_otherwise_is_refused_on_both_ports() {
    let edge = common::start_edge(
        &common::config("", "127.0.0.1:1".parse().expect("addr")),
        std::sync::Arc::new(creative_edge::SystemClock),
    )
    .await;
    testkit::http::assert_strict_framing(edge.addr, "/cache").await;
    testkit::http::assert_strict_framing(edge.admin, "/metrics").await;
    edge.stop().await;
}

#[tokio::test]
async fn asset_paths_reach_the_origin_in_one_spelling_and_climbs_never_do() {
    let (origin, edge) = setup().await;
    // Three spellings of one name: one origin request, one cache entry.
    for spelling in [
        "/assets/cdn/%61.png",
        "/assets/cdn/a.png",
        "/assets/cdn/a%2Epng",
    ] {
        assert_eq!(
            get(edge.addr, spelling).await.status.as_u16(),
            200,
            "{spelling}"
        );
    }
    assert_eq!(origin.requests("/c/a.png"), 1);
    for bad in [
        "/assets/cdn/..;/secret",
        "/assets/cdn/x/..;jsessionid=1/../secret",
        "/assets/cdn/a%5c..%5csecret",
        "/assets/cdn/%c0%ae%c0%ae/secret",
        "/assets/cdn/%2e%2e%3b/secret",
        "/assets/cdn/a%00.png",
    ] {
        let answer = get(edge.addr, bad).await;
        assert_eq!(answer.status.as_u16(), 400, "{bad}");
    }
    for path in ["/secret", "/c/secret", "/c/../secret", "/c/..;/secret"] {
        assert_eq!(origin.requests(path), 0, "{path}");
    }
    edge.stop().await;
}
