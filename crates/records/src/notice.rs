//! The record of one notice the exchange fired, or could not fire.

use serde::{Deserialize, Serialize};

use crate::Label;

/// A win, billing or loss notice, or a markup fetch, and how it ended. Written once per
/// notice, when its fate is known: sent (the bidder answered 2xx), failed (after its retries),
/// dropped (its host's queue was full) or refused (its URL named a host the bidder may not
/// use).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoticeRecord {
    pub v: u16,
    /// The exchange's auction id.
    pub auction: String,
    pub bidder: String,
    /// `win`, `billing`, `loss` or `markup_fetch`.
    pub notice: Label,
    /// `sent`, `failed`, `dropped` or `refused`.
    pub outcome: Label,
    /// Wall-clock milliseconds since the Unix epoch when its fate was known.
    pub at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imp: Option<String>,
    /// The bid's `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bid: Option<String>,
    /// For a winner's notice, the price it carries, in the bid's currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_micros: Option<i64>,
    /// The HTTP status of the last attempt, when one answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Attempts made (retries included).
    #[serde(default)]
    pub attempts: u32,
}
