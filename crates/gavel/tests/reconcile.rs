//! `gavel reconcile` as an operator runs it: the binary over a directory holding the
//! exchange's records (a completed, gzipped file) and a bidder's (the current, plain file).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use flate2::Compression;
use flate2::write::GzEncoder;
use records::{
    AuctionRecord, LedgerEvent, LedgerRecord, NoticeRecord, Record, VERSION, Win, to_line,
};
use testkit::TempDir;

fn lines(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        to_line(r, &mut out).unwrap();
        out.push(b'\n');
    }
    out
}

fn auction(id: &str, bidder: &str, bid: &str, price: i64) -> Record {
    Record::Auction(Box::new(AuctionRecord {
        v: VERSION,
        id: id.to_owned(),
        request_id: "r".to_owned(),
        seller: "pub".to_owned(),
        outcome: Cow::Borrowed("bid"),
        currency: "USD".to_owned(),
        floor_permille: 1000,
        wins: vec![Win {
            imp: "1".to_owned(),
            bidder: bidder.to_owned(),
            bid: bid.to_owned(),
            rule: Cow::Borrowed("second_price"),
            cleared_micros: price,
            charged_micros: price,
            billing_by: Some(Cow::Borrowed("exchange")),
            ..Win::default()
        }],
        ..AuctionRecord::default()
    }))
}

fn notice(auction: &str, bidder: &str, bid: &str) -> Record {
    Record::Notice(NoticeRecord {
        v: VERSION,
        auction: auction.to_owned(),
        bidder: bidder.to_owned(),
        notice: Cow::Borrowed("win"),
        outcome: Cow::Borrowed("sent"),
        at_ms: 1,
        bid: Some(bid.to_owned()),
        attempts: 1,
        ..NoticeRecord::default()
    })
}

fn charge(auction: &str, bid: &str, nanos: i64) -> Record {
    Record::Ledger(LedgerRecord {
        v: VERSION,
        event: LedgerEvent::Commit,
        at_ms: 2,
        node: "bidder-1".to_owned(),
        reservation: Some(bid.to_owned()),
        auction: Some(auction.to_owned()),
        imp: Some("1".to_owned()),
        campaign: Some("spring".to_owned()),
        amount_nanos: nanos,
        notice: Some(Cow::Borrowed("win")),
        outcome: Some(Cow::Borrowed("charged")),
        reason: None,
        suppressed: 0,
    })
}

fn reconcile(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .arg("reconcile")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The exchange's records, gzipped: three auctions won by the Gavel bidder and one by a
/// simulated DSP that keeps no ledger.
fn write_exchange(dir: &Path) {
    let records = [
        auction("x1", "gavel-dsp", "r1", 510_000),
        notice("x1", "gavel-dsp", "r1"),
        auction("x2", "gavel-dsp", "r2", 1_250_000),
        notice("x2", "gavel-dsp", "r2"),
        auction("x3", "sim-dsp", "s3", 900_000),
        auction("x4", "gavel-dsp", "r4", 75_000),
        notice("x4", "gavel-dsp", "r4"),
    ];
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&lines(&records)).unwrap();
    std::fs::write(dir.join("exchange-0001.ndjson.gz"), gz.finish().unwrap()).unwrap();
}

#[test]
fn reconcile_agrees_then_finds_a_price_mismatch_and_names_a_bad_line() {
    let dir = TempDir::new("reconcile");
    write_exchange(dir.path());
    let bidder = dir.join("bidder-0001.ndjson");
    let mut ledger = vec![
        charge("x1", "r1", 510_000),
        charge("x2", "r2", 1_250_000),
        charge("x4", "r4", 75_000),
    ];
    std::fs::write(&bidder, lines(&ledger)).unwrap();
    let path = dir.path().to_str().unwrap();

    let (code, stdout, stderr) = reconcile(&[path]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for needle in [
        "10 records from 2 files",
        "gavel-dsp",
        "  spring",
        "0.001835000",
        "sim-dsp",
        "no ledger records: not audited",
        "verdict: ok: 1 bidders audited, 3 wins charged; no ledger records: sim-dsp",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }

    // The bidder charged a micro more than it was told for x2, and x4 is not charged at all.
    ledger[1] = charge("x2", "r2", 1_250_001);
    ledger.truncate(2);
    std::fs::write(&bidder, lines(&ledger)).unwrap();
    let (code, stdout, stderr) = reconcile(&[path]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    for needle in [
        "price_mismatch   ",
        "auction x2 bid r2 bidder gavel-dsp campaign spring told 0.001250000 charged 0.001250001",
        "won_not_charged  unexplained        auction x4 bid r4",
        "verdict: FAILED: gavel-dsp: 1 of 3 wins not charged (333333 ppm), 0 allowed; gavel-dsp: 1 price_mismatch",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    // A tolerance admits the uncharged win, never the price.
    let (code, stdout, _) = reconcile(&["--tolerance", "1", path]);
    assert_eq!(code, Some(1));
    assert!(
        stdout.contains("verdict: FAILED: gavel-dsp: 1 price_mismatch\n"),
        "{stdout}"
    );
    let (code, stdout, _) = reconcile(&["--json", "--tolerance", "1", path]);
    assert_eq!(code, Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["report"]["totals"]["price_mismatch"], 1);
    let listed = json["report"]["listed"].as_array().unwrap();
    let price = listed
        .iter()
        .find(|m| m["kind"] == "price_mismatch")
        .unwrap();
    assert_eq!(price["auction"], "x2");
    assert_eq!(price["told_micros"], 1_250_000);
    assert_eq!(price["charged_nanos"], 1_250_001);

    // A line that is not a record: exit 2, naming the file and line.
    let mut bytes = lines(&ledger);
    bytes.extend_from_slice(b"{\"kind\":\"ledger\"}\n");
    std::fs::write(&bidder, bytes).unwrap();
    let (code, stdout, stderr) = reconcile(&[path]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("bidder-0001.ndjson line 3"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn a_required_bidder_without_ledger_records_fails() {
    let dir = TempDir::new("reconcile-required");
    write_exchange(dir.path());
    let path = dir.path().to_str().unwrap();
    let (code, stdout, _) = reconcile(&[path]);
    assert_eq!(code, Some(0), "{stdout}");
    let (code, stdout, _) = reconcile(&["--require-bidder", "gavel-dsp", path]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("gavel-dsp: required, but no ledger record joined its 3 wins"),
        "{stdout}"
    );
}
