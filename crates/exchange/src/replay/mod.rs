//! Pure: a recorded auction re-run under the rules in effect now, with the bids it recorded
//! (no network), and what would change: per impression, the recorded winner and price against
//! the new ones. `gavel replay` prints these; [`Totals`] sums them over many records (revenue
//! per seller, spend per bidder).
//!
//! The auction's input is rebuilt from the record exactly as the live path builds it
//! (`settle::rules` and `settle::candidates` over the request `intake` made fit):
//!
//! | input | live | replay |
//! | --- | --- | --- |
//! | floors | the request's, in the auction currency, times the seller's multiplier ([`Seller::floor`]) | the record's floors (before the multiplier) times the seller's multiplier *now*; a seller no longer configured keeps the record's |
//! | increment | `[auction] second_price_increment` | the same key, now |
//! | rule, blocks, deals | the request's `at`, `bcat`/`badv`/`wseat`/`bseat`, `pmp` | the record's |
//! | candidates | every bid not dropped before the auction, its price converted | every bid not `excluded`, at [`BidLine::auction_price_micros`] |
//! | bidder | its roster index | its index in the configuration's `[[bidders]]` now (the roster's order); a bidder no longer configured is numbered after them, in the order the record first names it |
//! | seat | `seatbid.seat`, else the bidder's name | the record's seat, else the bidder's name |
//! | tie seed | `auction::tie_seed(auction id)` | the same, of the record's id |
//!
//! Ties at an equal price are broken by a hash that includes the bidder's roster index, so a
//! roster reordered since the record was written can change the winner of a tie (and only of
//! a tie): that is what the exchange would now do.
//!
//! A win the exchange dropped after the auction (its markup could not be fetched) is compared
//! as the auction decided it: replay measures the auction rule, not delivery.

mod totals;

use std::collections::HashMap;

use auction::{AuctionConfig, Candidate, DealRules, ImpRules, PriceRule, Rules};
use openrtb::Price;
use records::{AuctionRecord, BidLine, Label, VERSION};
use serde::Serialize;

use crate::config::Validated;
use crate::sellers::Seller;

pub use totals::{MAX_NAMES, Money, OTHERS, Table, Totals};

/// The oldest record version replay reads (the fields it needs have been there since).
pub const MIN_VERSION: u16 = 1;

/// The rules a replay applies: what the configuration says now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayRules {
    /// `[auction] second_price_increment`.
    pub increment: Price,
    /// Each configured seller's floor multiplier, in thousandths.
    floor_permille: HashMap<String, u32>,
    /// Each configured bidder's roster index.
    bidder_ix: HashMap<String, u32>,
}

impl ReplayRules {
    /// The rules of a validated exchange configuration: its increment, its sellers' floor
    /// multipliers (the anonymous seller of `open_to_all_sellers` has none), its bidders'
    /// order.
    pub fn from_config(config: &Validated) -> ReplayRules {
        let mut rules = ReplayRules::new(config.second_price_increment);
        for seller in config.sellers.iter() {
            rules = rules.seller(&seller.name, seller.floor_permille);
        }
        if let Some(anyone) = config.sellers.anonymous() {
            rules = rules.seller(&anyone.name, anyone.floor_permille);
        }
        for bidder in &config.config.live.bidders {
            rules = rules.bidder(&bidder.name);
        }
        rules
    }

    /// Rules with this increment, no seller and no bidder configured.
    pub fn new(increment: Price) -> ReplayRules {
        ReplayRules {
            increment,
            ..ReplayRules::default()
        }
    }

    /// The seller `name`'s floor multiplier, in thousandths (1000: floors as sent).
    pub fn seller(mut self, name: &str, floor_permille: u32) -> ReplayRules {
        self.floor_permille.insert(name.to_owned(), floor_permille);
        self
    }

    /// The next bidder of the roster (indexed in the order they are added).
    pub fn bidder(mut self, name: &str) -> ReplayRules {
        let next = u32::try_from(self.bidder_ix.len()).unwrap_or(u32::MAX);
        self.bidder_ix.entry(name.to_owned()).or_insert(next);
        self
    }

    /// The multiplier a seller's floors get: the configured one, else the record's.
    pub fn floor_permille(&self, seller: &str, recorded: u32) -> u32 {
        self.floor_permille.get(seller).copied().unwrap_or(recorded)
    }
}

/// A sold impression: who bought it, with which bid, at what price under which rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sold {
    pub bidder: String,
    /// The bid's `id`.
    pub bid: String,
    /// The clearing price in the auction currency: what the seller is paid.
    pub cleared_micros: i64,
    /// `first_price`, `second_price` or `fixed_price`.
    pub rule: Label,
}

/// One impression whose winner or price would change. `None`: unsold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImpChange {
    pub imp: String,
    pub before: Option<Sold>,
    pub after: Option<Sold>,
}

impl ImpChange {
    /// What the seller gains (negative: loses) on this impression, in micros.
    pub fn delta_micros(&self) -> i64 {
        cleared(&self.after).saturating_sub(cleared(&self.before))
    }
}

fn cleared(sold: &Option<Sold>) -> i64 {
    sold.as_ref().map_or(0, |s| s.cleared_micros)
}

/// One auction replayed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Replayed {
    /// The impressions whose winner, bid or price would change, in the record's order.
    pub changes: Vec<ImpChange>,
    /// The impressions sold to the same bid at the same price both times (for totals).
    pub kept: Vec<Sold>,
}

/// Why a record is not replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    /// Written by a format this code cannot rebuild an auction from.
    #[error("version {0}")]
    Version(u16),
    /// No auction ran (`shed`, `bad_request`...): there is nothing to re-run.
    #[error("outcome {0}")]
    Outcome(String),
}

/// `record`'s auction re-run under `rules`, and how its result differs from the recorded one.
///
/// # Errors
/// [`Skip`] when the record cannot be replayed: its version, or an outcome in which no auction
/// ran (only `bid` and `no_bid` are replayed).
pub fn replay(record: &AuctionRecord, rules: &ReplayRules) -> Result<Replayed, Skip> {
    if !(MIN_VERSION..=VERSION).contains(&record.v) {
        return Err(Skip::Version(record.v));
    }
    if !matches!(record.outcome.as_ref(), "bid" | "no_bid") {
        return Err(Skip::Outcome(record.outcome.to_string()));
    }
    let seller = Seller {
        floor_permille: rules.floor_permille(&record.seller, record.floor_permille),
        ..Seller::anonymous(false)
    };
    let auction_rules = auction_rules(record, &seller);
    let lineup = Lineup::new(record, rules);
    // Index-aligned: the auction names a winner by its candidate index.
    let mut candidates: Vec<Candidate<'_>> = Vec::with_capacity(record.bids.len());
    let mut sources: Vec<&BidLine> = Vec::with_capacity(record.bids.len());
    for bid in record.bids.iter().filter(|b| !b.excluded) {
        if let Some(c) = candidate(bid, record.currency.as_str(), &lineup) {
            candidates.push(c);
            sources.push(bid);
        }
    }
    let config = AuctionConfig {
        second_price_increment: rules.increment,
    };
    let outcome = auction::run_seeded(
        &auction_rules,
        &candidates,
        &config,
        auction::tie_seed(&record.id),
    );

    let mut replayed = Replayed::default();
    for (i, imp) in record.imps.iter().enumerate() {
        // A repeated imp id: the auction gives every bid to the first, so this one is never
        // sold, then or now.
        if record
            .imps
            .iter()
            .take(i)
            .any(|earlier| earlier.id == imp.id)
        {
            continue;
        }
        let before = record.wins.iter().find(|w| w.imp == imp.id).map(|w| Sold {
            bidder: w.bidder.clone(),
            bid: w.bid.clone(),
            cleared_micros: w.cleared_micros,
            rule: w.rule.clone(),
        });
        let after = outcome
            .imps
            .get(i)
            .and_then(|result| result.winner)
            .and_then(|winner| {
                let bid = sources.get(winner.candidate)?;
                Some(Sold {
                    bidder: bid.bidder.clone(),
                    bid: bid.id.clone(),
                    cleared_micros: winner.clearing_price.micros(),
                    rule: Label::Borrowed(winner.price_rule.label()),
                })
            });
        match (before, after) {
            (None, None) => {}
            (Some(before), Some(after)) if before == after => replayed.kept.push(after),
            (before, after) => replayed.changes.push(ImpChange {
                imp: imp.id.clone(),
                before,
                after,
            }),
        }
    }
    Ok(replayed)
}

/// The auction's rules from the record, floors raised by the seller's multiplier now.
fn auction_rules<'a>(record: &'a AuctionRecord, seller: &Seller) -> Rules<'a> {
    let floor = |micros: i64| seller.floor(Price::from_micros(micros));
    let imps = record
        .imps
        .iter()
        .map(|imp| ImpRules {
            id: imp.id.as_str(),
            floor: floor(imp.floor_micros),
            private_auction: imp.private_auction,
            deals: imp
                .deals
                .iter()
                .map(|deal| DealRules {
                    id: deal.id.as_str(),
                    floor: floor(deal.floor_micros),
                    price_rule: PriceRule::from_deal_at(deal.at),
                    wseat: &deal.wseat,
                    wadomain: &deal.wadomain,
                })
                .collect(),
        })
        .collect();
    Rules {
        currency: record.currency.as_str(),
        price_rule: PriceRule::from_at(record.at),
        bcat: &record.blocks.bcat,
        badv: &record.blocks.badv,
        wseat: &record.blocks.wseat,
        bseat: &record.blocks.bseat,
        imps,
    }
}

/// A recorded bid as the auction saw it; `None` for one that had no price in the auction
/// currency (it never competed).
fn candidate<'a>(bid: &'a BidLine, currency: &'a str, lineup: &Lineup) -> Option<Candidate<'a>> {
    let price = bid.auction_price_micros()?;
    Some(Candidate {
        bidder: lineup.index(&bid.bidder),
        seat: if bid.seat.is_empty() {
            bid.bidder.as_str()
        } else {
            bid.seat.as_str()
        },
        bid_id: bid.id.as_str(),
        imp_id: bid.imp.as_str(),
        price: Price::from_micros(price),
        currency,
        deal_id: bid.deal.as_deref(),
        adomain: &bid.adomain,
        cat: &bid.cat,
    })
}

/// Bidder names to roster indices for one record: the configured ones, then the record's
/// others numbered after them.
struct Lineup<'r> {
    rules: &'r ReplayRules,
    others: Vec<&'r str>,
}

impl<'r> Lineup<'r> {
    fn new(record: &'r AuctionRecord, rules: &'r ReplayRules) -> Lineup<'r> {
        let mut others: Vec<&str> = Vec::new();
        let names = record
            .calls
            .iter()
            .map(|c| c.bidder.as_str())
            .chain(record.bids.iter().map(|b| b.bidder.as_str()));
        for name in names {
            if !rules.bidder_ix.contains_key(name) && !others.contains(&name) {
                others.push(name);
            }
        }
        Lineup { rules, others }
    }

    fn index(&self, name: &str) -> u32 {
        if let Some(&ix) = self.rules.bidder_ix.get(name) {
            return ix;
        }
        let past = self.others.iter().position(|n| *n == name).unwrap_or(0);
        u32::try_from(self.rules.bidder_ix.len().saturating_add(past)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests;
