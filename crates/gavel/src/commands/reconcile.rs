//! `gavel reconcile [PATHS...] [--nats URL]`: reads the exchange's and the bidders' records
//! (files, a NATS JetStream stream, or both), joins them
//! (`records::reconcile`, pure) and prints the books per bidder and campaign with the verdict.
//! Exit status: 0 within the tolerance, 1 on a mismatch beyond it, 2 on a read error.
//! [`summary`] and [`verdict_line`] are the printing, for `gavel demo` to end with.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use journal::read::{ReadError, ReadStats, read_paths_with};
use records::identity::Distinct;
use records::reconcile::{
    BidderReport, Books, CampaignReport, MismatchCounts, NOTICE_KINDS, Reconciler, Report,
    Tolerance,
};

use records::terminal::{safe_lines, shown};

use super::Exit;
use crate::cli::ReconcileArgs;

pub async fn run(args: ReconcileArgs) -> anyhow::Result<()> {
    let tolerance = Tolerance {
        max_uncharged_ppm: args.tolerance_ppm,
        max_uncharged: args.tolerance,
        require_bidders: args.require_bidders,
        unknown_auction_fails: args.fail_unknown_auctions,
    };
    let paths = args.paths;
    let read = tokio::task::spawn_blocking(move || {
        let mut seen = Distinct::new();
        reconcile_files(&paths, &mut seen).map(|(r, s)| (r, s, seen))
    })
    .await?;
    let (mut reconciler, mut stats, mut seen) = match read {
        Ok(read) => read,
        Err(e) => {
            eprintln!("gavel reconcile: {}", shown(&e.to_string()));
            return Err(Exit(2).into());
        }
    };
    if let Some(url) = &args.nats {
        let read = journal::nats::read_stream_with(url, &args.stream, &mut seen, |r| {
            reconciler.add(&r);
        });
        match read.await {
            Ok(read) => {
                stats.records += read.records;
                stats.duplicates += read.duplicates;
                stats.unchecked += read.unchecked;
            }
            Err(e) => {
                eprintln!(
                    "gavel reconcile: {url} stream {}: {}",
                    args.stream,
                    shown(&e.to_string())
                );
                return Err(Exit(2).into());
            }
        }
    }
    let report = reconciler.finish(&tolerance);
    let text = if args.json {
        let failures: Vec<String> = match report.verdict() {
            Ok(()) => Vec::new(),
            Err(f) => f.iter().map(ToString::to_string).collect(),
        };
        let json = serde_json::json!({
            "files": stats.files,
            "records": stats.records,
            "duplicates": stats.duplicates,
            "unchecked": stats.unchecked,
            "ok": failures.is_empty(),
            "failures": failures,
            "report": report,
        });
        format!("{}\n", serde_json::to_string_pretty(&json)?)
    } else {
        let mut duplicates = match stats.duplicates {
            0 => String::new(),
            n => format!(" ({n} duplicate records dropped: the same record read again)"),
        };
        if stats.unchecked > 0 {
            duplicates.push_str(&format!(
                " ({} records without ids not checked for copies: past the limit)",
                stats.unchecked
            ));
        }
        let text = format!(
            "gavel reconcile: {} records from {} files{duplicates}\n{}",
            stats.records,
            stats.files,
            summary(&report)
        );
        safe_lines(&text).into_owned()
    };
    // Not println!: a reader that stopped reading stdout must not turn a verdict into a panic.
    let _ = std::io::stdout().write_all(text.as_bytes());
    match report.verdict() {
        Ok(()) => Ok(()),
        Err(_) => Err(Exit(1).into()),
    }
}

/// Every record of `paths` through a [`Reconciler`], each once (`seen`: records read before, and
/// after, the ones read here; blocking file reads).
pub fn reconcile_files(
    paths: &[PathBuf],
    seen: &mut Distinct,
) -> Result<(Reconciler, ReadStats), ReadError> {
    let mut reconciler = Reconciler::new();
    let stats = read_paths_with(paths, seen, |record| reconciler.add(&record))?;
    Ok((reconciler, stats))
}

/// The report as tables (per bidder, its campaigns under it, then campaigns no win joined),
/// the mismatches listed, and the verdict line last. Amounts are currency units to the nano:
/// a price told at CPM p micros is p nanos, so the two columns compare exactly. Every name and
/// id from the records is printed through `shown` (escaped): records hold what others sent.
pub fn summary(report: &Report) -> String {
    let mut out = String::new();
    let seen = &report.seen;
    let _ = writeln!(
        out,
        "read {} auctions, {} notices, {} ledger records",
        seen.auctions, seen.notices, seen.ledger
    );
    let _ = writeln!(
        out,
        "{:<24} {:>8} {:>8} {:>9} {:>18} {:>18} {:>6} {:>7}  notices lost (win/billing/loss/markup)",
        "bidder / campaign", "won", "charged", "uncharged", "told", "charged", "dup", "refused"
    );
    for b in &report.bidders {
        bidder_rows(&mut out, b);
    }
    if !report.unattributed.is_empty() {
        let _ = writeln!(out, "campaigns that joined no win of these records:");
        for c in &report.unattributed {
            campaign_row(&mut out, c);
        }
    }
    let others = [
        (seen.unjoinable, "records without the ids to join them"),
        (seen.duplicate_wins, "wins recorded twice"),
        (
            seen.charged_on_retry,
            "charges known only from a retried notice",
        ),
        (seen.over_limit, "records past the memory limit"),
    ];
    for (n, what) in others {
        if n > 0 {
            let _ = writeln!(out, "{n} {what}");
        }
    }
    for m in &report.listed {
        let _ = writeln!(
            out,
            "  {:<16} {:<18} auction {} bid {}{}{}{}{}",
            m.kind.label(),
            m.kind.cause().unwrap_or(""),
            shown(&m.auction),
            shown(&m.bid),
            m.bidder
                .as_deref()
                .map(|b| format!(" bidder {}", shown(b)))
                .unwrap_or_default(),
            m.campaign
                .as_deref()
                .map(|c| format!(" campaign {}", shown(c)))
                .unwrap_or_default(),
            m.told_micros
                .map(|t| format!(" told {}", money(t.into())))
                .unwrap_or_default(),
            m.charged_nanos
                .map(|c| format!(" charged {}", money(c.into())))
                .unwrap_or_default(),
        );
    }
    let _ = writeln!(out, "{}", verdict_line(report));
    out
}

fn bidder_rows(out: &mut String, b: &BidderReport) {
    let lost: Vec<String> = NOTICE_KINDS
        .iter()
        .map(|k| b.notices.lost(k).to_string())
        .collect();
    if !b.audited {
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>8} {:>9} {:>18} {:>18} {:>6} {:>7}  {}   (no ledger records: not audited)",
            shown(&b.bidder),
            b.books.won,
            "-",
            "-",
            money(b.books.told_micros),
            "-",
            "-",
            "-",
            lost.join("/"),
        );
        return;
    }
    books_row(
        out,
        &shown(&b.bidder),
        &b.books,
        &b.mismatches,
        b.duplicates,
        b.notices_refused,
    );
    let _ = writeln!(out, "  notices lost {}", lost.join("/"));
    mismatch_line(out, "  ", &b.mismatches);
    for c in &b.campaigns {
        campaign_row(out, c);
    }
}

fn campaign_row(out: &mut String, c: &CampaignReport) {
    let name = format!("  {}", shown(&c.campaign));
    books_row(
        out,
        &name,
        &c.books,
        &c.mismatches,
        c.duplicates,
        c.notices_refused,
    );
    mismatch_line(out, "    ", &c.mismatches);
}

fn books_row(
    out: &mut String,
    name: &str,
    books: &Books,
    m: &MismatchCounts,
    duplicates: u64,
    refused: u64,
) {
    let _ = writeln!(
        out,
        "{:<24} {:>8} {:>8} {:>9} {:>18} {:>18} {:>6} {:>7}",
        name,
        books.won,
        books.charged,
        m.won_not_charged(),
        money(books.told_micros),
        money(books.charged_nanos),
        duplicates,
        refused,
    );
}

fn mismatch_line(out: &mut String, indent: &str, m: &MismatchCounts) {
    let parts: Vec<String> = [
        ("won_not_charged/notice_lost", m.notice_lost),
        ("won_not_charged/refused_by_bidder", m.refused_by_bidder),
        ("won_not_charged/seller_fires", m.seller_fires),
        ("won_not_charged/unexplained", m.unexplained),
        ("charged_not_won/no_win", m.no_win),
        ("charged_not_won/win_dropped", m.win_dropped),
        ("charged_not_won/test_win", m.test_win),
        ("unknown_auction", m.unknown_auction),
        ("price_mismatch", m.price_mismatch),
        ("double_charge", m.double_charge),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{what} {n}"))
    .collect();
    if !parts.is_empty() {
        let _ = writeln!(out, "{indent}mismatches: {}", parts.join(", "));
    }
}

/// One line: `verdict: ok (...)` or `verdict: FAILED: ...` with every failure's numbers.
pub fn verdict_line(report: &Report) -> String {
    match report.verdict() {
        Ok(()) => {
            let audited: Vec<&BidderReport> = report.bidders.iter().filter(|b| b.audited).collect();
            let charged: u64 = audited.iter().map(|b| b.books.charged).sum();
            let unaudited: Vec<std::borrow::Cow<'_, str>> = report
                .bidders
                .iter()
                .filter(|b| !b.audited)
                .map(|b| shown(&b.bidder))
                .collect();
            let mut line = format!(
                "verdict: ok: {} bidders audited, {charged} wins charged",
                audited.len()
            );
            if report.totals.unknown_auction > 0 {
                let _ = write!(
                    line,
                    ", {} charges for auctions not in these records",
                    report.totals.unknown_auction
                );
            }
            if !unaudited.is_empty() {
                let _ = write!(line, "; no ledger records: {}", unaudited.join(", "));
            }
            line
        }
        Err(failures) => {
            let text: Vec<String> = failures
                .iter()
                .map(|f| shown(&f.to_string()).into_owned())
                .collect();
            format!("verdict: FAILED: {}", text.join("; "))
        }
    }
}

/// Nanos of a currency as units, exactly (`0.000510000`).
fn money(nanos: i128) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    format!("{sign}{}.{:09}", n / 1_000_000_000, n % 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::money;

    #[test]
    fn money_is_exact_to_the_nano() {
        assert_eq!(money(510_000), "0.000510000");
        assert_eq!(money(-1), "-0.000000001");
        assert_eq!(money(12_345_000_000_001), "12345.000000001");
    }
}
