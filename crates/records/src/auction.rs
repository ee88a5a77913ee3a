//! The record of one auction: what was for sale, who was asked and what each did, every bid
//! and what became of it, and who won at what price under which rule. Enough to re-run the
//! auction (`gavel replay`: the imps' floors and deals, the request's blocks, every bid with
//! its seat, deal, advertiser domains and categories) and to bill it (`gavel reconcile`: each
//! win with the price cleared in the auction currency and the price charged in the bid's).

use serde::{Deserialize, Serialize};

use crate::{Label, is_false, is_zero};

/// One auction, as the exchange ran it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuctionRecord {
    pub v: u16,
    /// The exchange's auction id: the `BidRequest.id` every bidder saw, and the auction a
    /// notice and a ledger event name.
    pub id: String,
    /// The seller's own `BidRequest.id`.
    pub request_id: String,
    /// Wall-clock milliseconds since the Unix epoch when the auction settled.
    pub at_ms: i64,
    /// The seller's configured name.
    pub seller: String,
    /// How the request ended (`bid`, `no_bid`, `shed`, `bad_request`...).
    pub outcome: Label,
    /// The request was a test (`test: 1`): bidders were told so, and it is not billable.
    #[serde(default, skip_serializing_if = "is_false")]
    pub test: bool,
    /// The auction currency (ISO 4217).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub currency: String,
    /// The request's `at` (1 first price, 2 second price), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i32>,
    /// The `tmax` the deadline was computed from, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmax_ms: Option<u32>,
    /// The seller's floor multiplier in thousandths (1000: floors as sent), applied to every
    /// floor below to get the floor the auction used.
    #[serde(default = "per_mille_one")]
    pub floor_permille: u32,
    #[serde(default, skip_serializing_if = "Inventory::is_empty")]
    pub inventory: Inventory,
    #[serde(default, skip_serializing_if = "Blocks::is_empty")]
    pub blocks: Blocks,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imps: Vec<ImpSummary>,
    /// Every bidder of the roster the seller may use, in roster order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// Every bid received, in the order the auction saw them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bids: Vec<BidLine>,
    /// The auction's winners, one per impression sold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wins: Vec<Win>,
    /// Fields of the request repaired before validation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<Label>,
    /// Imps past `auction.max_imps`, dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub imps_dropped: u32,
    /// The request came as OpenRTB 2.5 and was converted up.
    #[serde(default, skip_serializing_if = "is_false")]
    pub upgraded: bool,
    /// Answered at once: less time was left than the fastest bidder typically needs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_time_left: bool,
    /// The winners' markup put to the `[cache]` store (`stored`, `timeout`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Label>,
}

fn per_mille_one() -> u32 {
    1000
}

/// What was for sale, without personal data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_bundle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher_id: Option<String>,
    /// `device.geo.country` (ISO 3166-1 alpha-3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The device's network: an IPv4 address cut to /24, an IPv6 one to /56 (as privacy
    /// enforcement masks them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_network: Option<String>,
}

impl Inventory {
    pub fn is_empty(&self) -> bool {
        *self == Inventory::default()
    }
}

/// The request's block and seat lists, which decide which bids may compete.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocks {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bcat: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub badv: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wseat: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bseat: Vec<String>,
}

impl Blocks {
    pub fn is_empty(&self) -> bool {
        self.bcat.is_empty()
            && self.badv.is_empty()
            && self.wseat.is_empty()
            && self.bseat.is_empty()
    }
}

/// One impression for sale.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImpSummary {
    pub id: String,
    /// `banner`, `video`, `audio` or `native` (the first the imp offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Label>,
    /// The seller's floor in the auction currency, before the seller's multiplier.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub floor_micros: i64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub private_auction: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deals: Vec<DealSummary>,
}

/// A deal of an impression.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DealSummary {
    pub id: String,
    /// The deal's floor in the auction currency, before the seller's multiplier.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub floor_micros: i64,
    /// The deal's `at` (1, 2, or 3 fixed price), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wseat: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wadomain: Vec<String>,
}

/// What one bidder did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub bidder: String,
    /// `bid`, `no_bid`, `timeout`, `error`, `invalid_response` or `skipped`.
    pub outcome: Label,
    /// Why it was not called (`breaker_open`, `privacy`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<Label>,
    /// The finer reason of a no-bid, an invalid answer or a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Label>,
    /// From the start of the fan-out to its complete answer, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_us: Option<u64>,
    /// What privacy enforcement did to its copy (`ids_removed`, `geo_coarsened`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privacy: Vec<Label>,
    /// Why privacy law left it out (`no_consent`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_called: Option<Label>,
}

/// One bid received, and what became of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BidLine {
    pub bidder: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub seat: String,
    /// The bid's `id`.
    pub id: String,
    pub imp: String,
    /// The bid's price as sent, in its own currency.
    pub price_micros: i64,
    /// The bid's currency, when not the auction currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cur: Option<String>,
    /// The price in the auction currency (rounded down), when `cur` differs and a rate existed:
    /// what the auction compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converted_micros: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deal: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adomain: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cat: Vec<String>,
    /// `won`, `lost`, or why it was rejected: before the auction (`no_markup`, `no_rate`,
    /// `stale_rates`) or by it (`below_floor`, `blocked_advertiser`...).
    pub status: Label,
    /// Rejected before the auction (`status` says why): it never competed, and a replay
    /// leaves it out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub excluded: bool,
}

impl BidLine {
    /// The price the auction compared, in the auction currency; `None` when the bid's currency
    /// could not be converted.
    pub fn auction_price_micros(&self) -> Option<i64> {
        match (&self.cur, self.converted_micros) {
            (None, _) => Some(self.price_micros),
            (Some(_), converted) => converted,
        }
    }
}

/// A winning bid and what it pays.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Win {
    pub imp: String,
    pub bidder: String,
    /// The winning bid's `id` (for a Gavel bidder, its reservation).
    pub bid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub seat: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deal: Option<String>,
    /// `first_price`, `second_price` or `fixed_price`.
    pub rule: Label,
    /// The clearing price, in the auction currency: what the seller is paid.
    pub cleared_micros: i64,
    /// The clearing price in the bid's currency (rounded down): what the bidder is told and
    /// charged. Equal to `cleared_micros` when the currencies are the same.
    pub charged_micros: i64,
    /// The bid's currency, when not the auction currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cur: Option<String>,
    /// Who fires its billing notice: `exchange`, `seller` (it is in the answer's `burl`) or
    /// absent when the bid had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing_by: Option<Label>,
    /// Why the win was not delivered after the auction: `markup_failed` (its markup could not
    /// be fetched), `internal_error` (the seller's answer could not be built; none of its
    /// notices was fired). A dropped win is not sold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Label>,
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}
