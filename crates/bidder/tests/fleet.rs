//! Two bidders following one campaign set in a real `nats-server -js` (docs/fleet.md): a push
//! reaches both and each serves the same revision (admin and `/metrics`) and bids from it;
//! invalid sets forced into the bucket are refused by both while the last good revision
//! serves; while a revision is in force the campaign file does not override it; NATS killed
//! and restarted with its store, a bidder started meanwhile serves its file, and a later push
//! (TOML this time) reaches all three.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{TestBidder, campaign_json, metric};
use serde_json::Value;
use testkit::NatsServer;

const KEY: &str = "bidder.campaigns";

async fn follower(url: &str) -> TestBidder {
    let file = format!("[{}]", campaign_json("c1", 1000.0, 2.0, "asap"));
    let extra = format!("[fleet]\nnats_url = \"{url}\"\nresync_ms = 200\n");
    TestBidder::start(&file, &extra).await
}

/// The campaign ids and the `config` object of `/admin/campaigns`.
async fn serving(b: &TestBidder) -> (Vec<String>, Value) {
    let v = b.admin().await;
    let ids = v["campaigns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    (ids, v["config"].clone())
}

async fn converge(nodes: &[&TestBidder], source: &str, revision: u64) {
    let what = format!("every bidder to serve {source} revision {revision}");
    testkit::time::eventually(Duration::from_secs(15), &what, || async {
        for b in nodes {
            let (_, config) = serving(b).await;
            if config["source"] != source || config["revision"] != revision {
                return false;
            }
        }
        true
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bidders_follow_one_campaign_set_through_faults() {
    let mut nats = NatsServer::start().await;
    let url = nats.url();
    let section = fleet::FleetSection::new(url.clone());
    let b1 = follower(&url).await;
    let b2 = follower(&url).await;
    for b in [&b1, &b2] {
        let (ids, config) = serving(b).await;
        assert_eq!(
            (ids, &config["source"]),
            (vec!["c1".to_owned()], &Value::from("file"))
        );
    }

    let set = format!("[{}]", campaign_json("c2", 1000.0, 3.0, "asap"));
    let r1 = fleet::push(&section, KEY, Bytes::from(set)).await.unwrap();
    converge(&[&b1, &b2], "nats", r1).await;
    for b in [&b1, &b2] {
        assert_eq!(serving(b).await.0, ["c2"]);
        assert_eq!(
            metric(b, "gavel_bidder_config_version{source=\"nats\"}").await,
            r1
        );
        let (_, _, _) = common::bid(b, "r1").await;
    }

    // Invalid sets forced in: refused by both, counted, r1 keeps serving.
    let invalid = [
        format!("[{}]", campaign_json("c3", -5.0, 3.0, "asap")),
        "[[campaign]\nid = \"x\"\n".to_owned(),
        format!(
            "[{}, {}]",
            campaign_json("c4", 1.0, 2.0, "asap"),
            campaign_json("c4", 1.0, 3.0, "asap")
        ),
    ];
    for (n, text) in invalid.iter().enumerate() {
        fleet::push(&section, KEY, Bytes::from(text.clone()))
            .await
            .unwrap();
        let refused = n as u64 + 1;
        testkit::time::wait_until(
            Duration::from_secs(15),
            &format!("invalid set {n} refused by both"),
            || {
                [&b1, &b2]
                    .iter()
                    .all(|b| b.bidder.metrics().config_push_refused.get() == refused)
            },
        )
        .await;
        for b in [&b1, &b2] {
            let (ids, config) = serving(b).await;
            assert_eq!(
                (ids, &config["revision"]),
                (vec!["c2".to_owned()], &Value::from(r1))
            );
        }
    }

    // The file changed while r1 is in force: not applied, the bucket wins.
    b1.write_campaigns(&format!("[{}]", campaign_json("c5", 1.0, 2.0, "asap")));
    assert_eq!(b1.bidder.reload().await, Ok(1));
    assert_eq!(serving(&b1).await.0, ["c2"]);

    // NATS killed; a bidder started meanwhile serves its file; NATS back with its store.
    nats.kill();
    let b3 = follower(&url).await;
    assert_eq!(serving(&b3).await.1["source"], "file");
    nats.restart().await;
    let toml = "[[campaign]]\nid = \"c6\"\nbudget = { total = 100 }\nbid = { cpm = 2 }\n\
        creatives = [{ id = \"cr\", w = 300, h = 250, adm = \"x\" }]\n";
    let r2 = fleet::push(&section, KEY, Bytes::from(toml)).await.unwrap();
    converge(&[&b1, &b2, &b3], "nats", r2).await;
    for b in [&b1, &b2, &b3] {
        assert_eq!(serving(b).await.0, ["c6"]);
    }
}
