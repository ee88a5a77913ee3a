//! Single flight over real sockets: a herd of clients missing on one object at once makes one
//! origin request, and every client streams the bytes as they arrive.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Obj, TestOrigin, config, get_streaming, open_files, pattern, start_edge};
use creative_edge::SystemClock;
use tokio::sync::oneshot;

const CONFIG: &str = r#"
    [[origins]]
    name = "cdn"
    url = "http://{origin}/creatives"
    max_connections = 4
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_misses_make_one_origin_request_and_all_stream_before_it_ends() {
    const CLIENTS: usize = 1_000;
    open_files(4 * CLIENTS as u64);
    let origin = TestOrigin::start().await;
    let body = pattern(300_000, 7);
    // The origin sends 1,000 bytes, then holds the rest until the test releases it: the fill
    // cannot end before every client has had its first byte.
    origin.put(
        "/creatives/hero.mp4",
        Obj {
            hold_after: Some(1_000),
            ..Obj::ok(body.clone(), "video/mp4", "max-age=600")
        },
    );
    let edge = start_edge(&config(CONFIG, origin.addr), Arc::new(SystemClock)).await;
    let mut first_bytes = Vec::with_capacity(CLIENTS);
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let (tx, rx) = oneshot::channel();
        first_bytes.push(rx);
        clients.push(tokio::spawn(get_streaming(
            edge.addr,
            "/assets/cdn/hero.mp4",
            tx,
        )));
    }
    for rx in first_bytes {
        // Generous: 1,000 connections on a loaded 2-core machine; the claim is the order of
        // events, not the time.
        tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .expect("every client gets its first byte while the origin holds the rest")
            .expect("the client reported");
    }
    let metrics = edge.edge.metrics().clone();
    assert_eq!(origin.requests("/creatives/hero.mp4"), 1);
    assert_eq!(metrics.fills.get(), 0, "the fill has not ended yet");
    origin.release();
    for client in clients {
        let got = client.await.expect("client task");
        assert!(
            got == body,
            "a client got {} bytes that differ from the object",
            got.len()
        );
    }
    assert_eq!(
        origin.requests("/creatives/hero.mp4"),
        1,
        "exactly one origin request"
    );
    testkit::time::wait_until(Duration::from_secs(10), "the fill lands", || {
        metrics.fills.get() == 1
    })
    .await;
    assert_eq!(metrics.fill_clients.get(), CLIENTS as u64);
    assert_eq!(metrics.largest_herd.get(), CLIENTS as u64);
    assert_eq!(
        edge.edge
            .origin_fetches("cdn", creative_edge::metrics::Fetch::Ok),
        1
    );
    edge.stop().await;
}
