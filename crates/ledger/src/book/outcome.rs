//! What the [`Book`](super::Book) answers: balances and outcomes, and the two error
//! enums. Each error carries a bounded, snake_case metric label and a message that is safe to log.

use serde::{Deserialize, Serialize};
use units::Nanos;

/// The current UTC day's side of a [`Balance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DailyBalance {
    /// UTC day number ([`Timestamp::day`](units::Timestamp::day)).
    pub day: u64,
    /// The daily budget in force: the configured one, or what is already spent+reserved today if
    /// that is higher (see [`Book::set_limits`](super::Book::set_limits)).
    pub budget: Nanos,
    pub spent: Nanos,
    pub reserved: Nanos,
    /// `budget - spent - reserved`, never negative.
    pub available: Nanos,
}

/// A campaign's money as the ledger sees it at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    pub campaign: String,
    /// The total budget in force: the configured one, or `spent + reserved` if that is higher.
    pub budget: Nanos,
    pub spent: Nanos,
    pub reserved: Nanos,
    /// `budget - spent - reserved`, never negative.
    pub available: Nanos,
    /// Present when the campaign has a daily budget.
    pub daily: Option<DailyBalance>,
}

/// Why a reservation was refused. Nothing changed in the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("unknown campaign")]
    UnknownCampaign,
    #[error("reservation amount must be positive")]
    NonPositiveAmount,
    #[error("campaign budget exhausted")]
    InsufficientBudget,
    #[error("campaign daily budget exhausted")]
    InsufficientDailyBudget,
    #[error("reservation id already used")]
    DuplicateId,
    /// The book holds as many open reservations as it may ([`Book::with_caps`](super::Book::with_caps)).
    #[error("too many open reservations")]
    TooManyOpen,
}

impl Refusal {
    /// Bounded metric label.
    pub const fn label(&self) -> &'static str {
        match self {
            Refusal::UnknownCampaign => "unknown_campaign",
            Refusal::NonPositiveAmount => "non_positive_amount",
            Refusal::InsufficientBudget => "insufficient_budget",
            Refusal::InsufficientDailyBudget => "insufficient_daily_budget",
            Refusal::DuplicateId => "duplicate_id",
            Refusal::TooManyOpen => "too_many_open",
        }
    }
}

/// A successful commit: the first one charges, a duplicate notice reports the recorded charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// This call charged the price.
    Charged(Nanos),
    /// This call charged the price of a reservation already released or expired: its money had
    /// gone back to the campaign, so the charge may take the campaign past its budget (by at
    /// most the reserved amount). Count it: it means a notice came late or out of order.
    ChargedAfterRelease(Nanos),
    /// An earlier commit already charged this price; nothing changed.
    AlreadyCommitted(Nanos),
}

/// A successful release. Releasing is idempotent: every answer means "this id holds no money".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// This call returned the reserved amount to the campaign.
    Released(Nanos),
    /// Already released (or expired); nothing changed.
    AlreadyReleased,
    /// Already committed; the charge stands and nothing changed.
    AlreadyCommitted,
}

/// Why a commit or release did not charge. Unless stated, nothing changed in the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettleError {
    /// Never reserved, or resolved so long ago that its tombstone is gone.
    #[error("unknown reservation")]
    UnknownReservation,
    /// The price is above what was reserved; the reservation stays open.
    #[error("price {price} is above the reserved {reserved}")]
    AboveReservation { reserved: Nanos, price: Nanos },
    #[error("price is negative")]
    NegativePrice,
}

impl SettleError {
    /// Bounded metric label.
    pub const fn label(&self) -> &'static str {
        match self {
            SettleError::UnknownReservation => "unknown_reservation",
            SettleError::AboveReservation { .. } => "above_reservation",
            SettleError::NegativePrice => "negative_price",
        }
    }
}
