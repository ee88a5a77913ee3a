//! Three exchanges following one roster in a real `nats-server -js` (docs/fleet.md): a push
//! reaches all of them and each serves the same revision (admin and `/metrics`, and the
//! auctions go to the pushed bidders); invalid pushes forced into the bucket are refused by
//! every node while the last good revision serves; NATS killed and restarted with its store,
//! then a later push still arrives; a node started while NATS is down serves its file and
//! takes the bucket's revision when NATS is back; while a revision is in force the file's
//! lists do not override it; removing the key brings the file's lists back. Times from push
//! to every node serving it are printed (`cargo test -p exchange --test fleet -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use support::*;
use testkit::http::call_as;
use testkit::secrets::ADMIN_TOKEN;
use testkit::{NatsServer, TempDir};

const KEY: &str = "exchange.roster";

fn bidder_block(name: &str, endpoint: &str) -> String {
    format!("[[bidders]]\nname = \"{name}\"\nendpoint = \"{endpoint}\"\nmax_connections = 16\n")
}

fn priced(seat: &'static str) -> impl Fn(&openrtb::BidRequest) -> Script {
    move |r| {
        bids(
            r,
            seat,
            |imp| json!({"id": "b", "impid": imp, "price": 1.0}),
        )
    }
}

/// One node: its own directory and file (bidder `a` only), following the bucket.
async fn node(nats_url: &str, local: &str) -> (RunningExchange, TempDir, PathBuf) {
    let dir = TempDir::new("fleet-exchange");
    let path = dir.join("exchange.toml");
    let admin = testkit::secrets::admin_toml(dir.path());
    let text = format!(
        "{admin}open_to_all_sellers = true\n{local}\n[fleet]\nnats_url = \"{nats_url}\"\nresync_ms = 200\n"
    );
    std::fs::write(&path, text).unwrap();
    let ex = exchange_from_file(&path).await;
    ex.exchange.watch();
    (ex, dir, path)
}

/// `GET /admin/bidders`: the bidders' names and the `config` object.
async fn roster(ex: &RunningExchange) -> (Vec<String>, Value) {
    let (status, body) = call_as(ex.admin, "GET", "/admin/bidders", Some(ADMIN_TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let names = v["bidders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_owned())
        .collect();
    (names, v["config"].clone())
}

/// Waits until every node serves `source` at `revision`, per its admin page.
async fn converge(nodes: &[&RunningExchange], source: &str, revision: u64) {
    let what = format!("every exchange to serve {source} revision {revision}");
    testkit::time::eventually(Duration::from_secs(15), &what, || async {
        for ex in nodes {
            let (_, config) = roster(ex).await;
            if config["source"] != source || config["revision"] != revision {
                return false;
            }
        }
        true
    })
    .await;
}

/// The seat that won one auction at `ex`.
async fn winner(ex: &RunningExchange) -> String {
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    body.unwrap()["seatbid"][0]["seat"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn metric_line(ex: &RunningExchange, prefix: &str) -> String {
    ex.metrics
        .render()
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_exchanges_follow_one_roster_through_faults() {
    let a = ScriptedBidder::start(priced("a")).await;
    let b = ScriptedBidder::start(priced("b")).await;
    let mut nats = NatsServer::start().await;
    let url = nats.url();
    let section = fleet::FleetSection::new(url.clone());
    let local = bidder_block("a", &a.endpoint());
    let (x1, _d1, path1) = node(&url, &local).await;
    let (x2, _d2, _) = node(&url, &local).await;
    let (x3, _d3, _) = node(&url, &local).await;
    let all = [&x1, &x2, &x3];
    // Before any push: the file serves, at its first load.
    for ex in all {
        let (names, config) = roster(ex).await;
        assert_eq!(names, ["a"]);
        assert_eq!(config["source"], "file");
        assert_eq!(config["revision"], 1);
        assert_eq!(winner(ex).await, "a");
    }

    // A push reaches all three; each serves the same revision and calls the pushed bidder.
    let doc = bidder_block("b", &b.endpoint());
    let pushed_at = std::time::Instant::now();
    let r1 = fleet::push(&section, KEY, Bytes::from(doc.clone()))
        .await
        .unwrap();
    converge(&all, "nats", r1).await;
    println!(
        "push to 3 exchanges serving it (admin-polled): {:?}",
        pushed_at.elapsed()
    );
    for ex in all {
        assert_eq!(roster(ex).await.0, ["b"]);
        assert_eq!(winner(ex).await, "b");
        assert_eq!(
            metric_line(ex, "gavel_exchange_config_version{"),
            format!("gavel_exchange_config_version{{source=\"nats\"}} {r1}")
        );
    }

    // Invalid documents forced in with a raw put: each refused by every node, counted, and
    // the last good revision keeps serving.
    let invalid = [
        "[[bidders]\nname = \"b\"\n".to_owned(),
        bidder_block("b", "ftp://127.0.0.1:9/"),
        format!("node = \"elsewhere\"\n{doc}"),
        format!("{doc}{doc}"),
    ];
    for (n, text) in invalid.iter().enumerate() {
        let r = fleet::push(&section, KEY, Bytes::from(text.clone()))
            .await
            .unwrap();
        testkit::time::wait_until(
            Duration::from_secs(15),
            &format!("invalid push {n} (revision {r}) refused by every node"),
            || {
                all.iter()
                    .all(|ex| ex.metrics.config_push_refused.get() == n as u64 + 1)
            },
        )
        .await;
        for ex in all {
            let (names, config) = roster(ex).await;
            assert_eq!(names, ["b"], "push {n}");
            assert_eq!(config["revision"], r1, "push {n}");
            assert_eq!(winner(ex).await, "b");
        }
    }

    // While a revision is in force the file's lists do not override it: a reload (SIGHUP)
    // of a file naming only `a` applies, and `b` still serves.
    std::fs::write(
        &path1,
        std::fs::read_to_string(&path1)
            .unwrap()
            .replace("max_connections = 16", "max_connections = 8"),
    )
    .unwrap();
    x1.exchange.reload().await.unwrap();
    let (names, config) = roster(&x1).await;
    assert_eq!(
        (names, &config["source"], &config["revision"]),
        (vec!["b".to_owned()], &json!("nats"), &json!(r1))
    );

    // NATS killed and restarted with its store; a node started meanwhile serves its file.
    nats.kill();
    let (x4, _d4, _) = node(&url, &local).await;
    let (names, config) = roster(&x4).await;
    assert_eq!(
        (names, &config["source"]),
        (vec!["a".to_owned()], &json!("file"))
    );
    assert_eq!(winner(&x4).await, "a");
    nats.restart().await;
    // ...and takes the bucket's latest good revision once NATS is back; the invalid
    // revisions pushed after it are the latest, so x4 refuses the latest and keeps its file.
    testkit::time::wait_until(
        Duration::from_secs(15),
        "the late node to read the latest (invalid) revision",
        || x4.metrics.config_push_refused.get() == 1,
    )
    .await;
    assert_eq!(roster(&x4).await.1["source"], "file");
    let both = format!("{doc}{}", bidder_block("a", &a.endpoint()));
    let pushed_at = std::time::Instant::now();
    let r2 = fleet::push(&section, KEY, Bytes::from(both)).await.unwrap();
    let every = [&x1, &x2, &x3, &x4];
    converge(&every, "nats", r2).await;
    println!(
        "push after a NATS restart to 4 exchanges serving it: {:?}",
        pushed_at.elapsed()
    );
    for ex in every {
        assert_eq!(roster(ex).await.0, ["b", "a"]);
    }

    // The key removed: the file's lists serve again, at the file's next count.
    let js = async_nats::jetstream::new(async_nats::connect(url.as_str()).await.unwrap());
    js.get_key_value("gavel-config")
        .await
        .unwrap()
        .delete(KEY)
        .await
        .unwrap();
    testkit::time::eventually(
        Duration::from_secs(15),
        "the file's lists again",
        || async {
            let mut back = true;
            for ex in every {
                let (names, config) = roster(ex).await;
                back &= names == ["a"] && config["source"] == "file";
            }
            back
        },
    )
    .await;
}
