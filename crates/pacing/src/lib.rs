//! Budget of record and pacing for Gavel's bidder, as pure decision code: no I/O, no tokio, no
//! clock of its own (every operation takes `now`), deterministic given its inputs and seed.
//!
//! Modules:
//! - [`money`]: [`Nanos`], integer money.
//! - [`time`]: [`Timestamp`], milliseconds since the Unix epoch, and UTC days.
//! - [`ledger`]: [`Book`], the budget of record as a two-phase state machine (reserve with a
//!   timeout, then commit or release; duplicate notices recognized and charged once).
//! - [`pace`]: [`Pacer`], the share of eligible requests that should bid so that spend follows
//!   the campaign's curve ([`PacingMode::Asap`] or [`PacingMode::Even`]).
//!
//! Invariants:
//! - Money is [`Nanos`], an `i64` count of billionths of a currency unit. One impression bought
//!   at a CPM of `p` micros costs exactly `p` nanos, so no rounding happens between a bid price
//!   and a budget charge.
//! - Time is [`Timestamp`], milliseconds since the Unix epoch, passed in by the caller.
//! - The [`Book`] never lets a campaign's spent + reserved exceed its budget, nor a day's its
//!   daily budget; a commit charges at most its reservation; each reservation resolves at most
//!   once. [`Book::check_invariants`] checks all of it, and the property tests call it after every
//!   step. A budget lowered below what is already committed to is clamped there (see
//!   [`Book::set_limits`]).
//! - The [`Pacer`] only throttles: the ledger is what enforces budgets, so a pacing error costs
//!   delivery, never overspend.
//! - Nothing here panics on input: no unwrapping, checked or saturating arithmetic.

pub mod ledger;
pub mod money;
pub mod pace;
pub mod time;

pub use ledger::{
    Balance, Book, CommitOutcome, DailyBalance, Limits, Refusal, ReleaseOutcome, SettleError,
};
pub use money::{MoneyError, Nanos};
pub use pace::{Flight, Pacer, PacerConfig, PacingMode, PacingState};
pub use time::Timestamp;
