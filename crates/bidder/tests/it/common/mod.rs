//! Helpers for the bidder's integration tests: a bidder on a free loopback port with its
//! campaigns in a temporary directory, the raw HTTP/1.1 client of `testkit`, and a steady open-loop load.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::TcpListener;

/// A campaign with one 300x250 creative and no targeting.
pub fn campaign_json(id: &str, budget: f64, cpm: f64, pacing: &str) -> String {
    format!(
        r#"{{"id": "{id}", "budget": {{"total": {budget}}}, "bid": {{"cpm": {cpm}}}, "pacing": "{pacing}",
  "creatives": [{{"id": "cr1", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["shop.example"]}}],
  "targeting": {{}}}}"#
    )
}

/// A one-imp banner request with `tmax` 100.
pub fn banner_request(id: &str, w: u32, h: u32, floor: f64) -> String {
    banner_request_with_tmax(id, w, h, floor, 100)
}

/// A one-imp banner request.
pub fn banner_request_with_tmax(id: &str, w: u32, h: u32, floor: f64, tmax: u32) -> String {
    format!(
        r#"{{"id": "{id}", "at": 1, "tmax": {tmax}, "cur": ["USD"],
  "imp": [{{"id": "1", "banner": {{"w": {w}, "h": {h}}}, "bidfloor": {floor}, "bidfloorcur": "USD"}}],
  "site": {{"id": "s1", "domain": "news.example", "publisher": {{"id": "p1"}}}},
  "device": {{"devicetype": 2, "os": "iOS", "geo": {{"country": "USA"}}}}}}"#
    )
}

pub use testkit::TempDir;
pub use testkit::http::{call, call_as, call_retrying};
pub use testkit::secrets::ADMIN_TOKEN;

/// A bidder serving on a free port, with its campaign file in a temporary directory.
pub struct TestBidder {
    pub addr: SocketAddr,
    /// The admin listener (`admin_listen`).
    pub admin_addr: SocketAddr,
    pub dir: TempDir,
    pub bidder: bidder::Bidder,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestBidder {
    /// Starts a bidder on `campaigns`, signing notices with the test key and serving admin
    /// (with the test token) on its own port; `extra` is appended to its TOML config. On a
    /// Redis ledger, the ledger is created first, as an operator does before a fleet's first
    /// start (`bidder::ledger_open::create`, what `gavel ledger create` runs).
    pub async fn start(campaigns: &str, extra: &str) -> TestBidder {
        TestBidder::start_with(campaigns, extra, true).await
    }

    /// [`TestBidder::start`] without creating a Redis ledger: the bidder finds none.
    pub async fn start_without_ledger(campaigns: &str, extra: &str) -> TestBidder {
        TestBidder::start_with(campaigns, extra, false).await
    }

    async fn start_with(campaigns: &str, extra: &str, create_ledger: bool) -> TestBidder {
        let dir = TempDir::new("bidder");
        std::fs::write(dir.join("campaigns.json"), campaigns).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin_addr = admin_listener.local_addr().unwrap();
        let security = testkit::secrets::security_toml(dir.path());
        let text = format!(
            "listen = \"{addr}\"\nadmin_listen = \"{admin_addr}\"\ncampaigns = \"campaigns.json\"\n{security}{extra}"
        );
        std::fs::write(dir.join("bidder.toml"), &text).unwrap();
        let config = bidder::BidderConfig::load(&dir.join("bidder.toml")).unwrap();
        if create_ledger && config.ledger.backend.is_redis() {
            bidder::ledger_open::create(
                &config,
                false,
                bidder::ledger_open::MarkerRule::Required,
                "test",
            )
            .await
            .unwrap_or_else(|e| panic!("creating the ledger: {e}"));
        }
        let bidder = bidder::Bidder::start(config).await.unwrap();
        bidder.watch();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server = bidder.clone();
        let (admin_tx, admin_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            server
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await;
            let _ = admin_tx.send(());
        });
        let admin = bidder.clone();
        tokio::spawn(async move {
            admin
                .serve_admin(admin_listener, async {
                    let _ = admin_rx.await;
                })
                .await;
        });
        TestBidder {
            addr,
            admin_addr,
            dir,
            bidder,
            stop: Some(tx),
        }
    }

    /// Replaces the campaign file atomically (write aside, rename), as a deploy tool would.
    pub fn write_campaigns(&self, text: &str) {
        write_atomically(&self.dir.join("campaigns.json"), text);
    }

    pub async fn post_bid(&self, body: &str) -> (u16, String) {
        call(self.addr, "POST", bidder::BID_PATH, body).await
    }

    pub async fn get(&self, target: &str) -> (u16, String) {
        call(self.addr, "GET", target, "").await
    }

    /// A notice, sent again while the answer is 503 (the ledger slower than its timeout on a
    /// busy machine), as the exchange does; see [`testkit::http::call_retrying`].
    pub async fn notice(&self, target: &str) -> (u16, String) {
        testkit::http::notice(self.addr, target).await
    }

    pub async fn post(&self, target: &str, body: &str) -> (u16, String) {
        call(self.addr, "POST", target, body).await
    }

    /// The Prometheus page, from the admin listener (the bid port serves none).
    pub async fn metrics_page(&self) -> String {
        let (status, text) = call(self.admin_addr, "GET", "/metrics", "").await;
        assert_eq!(status, 200, "{text}");
        text
    }

    /// An admin call with the test token.
    pub async fn admin_call(&self, method: &str, target: &str) -> (u16, String) {
        call_as(self.admin_addr, method, target, Some(ADMIN_TOKEN), "").await
    }

    /// The campaigns as `/admin/campaigns` reports them (asked again on 503, the ledger busy).
    pub async fn admin(&self) -> Value {
        let (status, body) = call_retrying(
            self.admin_addr,
            "GET",
            "/admin/campaigns",
            Some(ADMIN_TOKEN),
            "",
        )
        .await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    pub async fn campaign(&self, id: &str) -> Value {
        let all = self.admin().await;
        all["campaigns"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["id"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("no campaign {id} in {all}"))
    }
}

/// Bids once on a 300x250 imp and returns the bid's (nurl, burl, lurl).
pub async fn bid(b: &TestBidder, id: &str) -> (String, String, String) {
    let (status, body) = b.post_bid(&banner_request(id, 300, 250, 0.1)).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let bid = &v["seatbid"][0]["bid"][0];
    let url = |k: &str| bid[k].as_str().unwrap().to_owned();
    (url("nurl"), url("burl"), url("lurl"))
}

/// The value of the sample `line` (name and labels) on the bidder's `/metrics`.
pub async fn metric(b: &TestBidder, line: &str) -> u64 {
    let text = b.metrics_page().await;
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line} in\n{text}"))
}

/// Campaign `id`'s (spent, reserved), in nanos, from the admin endpoint.
pub async fn money(b: &TestBidder, id: &str) -> (i64, i64) {
    let c = b.campaign(id).await;
    (
        c["nanos"]["spent"].as_i64().unwrap(),
        c["nanos"]["reserved"].as_i64().unwrap(),
    )
}

impl Drop for TestBidder {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One answer of a [`steady_load`].
pub struct Answer {
    pub sent: Instant,
    pub status: u16,
    pub took: Duration,
    pub body: String,
}

impl Answer {
    /// Price of the first bid, when the answer holds one.
    pub fn price(&self) -> Option<f64> {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| v["seatbid"][0]["bid"][0]["price"].as_f64())
    }
}

/// Answers of a [`steady_load`], pushed as they come (readable while it runs).
pub type Answers = Arc<Mutex<Vec<Answer>>>;

/// Sends a bid request with `tmax` to `addr` every `every`, each on its own task (a slow
/// answer delays none of the others), until `stop` is set; the handle ends when every answer
/// is in.
pub fn steady_load(
    addr: SocketAddr,
    every: Duration,
    tmax: u32,
    stop: Arc<AtomicBool>,
    answers: Answers,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tasks = tokio::task::JoinSet::new();
        let mut tick = tokio::time::interval(every);
        let mut n = 0u64;
        while !stop.load(Relaxed) {
            tick.tick().await;
            n += 1;
            let answers = answers.clone();
            tasks.spawn(async move {
                let sent = Instant::now();
                let request = banner_request_with_tmax(&format!("s{n}"), 300, 250, 0.1, tmax);
                let (status, body) = call(addr, "POST", bidder::BID_PATH, &request).await;
                let took = sent.elapsed();
                answers.lock().unwrap().push(Answer {
                    sent,
                    status,
                    took,
                    body,
                });
            });
        }
        while tasks.join_next().await.is_some() {}
    })
}
