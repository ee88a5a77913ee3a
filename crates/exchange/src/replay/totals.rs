//! Sums over many replayed auctions: how many were replayed, changed or skipped (and why), the
//! revenue of each seller and the spend of each bidder before and after, per currency (records
//! of auctions in different currencies are never added together).

use std::collections::BTreeMap;

use records::AuctionRecord;
use serde::Serialize;

use super::{Replayed, Skip, Sold};

/// Most names one table keeps per currency; the rest are summed under [`OTHERS`], so a
/// directory of records with endless distinct names cannot exhaust memory.
pub const MAX_NAMES: usize = 10_000;
/// The row past [`MAX_NAMES`] names.
pub const OTHERS: &str = "(others)";

/// Money before and after, in micros of one currency (CPM micros summed over impressions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Money {
    pub before_micros: i64,
    pub after_micros: i64,
}

impl Money {
    pub fn delta_micros(&self) -> i64 {
        self.after_micros.saturating_sub(self.before_micros)
    }
}

/// Per currency, per name.
pub type Table = BTreeMap<String, BTreeMap<String, Money>>;

/// What a replay of many records came to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Auction records re-run.
    pub replayed: u64,
    /// Of those, the ones with at least one impression changed.
    pub changed: u64,
    /// Records not replayed, by reason (`outcome shed`, `version 0`).
    pub skipped: BTreeMap<String, u64>,
    /// Each seller's revenue: the clearing prices of its sold impressions.
    pub revenue: Table,
    /// Each bidder's spend, at the same clearing prices (in the auction currency).
    pub spend: Table,
}

impl Totals {
    /// Adds one record's replay (or why it was skipped).
    pub fn add(&mut self, record: &AuctionRecord, result: &Result<Replayed, Skip>) {
        let replayed = match result {
            Ok(replayed) => replayed,
            Err(skip) => {
                let count = self.skipped.entry(skip.to_string()).or_default();
                *count = count.saturating_add(1);
                return;
            }
        };
        self.replayed = self.replayed.saturating_add(1);
        if !replayed.changes.is_empty() {
            self.changed = self.changed.saturating_add(1);
        }
        let currency = record.currency.as_str();
        let mut credit = |sold: &Sold, after: bool| {
            for money in [
                row(&mut self.revenue, currency, &record.seller),
                row(&mut self.spend, currency, &sold.bidder),
            ] {
                let side = if after {
                    &mut money.after_micros
                } else {
                    &mut money.before_micros
                };
                *side = side.saturating_add(sold.cleared_micros);
            }
        };
        for sold in &replayed.kept {
            credit(sold, false);
            credit(sold, true);
        }
        for change in &replayed.changes {
            if let Some(before) = &change.before {
                credit(before, false);
            }
            if let Some(after) = &change.after {
                credit(after, true);
            }
        }
    }
}

/// The row of `name` in `currency`, or the [`OTHERS`] row once the table is full.
fn row<'t>(table: &'t mut Table, currency: &str, name: &str) -> &'t mut Money {
    let names = table.entry(currency.to_owned()).or_default();
    let key = if names.contains_key(name) || names.len() < MAX_NAMES {
        name
    } else {
        OTHERS
    };
    names.entry(key.to_owned()).or_default()
}
