//! A Redis that lost its data reopens no budget, across restarts too: a `gavel bidder` process
//! spends on a ledger the operator created (`gavel ledger create`), Redis is flushed, the
//! instance is restarted with yesterday's configuration, and it bids nothing and writes
//! nothing until the operator acts. The operator's acts refuse while the instance's marker
//! says a ledger lived there, and go through, audited, once told the data is lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::BidderProcess;
use testkit::http::{call, call_as};
use testkit::secrets::ADMIN_TOKEN;
use testkit::{RedisServer, TempDir};

const REQUEST: &str = r#"{"id": "r1", "tmax": 500, "cur": ["USD"],
  "imp": [{"id": "1", "banner": {"w": 300, "h": 250}, "bidfloor": 0.1, "bidfloorcur": "USD"}],
  "site": {"id": "s1", "domain": "news.example", "publisher": {"id": "p1"}},
  "device": {"devicetype": 2, "os": "iOS", "geo": {"country": "USA"}}}"#;

/// `gavel ledger ARGS --config FILE`: (success, stdout and stderr).
fn ledger(args: &[&str], config: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .arg("ledger")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Bids once and fires the bid's win notice: `Some(status of the notice)` when it bid.
async fn bid_and_win(b: &BidderProcess) -> Option<u16> {
    let (status, body) = call(b.addr, "POST", bidder::BID_PATH, REQUEST).await;
    if status == 204 {
        return None;
    }
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let nurl = v["seatbid"][0]["bid"][0]["nurl"]
        .as_str()
        .unwrap()
        .replace("${AUCTION_PRICE}", "1.5");
    let target = nurl.split_once(&b.addr.to_string()).unwrap().1.to_owned();
    Some(testkit::http::notice(b.addr, &target).await.0)
}

/// The sample line itself: the metric's HELP text also begins with its name and "1".
async fn ledger_missing(b: &BidderProcess) -> bool {
    let (_, page) = call(b.admin, "GET", "/metrics", "").await;
    page.lines().any(|l| l == "gavel_bidder_ledger_missing 1")
}

async fn one_mode(mode: &str) {
    let redis = RedisServer::start().await;
    let dir = TempDir::new(&format!("ledger-loss-{mode}"));
    dir.file(
        "campaigns.json",
        r#"[{"id": "c", "budget": {"total": 10}, "bid": {"cpm": 2}, "pacing": "asap",
            "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["a.example"]}]}]"#,
    );
    let config = dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\nnode = \"n1\"\n{}security.audit_log = \"audit.log\"\n\
             [ledger]\nbackend = \"redis\"\nredis_mode = \"{mode}\"\nredis_url = \"redis://{}\"\n\
             redis_timeout_ms = 500\nlease_report_ms = 50\n[pacing]\ncontrol_interval_ms = 100\n",
            testkit::secrets::security_toml(dir.path()),
            redis.addr()
        ),
    );

    // Day one: the operator creates the ledger, the instance spends.
    let (ok, out) = ledger(&["create"], &config);
    assert!(ok, "{out}");
    // The first line (stdout); the audit line follows on stderr.
    let first = out
        .lines()
        .next()
        .and_then(|line| line.trim().strip_prefix("created ledger "))
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    let mut b = BidderProcess::start(&config);
    let started = std::time::Instant::now();
    let charged = loop {
        if let Some(status) = bid_and_win(&b).await {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no bid on a new ledger"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(charged, 204);
    b.stop();

    // Redis loses everything; the instance restarts with the same file.
    assert!(redis.raw("FLUSHALL").await.starts_with("+OK"));
    let b = BidderProcess::start(&config);
    testkit::time::eventually(Duration::from_secs(20), "the loss reported", || async {
        ledger_missing(&b).await
    })
    .await;
    for _ in 0..5 {
        assert_eq!(bid_and_win(&b).await, None, "no bid on a lost ledger");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        redis.raw("DBSIZE").await.trim(),
        ":0",
        "nothing re-created in Redis after several control ticks"
    );

    // The operator's acts see the evidence: this host's marker names the lost ledger.
    let (ok, out) = ledger(&["status"], &config);
    assert!(!ok && out.contains(&first), "{out}");
    let (ok, out) = ledger(&["create"], &config);
    assert!(
        !ok && out.contains(&first) && out.contains("--after-loss"),
        "{out}"
    );
    let (status, body) =
        call_as(b.admin, "POST", "/admin/ledger/open", Some(ADMIN_TOKEN), "").await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains(&first), "{body}");
    assert_eq!(
        redis.raw("DBSIZE").await.trim(),
        ":0",
        "refusals create nothing"
    );
    assert!(ledger_missing(&b).await);

    // Told the data is lost (CLI in per-bid mode, admin call in lease mode), they create it.
    if mode == "per-bid" {
        let (ok, out) = ledger(&["create", "--after-loss"], &config);
        assert!(ok && out.contains("after a loss"), "{out}");
    } else {
        let (status, body) = call_as(
            b.admin,
            "POST",
            "/admin/ledger/open?after_loss=true",
            Some(ADMIN_TOKEN),
            "",
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    testkit::time::eventually(Duration::from_secs(20), "bids resume", || async {
        bid_and_win(&b).await.is_some()
    })
    .await;
    let audit = std::fs::read_to_string(dir.join("audit.log")).unwrap();
    let lines: Vec<&str> = audit.lines().collect();
    // The first creation, the refused attempts, the creation after the loss.
    assert!(lines.len() >= 4, "{audit}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("after_loss\":true") && l.contains("created")),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_redis_stays_closed_across_a_restart_per_bid() {
    one_mode("per-bid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_redis_stays_closed_across_a_restart_with_leases() {
    one_mode("lease").await;
}

#[test]
fn yesterdays_create_if_missing_is_refused_with_what_to_do() {
    let dir = TempDir::new("ledger-loss-config");
    dir.file("campaigns.json", "[]");
    let config = dir.file(
        "bidder.toml",
        "campaigns = \"campaigns.json\"\n[ledger]\nbackend = \"redis\"\ncreate_if_missing = true\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(["bidder", "--check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("ledger.create_if_missing") && err.contains("gavel ledger create"),
        "{err}"
    );
    // The old default, false, still loads.
    let harmless = dir.file(
        "old-default.toml",
        "campaigns = \"campaigns.json\"\nsecurity.sign_notices = false\n[ledger]\ncreate_if_missing = false\n",
    );
    assert!(bidder::BidderConfig::load(&harmless).is_ok());
}

/// A bidder configuration on `redis` whose marker lives in `state_dir`.
fn config_with_state_dir(
    dir: &TempDir,
    redis: &RedisServer,
    state_dir: &Path,
) -> std::path::PathBuf {
    dir.file(
        "campaigns.json",
        r#"[{"id": "c", "budget": {"total": 10}, "bid": {"cpm": 2}, "pacing": "asap",
            "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["a.example"]}]}]"#,
    );
    dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\nnode = \"n1\"\n{}security.audit_log = \"audit.log\"\n\
             [ledger]\nbackend = \"redis\"\nredis_mode = \"per-bid\"\nredis_url = \"redis://{}\"\n\
             redis_timeout_ms = 500\nstate_dir = \"{}\"\n[pacing]\ncontrol_interval_ms = 100\n",
            testkit::secrets::security_toml(dir.path()),
            redis.addr(),
            state_dir.display()
        ),
    )
}

/// Issue 45: with a state_dir it cannot write, `create` warned and created the ledger with no
/// marker; after a FLUSHDB a second `create` reopened every budget. Now it refuses, unless the
/// operator passes --no-marker; the marker it writes is the owner's alone.
#[test]
fn create_refuses_without_a_marker_unless_told_and_the_marker_is_private() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let redis = rt.block_on(RedisServer::start());
    let dir = TempDir::new("ledger-marker-refused");
    // A path under a regular file: no user, root included, can make a directory there.
    let blocked = dir.file("not-a-dir", "x").join("state");
    let config = config_with_state_dir(&dir, &redis, &blocked);
    let (ok, out) = ledger(&["create"], &config);
    assert!(!ok, "{out}");
    assert!(
        out.contains("the ledger marker cannot be written") && out.contains("--no-marker"),
        "{out}"
    );
    assert_eq!(
        rt.block_on(redis.raw("DBSIZE")).trim(),
        ":0",
        "nothing created in Redis"
    );
    let (ok, out) = ledger(&["create", "--no-marker"], &config);
    assert!(ok, "{out}");
    assert!(out.contains("created ledger"), "{out}");

    // A writable state_dir: the marker is written 0600.
    let good = TempDir::new("ledger-marker-private");
    let redis2 = rt.block_on(RedisServer::start());
    let config = config_with_state_dir(&good, &redis2, good.path());
    let (ok, out) = ledger(&["create"], &config);
    assert!(ok, "{out}");
    let marker = std::fs::read_dir(good.path())
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("gavel-ledger-"))
        .unwrap_or_else(|| panic!("no marker in {}", good.path().display()));
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        marker.metadata().unwrap().permissions().mode() & 0o777,
        0o600
    );
    // After a loss, the marker stops a second create.
    assert!(rt.block_on(redis2.raw("FLUSHALL")).starts_with("+OK"));
    let (ok, out) = ledger(&["create"], &config);
    assert!(!ok && out.contains("marker records ledger"), "{out}");
}

/// One campaign's record deleted while the ledger is open: readiness names the campaign, not
/// the ledger, and `gavel ledger status` still finds the ledger open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_campaign_record_is_named_by_readiness() {
    let redis = RedisServer::start().await;
    let dir = TempDir::new("ledger-campaign-gone");
    let config = config_with_state_dir(&dir, &redis, dir.path());
    let (ok, out) = tokio::task::block_in_place(|| ledger(&["create"], &config));
    assert!(ok, "{out}");
    let b = tokio::task::block_in_place(|| BidderProcess::start(&config));
    testkit::time::eventually(Duration::from_secs(20), "ready", || async {
        call(b.admin, "GET", "/readyz", "").await.0 == 200
    })
    .await;
    assert!(redis.raw("DEL gavel:{c}c:c").await.starts_with(":1"));
    testkit::time::eventually(Duration::from_secs(20), "the campaign named", || async {
        let (status, body) = call(b.admin, "GET", "/readyz", "").await;
        status == 503 && body.contains("campaign c not in the ledger")
    })
    .await;
    let (_, said) = call(b.admin, "GET", "/readyz", "").await;
    assert!(!said.contains("ledger missing"), "{said}");
    assert!(!ledger_missing(&b).await);
    let (ok, out) = tokio::task::block_in_place(|| ledger(&["status"], &config));
    assert!(ok && out.contains("is open"), "{out}");
}
