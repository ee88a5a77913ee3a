//! Currencies and exchange rates for integer money: ISO 4217 codes ([`Currency`]), rate
//! tables read from Prebid's currency file or a request's own rates ([`Rates`]), and the
//! conversion of an amount in micros (`i64`, as `openrtb::Price` holds a CPM) from one
//! currency to another ([`Converter`]). Pure: no I/O, no clock (the caller compares
//! [`Rates::as_of`] with its own time).
//!
//! **No float anywhere.** A rate is read from its JSON number's text (serde_json's `RawValue`)
//! into an exact fraction `m / 10^s` of two `u64`s in lowest terms: 19 significant digits
//! and 19 fractional digits are kept exactly, any digit beyond is rounded to nearest (ties
//! up), and the value must lie within 1e-9..=1e9. An inverse swaps the terms; a cross rate
//! multiplies two fractions into two `u128`s; `amount × numerator / denominator` is worked
//! out in 256 bits and rounded once.
//!
//! **Which rate a pair uses** (per table): its own listing; a pair listed both ways uses,
//! each way, the lower of its own rate and the inverse of the other's; a pair listed one way
//! serves the other by the exact inverse; a pair not listed goes through the first currency,
//! alphabetically, with a rate to both. The first table in the [`Converter`]'s list that can
//! convert the pair converts it. So the rates of `a -> b` and `b -> a` multiply to at most
//! one, and **money never grows on a round trip** rounded down both ways.
//!
//! | rounding | where | guarantee |
//! | --- | --- | --- |
//! | rate text, to nearest, ties up | [`Rates::from_json`], [`Rates::from_conversions_json`], [`Rate::parse`] | exact within 19 significant and 19 fractional digits |
//! | [`Round::Down`] (toward zero) | a bid, from the bidder's currency into the auction's | never more than the exact product |
//! | [`Round::Up`] (away from zero) | a floor, from the auction's currency into a bidder's | never less than the exact product; at most one micro above `Down` |
//!
//! Limits: a document of at most [`MAX_DOCUMENT_BYTES`], [`MAX_CURRENCIES`] currencies and
//! [`MAX_RATES`] rates; codes must be three upper-case letters; a key given twice, a rate
//! out of range and a currency's rate to itself other than 1 are refused, naming the pair.
//! A conversion refuses a negative amount and a result beyond `i64::MAX` micros.

mod code;
mod convert;
mod date;
mod decimal;
mod document;
mod rate;
mod table;
mod wide;

pub use code::{Currency, CurrencyError};
pub use convert::{ConvertError, Converter};
pub use decimal::{FRACTION_DIGITS, MAX_RATE, MIN_RATE, RateError, SIGNIFICANT_DIGITS};
pub use rate::{Rate, Round};
pub use table::{MAX_CURRENCIES, MAX_DOCUMENT_BYTES, MAX_RATES, Rates, RatesError};
