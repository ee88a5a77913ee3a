//! The record of one ledger event of a bidder: a reservation made or refused, a charge, a
//! release, an expiry, a notice refused before the ledger saw it.

use serde::{Deserialize, Serialize};

use crate::Label;

/// What happened to a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerEvent {
    /// Money held for a bid (`amount_nanos`: the bid's price for one impression).
    Reserve,
    /// A reservation refused (`reason`: `budget`, `unavailable`, `timeout`...): no bid.
    Refuse,
    /// A charging notice settled (`outcome`: `charged`, `charged_after_release`,
    /// `already_committed`; `amount_nanos`: the price charged).
    Commit,
    /// A loss notice settled (`outcome`: `released`, `already_released`, `already_committed`).
    Release,
    /// A reservation whose notice never came, returned to its campaign by the sweep.
    Expire,
    /// A notice refused before the ledger (`reason`: `bad_token`, `price_above_bid`,
    /// `conflict`...): nothing charged.
    NoticeRefused,
}

/// One ledger event, as a bidder instance saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRecord {
    pub v: u16,
    pub event: LedgerEvent,
    /// Wall-clock milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The bidder instance (`node`) that wrote it.
    pub node: String,
    /// The reservation, which is also the bid's `id`; absent for a refusal that never made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    /// The exchange's auction id (`BidRequest.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auction: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<String>,
    /// Money reserved, charged or released, in nanos of the campaign's currency.
    #[serde(default)]
    pub amount_nanos: i64,
    /// The notice that caused it: `win`, `billing` or `loss`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Label>,
    /// How a commit or release ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Label>,
    /// Why a reservation or notice was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Label>,
    /// A sampled event (a notice refused before the ledger, which anyone can send): how many
    /// more of the same `reason` were refused since the previous record of it, counted and not
    /// recorded.
    #[serde(default, skip_serializing_if = "crate::is_zero_u64")]
    pub suppressed: u64,
}
