//! [`Converter`]: integer money from one currency to another over an ordered list of rate
//! tables (a trusted request's own rates first, then the file's): the first table that can
//! convert a pair, directly, by an inverse or through an intermediate, converts it. A table
//! that can convert `a -> b` can also convert `b -> a` (the same pair, or the same
//! intermediate), so both directions of a round trip use the same table and rates whose
//! product is at most one: with [`Round::Down`] both ways, money never grows on a round trip.

use crate::code::Currency;
use crate::rate::{Rate, Round};
use crate::table::Rates;

/// Why an amount was not converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("no exchange rate from {from} to {to}")]
    NoRate { from: Currency, to: Currency },
    #[error("{micros} micros of {from} in {to} is beyond the largest amount, i64::MAX micros")]
    Overflow {
        micros: i64,
        from: Currency,
        to: Currency,
    },
    #[error("a negative amount ({micros} micros) is not converted")]
    Negative { micros: i64 },
}

impl ConvertError {
    /// A short fixed name of the failure, for a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            ConvertError::NoRate { .. } => "no_rate",
            ConvertError::Overflow { .. } => "overflow",
            ConvertError::Negative { .. } => "negative",
        }
    }
}

/// Converts over borrowed tables; `Copy`, and no call allocates.
#[derive(Debug, Clone, Copy)]
pub struct Converter<'a> {
    tables: &'a [&'a Rates],
}

impl<'a> Converter<'a> {
    /// Over `tables`, the first listed tried first.
    pub fn new(tables: &'a [&'a Rates]) -> Converter<'a> {
        Converter { tables }
    }

    /// The rate from the first table that has one (`Rates::rate`); one for the same currency.
    pub fn rate(&self, from: Currency, to: Currency) -> Option<Rate> {
        if from == to {
            return Some(Rate::ONE);
        }
        self.tables.iter().find_map(|table| table.rate(from, to))
    }

    /// `micros` of `from` in `to`, rounded as `round` says: [`Round::Down`] for a bid into the
    /// auction's currency, [`Round::Up`] for a floor into a bidder's. The same currency
    /// returns the amount unchanged.
    pub fn convert(
        &self,
        micros: i64,
        from: Currency,
        to: Currency,
        round: Round,
    ) -> Result<i64, ConvertError> {
        if micros < 0 {
            return Err(ConvertError::Negative { micros });
        }
        let rate = self
            .rate(from, to)
            .ok_or(ConvertError::NoRate { from, to })?;
        rate.apply(micros, round)
            .ok_or(ConvertError::Overflow { micros, from, to })
    }
}

#[cfg(test)]
mod tests;
