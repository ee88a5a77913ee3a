//! [`Nanos`]: integer money for budgets.
//!
//! Budgets are configured in currency units (`1.25` = one and a quarter dollars) and kept as an
//! `i64` count of nano-units (10^-9). OpenRTB prices are CPMs in micro-units
//! ([`openrtb::Price`]); a CPM is the price of a thousand impressions, so the price of one
//! impression in nano-units is numerically the CPM in micro-units: a bid at CPM 2.50 reserves
//! 2,500,000 nanos (0.0025 units). No division, no rounding between a bid and its charge.
//!
//! Rounding rule at the configuration edge: a decimal amount is read as an IEEE-754 double and
//! rounded to the nearest nano, ties away from zero. Amounts beyond [`Nanos::MAX_UNITS`] are
//! refused, which keeps sums of many budgets far from `i64` overflow.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

use openrtb::Price;
use serde::{Deserialize, Serialize};

/// An amount of money in billionths of a currency unit.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub i64);

/// Why a decimal amount could not become [`Nanos`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("amount is not a finite number")]
    NotFinite,
    #[error("amount is beyond +/-{} currency units", Nanos::MAX_UNITS)]
    OutOfRange,
}

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    /// Nano-units in one currency unit.
    pub const PER_UNIT: i64 = 1_000_000_000;
    /// Largest amount accepted from configuration, in currency units.
    pub const MAX_UNITS: f64 = 1e9;

    /// Converts an amount in currency units, rounding to the nearest nano (ties away from zero).
    pub fn from_units(units: f64) -> Result<Nanos, MoneyError> {
        if !units.is_finite() {
            return Err(MoneyError::NotFinite);
        }
        if units.abs() > Self::MAX_UNITS {
            return Err(MoneyError::OutOfRange);
        }
        // In range by the check above, so the cast cannot saturate.
        #[allow(clippy::cast_possible_truncation)]
        let n = (units * Self::PER_UNIT as f64).round() as i64;
        Ok(Nanos(n))
    }

    /// The cost of one impression bought at `cpm`: exactly its micro count, in nanos.
    pub const fn of_impression(cpm: Price) -> Nanos {
        Nanos(cpm.micros())
    }

    /// The CPM whose single impression costs this amount (the inverse of [`Nanos::of_impression`]).
    pub const fn as_cpm(self) -> Price {
        Price::from_micros(self.0)
    }

    /// For display and JSON only; never compute money with it.
    pub fn as_units_f64(self) -> f64 {
        self.0 as f64 / Self::PER_UNIT as f64
    }

    pub const fn get(self) -> i64 {
        self.0
    }

    pub const fn is_positive(self) -> bool {
        self.0 > 0
    }

    pub const fn min(self, other: Nanos) -> Nanos {
        if self.0 < other.0 { self } else { other }
    }

    pub const fn max(self, other: Nanos) -> Nanos {
        if self.0 > other.0 { self } else { other }
    }

    pub const fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }

    pub const fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 - rhs.0)
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 += rhs.0;
    }
}

impl SubAssign for Nanos {
    fn sub_assign(&mut self, rhs: Nanos) {
        self.0 -= rhs.0;
    }
}

/// Writes the exact decimal amount in currency units, e.g. `1.0025`.
impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let units = abs / Self::PER_UNIT as u64;
        let frac = abs % Self::PER_UNIT as u64;
        if frac == 0 {
            return write!(f, "{sign}{units}");
        }
        let digits = format!("{frac:09}");
        write!(f, "{sign}{units}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impression_costs_its_cpm_micros_in_nanos() {
        let cpm = Price::from_cpm(2.5).unwrap_or_default();
        assert_eq!(Nanos::of_impression(cpm), Nanos(2_500_000));
        // A thousand impressions at CPM 2.50 cost 2.50 units.
        assert_eq!(
            Nanos(Nanos::of_impression(cpm).0 * 1000),
            Nanos::from_units(2.5).unwrap_or_default()
        );
        assert_eq!(Nanos::of_impression(cpm).as_cpm(), cpm);
    }

    #[test]
    fn units_round_to_the_nearest_nano() {
        assert_eq!(Nanos::from_units(1.0), Ok(Nanos(1_000_000_000)));
        assert_eq!(Nanos::from_units(0.1), Ok(Nanos(100_000_000)));
        assert_eq!(Nanos::from_units(1e-10), Ok(Nanos(0)));
        assert_eq!(Nanos::from_units(f64::NAN), Err(MoneyError::NotFinite));
        assert_eq!(Nanos::from_units(2e9), Err(MoneyError::OutOfRange));
    }

    #[test]
    fn display_is_the_exact_decimal() {
        assert_eq!(Nanos(1_002_500_000).to_string(), "1.0025");
        assert_eq!(Nanos(3_000_000_000).to_string(), "3");
        assert_eq!(Nanos(-1).to_string(), "-0.000000001");
    }
}
