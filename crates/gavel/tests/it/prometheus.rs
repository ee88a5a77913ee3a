//! The dashboards and alerts of `deploy/` proven on a real Prometheus (Debian's `prometheus`
//! and `promtool`; the test fails, naming the package, when they are missing).
//!
//! `deploy_files_pass_promtool`: `promtool check config`, `check rules` and `test rules` on the
//! committed files.
//!
//! `every_dashboard_query_and_alert_evaluates_on_live_servers`: an exchange, three simulated
//! bidders, a real bidder on a leased Redis ledger and a creative edge (the exchange's markup
//! store, and an asset proxy in front of the exchange's own `/healthz`), all on loopback, take
//! 300 auctions while Prometheus scrapes their admin listeners every second with
//! `deploy/prometheus/alerts.yml` loaded. Then every query of every dashboard and every alert
//! expression goes through `/api/v1/query`: none may fail, the dashboards' may not be empty
//! (the few listed in `MAY_BE_EMPTY` aside, with why), every metric an alert names must exist,
//! and every rule must evaluate healthy. The exchange and the bidder write their records to
//! files, so the records' figures are live too.
//!
//! `series_stay_bounded_with_a_thousand_campaigns_or_bidders`: the series count of a real
//! bidder's `/metrics` with 1,000 campaigns equals its count with 150 (the cap is 100), and the
//! exchange's grows with configured bidders only, never with traffic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::prom;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use loadgen::{Arrivals, Corpus, LoadSpec, ResponseCheck};
use prom::{DashboardQuery, Prometheus, dashboard_queries, metric_names, promtool};
use testkit::{RedisServer, TempDir};
use tokio::net::TcpListener;
use tokio::sync::watch;

const SEED: u64 = 35;
const TMAX_MS: u32 = 300;
const SELLER_KEY: &str = "prometheus-test-seller-key-0123456789abcdef";
const WRITER_KEY: &str = "prometheus-test-store-writer-key-0123456789abcdef";

/// Families no dashboard query may find empty but these, and why.
const MAY_BE_EMPTY: &[(&str, &str)] = &[(
    "gavel_exchange_bid_rejections_total",
    "a reason's series appears with its first rejection, which 300 auctions may not see",
)];

#[test]
fn deploy_files_pass_promtool() {
    let dir = prom::deploy_dir().join("prometheus");
    println!(
        "{} / {}",
        prom::version_of("promtool"),
        prom::version_of("prometheus")
    );
    let rules = promtool(&dir, &["check", "rules", "alerts.yml"]);
    assert!(rules.contains("SUCCESS"), "{rules}");
    promtool(&dir, &["check", "config", "prometheus.yml"]);
    let tests = promtool(&dir, &["test", "rules", "alerts_test.yml"]);
    assert!(tests.contains("SUCCESS"), "{tests}");
    // Every alert of the file has a case in the test file.
    let alerts = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    let cases = std::fs::read_to_string(dir.join("alerts_test.yml")).unwrap();
    for name in alert_names(&alerts) {
        assert!(
            cases.contains(&format!("alertname: {name}\n")),
            "alerts_test.yml has no case for {name}"
        );
    }
}

/// The `alert:` names of a rules file, in order.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|n| n.trim().to_owned())
        .collect()
}

/// A fleet on loopback: what Prometheus scrapes, and where the load goes.
struct Fleet {
    exchange_admin: SocketAddr,
    bidder_admin: SocketAddr,
    edge: SocketAddr,
    edge_admin: SocketAddr,
    auction_url: String,
    stop: watch::Sender<bool>,
    _sims: sim::Fleet,
    _redis: RedisServer,
    /// The record writers: kept running for as long as the fleet.
    _records: Vec<journal::Writer>,
    _dir: TempDir,
}

/// Completes once `stop` is sent (every server's shutdown).
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

async fn bind() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// Campaigns the generated requests match: one `asap`, one `even` with a daily budget (so the
/// pacing figures exist).
const CAMPAIGNS: &str = r#"[
  {"id": "asap-brand", "adomain": ["asap.example"], "pacing": "asap",
   "budget": {"total": 50.0}, "bid": {"cpm": 1.5},
   "creatives": [
     {"id": "a-mrec", "w": 300, "h": 250, "adm": "<div>a</div>"},
     {"id": "a-phone", "w": 320, "h": 50, "adm": "<div>a</div>"}]},
  {"id": "even-brand", "adomain": ["even.example"], "pacing": "even",
   "budget": {"total": 100.0, "daily": 20.0}, "bid": {"cpm": 1.2},
   "creatives": [
     {"id": "e-mrec", "w": 300, "h": 250, "adm": "<div>e</div>"},
     {"id": "e-leader", "w": 728, "h": 90, "adm": "<div>e</div>"}]}
]"#;

async fn start_fleet() -> Fleet {
    let dir = TempDir::new("prometheus-fleet");
    let (stop, stop_rx) = watch::channel(false);
    let redis = RedisServer::start().await;

    // The real bidder, on a leased Redis ledger (the ledger dashboard's figures).
    dir.file("campaigns.json", CAMPAIGNS);
    let (bid_listener, bid_addr) = bind().await;
    let (bidder_admin_listener, bidder_admin) = bind().await;
    let bidder_toml = dir.file(
        "bidder.toml",
        &format!(
            "listen = \"{bid_addr}\"\nadmin_listen = \"{bidder_admin}\"\ncampaigns = \"campaigns.json\"\nnode = \"prom\"\n{}\
             [ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\nredis_mode = \"lease\"\nredis_timeout_ms = 200\n\
             [pacing]\ncontrol_interval_ms = 200\n",
            testkit::secrets::security_toml(dir.path()),
            redis.addr()
        ),
    );
    let config = bidder::BidderConfig::load(&bidder_toml).unwrap();
    bidder::ledger_open::create(
        &config,
        false,
        bidder::ledger_open::MarkerRule::Required,
        "test",
    )
    .await
    .unwrap();
    let records = |name: &str| journal::Config {
        sink: journal::SinkKind::File,
        dir: dir.join(name).display().to_string(),
        ..journal::Config::default()
    };
    let (journal, bidder_records) =
        journal::start(&records("bidder-records"), journal::Server::Bidder, "prom")
            .await
            .unwrap();
    let real_bidder = bidder::Bidder::start_with_journal(config, journal)
        .await
        .unwrap();
    tokio::spawn({
        let (b, s) = (real_bidder.clone(), stopped(stop_rx.clone()));
        async move { b.serve(bid_listener, s).await }
    });
    tokio::spawn({
        let (b, s) = (real_bidder.clone(), stopped(stop_rx.clone()));
        async move { b.serve_admin(bidder_admin_listener, s).await }
    });

    let fleet = sim::start(
        sim::FleetConfig {
            seed: SEED,
            bind: std::net::IpAddr::from([127, 0, 0, 1]),
            profiles: sim::demo_profiles(3),
            tls: None,
            transport: sim::Transport::Hyper,
        },
        stopped(stop_rx.clone()),
    )
    .await
    .unwrap();

    // The exchange's listeners first: the edge proxies its /healthz.
    let (auction_listener, auction_addr) = bind().await;
    let (exchange_admin_listener, exchange_admin) = bind().await;

    // The creative edge: the exchange's markup store, and assets from the exchange itself.
    testkit::secrets::write_private(&dir.join("writer.key"), WRITER_KEY);
    let edge_config = creative_edge::Config::parse(&format!(
        "[[store.writers]]\nname = \"exchange\"\nkey_file = \"writer.key\"\n\n\
         [[origins]]\nname = \"ex\"\nurl = \"http://{auction_addr}\"\n"
    ))
    .and_then(|c| c.validate_in(Some(dir.path())))
    .unwrap();
    let edge =
        creative_edge::Edge::new(&edge_config, Arc::new(creative_edge::SystemClock)).unwrap();
    let (edge_listener, edge_addr) = bind().await;
    let (edge_admin_listener, edge_admin) = bind().await;
    tokio::spawn({
        let (e, s) = (edge.clone(), stopped(stop_rx.clone()));
        async move { e.serve(edge_listener, s).await }
    });
    tokio::spawn({
        let (e, s) = (edge.clone(), stopped(stop_rx.clone()));
        async move { e.serve_admin(edge_admin_listener, s).await }
    });

    let key_file = dir.join("seller.key");
    testkit::secrets::write_private(&key_file, SELLER_KEY);
    let config = exchange::Config::from_toml(&format!(
        "node = \"prom\"\n[deadline]\ndefault_tmax_ms = {TMAX_MS}\nmax_tmax_ms = {TMAX_MS}\nanswer_margin_ms = 80\n\
         [notices]\nfire_lurl = true\nallow_private_addresses = true\n\
         [cache]\nurl = \"http://{edge_addr}/cache\"\npublic_url = \"http://{edge_addr}/cache\"\ntimeout_ms = 50\nkey_file = {writer:?}\n\n\
         [[sellers]]\nname = \"load\"\nkey_file = {key:?}\nbill_on_win = true\n\n\
         {sims}\n[[bidders]]\nname = \"gavel-bidder\"\nendpoint = \"http://{bid_addr}/openrtb2/bid\"\nmax_connections = 64\n",
        writer = dir.join("writer.key").display().to_string(),
        key = key_file.display().to_string(),
        sims = fleet.exchange_bidders_toml(64),
    ))
    .unwrap();
    let (journal, exchange_records) = journal::start(
        &records("exchange-records"),
        journal::Server::Exchange,
        "prom",
    )
    .await
    .unwrap();
    let exchange = exchange::Exchange::with_journal(config, journal);
    let admin = exchange.admin().unwrap();
    tokio::spawn({
        let (x, s) = (exchange.clone(), stopped(stop_rx.clone()));
        async move { x.serve(auction_listener, s).await }
    });
    tokio::spawn({
        let s = stopped(stop_rx.clone());
        async move { admin.serve(exchange_admin_listener, s).await }
    });
    Fleet {
        exchange_admin,
        bidder_admin,
        edge: edge_addr,
        edge_admin,
        auction_url: format!("http://{auction_addr}{}", exchange::AUCTION_PATH),
        stop,
        _sims: fleet,
        _redis: redis,
        _records: vec![bidder_records, exchange_records],
        _dir: dir,
    }
}

/// 300 auctions over 3 s, and a few asset requests through the edge.
async fn load(fleet: &Fleet) {
    let spec = LoadSpec {
        url: fleet.auction_url.clone(),
        arrivals: Arrivals::Rate(100.0),
        duration: Duration::from_secs(3),
        connections: 32,
        max_connections: None,
        timeout: Duration::from_secs(5),
        warmup: Duration::ZERO,
        warmup_rate: None,
        check: ResponseCheck::None,
        authorization: Some(format!("Bearer {SELLER_KEY}")),
        http: loadgen::HttpOptions::default(),
    };
    let corpus = Arc::new(Corpus::generated(SEED, 1000, TMAX_MS));
    let report = loadgen::run(&spec, corpus).await.unwrap();
    assert_eq!(report.sent, 300);
    assert!(report.completed > 250, "{:?}", report.status);
    for _ in 0..5 {
        let (status, _) = testkit::http::call(fleet.edge, "GET", "/assets/ex/healthz", "").await;
        assert_eq!(status, 200, "an asset through the edge");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_and_alert_evaluates_on_live_servers() {
    let fleet = start_fleet().await;
    let dir = TempDir::new("prometheus");
    let alerts = prom::deploy_dir().join("prometheus/alerts.yml");
    let config = dir.file(
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {alerts:?}\n\
             scrape_configs:\n\
             \x20 - job_name: gavel-exchange\n    static_configs:\n      - targets: [\"{}\"]\n\
             \x20 - job_name: gavel-bidder\n    static_configs:\n      - targets: [\"{}\"]\n\
             \x20 - job_name: gavel-edge\n    static_configs:\n      - targets: [\"{}\"]\n",
            fleet.exchange_admin,
            fleet.bidder_admin,
            fleet.edge_admin,
            alerts = alerts.canonicalize().unwrap().display().to_string(),
        ),
    );
    promtool(dir.path(), &["check", "config", "prometheus.yml"]);
    let prometheus = Prometheus::start(&config, &dir.join("data")).await;
    prometheus.wait_for_scrapes(3, 2).await;
    load(&fleet).await;
    // Scrapes after the load, so every rate over the last minute spans it.
    prometheus.wait_for_scrapes(3, 3).await;

    let mut failures = Vec::new();
    let mut empty_allowed = Vec::new();
    let mut evaluated = 0;
    for name in ["exchange", "bidder", "ledger", "edge"] {
        let file = prom::deploy_dir().join(format!("grafana/{name}.json"));
        for DashboardQuery { place, promql } in dashboard_queries(&file) {
            evaluated += 1;
            match prometheus.query(&promql).await {
                Err(e) => failures.push(format!("{place}: {promql}\n    error: {e}")),
                Ok(result) if result.is_empty() => {
                    match MAY_BE_EMPTY.iter().find(|(m, _)| promql.contains(m)) {
                        Some((m, _)) => empty_allowed.push(format!("{place} ({m})")),
                        None => failures.push(format!("{place}: {promql}\n    empty")),
                    }
                }
                Ok(_) => {}
            }
        }
    }
    assert!(evaluated > 60, "only {evaluated} dashboard queries found");

    // Every alert Prometheus loaded, evaluated by it (healthy) and through the query API; every
    // metric it names exists.
    let alert_file = std::fs::read_to_string(&alerts).unwrap();
    let mut expected = alert_names(&alert_file);
    expected.sort();
    let mut rules = Vec::new();
    testkit::time::eventually(Duration::from_secs(10), "every rule evaluated", || {
        let prometheus = &prometheus;
        async move {
            let data = prometheus.api("/api/v1/rules?type=alert").await.unwrap();
            let all: Vec<serde_json::Value> = data["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                .collect();
            all.iter()
                .all(|r| r["lastEvaluation"] != "0001-01-01T00:00:00Z")
        }
    })
    .await;
    let data = prometheus.api("/api/v1/rules?type=alert").await.unwrap();
    for group in data["groups"].as_array().unwrap() {
        rules.extend(group["rules"].as_array().unwrap().iter().cloned());
    }
    let mut loaded: Vec<&str> = rules.iter().filter_map(|r| r["name"].as_str()).collect();
    loaded.sort_unstable();
    assert_eq!(loaded, expected, "the alerts Prometheus loaded");
    for rule in &rules {
        let name = rule["name"].as_str().unwrap_or_default();
        let promql = rule["query"].as_str().unwrap_or_default();
        if rule["health"] != "ok" {
            failures.push(format!(
                "alert {name}: health {} {}",
                rule["health"], rule["lastError"]
            ));
        }
        if let Err(e) = prometheus.query(promql).await {
            failures.push(format!("alert {name}: {promql}\n    error: {e}"));
        }
        for metric in metric_names(promql) {
            if MAY_BE_EMPTY.iter().any(|(m, _)| *m == metric) {
                continue;
            }
            let present = prometheus
                .query(&format!("count({{__name__=\"{metric}\"}})"))
                .await
                .unwrap_or_default();
            if present.is_empty() {
                failures.push(format!("alert {name}: no series of {metric}"));
            }
        }
    }
    println!(
        "{evaluated} dashboard queries and {} alerts evaluated; empty as allowed: {empty_allowed:#?}",
        rules.len()
    );
    let _ = fleet.stop.send(true);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Series (sample lines) of a Prometheus text page.
fn series(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count()
}

/// Series of a real bidder's `/metrics` serving `n` campaigns with the default cap.
async fn bidder_series(n: usize) -> usize {
    let dir = TempDir::new("prometheus-series");
    let list: Vec<String> = (0..n)
        .map(|i| {
            let pacing = if i % 2 == 0 { "even" } else { "asap" };
            format!(
                r#"{{"id": "c{i}", "pacing": "{pacing}", "budget": {{"total": 10, "daily": 5}}, "bid": {{"cpm": 1}},
                  "creatives": [{{"id": "cr", "w": 300, "h": 250, "adm": "x"}}]}}"#
            )
        })
        .collect();
    dir.file("campaigns.json", &format!("[{}]", list.join(",\n")));
    let (listener, addr) = bind().await;
    let (admin_listener, admin) = bind().await;
    let toml = dir.file(
        "bidder.toml",
        &format!(
            "listen = \"{addr}\"\nadmin_listen = \"{admin}\"\ncampaigns = \"campaigns.json\"\n{}",
            testkit::secrets::security_toml(dir.path())
        ),
    );
    let b = bidder::Bidder::start(bidder::BidderConfig::load(&toml).unwrap())
        .await
        .unwrap();
    let (stop, rx) = watch::channel(false);
    tokio::spawn({
        let (b, s) = (b.clone(), stopped(rx.clone()));
        async move { b.serve(listener, s).await }
    });
    tokio::spawn({
        let (b, s) = (b.clone(), stopped(rx));
        async move { b.serve_admin(admin_listener, s).await }
    });
    let (status, text) = testkit::http::call_retrying(admin, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200);
    let _ = stop.send(true);
    series(&text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_stay_bounded_with_a_thousand_campaigns_or_bidders() {
    let (ten, capped, thousand) = (
        bidder_series(10).await,
        bidder_series(150).await,
        bidder_series(1_000).await,
    );
    println!("bidder /metrics series: 10 campaigns {ten}, 150 {capped}, 1000 {thousand}");
    assert!(ten < capped, "labelled campaigns add series up to the cap");
    assert_eq!(
        capped, thousand,
        "past metrics.max_labelled_campaigns, campaigns are summed under _other"
    );

    // The exchange labels by configured bidder only: 1,000 bidders cost a fixed number of
    // series each, and counting traffic adds none but a rejection reason's first sighting.
    let names = |n: usize| (0..n).map(|i| format!("b{i}")).collect::<Vec<_>>();
    let one = series(&exchange::metrics::Metrics::new(names(1)).render());
    let two = series(&exchange::metrics::Metrics::new(names(2)).render());
    let metrics = exchange::metrics::Metrics::new(names(1_000));
    let before = series(&metrics.render());
    for i in 0..1_000 {
        let b = metrics.bidder(i).unwrap();
        b.requests.inc();
        b.outcomes.inc(exchange::metrics::BidderOutcome::Timeout);
        b.latency.histogram().observe(Duration::from_millis(3));
    }
    let after = series(&metrics.render());
    println!(
        "exchange /metrics series: 1,000 bidders {before} ({} per bidder)",
        two - one
    );
    assert_eq!(before, one + 999 * (two - one));
    assert_eq!(before, after, "traffic adds no series");
}
