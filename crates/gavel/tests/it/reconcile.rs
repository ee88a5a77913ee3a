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

/// What an old bidder wrote for a forged notice: the forger's auction and campaign, a clear
/// screen and a fake verdict among them.
fn forged_refusal() -> Record {
    Record::Ledger(LedgerRecord {
        v: VERSION,
        event: LedgerEvent::NoticeRefused,
        at_ms: 3,
        node: "bidder-1".to_owned(),
        reservation: Some("q\u{1b}]0;owned\u{7}".to_owned()),
        auction: Some("zz".to_owned()),
        imp: None,
        campaign: Some("\u{1b}[2J\nverdict: ok".to_owned()),
        amount_nanos: 0,
        notice: Some(Cow::Borrowed("win")),
        outcome: None,
        reason: Some(Cow::Borrowed("bad_signature")),
        suppressed: 0,
    })
}

#[test]
fn hostile_records_cannot_fool_the_report() {
    let dir = TempDir::new("reconcile-hostile");
    write_exchange(dir.path());
    let ledger = vec![
        charge("x1", "r1", 510_000),
        charge("x2", "r2", 1_250_000),
        forged_refusal(),
    ];
    std::fs::write(dir.join("bidder-0001.ndjson"), lines(&ledger)).unwrap();
    let path = dir.path().to_str().unwrap();

    // A planted escape and newline are printed as text: no ESC reaches the terminal, and the
    // only verdict line is the real one.
    let (code, stdout, stderr) = reconcile(&[path]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("\\x1b[2J\\nverdict: ok"), "{stdout}");
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    let verdicts: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("verdict"))
        .collect();
    assert_eq!(verdicts.len(), 1, "{stdout}");
    assert!(verdicts[0].starts_with("verdict: FAILED"), "{stdout}");

    // The same directory twice, and the bidder's file again beside it: the same books, the
    // duplicates reported (the exchange's 7 records and the bidder's 3, then 3 more).
    let bidder = dir.join("bidder-0001.ndjson");
    let bidder = bidder.to_str().unwrap();
    let (code2, twice, _) = reconcile(&[path, path, bidder]);
    assert_eq!(code2, code);
    assert!(
        twice.starts_with(
            "gavel reconcile: 10 records from 5 files (13 duplicate records dropped: the same record read again)\n"
        ),
        "{twice}"
    );
    let body = |s: &str| s.split_once('\n').map(|(_, rest)| rest.to_owned());
    assert_eq!(body(&twice), body(&stdout), "no total changes");
    assert!(!twice.contains("double_charge"), "{twice}");
    let (_, json, _) = reconcile(&["--json", path, path]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["duplicates"], 10);

    // Negative money and a version Gavel never wrote: refused by name, exit 2.
    for (bad, named) in [
        (
            r#"{"kind":"ledger","v":1,"event":"commit","at_ms":1,"node":"n","reservation":"r9","auction":"x9","amount_nanos":-5}"#,
            "amount_nanos is negative (-5)",
        ),
        (
            r#"{"kind":"notice","v":0,"auction":"a","bidder":"b","notice":"win","outcome":"sent","at_ms":1}"#,
            "record version 0 is not one Gavel writes",
        ),
    ] {
        std::fs::write(dir.join("bidder-0002.ndjson"), format!("{bad}\n")).unwrap();
        let (code, stdout, stderr) = reconcile(&[path]);
        assert_eq!(code, Some(2), "{stdout}{stderr}");
        assert!(
            stderr.contains("bidder-0002.ndjson line 1") && stderr.contains(named),
            "{stderr}"
        );
    }
    let mut a = auction("x8", "gavel-dsp", "r8", 1);
    if let Record::Auction(a) = &mut a {
        a.wins[0].charged_micros = -510_000;
    }
    std::fs::write(dir.join("bidder-0002.ndjson"), lines(&[a])).unwrap();
    let (code, _, stderr) = reconcile(&[path]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("wins[0].charged_micros is negative (-510000)"),
        "{stderr}"
    );
}
