//! `gavel replay --config exchange.toml PATHS... [--json] [--limit N]`: re-runs recorded
//! auctions under the configuration's auction rules (`exchange::replay`, no network) and prints
//! each impression whose winner or price would change, then revenue per seller and spend per
//! bidder before and after. Prices are exact decimals from integer micros.
//!
//! Exit status: 0 when the records were read (changes are findings, not failures); 2 when the
//! configuration is refused (naming the key); 1 when a record file cannot be read.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use exchange::replay::{ImpChange, Money, ReplayRules, Replayed, Sold, Totals, replay};
use records::terminal::{safe_lines, shown};
use records::{AuctionRecord, Record};
use serde::Serialize;

use crate::cli::ReplayArgs;

/// The exit status of a configuration that does not load.
const BAD_CONFIG: i32 = 2;

pub async fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let validated = match exchange::Config::load(&args.config) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("gavel: {} refused: {e}", args.config.display());
            std::process::exit(BAD_CONFIG);
        }
    };
    let rules = ReplayRules::from_config(&validated);
    // Reading and re-running records is blocking work: off the runtime's workers.
    tokio::task::spawn_blocking(move || replay_all(&rules, &args.paths, args.json, args.limit))
        .await
        .context("replay stopped")?
}

/// Replays every auction record of `paths`, writing as it goes (nothing but the totals is kept).
fn replay_all(
    rules: &ReplayRules,
    paths: &[PathBuf],
    json: bool,
    limit: Option<u64>,
) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = Output {
        to: std::io::BufWriter::new(stdout.lock()),
        json,
        shown: 0,
        lines: 0,
        limit: limit.unwrap_or(u64::MAX),
        failed: None,
    };
    out.start();
    let mut totals = Totals::default();
    let read = journal::read::read_paths(paths, |record| {
        let Record::Auction(record) = record else {
            return;
        };
        let result = replay(&record, rules);
        if let Ok(replayed) = &result {
            out.changed(&record, replayed);
        }
        totals.add(&record, &result);
    })?;
    out.finish(&totals, read.duplicates);
    match out.failed {
        // A reader that went away (`| head`) is not our failure.
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Where the report goes, text or JSON. Not `println!`: a reader that stopped reading must not
/// turn the run into a panic; the first write error stops the writing and is reported.
struct Output<W: Write> {
    to: W,
    json: bool,
    /// Changed auctions written so far.
    shown: u64,
    /// Changed impressions written so far.
    lines: u64,
    limit: u64,
    failed: Option<std::io::Error>,
}

impl<W: Write> Output<W> {
    /// Writes `text`; as text, through `safe_lines` last (every record field is already
    /// `shown`, this is the guard for any that is not).
    fn write(&mut self, text: &str) {
        let text = if self.json {
            std::borrow::Cow::Borrowed(text)
        } else {
            safe_lines(text)
        };
        if self.failed.is_none()
            && let Err(e) = self.to.write_all(text.as_bytes())
        {
            self.failed = Some(e);
        }
    }

    fn start(&mut self) {
        if self.json {
            self.write("{\"changes\":[");
        }
    }

    fn changed(&mut self, record: &AuctionRecord, replayed: &Replayed) {
        if replayed.changes.is_empty() || self.shown >= self.limit {
            return;
        }
        for change in &replayed.changes {
            let line = if self.json {
                let comma = if self.lines == 0 { "" } else { "," };
                let json = serde_json::to_string(&JsonChange {
                    auction: &record.id,
                    seller: &record.seller,
                    currency: &record.currency,
                    change,
                    delta_micros: change.delta_micros(),
                })
                .unwrap_or_default();
                format!("{comma}\n{json}")
            } else {
                diff_line(record, change) + "\n"
            };
            self.write(&line);
            self.lines += 1;
        }
        self.shown += 1;
    }

    fn finish(&mut self, totals: &Totals, duplicates: u64) {
        if self.json {
            let json =
                serde_json::to_string(&JsonTotals::of(totals, duplicates)).unwrap_or_default();
            self.write(&format!("\n],\"totals\":{json}}}\n"));
        } else {
            if duplicates > 0 {
                self.write(&format!(
                    "({duplicates} duplicate records dropped: the same record read again)\n"
                ));
            }
            let hidden = totals.changed.saturating_sub(self.shown);
            if hidden > 0 {
                self.write(&format!(
                    "({hidden} more changed auctions not shown: --limit {})\n",
                    self.limit
                ));
            }
            self.write(&totals_text(totals));
        }
        if let Err(e) = self.to.flush()
            && self.failed.is_none()
        {
            self.failed = Some(e);
        }
    }
}

#[derive(Serialize)]
struct JsonChange<'a> {
    auction: &'a str,
    seller: &'a str,
    currency: &'a str,
    #[serde(flatten)]
    change: &'a ImpChange,
    delta_micros: i64,
}

#[derive(Serialize)]
struct JsonTotals<'a> {
    replayed: u64,
    changed: u64,
    /// Records met again in the input (the same directory given twice) and dropped.
    duplicates: u64,
    skipped: &'a std::collections::BTreeMap<String, u64>,
    revenue: Vec<JsonMoney<'a>>,
    spend: Vec<JsonMoney<'a>>,
}

#[derive(Serialize)]
struct JsonMoney<'a> {
    name: &'a str,
    currency: &'a str,
    before_micros: i64,
    after_micros: i64,
    delta_micros: i64,
}

impl<'a> JsonTotals<'a> {
    fn of(totals: &'a Totals, duplicates: u64) -> JsonTotals<'a> {
        JsonTotals {
            replayed: totals.replayed,
            changed: totals.changed,
            duplicates,
            skipped: &totals.skipped,
            revenue: rows(&totals.revenue).map(JsonMoney::of).collect(),
            spend: rows(&totals.spend).map(JsonMoney::of).collect(),
        }
    }
}

impl<'a> JsonMoney<'a> {
    fn of((currency, name, money): (&'a str, &'a str, &Money)) -> JsonMoney<'a> {
        JsonMoney {
            name,
            currency,
            before_micros: money.before_micros,
            after_micros: money.after_micros,
            delta_micros: money.delta_micros(),
        }
    }
}

/// A table's rows as (currency, name, money), currencies and names in order.
fn rows(table: &exchange::replay::Table) -> impl Iterator<Item = (&str, &str, &Money)> {
    table.iter().flat_map(|(currency, names)| {
        names
            .iter()
            .map(move |(name, money)| (currency.as_str(), name.as_str(), money))
    })
}

/// `x1-2a imp 1 (seller pub): dsp-a/b17 second_price 1.510000 -> dsp-b/b3 second_price
/// 1.600000 (+0.090000)`.
fn diff_line(record: &AuctionRecord, change: &ImpChange) -> String {
    format!(
        "{} imp {} (seller {}): {} -> {} ({})",
        shown(&record.id),
        shown(&change.imp),
        shown(&record.seller),
        sold(change.before.as_ref()),
        sold(change.after.as_ref()),
        signed(change.delta_micros()),
    )
}

fn sold(sold: Option<&Sold>) -> String {
    match sold {
        Some(s) => format!(
            "{}/{} {} {}",
            shown(&s.bidder),
            shown(&s.bid),
            shown(&s.rule),
            decimal(s.cleared_micros)
        ),
        None => "unsold".to_owned(),
    }
}

/// The totals as text: the counts, then revenue per seller and spend per bidder.
fn totals_text(totals: &Totals) -> String {
    let mut text = format!(
        "auctions: {} replayed, {} changed, {} skipped",
        totals.replayed,
        totals.changed,
        totals.skipped.values().sum::<u64>()
    );
    if !totals.skipped.is_empty() {
        let why: Vec<String> = totals
            .skipped
            .iter()
            .map(|(reason, n)| format!("{}: {n}", shown(reason)))
            .collect();
        text.push_str(&format!(" ({})", why.join(", ")));
    }
    text.push('\n');
    for (title, table) in [
        ("revenue per seller", &totals.revenue),
        ("spend per bidder", &totals.spend),
    ] {
        let width = rows(table)
            .map(|(_, name, _)| shown(name).len())
            .chain([title.len()])
            .max()
            .unwrap_or(0);
        text.push_str(&format!(
            "\n{title:<width$}  cur  {:>16}  {:>16}  {:>16}\n",
            "before", "after", "delta"
        ));
        for (currency, name, money) in rows(table) {
            let (name, currency) = (shown(name), shown(currency));
            text.push_str(&format!(
                "{name:<width$}  {currency:<3}  {:>16}  {:>16}  {:>16}\n",
                decimal(money.before_micros),
                decimal(money.after_micros),
                signed(money.delta_micros()),
            ));
        }
    }
    text
}

/// Micros as an exact decimal with six places: `1510000` is `1.510000`.
fn decimal(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

/// [`decimal`] with its sign always shown (`+0.090000`, `-0.510000`; zero unsigned).
fn signed(micros: i64) -> String {
    if micros > 0 {
        format!("+{}", decimal(micros))
    } else {
        decimal(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_an_exact_decimal_of_micros() {
        assert_eq!(decimal(1_510_000), "1.510000");
        assert_eq!(decimal(0), "0.000000");
        assert_eq!(decimal(7), "0.000007");
        assert_eq!(decimal(-510_000), "-0.510000");
        assert_eq!(decimal(i64::MIN), "-9223372036854.775808");
        assert_eq!(signed(90_000), "+0.090000");
        assert_eq!(signed(-90_000), "-0.090000");
        assert_eq!(signed(0), "0.000000");
    }
}
