//! How much disagreement between the exchange's books and the bidders' a reconcile accepts.

use serde::Serialize;

/// What a reconcile tolerates. Only wins left uncharged have a tolerance: a charge at another
/// price than the bidder was told (`price_mismatch`), a reservation charged twice
/// (`double_charge`) and a charge for an auction the exchange recorded without that win
/// (`charged_not_won`) always fail.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tolerance {
    /// Wins an audited bidder may leave uncharged, per million of its wins (rounded down).
    pub max_uncharged_ppm: u32,
    /// Wins an audited bidder may leave uncharged, however few its wins. A bidder passes when
    /// its uncharged wins are within either limit (the larger of the two).
    pub max_uncharged: u64,
    /// Bidders that must be audited: one of them without a ledger record joined to its wins
    /// fails the reconcile instead of being listed as "no ledger records".
    pub require_bidders: Vec<String>,
    /// A charge for an auction the exchange did not record (another exchange's, or outside
    /// the window read) fails the reconcile; by default it is counted apart.
    pub unknown_auction_fails: bool,
}

impl Tolerance {
    /// The uncharged wins allowed out of `won`.
    pub fn allowed_uncharged(&self, won: u64) -> u64 {
        let by_ppm = u128::from(won) * u128::from(self.max_uncharged_ppm) / 1_000_000;
        u64::try_from(by_ppm)
            .unwrap_or(u64::MAX)
            .max(self.max_uncharged)
    }

    /// Whether `bidder` is named in `require_bidders`.
    pub fn requires(&self, bidder: &str) -> bool {
        self.require_bidders.iter().any(|b| b == bidder)
    }
}
