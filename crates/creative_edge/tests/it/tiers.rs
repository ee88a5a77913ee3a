//! The tiers over real sockets, with the edge's clock moved by hand: lifetimes, LRU eviction
//! by bytes, the placement policy, and the disk tier across restarts and corruption.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Obj, TestOrigin, config, get, pattern, start_edge};
use creative_edge::ManualClock;

/// 2026-11-25T00:00:00Z.
const T0_MS: u64 = 1_795_564_800_000;

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at(T0_MS))
}

#[tokio::test]
async fn an_object_is_served_from_memory_until_its_lifetime_ends_then_fetched_again() {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/a.png",
        Obj::ok(pattern(2_000, 1), "image/png", "max-age=60"),
    );
    origin.put(
        "/c/silent.png",
        Obj::ok(pattern(2_000, 2), "image/png", "public"),
    );
    let toml = r#"
        default_ttl_s = 30
        [[origins]]
        name = "cdn"
        url = "http://{origin}/c"
    "#;
    let clock = clock();
    let edge = start_edge(&config(toml, origin.addr), clock.clone()).await;
    let first = get(edge.addr, "/assets/cdn/a.png").await;
    assert_eq!(
        (first.status.as_u16(), first.header("x-cache")),
        (200, Some("miss"))
    );
    assert_eq!(first.body, pattern(2_000, 1));
    clock.advance(Duration::from_secs(59));
    let hit = get(edge.addr, "/assets/cdn/a.png").await;
    assert_eq!(hit.header("x-cache"), Some("hit_memory"));
    assert_eq!(hit.header("age"), Some("59"));
    assert_eq!(hit.body, first.body);
    assert_eq!(origin.requests("/c/a.png"), 1);
    clock.advance(Duration::from_secs(1));
    let again = get(edge.addr, "/assets/cdn/a.png").await;
    assert_eq!(again.header("x-cache"), Some("miss"), "expired at 60 s");
    assert_eq!(origin.requests("/c/a.png"), 2);

    // No lifetime from the origin: the configured default (30 s).
    get(edge.addr, "/assets/cdn/silent.png").await;
    clock.advance(Duration::from_secs(29));
    assert_eq!(
        get(edge.addr, "/assets/cdn/silent.png")
            .await
            .header("x-cache"),
        Some("hit_memory")
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        get(edge.addr, "/assets/cdn/silent.png")
            .await
            .header("x-cache"),
        Some("miss")
    );
    assert_eq!(origin.requests("/c/silent.png"), 2);
    edge.stop().await;
}

#[tokio::test]
async fn the_memory_tier_evicts_the_least_recently_used_to_stay_within_its_bytes() {
    let origin = TestOrigin::start().await;
    for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
        origin.put(
            &format!("/c/{name}"),
            Obj::ok(pattern(1_000, i as u8), "image/png", "max-age=600"),
        );
    }
    // Room for three objects of 1,000 bytes and their overhead, not four.
    let toml = r#"
        [memory]
        max_bytes = 4000
        [[origins]]
        name = "cdn"
        url = "http://{origin}/c"
    "#;
    let edge = start_edge(&config(toml, origin.addr), clock()).await;
    for name in ["a", "b", "c"] {
        get(edge.addr, &format!("/assets/cdn/{name}")).await;
    }
    let metrics = edge.edge.metrics().clone();
    testkit::time::wait_until(Duration::from_secs(5), "three stored", || {
        metrics.memory.objects.get() == 3
    })
    .await;
    // `a` is used again, so `b` is now the least recently used.
    assert_eq!(
        get(edge.addr, "/assets/cdn/a").await.header("x-cache"),
        Some("hit_memory")
    );
    get(edge.addr, "/assets/cdn/d").await;
    testkit::time::wait_until(Duration::from_secs(5), "d stored", || {
        metrics.memory.inserts.get() == 4
    })
    .await;
    assert_eq!(metrics.memory.evictions.get(), 1);
    assert!(metrics.memory.bytes.get() <= 4_000);
    assert_eq!(
        get(edge.addr, "/assets/cdn/a").await.header("x-cache"),
        Some("hit_memory")
    );
    assert_eq!(
        get(edge.addr, "/assets/cdn/c").await.header("x-cache"),
        Some("hit_memory")
    );
    assert_eq!(
        get(edge.addr, "/assets/cdn/b").await.header("x-cache"),
        Some("miss")
    );
    assert_eq!(origin.requests("/c/b"), 2);
    assert_eq!(origin.requests("/c/a"), 1);
    edge.stop().await;
}

#[tokio::test]
async fn the_policy_sends_video_to_disk_only_and_refuses_what_no_tier_takes() {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/spot.mp4",
        Obj::ok(pattern(5_000, 3), "video/mp4", "max-age=600"),
    );
    origin.put(
        "/c/banner.png",
        Obj::ok(pattern(5_000, 4), "image/png", "max-age=600"),
    );
    origin.put(
        "/c/huge.png",
        Obj::ok(pattern(50_000, 5), "image/png", "max-age=600"),
    );
    origin.put(
        "/c/private.png",
        Obj::ok(pattern(100, 6), "image/png", "private, max-age=600"),
    );
    let dir = testkit::TempDir::new("edge-policy");
    let toml = format!(
        r#"
        [memory]
        content_types = ["image/*"]
        max_object_bytes = 10000
        [disk]
        dir = "{}"
        max_object_bytes = 20000
        [[origins]]
        name = "cdn"
        url = "http://{{origin}}/c"
    "#,
        dir.path().display()
    );
    let edge = start_edge(&config(&toml, origin.addr), clock()).await;
    let metrics = edge.edge.metrics().clone();
    for name in ["spot.mp4", "banner.png", "huge.png", "private.png"] {
        assert_eq!(
            get(edge.addr, &format!("/assets/cdn/{name}"))
                .await
                .status
                .as_u16(),
            200
        );
    }
    testkit::time::wait_until(Duration::from_secs(5), "stored", || {
        metrics.disk.inserts.get() == 2 && metrics.not_stored.get() == 2
    })
    .await;
    assert_eq!(
        metrics.memory.inserts.get(),
        1,
        "only the banner is in memory"
    );
    assert_eq!(
        get(edge.addr, "/assets/cdn/spot.mp4")
            .await
            .header("x-cache"),
        Some("hit_disk")
    );
    assert_eq!(
        get(edge.addr, "/assets/cdn/banner.png")
            .await
            .header("x-cache"),
        Some("hit_memory")
    );
    assert_eq!(
        get(edge.addr, "/assets/cdn/huge.png")
            .await
            .header("x-cache"),
        Some("miss")
    );
    assert_eq!(
        get(edge.addr, "/assets/cdn/private.png")
            .await
            .header("x-cache"),
        Some("miss")
    );
    edge.stop().await;
}

const DISK: &str = r#"
    [memory]
    max_bytes = 1000000
    [disk]
    dir = "{dir}"
    [[origins]]
    name = "cdn"
    url = "http://{origin}/c"
"#;

#[tokio::test]
async fn after_a_restart_the_disk_tier_serves_without_the_origin() {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/v.mp4",
        Obj::ok(pattern(100_000, 9), "video/mp4", "max-age=600"),
    );
    let dir = testkit::TempDir::new("edge-restart");
    let config = config(
        &DISK.replace("{dir}", &dir.path().display().to_string()),
        origin.addr,
    );
    let edge = start_edge(&config, clock()).await;
    assert_eq!(
        get(edge.addr, "/assets/cdn/v.mp4").await.status.as_u16(),
        200
    );
    let metrics = edge.edge.metrics().clone();
    testkit::time::wait_until(Duration::from_secs(5), "on disk", || {
        metrics.disk.inserts.get() == 1
    })
    .await;
    edge.stop().await;
    origin.stop();

    let edge = start_edge(&config, clock()).await;
    assert_eq!(
        edge.edge.metrics().disk.objects.get(),
        1,
        "indexed at start"
    );
    let got = get(edge.addr, "/assets/cdn/v.mp4").await;
    assert_eq!(
        (got.status.as_u16(), got.header("x-cache")),
        (200, Some("hit_disk"))
    );
    assert!(got.body == pattern(100_000, 9));
    assert_eq!(origin.requests("/c/v.mp4"), 1);
    // Promoted to memory by that read.
    assert_eq!(
        get(edge.addr, "/assets/cdn/v.mp4").await.header("x-cache"),
        Some("hit_memory")
    );
    edge.stop().await;
}

#[tokio::test]
async fn a_corrupted_disk_entry_is_never_served_but_dropped_and_fetched_again() {
    let origin = TestOrigin::start().await;
    origin.put(
        "/c/v.mp4",
        Obj::ok(pattern(100_000, 11), "video/mp4", "max-age=600"),
    );
    let dir = testkit::TempDir::new("edge-corrupt");
    let config = config(
        &DISK.replace("{dir}", &dir.path().display().to_string()),
        origin.addr,
    );
    let edge = start_edge(&config, clock()).await;
    get(edge.addr, "/assets/cdn/v.mp4").await;
    let metrics = edge.edge.metrics().clone();
    testkit::time::wait_until(Duration::from_secs(5), "on disk", || {
        metrics.disk.inserts.get() == 1
    })
    .await;
    let file = edge.edge.disk_file_of("cdn/v.mp4").expect("a disk tier");
    edge.stop().await;

    // One bit flipped in the middle of the body.
    let mut bytes = std::fs::read(&file).expect("the object's file");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&file, bytes).expect("corrupt it");

    let edge = start_edge(&config, clock()).await;
    let got = get(edge.addr, "/assets/cdn/v.mp4").await;
    assert_eq!(
        (got.status.as_u16(), got.header("x-cache")),
        (200, Some("miss"))
    );
    assert!(
        got.body == pattern(100_000, 11),
        "the corrupt copy was served"
    );
    assert_eq!(origin.requests("/c/v.mp4"), 2);
    let metrics = edge.edge.metrics().clone();
    assert_eq!(metrics.disk_corrupt.get(), 1);
    testkit::time::wait_until(Duration::from_secs(5), "rewritten", || {
        metrics.disk.inserts.get() == 1
    })
    .await;
    let rewritten = std::fs::read(&file).expect("rewritten file");
    assert!(rewritten.len() > 100_000);
    edge.stop().await;
}
