//! A flood of forged notices against a real `gavel bidder` process writing records to files
//! (issue 45): 100,000 notices with attacker-chosen auction, campaign and imp fields (128
//! bytes each, terminal escapes among them), their tokens forged or missing. Every one is
//! refused and counted; the records hold at most one `notice_refused` a second per reason,
//! which says how many it stands for and carries none of the forged fields, and the record
//! directory stays within a few kilobytes. Then a real bid's billing URL replayed 10,000
//! times: charged once, its duplicate recorded once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::SocketAddr;
use std::time::Instant;

use common::BidderProcess;
use records::{LedgerEvent, Record};
use testkit::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FORGED: usize = 100_000;
const CONNECTIONS: usize = 4;
/// Requests written back to back on a connection before their answers are read.
const PIPELINE: usize = 250;

/// 128 bytes a forger chooses, percent-encoded: an escape that clears the screen, a newline
/// and a fake verdict.
fn forged_field(n: usize) -> String {
    let text = format!("\u{1b}[2J\nverdict: ok {n} ");
    let mut field: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
    while field.len() < 128 * 3 {
        field.push_str("%41");
    }
    field
}

/// The target of forged notice `n`: a bad token for nine in ten, none for the tenth.
fn forged(n: usize) -> String {
    let token = if n.is_multiple_of(10) {
        String::new()
    } else {
        format!("&t={}", "0".repeat(32))
    };
    let f = forged_field(n);
    format!("/notice/win?r=forged-{n}&a={f}&c={f}&i={f}&x=900000000&e=9999999999&price=900{token}")
}

/// Sends notices `from..to` on one kept-alive connection, `PIPELINE` at a time, and counts the
/// 403 answers; a connection the server closes is opened again for what was not answered.
async fn flood(addr: SocketAddr, from: usize, to: usize) -> usize {
    flood_with(addr, from, to, forged, "HTTP/1.1 403").await
}

/// Sends `target(n)` for `n` in `from..to` as [`flood`] does; how many answers began `status`.
async fn flood_with(
    addr: SocketAddr,
    from: usize,
    to: usize,
    target: impl Fn(usize) -> String,
    status: &str,
) -> usize {
    let mut refused = 0;
    let mut next = from;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    while next < to {
        let end = (next + PIPELINE).min(to);
        let mut wire = String::new();
        for n in next..end {
            wire.push_str(&format!(
                "GET {} HTTP/1.1\r\nHost: bidder\r\n\r\n",
                target(n)
            ));
        }
        stream.write_all(wire.as_bytes()).await.unwrap();
        let want = end - next;
        let (mut seen, mut buf, mut text) = (0, vec![0u8; 64 * 1024], String::new());
        while seen < want {
            let read = stream.read(&mut buf).await.unwrap();
            if read == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..read]));
            seen = text.matches("HTTP/1.1 ").count();
        }
        refused += text.matches(status).count();
        next += seen.max(1).min(want);
        if seen < want {
            stream = TcpStream::connect(addr).await.unwrap();
        }
    }
    refused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_forged_notices_leave_the_records_within_their_caps() {
    let dir = TempDir::new("forged-notices");
    let records = dir.join("records");
    let security = testkit::secrets::security_toml(dir.path());
    dir.file(
        "campaigns.json",
        r#"[{"id": "c1", "budget": {"total": 100}, "bid": {"cpm": 2},
            "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "x"}]}]"#,
    );
    let config = dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\n{security}[records]\nsink = \"file\"\ndir = \"{}\"\n\
             max_file_mb = 1\nmax_total_mb = 2\n",
            records.display()
        ),
    );
    let mut bidder = tokio::task::block_in_place(|| BidderProcess::start(&config));
    let started = Instant::now();
    let per = FORGED / CONNECTIONS;
    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|c| tokio::spawn(flood(bidder.addr, c * per, (c + 1) * per)))
        .collect();
    let mut refused = 0;
    for f in floods {
        refused += f.await.unwrap();
    }
    let seconds = started.elapsed().as_secs() + 1;
    assert_eq!(refused, FORGED, "every forged notice answered 403");
    let (_, page) = testkit::http::call(bidder.admin, "GET", "/metrics", "").await;
    let counted = |reason: &str| -> u64 {
        page.lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "gavel_bidder_notices_refused_total{{reason=\"{reason}\"}} "
                ))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no refusals counted for {reason}"))
    };
    assert_eq!(counted("bad_signature"), 90_000);
    assert_eq!(counted("missing_token"), 10_000);

    // A real bid's billing URL, fired once and then replayed 10,000 times (a seller holds it
    // when billing is on render): charged once, and its duplicate recorded once.
    let request = r#"{"id": "real-1", "tmax": 500, "cur": ["USD"],
      "imp": [{"id": "1", "banner": {"w": 300, "h": 250}, "bidfloor": 0.1, "bidfloorcur": "USD"}],
      "site": {"id": "s1", "domain": "news.example", "publisher": {"id": "p1"}},
      "device": {"devicetype": 2, "os": "iOS", "geo": {"country": "USA"}}}"#;
    let (status, body) = testkit::http::call(bidder.addr, "POST", bidder::BID_PATH, request).await;
    assert_eq!(status, 200, "{body}");
    let bid: serde_json::Value = serde_json::from_str(&body).unwrap();
    let burl = bid["seatbid"][0]["bid"][0]["burl"]
        .as_str()
        .unwrap()
        .replace("${AUCTION_PRICE}", "1.5");
    let target = burl
        .split_once(&bidder.addr.to_string())
        .unwrap()
        .1
        .to_owned();
    let replays = 10_000;
    let answered = flood_with(bidder.addr, 0, replays, |_| target.clone(), "HTTP/1.1 20").await;
    assert_eq!(
        answered, replays,
        "the first charges, the rest are duplicates (204)"
    );
    tokio::task::block_in_place(|| bidder.stop());

    let mut kept = Vec::new();
    journal::read::read_paths(std::slice::from_ref(&records), |r| kept.push(r)).unwrap();
    let mut by_reason = std::collections::BTreeMap::<String, (u64, u64)>::new();
    let real = |l: &records::LedgerRecord| l.auction.as_deref() == Some("real-1");
    let of_the_real_bid: Vec<String> = kept
        .iter()
        .filter_map(|r| match r {
            Record::Ledger(l) if real(l) => Some(format!(
                "{:?}/{}",
                l.event,
                l.outcome.as_deref().unwrap_or("-")
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        of_the_real_bid,
        ["Reserve/-", "Commit/charged", "Commit/already_committed"],
        "one record per event of the real bid, whatever the replays"
    );
    for record in &kept {
        let Record::Ledger(l) = record else {
            panic!("a bidder writes ledger records only: {record:?}")
        };
        if real(l) {
            continue;
        }
        assert_eq!(l.event, LedgerEvent::NoticeRefused);
        assert!(
            l.auction.is_none()
                && l.campaign.is_none()
                && l.imp.is_none()
                && l.reservation.is_none(),
            "nothing a forged token vouches for is kept: {l:?}"
        );
        let entry = by_reason
            .entry(l.reason.clone().unwrap_or_default().into_owned())
            .or_default();
        entry.0 += 1;
        entry.1 += 1 + l.suppressed;
    }
    println!("{FORGED} forged notices in {seconds} s: records kept {by_reason:?}");
    for (reason, (records, stood_for)) in &by_reason {
        assert!(
            *records <= seconds + 1,
            "{reason}: {records} records in {seconds} s"
        );
        assert!(*stood_for <= 90_000, "{reason}: {stood_for}");
    }
    assert_eq!(
        by_reason.keys().map(String::as_str).collect::<Vec<_>>(),
        ["bad_signature", "missing_token"]
    );
    let bytes: u64 = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(bytes < 64 * 1024, "{bytes} bytes of records");
}
