//! `gavel replay` as an operator runs it: auction records written as NDJSON files, an exchange
//! configuration with a new second-price increment and a seller's floor multiplier, the binary
//! run over them, its exact diff lines and totals compared.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::process::Command;

use records::{
    AuctionRecord, BidLine, DealSummary, ImpSummary, NoticeRecord, Record, VERSION, Win,
};
use testkit::TempDir;

fn gavel(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bid(bidder: &str, id: &str, micros: i64, status: &'static str) -> BidLine {
    BidLine {
        bidder: bidder.to_owned(),
        id: id.to_owned(),
        imp: "1".to_owned(),
        price_micros: micros,
        status: Cow::Borrowed(status),
        ..BidLine::default()
    }
}

/// An auction of seller `pub` with one imp, as the exchange recorded it under the old rules
/// (increment 0.01, no floor multiplier); `won` is (bidder, bid, rule, cleared).
fn auction(
    id: &str,
    floor_micros: i64,
    bids: Vec<BidLine>,
    won: Option<(&str, &str, &'static str, i64)>,
) -> AuctionRecord {
    AuctionRecord {
        v: VERSION,
        id: id.to_owned(),
        request_id: format!("r-{id}"),
        at_ms: 1_764_000_000_000,
        seller: "pub".to_owned(),
        outcome: Cow::Borrowed(if won.is_some() { "bid" } else { "no_bid" }),
        currency: "USD".to_owned(),
        floor_permille: 1000,
        imps: vec![ImpSummary {
            id: "1".to_owned(),
            floor_micros,
            ..ImpSummary::default()
        }],
        bids,
        wins: won
            .into_iter()
            .map(|(bidder, bid, rule, cleared)| Win {
                imp: "1".to_owned(),
                bidder: bidder.to_owned(),
                bid: bid.to_owned(),
                rule: Cow::Borrowed(rule),
                cleared_micros: cleared,
                charged_micros: cleared,
                ..Win::default()
            })
            .collect(),
        ..AuctionRecord::default()
    }
}

/// The records, over two files read in name order.
fn write_records(dir: &TempDir) {
    let x1 = auction(
        "x1-2a",
        500_000,
        vec![
            bid("dsp-a", "a1", 2_000_000, "won"),
            bid("dsp-b", "b1", 1_500_000, "lost"),
        ],
        Some(("dsp-a", "a1", "second_price", 1_510_000)),
    );
    let x2 = auction(
        "x2",
        400_000,
        vec![bid("dsp-b", "b2", 900_000, "won")],
        Some(("dsp-b", "b2", "second_price", 410_000)),
    );
    // dsp-b bid on a deal whose floor (0.20) is below the imp's (0.30).
    let mut x3 = auction(
        "x3",
        300_000,
        vec![
            bid("dsp-a", "a3", 550_000, "won"),
            BidLine {
                deal: Some("d3".to_owned()),
                ..bid("dsp-b", "b3", 500_000, "lost")
            },
        ],
        Some(("dsp-a", "a3", "second_price", 510_000)),
    );
    x3.imps[0].deals = vec![DealSummary {
        id: "d3".to_owned(),
        floor_micros: 200_000,
        ..DealSummary::default()
    }];
    let x4 = auction(
        "x4",
        500_000,
        vec![bid("dsp-a", "a4", 700_000, "won")],
        Some(("dsp-a", "a4", "second_price", 510_000)),
    );
    // A seller no longer configured, first price: nothing the new file says applies to it.
    let mut x5 = auction(
        "x5",
        500_000,
        vec![bid("dsp-a", "a5", 1_000_000, "won")],
        Some(("dsp-a", "a5", "first_price", 1_000_000)),
    );
    x5.seller = "gone".to_owned();
    x5.at = Some(1);
    // A fixed-price deal: its agreed price is its floor, which the multiplier raises too.
    let mut x6 = auction(
        "x6",
        0,
        vec![BidLine {
            deal: Some("d6".to_owned()),
            ..bid("dsp-b", "b6", 2_500_000, "won")
        }],
        Some(("dsp-b", "b6", "fixed_price", 1_000_000)),
    );
    x6.imps[0].deals = vec![DealSummary {
        id: "d6".to_owned(),
        floor_micros: 1_000_000,
        at: Some(3),
        ..DealSummary::default()
    }];
    // A bid dropped before the auction (no markup) never competes, then or now.
    x6.bids.push(BidLine {
        excluded: true,
        ..bid("dsp-a", "a6", 9_000_000, "no_markup")
    });
    let mut shed = auction("x7", 0, Vec::new(), None);
    shed.outcome = Cow::Borrowed("shed");
    let notice = Record::Notice(NoticeRecord {
        v: VERSION,
        auction: "x1-2a".to_owned(),
        bidder: "dsp-a".to_owned(),
        notice: Cow::Borrowed("billing"),
        outcome: Cow::Borrowed("sent"),
        at_ms: 1,
        ..NoticeRecord::default()
    });
    let lines = |records: Vec<Record>| {
        let mut text = Vec::new();
        for record in records {
            records::to_line(&record, &mut text).unwrap();
            text.push(b'\n');
        }
        text
    };
    let boxed = |r: AuctionRecord| Record::Auction(Box::new(r));
    std::fs::write(
        dir.join("a.ndjson"),
        lines(vec![boxed(x1), notice, boxed(x2), boxed(x3)]),
    )
    .unwrap();
    std::fs::write(
        dir.join("b.ndjson"),
        lines(vec![boxed(x4), boxed(x5), boxed(x6), boxed(shed)]),
    )
    .unwrap();
}

/// An exchange configuration with this `[auction]` increment and `pub`'s floor multiplier.
fn config(dir: &TempDir, name: &str, increment: &str, multiplier: Option<&str>) -> String {
    dir.file("pub.key", "a-seller-key-long-enough-1\n");
    let multiplier = multiplier
        .map(|m| format!("floor_multiplier = {m}\n"))
        .unwrap_or_default();
    let path = dir.file(
        name,
        &format!(
            "[auction]\nsecond_price_increment = {increment}\n\
             [[bidders]]\nname = \"dsp-a\"\nendpoint = \"http://127.0.0.1:9001/\"\n\
             [[bidders]]\nname = \"dsp-b\"\nendpoint = \"http://127.0.0.1:9002/\"\n\
             [[sellers]]\nname = \"pub\"\nkey_file = \"pub.key\"\n{multiplier}"
        ),
    );
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_new_increment_and_floor_show_every_changed_auction_and_the_money() {
    let dir = TempDir::new("replay");
    let files = TempDir::new("replay-records");
    write_records(&files);
    let records = files.path().to_str().unwrap();

    // The rules the records were written under change nothing.
    let old = config(&dir, "old.toml", "0.01", None);
    let (code, stdout, stderr) = gavel(&["replay", "--config", &old, records]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("auctions: 6 replayed, 0 changed, 1 skipped (outcome shed: 1)\n"),
        "{stdout}"
    );

    // Increment 0.05, and pub's floors doubled.
    let new = config(&dir, "new.toml", "0.05", Some("2.0"));
    let (code, stdout, stderr) = gavel(&["replay", "--config", &new, records]);
    assert_eq!(code, Some(0), "{stderr}");
    let expected = "\
x1-2a imp 1 (seller pub): dsp-a/a1 second_price 1.510000 -> dsp-a/a1 second_price 1.550000 (+0.040000)
x2 imp 1 (seller pub): dsp-b/b2 second_price 0.410000 -> dsp-b/b2 second_price 0.850000 (+0.440000)
x3 imp 1 (seller pub): dsp-a/a3 second_price 0.510000 -> dsp-b/b3 second_price 0.450000 (-0.060000)
x4 imp 1 (seller pub): dsp-a/a4 second_price 0.510000 -> unsold (-0.510000)
x6 imp 1 (seller pub): dsp-b/b6 fixed_price 1.000000 -> dsp-b/b6 fixed_price 2.000000 (+1.000000)
auctions: 6 replayed, 5 changed, 1 skipped (outcome shed: 1)

revenue per seller  cur            before             after             delta
gone                USD          1.000000          1.000000          0.000000
pub                 USD          3.940000          4.850000         +0.910000

spend per bidder  cur            before             after             delta
dsp-a             USD          3.530000          2.550000         -0.980000
dsp-b             USD          1.410000          3.300000         +1.890000
";
    assert_eq!(stdout, expected);

    // --limit: the first changed auctions, then how many more; totals over all.
    let (code, stdout, _) = gavel(&["replay", "--config", &new, "--limit", "2", records]);
    assert_eq!(code, Some(0));
    let mut lines = stdout.lines();
    assert!(lines.next().unwrap().starts_with("x1-2a imp 1"));
    assert!(lines.next().unwrap().starts_with("x2 imp 1"));
    assert_eq!(
        lines.next(),
        Some("(3 more changed auctions not shown: --limit 2)")
    );
    assert!(stdout.contains("+0.910000"), "{stdout}");

    // --json: the same findings in integer micros.
    let (code, stdout, stderr) = gavel(&["replay", "--config", &new, "--json", records]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let changes = json["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 5);
    assert_eq!(changes[2]["auction"], "x3");
    assert_eq!(changes[2]["before"]["bidder"], "dsp-a");
    assert_eq!(changes[2]["after"]["cleared_micros"], 450_000);
    assert_eq!(changes[2]["delta_micros"], -60_000);
    assert_eq!(changes[3]["after"], serde_json::Value::Null);
    let totals = &json["totals"];
    assert_eq!(totals["replayed"], 6);
    assert_eq!(totals["skipped"]["outcome shed"], 1);
    assert_eq!(totals["revenue"][1]["name"], "pub");
    assert_eq!(totals["revenue"][1]["delta_micros"], 910_000);
    assert_eq!(totals["spend"][0]["delta_micros"], -980_000);
    assert_eq!(totals["duplicates"], 0);

    // The same directory three times: every total as once, the duplicates reported.
    let (code, thrice, stderr) = gavel(&["replay", "--config", &new, records, records, records]);
    assert_eq!(code, Some(0), "{stderr}");
    let (dropped, rest) = thrice
        .split_once("auctions: ")
        .map(|(head, tail)| (head, format!("auctions: {tail}")))
        .unwrap();
    assert!(
        dropped.ends_with("(16 duplicate records dropped: the same record read again)\n"),
        "{thrice}"
    );
    assert_eq!(
        rest,
        expected
            .split_once("auctions: ")
            .map(|(_, t)| format!("auctions: {t}"))
            .unwrap()
    );
    let (_, json, _) = gavel(&["replay", "--config", &new, "--json", records, records]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["totals"]["duplicates"], 8);
    assert_eq!(json["totals"]["replayed"], 6);
}

#[test]
fn fields_a_forger_chose_are_printed_escaped() {
    let dir = TempDir::new("replay-escapes");
    let files = TempDir::new("replay-escaped-records");
    let x = auction(
        "x\u{1b}[2J\nauctions: 0 replayed",
        100_000,
        vec![bid("dsp-a", "a\u{202e}1", 2_000_000, "won")],
        Some(("dsp-a", "a\u{202e}1", "second_price", 110_000)),
    );
    let mut line = Vec::new();
    records::to_line(&Record::Auction(Box::new(x)), &mut line).unwrap();
    line.push(b'\n');
    std::fs::write(files.join("exchange-1.ndjson"), line).unwrap();
    let new = config(&dir, "new.toml", "0.05", None);
    let (code, stdout, stderr) =
        gavel(&["replay", "--config", &new, files.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout
            .starts_with("x\\x1b[2J\\nauctions: 0 replayed imp 1 (seller pub): dsp-a/a\\u{202e}1"),
        "{stdout}"
    );
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{202e}'),
        "{stdout:?}"
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("auctions: "))
            .count(),
        1,
        "no forged totals line: {stdout}"
    );
}

#[test]
fn a_refused_configuration_exits_2_naming_the_key() {
    let dir = TempDir::new("replay-bad");
    let path = dir.file(
        "bad.toml",
        "open_to_all_sellers = true\n[auction]\nsecond_price_increment = -1\n",
    );
    let (code, stdout, stderr) = gavel(&["replay", "--config", path.to_str().unwrap(), "."]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("auction.second_price_increment"),
        "{stderr}"
    );
    // A record file that is not one is named with its line, exit 1.
    let good = dir.file("good.toml", "open_to_all_sellers = true\n");
    let records = dir.file("bad.ndjson", "{\"kind\":\"auction\"}\n");
    let (code, _, stderr) = gavel(&[
        "replay",
        "--config",
        good.to_str().unwrap(),
        records.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("bad.ndjson line 1"), "{stderr}");
}
