//! `/readyz` apart from `/healthz` on a real `gavel bidder` over a real Redis: while Redis holds
//! no ledger the bidder is alive (200) but not ready (503 `not ready: ledger missing`, on the
//! bid and the admin port, `gavel_bidder_ready 0`); once the operator opens one and the
//! campaign limits are written, it is ready. In both Redis modes. `gavel probe` (the image's
//! healthcheck) says the same by its exit status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::BidderProcess;
use testkit::http::{call, call_as};
use testkit::secrets::ADMIN_TOKEN;
use testkit::{RedisServer, TempDir};

/// `gavel probe URL`: its exit status and what it said on stderr.
fn probe(url: &str) -> (i32, String) {
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gavel"))
            .args(["probe", url, "--timeout-ms", "5000"])
            .output()
            .unwrap()
    });
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn one_mode(mode: &str) {
    let redis = RedisServer::start().await;
    let dir = TempDir::new(&format!("readiness-{mode}"));
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
    // No `gavel ledger create`: Redis holds no ledger.
    let b = BidderProcess::start(&config);
    for port in [b.addr, b.admin] {
        assert_eq!(
            call(port, "GET", "/healthz", "").await,
            (200, "ok\n".to_owned())
        );
        assert_eq!(
            call(port, "GET", "/readyz", "").await,
            (503, "not ready: ledger missing\n".to_owned()),
            "{mode}"
        );
    }
    let page = call(b.admin, "GET", "/metrics", "").await.1;
    assert!(page.contains("\ngavel_bidder_ready 0\n"), "{page}");
    assert_eq!(probe(&format!("http://{}/healthz", b.admin)).0, 0);
    let (code, said) = probe(&format!("http://{}/readyz", b.admin));
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("answered 503"), "{said}");

    let (status, body) =
        call_as(b.admin, "POST", "/admin/ledger/open", Some(ADMIN_TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    testkit::time::eventually(Duration::from_secs(20), "ready once opened", || async {
        call(b.addr, "GET", "/readyz", "").await == (200, "ready\n".to_owned())
    })
    .await;
    assert_eq!(
        call(b.admin, "GET", "/readyz", "").await,
        (200, "ready\n".to_owned())
    );
    let page = call(b.admin, "GET", "/metrics", "").await.1;
    assert!(page.contains("\ngavel_bidder_ready 1\n"), "{page}");
    assert_eq!(
        probe(&format!("http://{}/readyz", b.admin)),
        (0, String::new())
    );
    let admin = b.admin;
    drop(b);
    // Nobody listening any more: a failure naming the connection.
    let (code, said) = probe(&format!("http://{admin}/healthz"));
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("connecting to"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_bid_bidder_is_not_ready_until_its_ledger_is_open() {
    one_mode("per-bid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_bidder_is_not_ready_until_its_ledger_is_open() {
    one_mode("lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_bidder_is_ready_at_once() {
    let dir = TempDir::new("readiness-memory");
    dir.file(
        "campaigns.json",
        r#"[{"id": "c", "budget": {"total": 10}, "bid": {"cpm": 2}, "pacing": "asap",
            "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["a.example"]}]}]"#,
    );
    let config = dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\n{}",
            testkit::secrets::security_toml(dir.path())
        ),
    );
    let mut b = BidderProcess::start(&config);
    assert_eq!(
        call(b.addr, "GET", "/readyz", "").await,
        (200, "ready\n".to_owned())
    );
    assert_eq!(call(b.addr, "POST", "/readyz", "").await.0, 405);
    b.stop();
}
