//! Three exchanges following one roster in a real `nats-server -js` (docs/fleet.md): a push
//! reaches all of them and each serves the same revision (admin and `/metrics`, and the
//! auctions go to the pushed bidders); invalid pushes forced into the bucket are refused by
//! every node while the last good revision serves; NATS killed and restarted with its store,
//! then a later push still arrives; a node started while NATS is down serves its file and
//! takes the bucket's revision when NATS is back; while a revision is in force the file's
//! lists do not override it; removing the key changes nothing (nobody signed the removal).
//! Hostile pushes, as anyone reaching NATS would make them: an unsigned roster pointing a
//! bidder at an attacker's endpoint, a signed roster naming `PATH` as a seller's key, and the
//! first signed roster put again; each refused by every node, counted by reason, and the
//! attacker's endpoint never called. Times from push to every node serving it are printed
//! (`cargo test -p exchange --test it fleet:: -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use fleet::{PushRefused, SigningKey};
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

/// One node: its own directory and file (bidder `a` only), following the bucket and trusting
/// `operator`'s key; pushed documents may name the seller key variable `SELLER_FLEET_KEYS`.
async fn node(
    nats_url: &str,
    local: &str,
    operator: &SigningKey,
) -> (RunningExchange, TempDir, PathBuf) {
    let dir = TempDir::new("fleet-exchange");
    let path = dir.join("exchange.toml");
    let admin = testkit::secrets::admin_toml(dir.path());
    let trusted = dir.file("fleet.pub", &operator.public_pem());
    let text = format!(
        "{admin}open_to_all_sellers = true\n{local}\n[fleet]\nnats_url = \"{nats_url}\"\nresync_ms = 200\n\
         trusted_keys_file = \"{}\"\nallowed_key_env = [\"SELLER_FLEET_KEYS\"]\n",
        trusted.display()
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

fn refused(ex: &RunningExchange, reason: PushRefused) -> u64 {
    ex.metrics.config_push_refused.get(reason)
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
    let (operator, _) = SigningKey::generate().unwrap();
    let section = fleet::FleetSection::new(url.clone());
    let local = bidder_block("a", &a.endpoint());
    let (x1, _d1, path1) = node(&url, &local, &operator).await;
    let (x2, _d2, _) = node(&url, &local, &operator).await;
    let (x3, _d3, _) = node(&url, &local, &operator).await;
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
    let first = fleet::push(&section, KEY, doc.as_bytes(), &operator)
        .await
        .unwrap();
    let r1 = first.revision;
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

    // Invalid documents, signed (what `gavel config push` would refuse, put by the library):
    // each refused by every node, counted, and the last good revision keeps serving. The last
    // names `PATH` as a seller's key: a secret no node allows.
    let invalid = [
        "[[bidders]\nname = \"b\"\n".to_owned(),
        bidder_block("b", "ftp://127.0.0.1:9/"),
        format!("node = \"elsewhere\"\n{doc}"),
        format!("{doc}{doc}"),
        format!("{doc}[[sellers]]\nname = \"evil\"\nkey_env = \"PATH\"\n"),
    ];
    for (n, text) in invalid.iter().enumerate() {
        let r = fleet::push(&section, KEY, text.as_bytes(), &operator)
            .await
            .unwrap()
            .revision;
        testkit::time::wait_until(
            Duration::from_secs(15),
            &format!("invalid push {n} (revision {r}) refused by every node"),
            || {
                all.iter()
                    .all(|ex| refused(ex, PushRefused::Invalid) == n as u64 + 1)
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

    // Anyone reaching NATS, with no credentials and no key: an unsigned roster pointing `b`
    // at the attacker, published raw; then the first signed roster put again (older than the
    // one in force). Both refused by every node; nothing reaches the attacker.
    let attacker = ScriptedBidder::start(priced("attacker")).await;
    let subject = format!("$KV.{}.{KEY}", section.bucket);
    let hijack = bidder_block("b", &attacker.endpoint());
    testkit::nats::publish_raw(nats.port, "{}", &subject, hijack.as_bytes())
        .await
        .unwrap();
    let replay = fleet::signed::seal(
        &operator,
        fleet::signed::Place {
            bucket: &section.bucket,
            key: KEY,
        },
        first.serial,
        "2026-11-28T10:00:00Z",
        doc.as_bytes(),
    )
    .unwrap();
    testkit::nats::publish_raw(nats.port, "{}", &subject, &replay)
        .await
        .unwrap();
    testkit::time::wait_until(
        Duration::from_secs(15),
        "the unsigned and the replayed roster refused by every node",
        || {
            all.iter().all(|ex| {
                refused(ex, PushRefused::Unsigned) == 1 && refused(ex, PushRefused::Stale) == 1
            })
        },
    )
    .await;
    for ex in all {
        assert_eq!(roster(ex).await.1["revision"], r1);
        assert_eq!(winner(ex).await, "b");
    }
    assert!(
        attacker.requests.lock().unwrap().is_empty(),
        "the attacker's endpoint is never called"
    );

    // NATS killed and restarted with its store; a node started meanwhile serves its file.
    nats.kill();
    let (x4, _d4, _) = node(&url, &local, &operator).await;
    let (names, config) = roster(&x4).await;
    assert_eq!(
        (names, &config["source"]),
        (vec!["a".to_owned()], &json!("file"))
    );
    assert_eq!(winner(&x4).await, "a");
    nats.restart().await;
    // ...and once NATS is back reads the key's history: the latest revision (the replayed
    // roster) is older than the newest signed one there, the `PATH` roster, which the node
    // refuses as invalid; it keeps its file.
    testkit::time::wait_until(
        Duration::from_secs(15),
        "the late node to judge the latest revisions",
        || refused(&x4, PushRefused::Invalid) == 1 && refused(&x4, PushRefused::Stale) == 1,
    )
    .await;
    assert_eq!(roster(&x4).await.1["source"], "file");
    let both = format!("{doc}{}", bidder_block("a", &a.endpoint()));
    let pushed_at = std::time::Instant::now();
    let r2 = fleet::push(&section, KEY, both.as_bytes(), &operator)
        .await
        .unwrap()
        .revision;
    let every = [&x1, &x2, &x3, &x4];
    converge(&every, "nats", r2).await;
    println!(
        "push after a NATS restart to 4 exchanges serving it: {:?}",
        pushed_at.elapsed()
    );
    for ex in every {
        assert_eq!(roster(ex).await.0, ["b", "a"]);
    }

    // The key removed: no signature vouches for a removal, so every node keeps r2.
    let js = async_nats::jetstream::new(async_nats::connect(url.as_str()).await.unwrap());
    js.get_key_value("gavel-config")
        .await
        .unwrap()
        .delete(KEY)
        .await
        .unwrap();
    testkit::time::wait_until(
        Duration::from_secs(15),
        "the removal refused by every node",
        || {
            every
                .iter()
                .all(|ex| refused(ex, PushRefused::Removed) == 1)
        },
    )
    .await;
    for ex in every {
        let (names, config) = roster(ex).await;
        assert_eq!(
            (names, &config["revision"]),
            (vec!["b".to_owned(), "a".to_owned()], &json!(r2))
        );
    }
}
