//! How fast the NATS sink publishes auction records: starts its own `nats-server -js` (the
//! tests' helper), publishes 10,000 auction records at fan-out 10 in the writer's batches,
//! and prints the rate; then reads the stream back and prints that rate.
//!
//! `cargo run -p journal --release --example nats_publish [records] [batch]`

use std::borrow::Cow;
use std::time::Instant;

use journal::nats::{NatsSink, read_stream};
use journal::sink::{Line, Sink};
use journal::{Config, SinkKind};
use records::{AuctionRecord, BidLine, Call, ImpSummary, Record, VERSION, Win, to_line};
use testkit::{NatsServer, TempDir};

/// An auction record shaped like one at fan-out 10: two imps, ten bidders called, ten bids.
fn auction(n: u64) -> Record {
    let bidder = |b: u64| format!("dsp-{b:02}");
    Record::Auction(Box::new(AuctionRecord {
        v: VERSION,
        id: format!("x1-{n:016x}"),
        request_id: format!("req-{n}"),
        at_ms: 1_764_000_000_000 + n as i64,
        seller: "publisher-one".to_owned(),
        outcome: Cow::Borrowed("bid"),
        currency: "USD".to_owned(),
        at: Some(2),
        tmax_ms: Some(120),
        floor_permille: 1000,
        imps: (1..=2)
            .map(|i| ImpSummary {
                id: i.to_string(),
                media: Some(Cow::Borrowed("banner")),
                floor_micros: 500_000,
                ..ImpSummary::default()
            })
            .collect(),
        calls: (0..10)
            .map(|b| Call {
                bidder: bidder(b),
                outcome: Cow::Borrowed("bid"),
                took_us: Some(8_000 + b * 731),
                privacy: vec![Cow::Borrowed("ip_truncated")],
                ..Call::default()
            })
            .collect(),
        bids: (0..10)
            .map(|b| BidLine {
                bidder: bidder(b),
                seat: format!("seat-{b}"),
                id: format!("bid-{n}-{b}"),
                imp: (1 + b % 2).to_string(),
                price_micros: 600_000 + (b as i64) * 45_000,
                adomain: vec![format!("advertiser{b}.example")],
                cat: vec!["IAB1".to_owned()],
                status: Cow::Borrowed(if b == 9 { "won" } else { "lost" }),
                ..BidLine::default()
            })
            .collect(),
        wins: vec![Win {
            imp: "2".to_owned(),
            bidder: bidder(9),
            bid: format!("bid-{n}-9"),
            seat: "seat-9".to_owned(),
            rule: Cow::Borrowed("second_price"),
            cleared_micros: 970_000,
            charged_micros: 970_000,
            ..Win::default()
        }],
        ..AuctionRecord::default()
    }))
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let count: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let batch: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(256)
        .max(1);
    let server = NatsServer::start().await;
    let spill = TempDir::new("nats-bench-spill");
    let config = Config {
        sink: SinkKind::Nats,
        nats_url: server.url(),
        spill_dir: spill.path().display().to_string(),
        ..Config::default()
    };
    let lines: Vec<Line> = (0..count)
        .map(|n| {
            let mut bytes = Vec::new();
            to_line(&auction(n), &mut bytes).expect("an auction record encodes");
            Line {
                id: format!("bench-{n}"),
                bytes,
            }
        })
        .collect();
    let bytes: usize = lines.iter().map(|l| l.bytes.len()).sum();
    let mut sink = NatsSink::connect(&config, "gavel.records.exchange".into())
        .await
        .expect("the sink connects");
    let started = Instant::now();
    for chunk in lines.chunks(batch) {
        sink.write(chunk).await.expect("the batch is kept");
    }
    let took = started.elapsed().as_secs_f64();
    let stats = sink.stats();
    println!(
        "published {count} auction records ({} bytes each on average) in batches of {batch}: \
         {took:.3} s, {:.0} records/s, {:.1} MB/s; {stats:?}",
        bytes / lines.len().max(1),
        count as f64 / took,
        bytes as f64 / took / 1e6,
    );
    let started = Instant::now();
    let read = read_stream(&server.url(), &config.nats_stream, |_| {})
        .await
        .expect("the stream reads back");
    let took = started.elapsed().as_secs_f64();
    println!(
        "read back {} records in {took:.3} s, {:.0} records/s",
        read.records,
        read.records as f64 / took
    );
}
