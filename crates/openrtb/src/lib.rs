//! OpenRTB 2.6 for Gavel: the object model, integer money and the auction macros. No I/O.
//!
//! Invariants: every price is a [`Price`] (integer micros), converted once at the JSON edge;
//! unknown fields and every `ext` pass through decode and encode untouched.

pub mod price;

pub use price::{Price, PriceError};
