//! Gavel's bidder (DSP): answers OpenRTB 2.6 bid requests for a set of campaigns, within the
//! request's deadline, without ever spending more than a campaign's budget, even when several
//! instances share it.
//!
//! This crate is the server; the decisions are the `campaigns` crate's (pure) and the money the
//! `ledger` crate's. The life of a bid request: decode and validate (`bid_path`), ask the
//! campaign index for the candidates of each impression, price and rank them, dropping those
//! whose budget is exhausted or whose pacer holds them back ([`campaigns::rank()`]), reserve the
//! best one's maximum cost in the ledger ([`ledger::Ledger`]), answer with a bid whose notice
//! URLs settle that reservation ([`notice`]).
//!
//! Invariants:
//! - No bid goes out without a reservation of its maximum cost in the ledger of record; a win
//!   or billing notice commits at most that amount, once per reservation id; a loss notice or
//!   the reservation's expiry returns it. So spend never exceeds the budget, whatever the
//!   notices do (duplicated, reordered, late, missing).
//! - The request path never waits on a lock or on a store past the request's deadline: the
//!   campaign set is read through an atomic pointer ([`campaigns::Snapshot`]), pacing through atomics, and a
//!   ledger that does not answer in time is a refusal (fail closed).
//! - Campaign changes are validated and indexed aside and swapped whole (`reload`); a bad file
//!   never replaces a good one.
//! - Money is integer: CPMs in micros ([`openrtb::Price`]), budgets in nanos ([`units::Nanos`]);
//!   one impression at CPM p micros costs exactly p nanos.

mod admin;
mod bid_path;
pub mod campaign_metrics;
pub mod config;
mod count;
mod decision;
pub mod fleet_doc;
pub mod ledger_open;
mod ledger_record;
mod limits_body;
mod limits_check;
pub mod metrics;
pub mod notice;
pub mod prices;
pub mod redis_url;
mod reload;
pub mod server;
mod start;
mod state;
pub mod token;

pub use admin::CampaignReport;
pub use config::BidderConfig;
pub use ledger_open::REDIS_URL_ENV;
pub use metrics::Metrics;
pub use reload::{LoadError, ReloadError};
pub use server::BID_PATH;
pub use start::{CheckReport, NOTICE_KEY_ENV, PREVIOUS_NOTICE_KEY_ENV, StartError};
pub use state::Bidder;
