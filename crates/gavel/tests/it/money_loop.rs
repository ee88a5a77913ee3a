//! The money loop end to end, as `gavel demo` runs it but checked instead of printed: the
//! exchange, three simulated bidders and a real `gavel bidder` process (in-memory ledger, or a
//! real `redis-server` in lease or per-bid mode), driven by the load generator, all over loopback.
//! The exchange bills on win and sends loss notices. Once its notices have settled:
//! - the exchange's books equal what every bidder was told, to the micro;
//! - the real bidder charged every win exactly once (the billing notice after it charged nothing);
//! - no campaign was ever over budget, and the small one spent its budget;
//! - nothing stays reserved;
//! - both sides' records (`[records]`, rotating files) reconcile: every win of the real
//!   bidder charged once at the price it was told, no mismatch of any kind.
//!
//! The simulated bidders put their markup in the bid. A bidder whose markup is fetched from its
//! win notice counts a win when the fetch reaches it, even if the exchange then drops the bid
//! for missing the deadline; that gap is the demo's to print, not an equality to assert.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::BidderProcess;
use exchange::{BidderReport, Exchange, ExchangeReport};
use loadgen::{Arrivals, Corpus, LoadSpec, ResponseCheck};
use serde_json::Value;
use sim::{BidderProfile, LatencyDist, PriceDist};
use testkit::http::{call, call_retrying};
use testkit::secrets::ADMIN_TOKEN;
use testkit::{RedisServer, TempDir};
use tokio::net::TcpListener;
use tokio::sync::watch;

const SEED: u64 = 20;
const TMAX_MS: u32 = 300;
/// The small campaign: 0.03 at most 3.00 CPM, about ten impressions, gone early in the run.
const SMALL_BUDGET_NANOS: i64 = 30_000_000;
const SMALL_CPM_NANOS: i64 = 3_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_books_balance_with_an_in_memory_ledger() {
    money_loop(None, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_books_balance_with_a_leased_redis_ledger() {
    let redis = RedisServer::start().await;
    money_loop(Some(&redis), "lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_books_balance_with_a_per_bid_redis_ledger() {
    let redis = RedisServer::start().await;
    money_loop(Some(&redis), "per-bid").await;
}

fn campaigns() -> &'static str {
    r#"[
  {"id": "small", "adomain": ["small.example"], "pacing": "asap",
   "budget": {"total": 0.03}, "bid": {"cpm": 3.00},
   "creatives": [
     {"id": "s-mrec", "w": 300, "h": 250, "adm": "<div>small</div>"},
     {"id": "s-phone", "w": 320, "h": 50, "adm": "<div>small</div>"}]},
  {"id": "large", "adomain": ["large.example"], "pacing": "asap",
   "budget": {"total": 20.00}, "bid": {"cpm": 1.40},
   "creatives": [
     {"id": "l-mrec", "w": 300, "h": 250, "adm": "<div>large</div>"},
     {"id": "l-leader", "w": 728, "h": 90, "adm": "<div>large</div>"},
     {"id": "l-phone", "w": 320, "h": 50, "adm": "<div>large</div>"}]}
]"#
}

fn sim_profiles() -> Vec<BidderProfile> {
    let profile = |name: &str, median: f64, p50_ms: f64| BidderProfile {
        bid_probability: 0.8,
        latency: LatencyDist::LogNormal {
            p50_ms,
            p99_ms: p50_ms * 4.0,
        },
        adomain: vec![format!("{name}.example")],
        ..BidderProfile::new(name, PriceDist::LogNormal { median, p99: 6.0 })
    };
    vec![
        profile("atlas", 1.2, 3.0),
        profile("beacon", 1.0, 5.0),
        BidderProfile {
            deal_rate: 0.5,
            ..profile("cobalt", 1.6, 8.0)
        },
    ]
}

/// One money loop at a time: each is a whole fleet under load, and three at once on two cores
/// starve each other of the time their deadlines need.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `ledger`: `None` for the in-memory ledger, or the Redis to share with `redis_mode`.
async fn money_loop(redis: Option<&RedisServer>, redis_mode: &str) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = TempDir::new(&format!("money-{redis_mode}"));
    dir.file("campaigns.json", campaigns());
    let ledger = match redis {
        None => String::new(),
        Some(r) => format!(
            "[ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\n    redis_mode = \"{redis_mode}\"\nredis_timeout_ms = 200\n\
             reservation_ttl_ms = 2000\nreservation_grace_ms = 1000\n",
            r.addr()
        ),
    };
    let memory_ttl = if redis.is_none() {
        "[ledger]\nreservation_ttl_ms = 2000\nreservation_grace_ms = 1000\n"
    } else {
        ""
    };
    let config = dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\nnode = \"money\"\n{}{ledger}{memory_ttl}\
             [records]\nsink = \"file\"\ndir = \"records\"\n",
            testkit::secrets::security_toml(dir.path())
        ),
    );
    if redis.is_some() {
        common::create_ledger(&config);
    }
    let mut bidder = BidderProcess::start(&config);

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let fleet = sim::start(
        sim::FleetConfig {
            seed: SEED,
            bind: std::net::IpAddr::from([127, 0, 0, 1]),
            profiles: sim_profiles(),
            tls: None,
            transport: sim::Transport::Hyper,
        },
        stopped(stop_rx.clone()),
    )
    .await
    .unwrap();

    let seller_key = "money-loop-seller-key-0123456789abcdef";
    let key_file = dir.join("seller.key");
    testkit::secrets::write_private(&key_file, seller_key);
    let config = exchange::Config::from_toml(&format!(
        "node = \"money\"\n[deadline]\ndefault_tmax_ms = {TMAX_MS}\nmax_tmax_ms = {TMAX_MS}\nanswer_margin_ms = 80\n\
         [notices]\nfire_lurl = true\nallow_private_addresses = true\n\n\
         [[sellers]]\nname = \"load\"\nkey_file = {key_file:?}\nbill_on_win = true\n\n\
         {sims}\n[[bidders]]\nname = \"gavel-bidder\"\nendpoint = \"http://{bidder}/openrtb2/bid\"\nmax_connections = 64\n",
        key_file = key_file.display().to_string(),
        sims = fleet.exchange_bidders_toml(64),
        bidder = bidder.addr,
    ))
    .unwrap();
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let url = format!(
        "http://{}{}",
        listener.local_addr().unwrap(),
        exchange::AUCTION_PATH
    );
    let records = journal::Config {
        sink: journal::SinkKind::File,
        dir: dir.join("records").display().to_string(),
        ..journal::Config::default()
    };
    let (journal, writer) = journal::start(&records, journal::Server::Exchange, "money")
        .await
        .unwrap();
    let exchange = Exchange::with_journal(config, journal);
    let server = tokio::spawn({
        let (exchange, stop) = (exchange.clone(), stopped(stop_rx.clone()));
        async move { exchange.serve(listener, stop).await }
    });

    // 600 auctions over 3 s; the bidder's books are read throughout.
    let spec = |seconds| LoadSpec {
        url: url.clone(),
        arrivals: Arrivals::Rate(200.0),
        duration: Duration::from_secs(seconds),
        connections: 64,
        max_connections: None,
        timeout: Duration::from_secs(5),
        warmup: Duration::ZERO,
        warmup_rate: None,
        check: ResponseCheck::None,
        authorization: Some(format!("Bearer {seller_key}")),
        http: loadgen::HttpOptions::default(),
    };
    let corpus = Arc::new(Corpus::generated(SEED, 1000, TMAX_MS));
    let load = tokio::spawn({
        let (spec, corpus) = (spec(3), corpus.clone());
        async move { loadgen::run(&spec, corpus).await }
    });
    let mut looks = 0;
    while !load.is_finished() {
        assert_within_budget(&campaigns_of(bidder.admin).await);
        looks += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report = load.await.unwrap().unwrap();
    assert!(
        looks > 10,
        "the books were read {looks} times during the load"
    );
    assert_eq!(report.sent, 600);
    // Every auction answered 200 or 204, or never sent because no connection of the
    // generator's came free in its time (a machine busy with other work): none failed or
    // timed out.
    let status = &report.status;
    assert_eq!(report.completed + status.dropped, 600, "{status:?}");
    assert_eq!(
        status.ok_200 + status.no_content_204,
        report.completed,
        "{status:?}"
    );
    // The small campaign runs out within those 600 on a quiet machine. On one whose cores
    // other tests' processes keep busy, fewer auctions leave the bidder time to bid: more come,
    // a second at a time (bounded), until it has run out. The books below cover them all.
    for _ in 0..10 {
        let campaigns = campaigns_of(bidder.admin).await;
        assert_within_budget(&campaigns);
        let small = campaigns.iter().find(|c| c["id"] == "small").unwrap();
        if SMALL_BUDGET_NANOS - nanos(small, "spent") < SMALL_CPM_NANOS {
            break;
        }
        let more = loadgen::run(&spec(1), corpus.clone()).await.unwrap();
        assert_eq!(
            more.status.ok_200 + more.status.no_content_204,
            more.completed
        );
    }

    let pending = exchange.flush_notices(Duration::from_secs(30)).await;
    assert_eq!(pending, 0, "notices still queued after 30 s");
    let books = exchange.report();
    // Enough sold that the equalities below mean something; how much depends on the machine
    // (with both cores busy elsewhere most auctions find too little time left).
    assert!(books.sold > 0, "{books:?}");
    // Not asserted here: whether answers were late. With both cores taken by other work the
    // process may not run within the 80 ms answer margin, and the books must balance all the
    // same; lateness under the exchange's control is held to 0 by tests/deadline_admission.rs
    // of the exchange. Printed below.
    assert_eq!(books.win_notices_lost, 0, "{books:?}");
    assert_eq!(books.markup_fetched + books.markup_failed, 0);
    assert_eq!(books.win_notices_sent, books.wins());

    // Every simulated bidder was told exactly what the exchange booked for it.
    let by_name: HashMap<&str, &BidderReport> =
        books.bidders.iter().map(|b| (b.name.as_str(), b)).collect();
    for told in fleet.stats() {
        let booked = by_name[told.name.as_str()];
        let seen = (told.win_notices, told.win_value, told.bill_notices);
        assert_eq!(
            seen,
            (booked.wins, booked.cleared, booked.wins),
            "{}: (win notices, their value, billing notices) against the exchange's books",
            told.name
        );
        assert_eq!(told.bill_value, booked.cleared, "{}", told.name);
        assert_eq!((told.bad_notices, told.overpriced_notices), (0, 0));
    }

    eprintln!(
        "{}: {} sold, {} no-bid, {} late, {} wins ({} by the real bidder), cleared {}",
        if redis_mode.is_empty() {
            "memory"
        } else {
            redis_mode
        },
        books.sold,
        books.no_bid,
        books.late_answers,
        books.wins(),
        by_name["gavel-bidder"].wins,
        books.cleared()
    );

    // The real bidder charged each of its wins once, at the clearing price, to the nano.
    let real = by_name["gavel-bidder"];
    assert!(real.wins > 0, "the real bidder never won: {real:?}");
    check_real_bidder(&books, real, bidder.admin).await;

    // What this (only) instance charged, per campaign, to the nano: the ledger of record ends
    // with exactly that spent, and nothing reserved once the notices have settled. Lost bids
    // were released by their loss notices; a bid the exchange gave up on (too late) releases
    // when its reservation expires. In lease mode Redis hears of charges when the lease
    // reports (every `lease_report_ms`) and when it is returned at stop, and leases park money
    // as reserved until then: Redis is read after the bidder has stopped.
    let charged: Vec<i64> = campaigns_of(bidder.admin)
        .await
        .iter()
        .map(|c| nanos(c, "charged_here"))
        .collect();
    if redis_mode != "lease" {
        testkit::time::eventually(Duration::from_secs(30), "nothing reserved", || async {
            campaigns_of(bidder.admin)
                .await
                .iter()
                .all(|c| nanos(c, "reserved") == 0)
        })
        .await;
        let spent: Vec<i64> = campaigns_of(bidder.admin)
            .await
            .iter()
            .map(|c| nanos(c, "spent"))
            .collect();
        assert_eq!(spent, charged, "spent in the ledger against charged here");
    }
    bidder.stop();
    if let Some(redis) = redis {
        let ledger = ledger::RedisLedger::new(ledger::RedisConfig {
            addr: redis.addr(),
            // The test's own reads: generous, the machine may be busy.
            timeout: testkit::http::RETRY_FOR,
            ..ledger::RedisConfig::default()
        });
        for (id, charged) in ["small", "large"].iter().zip(&charged) {
            let b = ledger
                .balance(id, units::Timestamp::now())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (b.spent.get(), b.reserved.get()),
                (*charged, 0),
                "{id} in Redis after the bidder stopped"
            );
        }
    }
    let _ = stop_tx.send(true);
    server.await.unwrap();
    // The bidder flushed its ledger records when it stopped; the exchange's now.
    let lost = writer
        .shutdown(tokio::time::Instant::now() + Duration::from_secs(10))
        .await;
    assert_eq!(lost, 0, "exchange records not written");
    check_records(&dir.join("records"), real, &books);
}

/// Both sides' records reconcile: the real bidder audited, each of its wins charged once at
/// the price it was told; the simulated bidders (no ledger) listed, not audited.
fn check_records(dir: &std::path::Path, real: &BidderReport, books: &ExchangeReport) {
    let mut reconciler = records::reconcile::Reconciler::new();
    let stats = journal::read::read_paths(&[dir.to_owned()], |r| reconciler.add(&r)).unwrap();
    let report = reconciler.finish(&records::reconcile::Tolerance::default());
    assert!(
        report.verdict().is_ok(),
        "{:?}\n{report:?}",
        report.verdict()
    );
    // Every auction that ran has its record; those answered at once for lack of time have none.
    assert_eq!(
        report.seen.auctions,
        books.sold + books.no_bid - books.no_time_left,
        "{report:?}"
    );
    let gavel = report
        .bidders
        .iter()
        .find(|b| b.bidder == "gavel-bidder")
        .unwrap_or_else(|| panic!("no gavel-bidder in {report:?}"));
    assert!(gavel.audited, "{gavel:?}");
    assert_eq!(
        (gavel.books.won, gavel.books.charged),
        (real.wins, real.wins),
        "{gavel:?}"
    );
    assert_eq!(gavel.books.told_micros, i128::from(real.cleared.micros()));
    assert_eq!(gavel.books.charged_nanos, i128::from(real.cleared.micros()));
    for sim in report.bidders.iter().filter(|b| b.bidder != "gavel-bidder") {
        assert!(!sim.audited, "{sim:?}");
    }
    eprintln!(
        "records: {} read from {} files; gavel-bidder {} won, {} charged",
        stats.records, stats.files, gavel.books.won, gavel.books.charged
    );
}

/// The real bidder's side of the books against the exchange's.
async fn check_real_bidder(books: &ExchangeReport, booked: &BidderReport, admin: SocketAddr) {
    let campaigns = campaigns_of(admin).await;
    assert_within_budget(&campaigns);
    let wins: u64 = campaigns.iter().map(|c| c["wins"].as_u64().unwrap()).sum();
    let charged: i64 = campaigns.iter().map(|c| nanos(c, "charged_here")).sum();
    // A win at CPM p micros costs p nanos: the sum of clearing CPMs in micros is the spend.
    assert_eq!(
        (wins, charged),
        (booked.wins, booked.cleared.micros()),
        "(wins, charged nanos) at the bidder against the exchange's books; {books:?}\n\
         campaigns: {campaigns:?}"
    );
    let (status, metrics) = call(admin, "GET", "/metrics", "").await;
    assert_eq!(status, 200);
    let small = campaigns.iter().find(|c| c["id"] == "small").unwrap();
    assert!(
        SMALL_BUDGET_NANOS - nanos(small, "spent") < SMALL_CPM_NANOS,
        "the small campaign should have spent its budget: {small}"
    );

    let count = |kind: &str, outcome: &str| {
        metric(
            &metrics,
            &format!("gavel_bidder_notices_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}"),
        )
    };
    // Win and billing notice for every win: whichever came first charged, the other was a
    // duplicate; nothing was refused, unknown, above its bid or lost to the ledger.
    let charged = count("win", "charged") + count("bill", "charged");
    let duplicates = count("win", "duplicate") + count("bill", "duplicate");
    assert_eq!((charged, duplicates), (booked.wins, booked.wins));
    for outcome in [
        "charged_after_release",
        "unknown_reservation",
        "above_reservation",
        "refused",
        "invalid",
        "ledger_error",
        "loss_after_win",
    ] {
        for kind in ["win", "bill", "loss"] {
            assert_eq!(count(kind, outcome), 0, "{kind} notices {outcome}");
        }
    }
    assert!(
        count("loss", "released") > 0,
        "no loss notice released a bid"
    );
}

/// Every campaign as the bidder's admin endpoint reports it now.
async fn campaigns_of(admin: SocketAddr) -> Vec<Value> {
    let (status, body) =
        call_retrying(admin, "GET", "/admin/campaigns", Some(ADMIN_TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    let all: Value = serde_json::from_str(&body).unwrap();
    all["campaigns"].as_array().unwrap().clone()
}

fn assert_within_budget(campaigns: &[Value]) {
    for c in campaigns {
        if c["nanos"]["budget"].is_null() {
            continue; // not yet known to the ledger
        }
        assert!(
            nanos(c, "spent") + nanos(c, "reserved") <= nanos(c, "budget"),
            "over budget: {c}"
        );
    }
}

fn nanos(c: &Value, key: &str) -> i64 {
    c["nanos"][key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} in {c}"))
}

/// The value of one sample line of a Prometheus text page.
fn metric(page: &str, name_and_labels: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name_and_labels}"))
}
