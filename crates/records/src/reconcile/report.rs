//! What a reconcile found: per exchange bidder and per campaign, the wins, the charges and the
//! notices, the mismatches (counted, a few listed), and the verdict under a [`Tolerance`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};

use super::tolerance::Tolerance;

/// Notice kinds the exchange records, in the order reports show them; anything else is
/// counted as `other`.
pub const NOTICE_KINDS: [&str; 4] = ["win", "billing", "loss", "markup_fetch"];
/// Notice outcomes the exchange records; anything else is counted as `other`.
pub const NOTICE_OUTCOMES: [&str; 4] = ["sent", "failed", "dropped", "refused"];

/// Notices the exchange recorded, by kind and outcome (a fixed table: labels read from a file
/// cannot grow it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoticeCounts {
    counts: [[u64; 5]; 5],
}

fn slot(labels: &[&str; 4], label: &str) -> usize {
    labels.iter().position(|l| *l == label).unwrap_or(4)
}

impl NoticeCounts {
    pub(crate) fn add(&mut self, kind: &str, outcome: &str) {
        if let Some(row) = self.counts.get_mut(slot(&NOTICE_KINDS, kind))
            && let Some(n) = row.get_mut(slot(&NOTICE_OUTCOMES, outcome))
        {
            *n += 1;
        }
    }

    /// Notices of `kind` (`other` for the unknown ones) that ended in `outcome`.
    pub fn get(&self, kind: &str, outcome: &str) -> u64 {
        self.counts
            .get(slot(&NOTICE_KINDS, kind))
            .and_then(|row| row.get(slot(&NOTICE_OUTCOMES, outcome)))
            .copied()
            .unwrap_or(0)
    }

    /// Notices of `kind` that never reached the bidder: failed, dropped or refused.
    pub fn lost(&self, kind: &str) -> u64 {
        ["failed", "dropped", "refused"]
            .iter()
            .map(|o| self.get(kind, o))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.iter().flatten().all(|n| *n == 0)
    }
}

/// As `{"win": {"sent": 10, "failed": 1}, ...}`, zeros left out.
impl Serialize for NoticeCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kinds = NOTICE_KINDS.iter().copied().chain(["other"]);
        let mut map: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
        for (kind, row) in kinds.zip(self.counts.iter()) {
            let outcomes = NOTICE_OUTCOMES.iter().copied().chain(["other"]);
            for (outcome, n) in outcomes.zip(row.iter()) {
                if *n > 0 {
                    map.entry(kind).or_default().insert(outcome, *n);
                }
            }
        }
        map.serialize(s)
    }
}

/// Why a win was not charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Uncharged {
    /// A win or billing notice (or the markup fetch on `nurl`) for it failed, was dropped or
    /// was refused at the exchange: the bidder never heard.
    NoticeLost,
    /// The bidder refused its notice before the ledger (a `notice_refused` ledger record:
    /// bad token, price above the bid...).
    RefusedByBidder,
    /// The seller fires its billing notice (`billing_by = seller`): charged when the seller
    /// reports the render, if ever.
    SellerFires,
    /// No record explains it.
    Unexplained,
}

/// What a charge without a win was charged for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotWon {
    /// The exchange recorded the auction, and no win for this bid.
    NoWin,
    /// The bid won, but the win was dropped (its markup could not be had): not sold.
    WinDropped,
    /// The bid won a test auction (`test: 1`): not billable.
    TestWin,
}

/// A disagreement between the exchange's books and a bidder's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "cause")]
pub enum MismatchKind {
    /// The exchange sold the impression; the bidder's ledger never charged it.
    WonNotCharged(Uncharged),
    /// The bidder charged for an auction the exchange recorded, with no such win.
    ChargedNotWon(NotWon),
    /// The bidder charged for an auction the exchange did not record (another exchange's, or
    /// outside the window read). Counted apart; a failure only when the tolerance says so.
    UnknownAuction,
    /// Charged another amount than the price the bidder was told.
    PriceMismatch,
    /// A reservation charged more than once: exactly-once broken.
    DoubleCharge,
}

impl MismatchKind {
    /// The label reports use (`won_not_charged`, ...).
    pub fn label(self) -> &'static str {
        match self {
            MismatchKind::WonNotCharged(_) => "won_not_charged",
            MismatchKind::ChargedNotWon(_) => "charged_not_won",
            MismatchKind::UnknownAuction => "unknown_auction",
            MismatchKind::PriceMismatch => "price_mismatch",
            MismatchKind::DoubleCharge => "double_charge",
        }
    }

    /// The cause's label, for the kinds that have one.
    pub fn cause(self) -> Option<&'static str> {
        match self {
            MismatchKind::WonNotCharged(c) => Some(match c {
                Uncharged::NoticeLost => "notice_lost",
                Uncharged::RefusedByBidder => "refused_by_bidder",
                Uncharged::SellerFires => "seller_fires",
                Uncharged::Unexplained => "unexplained",
            }),
            MismatchKind::ChargedNotWon(c) => Some(match c {
                NotWon::NoWin => "no_win",
                NotWon::WinDropped => "win_dropped",
                NotWon::TestWin => "test_win",
            }),
            _ => None,
        }
    }
}

/// One mismatch, listed: which auction and bid (the reservation), whose, and the money.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    #[serde(flatten)]
    pub kind: MismatchKind,
    pub auction: String,
    /// The bid's id, which is the Gavel bidder's reservation.
    pub bid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campaign: Option<String>,
    /// The price the bidder was told (CPM micros, the bid's currency).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub told_micros: Option<i64>,
    /// The amount charged (nanos; one impression at CPM p micros costs p nanos).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charged_nanos: Option<i64>,
}

/// Mismatches counted, by kind and cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MismatchCounts {
    pub notice_lost: u64,
    pub refused_by_bidder: u64,
    pub seller_fires: u64,
    pub unexplained: u64,
    pub no_win: u64,
    pub win_dropped: u64,
    pub test_win: u64,
    pub unknown_auction: u64,
    pub price_mismatch: u64,
    pub double_charge: u64,
}

impl MismatchCounts {
    pub(crate) fn count(&mut self, kind: MismatchKind) {
        let n = match kind {
            MismatchKind::WonNotCharged(Uncharged::NoticeLost) => &mut self.notice_lost,
            MismatchKind::WonNotCharged(Uncharged::RefusedByBidder) => &mut self.refused_by_bidder,
            MismatchKind::WonNotCharged(Uncharged::SellerFires) => &mut self.seller_fires,
            MismatchKind::WonNotCharged(Uncharged::Unexplained) => &mut self.unexplained,
            MismatchKind::ChargedNotWon(NotWon::NoWin) => &mut self.no_win,
            MismatchKind::ChargedNotWon(NotWon::WinDropped) => &mut self.win_dropped,
            MismatchKind::ChargedNotWon(NotWon::TestWin) => &mut self.test_win,
            MismatchKind::UnknownAuction => &mut self.unknown_auction,
            MismatchKind::PriceMismatch => &mut self.price_mismatch,
            MismatchKind::DoubleCharge => &mut self.double_charge,
        };
        *n += 1;
    }

    /// Wins not charged, all causes.
    pub fn won_not_charged(&self) -> u64 {
        self.notice_lost + self.refused_by_bidder + self.seller_fires + self.unexplained
    }

    /// Charges without a win of this exchange, all causes.
    pub fn charged_not_won(&self) -> u64 {
        self.no_win + self.win_dropped + self.test_win
    }

    pub(crate) fn merge(&mut self, o: &MismatchCounts) {
        self.notice_lost += o.notice_lost;
        self.refused_by_bidder += o.refused_by_bidder;
        self.seller_fires += o.seller_fires;
        self.unexplained += o.unexplained;
        self.no_win += o.no_win;
        self.win_dropped += o.win_dropped;
        self.test_win += o.test_win;
        self.unknown_auction += o.unknown_auction;
        self.price_mismatch += o.price_mismatch;
        self.double_charge += o.double_charge;
    }

    /// The kinds never tolerated (and `unknown_auction` when `strict`), with their counts.
    fn intolerable(&self, strict: bool) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("price_mismatch", self.price_mismatch),
            ("double_charge", self.double_charge),
            ("charged_not_won", self.charged_not_won()),
            (
                "unknown_auction",
                if strict { self.unknown_auction } else { 0 },
            ),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
    }
}

/// Money and impressions on both sides, for a bidder or a campaign.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Books {
    /// Wins the exchange sold (not dropped, not test). For a campaign: its wins that a ledger
    /// record joined.
    pub won: u64,
    /// Of those, charged by the bidder's ledger (each reservation once).
    pub charged: u64,
    /// Sum of the prices the bidder was told for its sold wins (`Win::charged_micros`).
    pub told_micros: i128,
    /// Sum of what the ledger charged for this exchange's auctions, duplicates and charges
    /// without a win included (nanos: comparable to `told_micros` exactly).
    pub charged_nanos: i128,
    /// Of `told_micros`, the part for wins that were charged: equal to what a correct ledger
    /// charged for them.
    pub told_charged_micros: i128,
}

/// One campaign of a bidder, as its ledger records say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CampaignReport {
    pub campaign: String,
    #[serde(flatten)]
    pub books: Books,
    /// Charging notices that came again and charged nothing (`already_committed`).
    pub duplicates: u64,
    /// Notices the bidder refused before its ledger (`notice_refused`), of which `conflicts`
    /// were a second charge at another price.
    pub notices_refused: u64,
    pub conflicts: u64,
    pub mismatches: MismatchCounts,
}

/// One bidder of the exchange's roster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BidderReport {
    pub bidder: String,
    /// A ledger record joined one of its wins.
    pub joined: bool,
    /// Joined, or named in `require_bidders`: its books are checked. Otherwise it is listed as
    /// having no ledger records (a DSP that is not a Gavel bidder) and never fails.
    pub audited: bool,
    #[serde(flatten)]
    pub books: Books,
    /// Wins dropped after the auction (markup failed): not sold.
    pub dropped_wins: u64,
    /// Wins of test auctions: not billable.
    pub test_wins: u64,
    /// Notices the exchange recorded for it, by kind and outcome.
    pub notices: NoticeCounts,
    pub duplicates: u64,
    pub notices_refused: u64,
    pub conflicts: u64,
    pub mismatches: MismatchCounts,
    /// Uncharged wins allowed by the tolerance, for its `won`.
    pub allowed_uncharged: u64,
    pub campaigns: Vec<CampaignReport>,
}

/// What was read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Seen {
    pub auctions: u64,
    pub notices: u64,
    pub ledger: u64,
    /// Records that could not be joined (a ledger record without an auction or reservation, a
    /// notice without a bid): counted, not checked.
    pub unjoinable: u64,
    /// The same win recorded twice (the exchange's records read twice?): the first kept.
    pub duplicate_wins: u64,
    /// Charges known only from a retried notice's `already_committed` (the first answer was
    /// lost, and with it the `charged` record): counted as the charge.
    pub charged_on_retry: u64,
    /// Records not tracked because the reconcile's memory limit was reached: the reconcile is
    /// incomplete, and fails.
    pub over_limit: u64,
    /// The limit (entries tracked at once).
    pub limit: u64,
}

/// The result of a reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Every bidder the exchange recorded a win or notice for, by name.
    pub bidders: Vec<BidderReport>,
    /// Campaigns whose ledger records joined no win of this exchange (another exchange's, or a
    /// bidder whose wins are outside the window): their charges are `charged_not_won` or
    /// `unknown_auction`.
    pub unattributed: Vec<CampaignReport>,
    /// All mismatches, counted.
    pub totals: MismatchCounts,
    /// The first few of each kind, in (auction, bid) order.
    pub listed: Vec<Mismatch>,
    pub seen: Seen,
    pub tolerance: Tolerance,
}

/// One reason a reconcile failed, with its numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "failure")]
pub enum Failure {
    /// An audited bidder left more wins uncharged than the tolerance allows.
    Uncharged {
        bidder: String,
        uncharged: u64,
        won: u64,
        allowed: u64,
    },
    /// Mismatches that are never tolerated, of a bidder or of a campaign without one.
    Mismatch {
        who: String,
        kind: &'static str,
        count: u64,
    },
    /// A required bidder had no ledger record joined to its wins.
    NotAudited { bidder: String, won: u64 },
    /// Records were not tracked past the memory limit.
    Incomplete { over_limit: u64, limit: u64 },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Uncharged {
                bidder,
                uncharged,
                won,
                allowed,
            } => {
                let ppm = u128::from(*uncharged) * 1_000_000 / u128::from((*won).max(1));
                write!(
                    f,
                    "{bidder}: {uncharged} of {won} wins not charged ({ppm} ppm), {allowed} allowed"
                )
            }
            Failure::Mismatch { who, kind, count } => write!(f, "{who}: {count} {kind}"),
            Failure::NotAudited { bidder, won } => write!(
                f,
                "{bidder}: required, but no ledger record joined its {won} wins"
            ),
            Failure::Incomplete { over_limit, limit } => write!(
                f,
                "incomplete: {over_limit} records past the limit of {limit} tracked at once"
            ),
        }
    }
}

impl Report {
    /// `Ok` when the books agree within the tolerance; otherwise every failure, with numbers.
    pub fn verdict(&self) -> Result<(), Vec<Failure>> {
        let strict = self.tolerance.unknown_auction_fails;
        let mut failures = Vec::new();
        for b in &self.bidders {
            if !b.audited {
                continue;
            }
            if self.tolerance.requires(&b.bidder) && !b.joined {
                failures.push(Failure::NotAudited {
                    bidder: b.bidder.clone(),
                    won: b.books.won,
                });
            }
            let uncharged = b.mismatches.won_not_charged();
            if uncharged > b.allowed_uncharged {
                failures.push(Failure::Uncharged {
                    bidder: b.bidder.clone(),
                    uncharged,
                    won: b.books.won,
                    allowed: b.allowed_uncharged,
                });
            }
            for (kind, count) in b.mismatches.intolerable(strict) {
                failures.push(Failure::Mismatch {
                    who: b.bidder.clone(),
                    kind,
                    count,
                });
            }
        }
        for required in &self.tolerance.require_bidders {
            if !self.bidders.iter().any(|b| &b.bidder == required) {
                failures.push(Failure::NotAudited {
                    bidder: required.clone(),
                    won: 0,
                });
            }
        }
        for c in &self.unattributed {
            for (kind, count) in c.mismatches.intolerable(strict) {
                failures.push(Failure::Mismatch {
                    who: format!("campaign {} (no win of this exchange joined)", c.campaign),
                    kind,
                    count,
                });
            }
        }
        if self.seen.over_limit > 0 {
            failures.push(Failure::Incomplete {
                over_limit: self.seen.over_limit,
                limit: self.seen.limit,
            });
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
    }
}
