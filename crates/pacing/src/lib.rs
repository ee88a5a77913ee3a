//! Pacing for Gavel's bidder, and the money and time it is counted in, as pure decision code:
//! no I/O, no tokio, no clock of its own (every operation takes `now`), deterministic given its
//! inputs and seed. The budget of record that enforces the limits is the `ledger` crate.
//!
//! Modules:
//! - [`money`]: [`Nanos`], integer money.
//! - [`time`]: [`Timestamp`], milliseconds since the Unix epoch, UTC days, RFC 3339.
//! - [`limits`]: [`Limits`], a campaign's total and daily budget.
//! - [`pace`]: [`Pacer`], the share of eligible requests that should bid so that spend follows
//!   the campaign's curve ([`PacingMode::Asap`] or [`PacingMode::Even`]).
//!
//! Invariants:
//! - Money is [`Nanos`], an `i64` count of billionths of a currency unit. One impression bought
//!   at a CPM of `p` micros costs exactly `p` nanos, so no rounding happens between a bid price
//!   and a budget charge.
//! - Time is [`Timestamp`], milliseconds since the Unix epoch, passed in by the caller.
//! - The [`Pacer`] only throttles: the ledger is what enforces budgets, so a pacing error costs
//!   delivery, never overspend.
//! - Nothing here panics on input: no unwrapping, checked or saturating arithmetic.

pub mod limits;
pub mod money;
pub mod pace;
pub mod time;

pub use limits::Limits;
pub use money::{MoneyError, Nanos};
pub use pace::{Flight, Pacer, PacerConfig, PacingMode, PacingState};
pub use time::Timestamp;
