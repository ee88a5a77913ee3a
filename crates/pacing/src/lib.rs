//! Pacing for Gavel's bidder, as pure decision code: no I/O, no tokio, no clock of its own
//! (every operation takes `now`), deterministic given its inputs and seed. Money and time are
//! the `units` crate's; the budget of record that enforces the limits is the `ledger` crate.
//!
//! - [`pace`]: [`Pacer`], the share of eligible requests that should bid so that spend follows
//!   the campaign's curve ([`PacingMode::Asap`] or [`PacingMode::Even`]).
//!
//! Invariants:
//! - The [`Pacer`] only throttles: the ledger is what enforces budgets, so a pacing error costs
//!   delivery, never overspend.
//! - Nothing here panics on input: no unwrapping, checked or saturating arithmetic.

pub mod pace;

pub use pace::{Flight, Pacer, PacerConfig, PacingMode, PacingState};
