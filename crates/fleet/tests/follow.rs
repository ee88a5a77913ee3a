//! The follower and the push against a real `nats-server -js`: every revision reaches every
//! follower once and in order, a follower started while NATS is down catches up when it
//! comes, and a NATS restart with the same store loses no later push.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fleet::{Change, FleetSection, Pushed, follow, push, show};
use testkit::NatsServer;

/// A server stand-in: what it was offered, in order.
#[derive(Default)]
struct Node {
    offered: Mutex<Vec<Change>>,
}

impl Node {
    fn revisions(&self) -> Vec<u64> {
        self.offered
            .lock()
            .unwrap()
            .iter()
            .map(Change::revision)
            .collect()
    }
    fn last(&self) -> Option<Change> {
        self.offered.lock().unwrap().last().cloned()
    }
}

fn start(section: &FleetSection) -> Arc<Node> {
    let node = Arc::new(Node::default());
    follow(
        Arc::downgrade(&node),
        section.clone(),
        "test.key".into(),
        "fleet-test",
        |node: Arc<Node>, change| async move {
            node.offered.lock().unwrap().push(change);
        },
    );
    node
}

/// Waits (at most 15 s) until every node's last change is `revision`.
async fn converge(nodes: &[Arc<Node>], revision: u64) {
    let until = Instant::now() + Duration::from_secs(15);
    while nodes
        .iter()
        .any(|n| n.last().map(|c| c.revision()) != Some(revision))
    {
        assert!(
            Instant::now() < until,
            "nodes did not reach revision {revision}: {:?}",
            nodes.iter().map(|n| n.revisions()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn section(url: String) -> FleetSection {
    FleetSection {
        resync_ms: 200,
        ..FleetSection::new(url)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_reach_every_follower_once_in_order() {
    let nats = NatsServer::start().await;
    let s = section(nats.url());
    assert!(show(&s, "test.key").await.is_err(), "no bucket yet");
    let first = push(&s, "test.key", Bytes::from_static(b"one"))
        .await
        .unwrap();
    let nodes: Vec<_> = (0..3).map(|_| start(&s)).collect();
    converge(&nodes, first).await;
    let second = push(&s, "test.key", Bytes::from_static(b"two"))
        .await
        .unwrap();
    let third = push(&s, "test.key", Bytes::from_static(b"three"))
        .await
        .unwrap();
    assert!(first < second && second < third);
    converge(&nodes, third).await;
    for node in &nodes {
        let seen = node.revisions();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "in order, once: {seen:?}"
        );
        assert_eq!(
            node.last(),
            Some(Change::Put(Pushed {
                revision: third,
                value: Bytes::from_static(b"three")
            }))
        );
    }
    let shown = show(&s, "test.key").await.unwrap().unwrap();
    assert_eq!(shown.revision, third);
    assert_eq!(shown.digest, Some(fleet::digest(b"three")));
    assert_eq!(shown.bytes, 5);
    // A key that was never put shows nothing; a document past the limit is refused before
    // it travels.
    assert_eq!(show(&s, "other.key").await.unwrap(), None);
    let huge = Bytes::from(vec![b'x'; fleet::MAX_DOCUMENT_BYTES + 1]);
    let e = push(&s, "test.key", huge).await.unwrap_err().to_string();
    assert!(e.contains("at most"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_outlives_nats_and_starts_without_it() {
    let mut nats = NatsServer::start().await;
    let s = section(nats.url());
    let first = push(&s, "test.key", Bytes::from_static(b"one"))
        .await
        .unwrap();
    let early = start(&s);
    converge(std::slice::from_ref(&early), first).await;
    nats.kill();
    // Started while NATS is down: nothing to apply, no error to the node.
    let late = start(&s);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(late.last(), None);
    nats.restart().await;
    converge(&[early.clone(), late.clone()], first).await;
    let second = push(&s, "test.key", Bytes::from_static(b"two"))
        .await
        .unwrap();
    converge(&[early.clone(), late.clone()], second).await;
    // A delete is offered as a removal.
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let store = js.get_key_value("gavel-config").await.unwrap();
    store.delete("test.key").await.unwrap();
    let until = Instant::now() + Duration::from_secs(15);
    while !matches!(early.last(), Some(Change::Removed { .. })) {
        assert!(
            Instant::now() < until,
            "removal not seen: {:?}",
            early.last()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        early.revisions().iter().filter(|r| **r == second).count(),
        1
    );
}
