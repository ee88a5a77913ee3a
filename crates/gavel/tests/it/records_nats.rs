//! Records to NATS JetStream through a fault: an exchange and a real `gavel bidder` process
//! publish their records to a `nats-server -js` the test starts, under load; mid-run the
//! server is killed (SIGKILL) and restarted 2.5 s later on the same port and store. The
//! records written meanwhile go to each side's disk spill and are replayed in order. Afterwards
//! the stream holds every auction once (no record lost, none doubled), and `gavel reconcile`'s
//! join over the stream finds the books exact: every win of the real bidder charged once at the
//! price it was told.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::BidderProcess;
use exchange::Exchange;
use loadgen::{Arrivals, Corpus, LoadSpec, ResponseCheck};
use records::reconcile::{Reconciler, Tolerance};
use sim::{BidderProfile, LatencyDist, PriceDist};
use testkit::{NatsServer, TempDir};
use tokio::net::TcpListener;
use tokio::sync::watch;

const SEED: u64 = 35;
const TMAX_MS: u32 = 300;

const CAMPAIGNS: &str = r#"[
  {"id": "steady", "adomain": ["steady.example"], "pacing": "asap",
   "budget": {"total": 50.00}, "bid": {"cpm": 1.50},
   "creatives": [
     {"id": "mrec", "w": 300, "h": 250, "adm": "<div>steady</div>"},
     {"id": "leader", "w": 728, "h": 90, "adm": "<div>steady</div>"},
     {"id": "phone", "w": 320, "h": 50, "adm": "<div>steady</div>"}]}
]"#;

fn sim_profiles() -> Vec<BidderProfile> {
    ["atlas", "beacon"]
        .iter()
        .map(|name| BidderProfile {
            bid_probability: 0.8,
            latency: LatencyDist::LogNormal {
                p50_ms: 3.0,
                p99_ms: 12.0,
            },
            adomain: vec![format!("{name}.example")],
            ..BidderProfile::new(
                name,
                PriceDist::LogNormal {
                    median: 1.2,
                    p99: 6.0,
                },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_survive_a_nats_server_killed_mid_run_and_reconcile_exactly() {
    let mut nats = NatsServer::start().await;
    let dir = TempDir::new("records-nats");
    dir.file("campaigns.json", CAMPAIGNS);
    let records = |spill: &str| {
        format!(
            // 64 MiB: the test server's JetStream (1 GiB) refuses the default 10 GiB stream.
            "[records]\nsink = \"nats\"\nnats_url = \"{}\"\nspill_dir = {:?}\nmax_total_mb = 64\n",
            nats.url(),
            dir.join(spill).display().to_string()
        )
    };
    let config = dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\nnode = \"nats-bidder\"\n{}\
             [ledger]\nreservation_ttl_ms = 2000\nreservation_grace_ms = 1000\n{}",
            testkit::secrets::security_toml(dir.path()),
            records("bidder-spill")
        ),
    );
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
    let config = exchange::Config::from_toml(&format!(
        "node = \"nats-exchange\"\nopen_to_all_sellers = true\n\
         [deadline]\ndefault_tmax_ms = {TMAX_MS}\nmax_tmax_ms = {TMAX_MS}\nanswer_margin_ms = 80\n\
         [notices]\nfire_lurl = true\nfire_burl = true\nallow_private_addresses = true\n{}\n\
         {sims}\n[[bidders]]\nname = \"gavel-bidder\"\nendpoint = \"http://{bidder}/openrtb2/bid\"\nmax_connections = 64\n",
        records("exchange-spill"),
        sims = fleet.exchange_bidders_toml(64),
        bidder = bidder.addr,
    ))
    .unwrap();
    let (journal, writer) = journal::start(
        &config.config.rtb.records,
        journal::Server::Exchange,
        "nats-exchange",
    )
    .await
    .unwrap();
    let exchange = Exchange::with_journal(config, journal.clone());
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let url = format!(
        "http://{}{}",
        listener.local_addr().unwrap(),
        exchange::AUCTION_PATH
    );
    let server = tokio::spawn({
        let (exchange, stop) = (exchange.clone(), stopped(stop_rx.clone()));
        async move { exchange.serve(listener, stop).await }
    });

    let spec = LoadSpec {
        url,
        arrivals: Arrivals::Rate(150.0),
        duration: Duration::from_secs(5),
        connections: 64,
        max_connections: None,
        timeout: Duration::from_secs(5),
        warmup: Duration::ZERO,
        warmup_rate: None,
        check: ResponseCheck::None,
        authorization: None,
        http: loadgen::HttpOptions::default(),
    };
    let corpus = Arc::new(Corpus::generated(SEED, 1000, TMAX_MS));
    let load = tokio::spawn(async move { loadgen::run(&spec, corpus).await });
    // A crash of the record server in the middle of the run, back 2.5 s later (longer than a
    // publish may wait for its acknowledgement, so records go to the spill).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    nats.kill();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    nats.restart().await;
    let report = load.await.unwrap().unwrap();
    assert_eq!(report.sent, 750);

    assert_eq!(exchange.flush_notices(Duration::from_secs(30)).await, 0);
    // Both spills replayed into the restarted server (a spill file is removed once empty).
    for spill in ["exchange-spill", "bidder-spill"] {
        let file = dir.join(spill).join(journal::nats::SPILL_FILE);
        testkit::time::eventually(Duration::from_secs(30), "the spill replayed", || {
            let gone = !file.exists();
            async move { gone }
        })
        .await;
    }
    bidder.stop();
    let _ = stop_tx.send(true);
    server.await.unwrap();
    let lost = writer
        .shutdown(tokio::time::Instant::now() + Duration::from_secs(10))
        .await;
    assert_eq!(lost, 0, "exchange records not written");
    let books = exchange.report();
    let spilled = journal_metric(&journal, "gavel_exchange_records_spilled_total");
    assert!(
        spilled > 0.0,
        "no record went through the spill: the kill missed the run"
    );

    let mut reconciler = Reconciler::new();
    let read = journal::nats::read_stream(&nats.url(), "GAVEL_RECORDS", |r| reconciler.add(&r))
        .await
        .unwrap();
    let reconciled = reconciler.finish(&Tolerance::default());
    assert!(reconciled.verdict().is_ok(), "{:?}", reconciled.verdict());
    // Every auction that ran, once: none lost in the outage, none doubled by a retry.
    assert_eq!(
        reconciled.seen.auctions,
        books.sold + books.no_bid - books.no_time_left,
        "{reconciled:?}"
    );
    assert_eq!(reconciled.seen.duplicate_wins, 0);
    let real = books
        .bidders
        .iter()
        .find(|b| b.name == "gavel-bidder")
        .unwrap();
    let gavel = reconciled
        .bidders
        .iter()
        .find(|b| b.bidder == "gavel-bidder")
        .unwrap();
    assert!(real.wins > 0, "the real bidder never won: {books:?}");
    assert!(gavel.audited);
    assert_eq!(
        (gavel.books.won, gavel.books.charged),
        (real.wins, real.wins)
    );
    assert_eq!(gavel.books.charged_nanos, i128::from(real.cleared.micros()));
    eprintln!(
        "{} records read back from the stream; {} auctions, {} spilled by the exchange; gavel-bidder {} won, {} charged",
        read.records, reconciled.seen.auctions, spilled, gavel.books.won, gavel.books.charged
    );
}

/// A figure of the journal's part of `/metrics`.
fn journal_metric(journal: &journal::Journal, name: &str) -> f64 {
    let mut text = String::new();
    journal.render(&mut text);
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
