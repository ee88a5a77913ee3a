//! OpenRTB 2.6 for Gavel: the bid request/response object model, integer money, the auction
//! substitution macros and reason codes. No I/O, no policy: this crate turns bytes into typed
//! objects and back, and other crates decide what to do with them.
//!
//! # Invariants
//!
//! - **Money is integer.** Every CPM amount (`Imp.bidfloor`, `Deal.bidfloor`,
//!   `mincpmpersec`, `DurFloors.bidfloor`, `Bid.price`) is a [`Price`] in micro-units, converted
//!   once at the JSON edge with the rounding rule documented in [`price`].
//! - **Nothing is lost in transit.** Every object keeps its `ext` and every field this crate
//!   does not model as verbatim JSON ([`RawJson`], [`UnknownFields`]) and writes them back on
//!   encode, byte for byte. decode -> encode -> decode yields an equal value.
//! - **Field names are the JSON keys.** `imp.bidfloor` in JSON is `imp.bidfloor` in Rust; only
//!   Rust keywords differ (`r#type`, `r#ref`). Fields the spec marks required and the codec
//!   needs are plain (`BidRequest.id`/`imp`, `Imp.id`, `BidResponse.id`, `SeatBid.bid`,
//!   `Bid.id`/`impid`/`price`); everything else is an `Option`, absent when the key is absent
//!   or `null`.
//! - **Enumerations are open.** Integer code lists are newtypes ([`enums`], [`codes`]) that
//!   accept any value, because OpenRTB requires tolerating codes one does not know.
//! - **Decoding is strict about shape, lenient about content.** A wrong JSON type, a duplicate
//!   key, a missing required field or nesting deeper than 128 levels is an error that names the
//!   JSON path ([`DecodeError`]); semantic checks (at least one imp, a media object per imp,
//!   floors and sizes in range, `0/1` flags, the few code lists the spec closes, the Native 1.2
//!   request inside `imp.native.request`...) are a separate step, [`validate`], which the
//!   exchange and the bidder share, and whose errors also name the JSON path.
//!
//! # Layout
//!
//! [`request`] (with `imp`, `media`, `context`, `device`, `user`), [`response`], [`codec`]
//! (entry points and errors; the fast one-pass reader behind them is the private `direct`),
//! [`raw`] (verbatim JSON), [`enums`], [`codes`], [`price`],
//! [`macros`] (`${AUCTION_PRICE}` and friends), [`query`] (notice URL parameters, exact decimal
//! prices), [`validate`] (semantic checks of a request, OpenRTB 2.6 and Native 1.2). All object
//! types are re-exported at the root.

mod direct;
mod object;

pub mod codec;
pub mod codes;
pub mod convert;
pub mod enums;
pub mod macros;
pub mod price;
pub mod query;
pub mod raw;
pub mod request;
pub mod response;
pub mod validate;

pub use codec::{DecodeError, decode};
pub use codes::{LossReason, NoBidReason};
pub use enums::*;
pub use macros::{MacroValues, substitute};
pub use price::{Price, PriceError};
pub use raw::{RawJson, RawJsonError, UnknownFields};
pub use request::context::{App, Channel, Content, Dooh, Network, Producer, Publisher, Site};
pub use request::device::{BrandVersion, Device, Geo, UserAgent};
pub use request::imp::{Deal, Imp, Metric, Pmp, Qty, RefSettings, Refresh};
pub use request::media::{Audio, Banner, DurFloors, Format, Native, Video};
pub use request::user::{Data, Eid, Segment, Uid, User};
pub use request::{BidRequest, Regs, Source, SupplyChain, SupplyChainNode};
pub use response::{Bid, BidResponse, SeatBid};
