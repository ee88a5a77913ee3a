//! The exchange's admin endpoints over real sockets: on their own listener, behind the token,
//! every mutation audited; an operator can see the roster with breaker states, take a bidder
//! out of auctions and back, and reload.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use support::{ScriptedBidder, auction, banner_request, bids, send};
use testkit::TempDir;
use testkit::http::{call, call_as};
use testkit::secrets::ADMIN_TOKEN;
use tokio::net::TcpListener;

#[tokio::test]
async fn operators_pause_a_bidder_reload_and_every_mutation_is_audited() {
    let answer = |r: &openrtb::BidRequest| {
        bids(
            r,
            "s",
            |imp| serde_json::json!({"id": "b", "impid": imp, "price": 1.0, "adm": "<div/>"}),
        )
    };
    let one = ScriptedBidder::start(answer).await;
    let two = ScriptedBidder::start(answer).await;
    let dir = TempDir::new("exchange-admin");
    let security = testkit::secrets::admin_toml(dir.path());
    let config = format!(
        "{security}security.audit_log = \"audit.log\"\n\
         [[bidders]]\nname = \"one\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"two\"\nendpoint = \"{}\"\n",
        one.endpoint(),
        two.endpoint()
    );
    std::fs::write(dir.join("exchange.toml"), &config).unwrap();
    let running = support::exchange_from_file(&dir.join("exchange.toml")).await;
    let admin = running.exchange.admin().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { admin.serve(listener, std::future::pending()).await });
    let as_admin = |method: &'static str, path: &'static str| async move {
        call_as(admin_addr, method, path, Some(ADMIN_TOKEN), "").await
    };

    // Not on the auction port; not without the token.
    let (status, _, _) = send(running.addr, "GET", "/admin/bidders", "").await;
    assert_eq!(status, 404);
    assert_eq!(call(admin_addr, "GET", "/admin/bidders", "").await.0, 401);
    let wrong = call_as(
        admin_addr,
        "POST",
        "/admin/bidders/one/disable",
        Some("x"),
        "",
    )
    .await;
    assert_eq!(wrong.0, 401);

    let (status, body) = as_admin("GET", "/admin/bidders").await;
    assert_eq!(status, 200, "{body}");
    let roster: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(roster["bidders"][0]["name"], "one");
    assert_eq!(roster["bidders"][0]["breaker"]["state"], "closed");
    assert_eq!(roster["bidders"][1]["serving"], true);

    // Paused: auctions stop calling it, the other still is.
    let (status, body) = as_admin("POST", "/admin/bidders/one/disable").await;
    assert_eq!(status, 200, "{body}");
    for _ in 0..3 {
        assert_eq!(auction(running.addr, &banner_request(0.1)).await.0, 200);
    }
    assert_eq!(one.requests.lock().unwrap().len(), 0);
    assert_eq!(two.requests.lock().unwrap().len(), 3);
    assert_eq!(
        as_admin("POST", "/admin/bidders/nobody/disable").await.0,
        404
    );

    // A reload keeps the pause (an operator's decision outlives a config push).
    let (status, body) = as_admin("POST", "/admin/reload").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(auction(running.addr, &banner_request(0.1)).await.0, 200);
    assert_eq!(one.requests.lock().unwrap().len(), 0);

    let (status, _) = as_admin("POST", "/admin/bidders/one/enable").await;
    assert_eq!(status, 200);
    assert_eq!(auction(running.addr, &banner_request(0.1)).await.0, 200);
    assert_eq!(one.requests.lock().unwrap().len(), 1);

    // Three mutations, three audit lines, in order; the 404 changed nothing and is not one.
    let audit = std::fs::read_to_string(dir.join("audit.log")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let whats: Vec<&str> = lines.iter().map(|l| l["what"].as_str().unwrap()).collect();
    assert_eq!(
        whats,
        [
            "POST /admin/bidders/one/disable",
            "POST /admin/reload",
            "POST /admin/bidders/one/enable"
        ]
    );
    assert_eq!(lines[0]["before"]["paused"], false);
    assert_eq!(lines[0]["after"]["paused"], true);
    assert_eq!(
        lines[1]["before"]["bidders"],
        serde_json::json!(["one", "two"])
    );
    assert!(lines[0]["who"].as_str().unwrap().contains("token:"));
    assert!(!audit.contains(ADMIN_TOKEN));
}

#[test]
fn a_public_admin_address_is_refused_unless_asked_for() {
    let e =
        exchange::Config::from_toml("open_to_all_sellers = true\nadmin_listen = \"0.0.0.0:8081\"")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
    assert!(e.starts_with("admin_listen:"), "{e}");
    assert!(
        exchange::Config::from_toml(
            "open_to_all_sellers = true\nadmin_listen = \"0.0.0.0:8081\"\n[security]\nadmin_remote = true"
        )
        .is_ok()
    );
}
