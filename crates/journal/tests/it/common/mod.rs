//! Records to write and ways to look at what was written, shared by the tests and the bench.
#![allow(dead_code, clippy::unwrap_used)]

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use journal::layout::{self, Limits};
use journal::metrics::Metrics;
use journal::{FileConfig, FileSink, Journal, Server, Writer};
use records::{
    AuctionRecord, BidLine, Blocks, Call, DealSummary, ImpSummary, Inventory, NoticeRecord, Record,
    VERSION, Win,
};

/// A small record naming `id`.
pub fn notice(id: &str) -> Record {
    Record::Notice(NoticeRecord {
        v: VERSION,
        auction: id.to_owned(),
        bidder: "dsp-3".to_owned(),
        notice: Cow::Borrowed("billing"),
        outcome: Cow::Borrowed("sent"),
        at_ms: 1_764_000_000_000,
        price_micros: Some(1_234_567),
        status: Some(204),
        attempts: 1,
        ..NoticeRecord::default()
    })
}

/// An auction record as the exchange writes one at fan-out `fan_out`: every bidder called
/// (most bid, one timed out, one did not bid), `bids` bids, one win at second price.
pub fn auction(id: &str, fan_out: usize, bids: usize) -> Record {
    let bidder = |i: usize| format!("dsp-{i:02}");
    let calls = (0..fan_out)
        .map(|i| Call {
            bidder: bidder(i),
            outcome: Cow::Borrowed(match i {
                0 => "timeout",
                1 => "no_bid",
                _ => "bid",
            }),
            detail: (i == 1).then_some(Cow::Borrowed("no_match")),
            took_us: (i != 0).then_some(4_000 + 731 * i as u64),
            privacy: if i % 3 == 0 {
                vec![Cow::Borrowed("ids_removed")]
            } else {
                Vec::new()
            },
            ..Call::default()
        })
        .collect();
    let bid_lines = (0..bids)
        .map(|i| BidLine {
            bidder: bidder(2 + i % fan_out.saturating_sub(2).max(1)),
            seat: format!("seat-{i}"),
            id: format!("{id}-bid-{i}"),
            imp: "1".to_owned(),
            price_micros: 1_500_000 + 97_531 * i as i64,
            deal: (i == 3).then(|| "deal-gold".to_owned()),
            adomain: vec![format!("brand{i}.example")],
            cat: vec!["IAB1".to_owned()],
            status: Cow::Borrowed(match i {
                7 => "won",
                0 => "below_floor",
                _ => "lost",
            }),
            ..BidLine::default()
        })
        .collect();
    Record::Auction(Box::new(AuctionRecord {
        v: VERSION,
        id: id.to_owned(),
        request_id: format!("req-{id}"),
        at_ms: 1_764_000_000_123,
        seller: "news-site".to_owned(),
        outcome: Cow::Borrowed("bid"),
        currency: "USD".to_owned(),
        at: Some(2),
        tmax_ms: Some(120),
        floor_permille: 1000,
        inventory: Inventory {
            site_domain: Some("news.example".to_owned()),
            publisher_id: Some("pub-42".to_owned()),
            country: Some("USA".to_owned()),
            ip_network: Some("203.0.113.0/24".to_owned()),
            ..Inventory::default()
        },
        blocks: Blocks {
            bcat: vec!["IAB25".to_owned(), "IAB26".to_owned()],
            badv: vec!["blocked.example".to_owned()],
            ..Blocks::default()
        },
        imps: vec![ImpSummary {
            id: "1".to_owned(),
            media: Some(Cow::Borrowed("banner")),
            floor_micros: 1_000_000,
            deals: vec![DealSummary {
                id: "deal-gold".to_owned(),
                floor_micros: 2_500_000,
                at: Some(1),
                ..DealSummary::default()
            }],
            ..ImpSummary::default()
        }],
        calls,
        bids: bid_lines,
        wins: vec![Win {
            imp: "1".to_owned(),
            bidder: bidder(3),
            bid: format!("{id}-bid-7"),
            seat: "seat-7".to_owned(),
            rule: Cow::Borrowed("second_price"),
            cleared_micros: 2_093_150,
            charged_micros: 2_093_150,
            billing_by: Some(Cow::Borrowed("exchange")),
            ..Win::default()
        }],
        ..AuctionRecord::default()
    }))
}

/// The id a record names (an auction's id, a notice's auction).
pub fn id_of(record: &Record) -> String {
    match record {
        Record::Auction(a) => a.id.clone(),
        Record::Notice(n) => n.auction.clone(),
        Record::Ledger(l) => l.auction.clone().unwrap_or_default(),
    }
}

/// The ids of every record under `dir`, in the order `read` gives them.
pub fn ids_in(dir: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    journal::read::read_paths(&[dir.to_path_buf()], |r| ids.push(id_of(&r))).unwrap();
    ids
}

/// The files in `dir` whose names end in `suffix`, sorted.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// Waits (in the runtime's time, paused or not) until `done` holds; panics after a long while.
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..20_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

/// A journal over a file sink in `dir` with these limits, for the exchange on node `n1`.
pub async fn file_journal(dir: &Path, limits: Limits, queue: usize) -> (Journal, Writer) {
    file_journal_keeping(dir, limits, journal::Config::default().retention(), queue).await
}

/// [`file_journal`] keeping only what `retention` allows.
pub async fn file_journal_keeping(
    dir: &Path,
    limits: Limits,
    retention: layout::Retention,
    queue: usize,
) -> (Journal, Writer) {
    let metrics = Arc::new(Metrics::new(Server::Exchange));
    let sink = FileSink::open(
        FileConfig {
            dir: dir.to_path_buf(),
            prefix: layout::prefix("exchange", "n1"),
            limits,
            retention,
        },
        metrics.clone(),
    )
    .await
    .unwrap();
    journal::start_with(sink, queue, metrics, "n1")
}
