//! What Gavel counts in, as pure code: no I/O, no clock of its own beyond
//! [`Timestamp::now`], nothing that panics on input.
//!
//! - [`money`]: [`Nanos`], integer money. One impression bought at a CPM of `p` micros costs
//!   exactly `p` nanos, so no rounding happens between a bid price and a budget charge.
//! - [`time`]: [`Timestamp`], milliseconds since the Unix epoch, UTC days, RFC 3339.
//! - [`limits`]: [`Limits`], a campaign's total and daily budget.
//!
//! The pacer (`pacing`), the ledger of record (`ledger`) and the campaigns (`campaigns`) all
//! count in these.

pub mod limits;
pub mod money;
pub mod time;

pub use limits::Limits;
pub use money::{MoneyError, Nanos};
pub use time::Timestamp;
