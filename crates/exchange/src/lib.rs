//! Gavel's exchange: receives OpenRTB 2.6 bid requests, fans each out to every configured bidder
//! over that bidder's own connection pool, runs the auction inside an absolute deadline, answers
//! the seller and fires win/billing/loss notices afterwards.
//!
//! Invariants:
//! - The deadline is fixed once, when the request has been read (`admission::deadline`), and bounds every
//!   bidder call; the answer is written before `tmax` expires whatever bidders do.
//! - A bidder's failure (timeout, error, garbage, busy pool) is an outcome of that bidder, never
//!   an error of the auction; only bad input from the seller fails a request (400/405/413).
//! - The request path does not panic on input, does not block a runtime thread, and does not
//!   queue: a bidder whose connections are all busy is skipped for that auction.
//! - Money is `openrtb::Price` (integer micros) from decode to encode.

mod admin;
pub(crate) mod auction_path;
mod auction_record;
mod bidder_config;
pub mod breaker;
mod cache_config;
mod clock;
pub mod config;
mod count;
mod currency_config;
pub mod enrich;
pub mod fanout;
pub mod fleet_doc;
mod intake;
mod live;
mod markup_cache;
pub mod metrics;
pub mod money;
mod notice_plan;
mod notices;
pub mod outcome;
mod outgoing;
mod privacy;
mod privacy_config;
mod rates;
pub mod reload;
pub mod replay;
pub mod reply;
mod report;
mod resolver;
mod roster;
mod running;
mod sellers;
mod server;
pub mod settle;
mod state;
mod typical;
pub mod warnings;
/// Request validation lives in `openrtb` (the bidder applies the same rules).
pub use openrtb::validate;
/// The outbound client, a crate of its own since issue 33; its modules stay reachable here.
pub use upstream::{notice_client, outbound, pool, tls};

pub use admin::ExchangeAdmin;
pub use config::{Config, ConfigError, Validated};
pub use metrics::Metrics;
pub use report::{BidderReport, ExchangeReport};
pub use server::AUCTION_PATH;
pub use state::Exchange;
