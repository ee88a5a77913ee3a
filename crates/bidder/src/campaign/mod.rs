//! Campaigns: schema, validation, targeting and the index built at load.
//!
//! Life of a campaign file: [`parse`] reads JSON or TOML into [`schema`] structs (unknown keys
//! refused), [`validate`] turns them into typed [`Campaign`]s (integer money, normalized lists,
//! bounded sizes), and [`CampaignSet`] indexes them once. Per request, [`RequestFacts`] and
//! [`ImpFacts`] extract what targeting needs, [`CampaignSet::candidates`] returns the
//! (campaign, creative, deal) triples that may bid, and [`bid_price`] prices one.
//!
//! Invariants:
//! - a [`Campaign`] exists only validated; a [`CampaignSet`] never changes after it is built
//!   (reload = build a new one and swap the `Arc`);
//! - matching is deterministic, does no I/O and takes the time as an argument;
//! - a [`CampaignSet`] holds its campaigns by descending `max_cpm` (file order among equal
//!   ones), and every campaign index is a position in that order;
//! - [`CampaignSet::candidates`] returns exactly what [`CampaignSet::candidates_scan`] (the
//!   predicate applied to every campaign) returns, in the same order, and
//!   [`CampaignSet::visit_candidates`] visits the same candidates in that order, stopping when
//!   asked;
//! - nothing here panics on any input file or request.
//!
//! The format is documented for operators in `docs/campaigns.md`.

pub mod error;
pub mod facts;
pub mod index;
pub mod limits;
pub mod model;
pub mod parse;
pub mod pricing;
pub mod schema;
pub mod synth;
pub mod targeting;
pub mod validate;

#[cfg(test)]
mod tests;

pub use error::{CampaignError, Problem};
pub use facts::{DealFacts, ImpFacts, RequestFacts};
pub use index::{CampaignSet, Candidate};
pub use model::{
    BidRule, Budget, Campaign, Country, Creative, Flight, Media, Size, Targeting, VideoCreative,
};
pub use parse::Format;
pub use pricing::bid_price;
pub use schema::{
    BidSpec, BudgetSpec, CampaignFile, CampaignSpec, CreativeSpec, FlightSpec, PacingModeConfig,
    TargetingSpec, TimestampText, VideoSpec,
};
pub use validate::validate_all;
