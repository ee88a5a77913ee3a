//! The bidder on a Redis Cluster (`backend = "redis-cluster"`): `gavel ledger status|create`
//! against a real cluster, and a bid won and charged in both Redis modes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{TestBidder, banner_request, call, campaign_json};
use testkit::{RedisCluster, TempDir};

fn cluster_toml(cluster: &RedisCluster, mode: &str) -> String {
    let seeds: Vec<String> = cluster
        .seed_urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect();
    format!(
        "[ledger]\nbackend = \"redis-cluster\"\nredis_mode = \"{mode}\"\nredis_timeout_ms = 2000\n\
         lease_report_ms = 50\nredis_cluster_nodes = [{}]\n",
        seeds.join(", ")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_status_and_create_work_against_a_cluster() {
    let cluster = RedisCluster::start(3, 0).await;
    let dir = TempDir::new("cluster-ledger");
    let security = testkit::secrets::security_toml(dir.path());
    let text = format!(
        "campaigns = \"c.json\"\n{security}{}",
        cluster_toml(&cluster, "per-bid")
    );
    std::fs::write(dir.join("c.json"), "[]").unwrap();
    std::fs::write(dir.join("bidder.toml"), text).unwrap();
    let config = bidder::BidderConfig::load(&dir.join("bidder.toml")).unwrap();
    let before = bidder::ledger_open::status(&config).await.unwrap();
    assert_eq!(before.ledger, None);
    let opened = bidder::ledger_open::create(
        &config,
        false,
        bidder::ledger_open::MarkerRule::Required,
        "test",
    )
    .await
    .unwrap();
    let bidder::ledger_open::Opened::Created { ledger, .. } = opened else {
        panic!("not created: {opened:?}");
    };
    let after = bidder::ledger_open::status(&config).await.unwrap();
    assert_eq!(after.ledger, Some(ledger.clone()));
    // Every primary holds the marker of its slots.
    for reply in cluster.on_masters(&["DBSIZE"]).await {
        let keys: u64 = reply.trim_start_matches(':').trim().parse().unwrap();
        assert!(keys > 4_000, "{reply}");
    }
    // Creating again finds it.
    assert!(matches!(
        bidder::ledger_open::create(&config, false, bidder::ledger_open::MarkerRule::Required, "test").await.unwrap(),
        bidder::ledger_open::Opened::Existing { ledger: l } if l == ledger
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bid_is_won_and_charged_on_a_cluster_in_both_modes() {
    let cluster = RedisCluster::start(3, 0).await;
    for (mode, campaign) in [("per-bid", "c"), ("lease", "d")] {
        let campaigns = format!("[{}]", campaign_json(campaign, 10.0, 2.0, "asap"));
        let b = TestBidder::start(&campaigns, &cluster_toml(&cluster, mode)).await;
        // Lease mode refuses a campaign's first bids until its lease arrives.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let body = loop {
            let (status, body) = b.post_bid(&banner_request("q1", 300, 250, 0.5)).await;
            if status == 200 {
                break body;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{mode}: no bid ({status})"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let nurl = v["seatbid"][0]["bid"][0]["nurl"].as_str().unwrap();
        let win = nurl.replace("${AUCTION_PRICE}", "1.5");
        assert_eq!(call(b.addr, "GET", &win, "").await.0, 204, "{mode}");
        // Lease mode reports the spend to the cluster at its next round.
        testkit::time::eventually(
            std::time::Duration::from_secs(10),
            "the win in the shared books",
            || async { b.campaign(campaign).await["nanos"]["spent"] == 1_500_000 },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_is_created_on_a_cluster_over_tls_with_the_ca_file() {
    let dir = TempDir::new("cluster-tls-ledger");
    let files = testkit::tls::generate(dir.path(), "redis");
    let cluster = RedisCluster::start_with(3, 0, Some(files.clone())).await;
    let seeds: Vec<String> = cluster
        .tls_seed_addrs()
        .iter()
        .map(|a| format!("\"rediss://{a}\""))
        .collect();
    let security = testkit::secrets::security_toml(dir.path());
    let text = format!(
        "campaigns = \"c.json\"\n{security}[ledger]\nbackend = \"redis-cluster\"\n\
         redis_timeout_ms = 5000\nredis_ca_file = \"{}\"\nredis_cluster_nodes = [{}]\n",
        files.ca.display(),
        seeds.join(", ")
    );
    std::fs::write(dir.join("c.json"), "[]").unwrap();
    std::fs::write(dir.join("bidder.toml"), text).unwrap();
    let config = bidder::BidderConfig::load(&dir.join("bidder.toml")).unwrap();
    let opened = bidder::ledger_open::create(
        &config,
        false,
        bidder::ledger_open::MarkerRule::Required,
        "test",
    )
    .await
    .unwrap();
    assert!(matches!(
        opened,
        bidder::ledger_open::Opened::Created { .. }
    ));
    let state = bidder::ledger_open::status(&config).await.unwrap();
    assert!(state.ledger.is_some());
}
