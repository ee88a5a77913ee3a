//! The bidder's domain, as pure decision code: campaign files and their validation, the index
//! that finds an impression's candidates, the price rule, each campaign's running pacing state,
//! and the ranking of one impression's candidates. No I/O, no tokio, no clock of its own (every
//! call takes `now`): the bidder server (`crates/bidder`) reads files, owns time and reserves
//! budget; this crate decides.
//!
//! Life of a campaign file: [`parse`] reads JSON or TOML bytes into [`schema`] structs (unknown
//! keys refused), [`validate`] turns them into typed [`Campaign`]s (integer money, normalized
//! lists, bounded sizes), and [`CampaignSet`] indexes them once (`postings.rs`). Per request,
//! [`RequestFacts`] and [`ImpFacts`] extract what targeting needs, [`CampaignSet::candidates`]
//! returns the (campaign, creative, deal) triples that may bid, [`bid_price`] prices one, and
//! [`rank::rank`] keeps the best few that their budget state and pacer allow ([`Snapshot`]).
//!
//! | module | job |
//! | --- | --- |
//! | [`schema`], [`parse`] | the file format, JSON or TOML, errors with line, column and path |
//! | [`validate`], [`model`], [`limits`], [`error`] | typed, bounded campaigns; errors naming the field |
//! | [`set`] | [`CampaignSet`]: campaigns by descending ceiling, lookups, candidates |
//! | `postings.rs`, `fxhash.rs` | the index: postings per targeting value, intersected chunk by chunk |
//! | `key.rs` | the string keys of the index's maps, inline when short |
//! | `hot.rs` | what verification and ranking read per campaign and creative, packed apart from the campaigns |
//! | [`facts`], [`targeting`] | what a request offers; the targeting predicate |
//! | [`pricing`] | the bid price rule |
//! | [`snapshot`] | the set in force and each campaign's running state (pacing share, counters) |
//! | [`rank`](mod@rank) | one impression's proposals, best first, with what was passed over |
//!
//! Invariants:
//! - a [`Campaign`] exists only validated; a [`CampaignSet`] never changes after it is built
//!   (reload = build a new one and swap the `Arc`);
//! - matching and ranking are deterministic, do no I/O and take the time as an argument;
//! - a [`CampaignSet`] holds its campaigns by descending `max_cpm` (file order among equal
//!   ones), and every campaign index is a position in that order;
//! - [`CampaignSet::candidates`] returns exactly what [`CampaignSet::candidates_scan`] (the
//!   predicate applied to every campaign) returns, in the same order, and
//!   [`CampaignSet::visit_candidates`] visits the same candidates in that order, stopping when
//!   asked; [`rank::rank`]'s early exit returns what pricing every candidate returns;
//! - nothing here panics on any input file or request.
//!
//! The format is documented for operators in `docs/campaigns.md`.

pub mod error;
pub mod facts;
mod fxhash;
mod hot;
mod key;
pub mod limits;
pub mod model;
pub mod parse;
mod postings;
pub mod pricing;
pub mod rank;
pub mod schema;
pub mod set;
pub mod snapshot;
pub mod targeting;
pub mod validate;

#[cfg(test)]
mod tests;

pub use error::{CampaignError, Problem};
pub use facts::{DealFacts, ImpFacts, RequestFacts};
pub use model::{
    BidRule, Budget, Campaign, Country, Creative, Flight, Media, Size, Targeting, VideoCreative,
};
pub use parse::Format;
pub use pricing::bid_price;
pub use rank::{MAX_PROPOSALS, Proposal, Ranking, Skips, rank};
pub use schema::{
    BidSpec, BudgetSpec, CampaignFile, CampaignSpec, CreativeSpec, FlightSpec, PacingModeConfig,
    TargetingSpec, TimestampText, VideoSpec,
};
pub use set::CampaignSet;
pub use snapshot::{CampaignState, Snapshot};
pub use targeting::Candidate;
pub use validate::validate_all;
