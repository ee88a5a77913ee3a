//! What Gavel keeps of every auction and every dollar: one [`Record`] per auction the exchange
//! ran, per notice it fired or dropped, and per ledger event of a bidder (reservation, charge,
//! release, refusal). The auction log is also the billing record: invoices to buyers and
//! payouts to sellers are computed from it, `gavel reconcile` checks the exchange's books
//! against the bidders', and `gavel replay` re-runs recorded auctions under new rules.
//!
//! Rules every record keeps:
//!
//! | rule | how |
//! | --- | --- |
//! | versioned | every record carries `v` ([`VERSION`]); a reader refuses a newer version by name instead of misreading it |
//! | one line each | one JSON object per line (NDJSON), at most [`MAX_LINE_BYTES`] |
//! | one identity | the journal stamps each line with its id (`rid`, last), so readers count a record read twice once ([`identity`]) |
//! | checked when read | a version Gavel writes, no negative money: refused naming the field |
//! | money exact | prices are integer CPM micros (`*_micros`), ledger amounts integer nanos (`*_nanos`): one impression at CPM `p` micros costs `p` nanos |
//! | no personal data | no user, device or buyer ids; the device IP cut to its network (/24, /56); so a record can be kept and shared for billing |
//! | labels | outcomes and reasons are the labels the metrics use (`timeout`, `below_floor`, ...) |
//! | compact | empty lists and absent values are left out |
//!
//! Pure: building, encoding and decoding records. Writing them (a bounded queue, rotating files,
//! NATS JetStream) is the `journal` crate's job.

mod auction;
pub mod identity;
mod ledger;
mod line;
mod notice;
pub mod reconcile;
pub mod terminal;

pub use auction::{AuctionRecord, BidLine, Blocks, Call, DealSummary, ImpSummary, Inventory, Win};
pub use ledger::{LedgerEvent, LedgerRecord};
pub use line::{MAX_LINE_BYTES, RecordError, from_line, to_line};
pub use notice::NoticeRecord;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// The record format this code writes. Readers accept this version and older ones.
pub const VERSION: u16 = 1;

/// A label: a `&'static str` when written (no allocation on the request path), owned when
/// read back.
pub type Label = Cow<'static, str>;

/// One record, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// Boxed: an auction record is several times the size of the others.
    Auction(Box<AuctionRecord>),
    Notice(NoticeRecord),
    Ledger(LedgerRecord),
}

impl Record {
    /// The record's format version.
    pub fn version(&self) -> u16 {
        match self {
            Record::Auction(r) => r.v,
            Record::Notice(r) => r.v,
            Record::Ledger(r) => r.v,
        }
    }
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub(crate) fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests;
