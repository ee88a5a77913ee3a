//! Integer money: [`Price`] is a CPM in micro-units of a currency.
//!
//! OpenRTB carries prices as JSON floats (`bidfloor`, `price`, deal floors). Gavel converts them
//! once, here, into an `i64` count of millionths of a currency unit per thousand impressions, and
//! every later computation (floors, auctions, budgets) is integer arithmetic.
//!
//! Rounding rule: the JSON number is read as an IEEE-754 double and rounded to the nearest micro,
//! ties away from zero (`f64::round`). A double holds 15 significant decimal digits exactly, so
//! every price up to 10^9 CPM with six decimals decodes to the exact decimal that was written.
//! Non-finite values and magnitudes beyond [`Price::MAX_CPM`] are refused. Encoding writes the
//! shortest decimal that reads back to the same micro count (e.g. `2_500_000` -> `2.5`; below
//! 0.001 serde_json may choose exponent form, `1e-6`, which reads back just as exactly).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A CPM price in micro-units of currency (1 CPM unit = 1,000,000 micros).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Price(i64);

/// Why a number could not become a [`Price`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("price is not a finite number")]
    NotFinite,
    #[error("price is beyond +/-{} CPM", Price::MAX_CPM)]
    OutOfRange,
}

impl Price {
    /// Micro-units in one currency unit.
    pub const MICROS_PER_UNIT: i64 = 1_000_000;
    /// Largest magnitude accepted from JSON, in currency units CPM (a billion CPM is absurd
    /// already; the bound keeps every sum of a few million prices far from `i64` overflow).
    pub const MAX_CPM: f64 = 1e9;
    pub const ZERO: Price = Price(0);

    pub const fn from_micros(micros: i64) -> Self {
        Price(micros)
    }

    pub const fn micros(self) -> i64 {
        self.0
    }

    /// Converts a CPM in currency units, rounding to the nearest micro (ties away from zero).
    pub fn from_cpm(cpm: f64) -> Result<Self, PriceError> {
        if !cpm.is_finite() {
            return Err(PriceError::NotFinite);
        }
        if cpm.abs() > Self::MAX_CPM {
            return Err(PriceError::OutOfRange);
        }
        // In range by the check above, so the cast cannot saturate.
        #[allow(clippy::cast_possible_truncation)]
        let micros = (cpm * Self::MICROS_PER_UNIT as f64).round() as i64;
        Ok(Price(micros))
    }

    /// The CPM as a double, for display and JSON only; never compute money with it.
    pub fn as_cpm_f64(self) -> f64 {
        self.0 as f64 / Self::MICROS_PER_UNIT as f64
    }

    /// The cost of a single impression at this CPM, in micro-units (CPM / 1000), rounded down:
    /// a buyer is never charged a fraction of a micro it did not bid.
    pub const fn per_impression_micros(self) -> i64 {
        self.0.div_euclid(1000)
    }

    pub const fn is_positive(self) -> bool {
        self.0 > 0
    }

    pub const fn saturating_add(self, other: Price) -> Price {
        Price(self.0.saturating_add(other.0))
    }

    pub const fn saturating_sub(self, other: Price) -> Price {
        Price(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Price {
    /// Exact decimal: integer part, then up to six fractional digits without trailing zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let unit = Self::MICROS_PER_UNIT as u64;
        let (whole, frac) = (abs / unit, abs % unit);
        if frac == 0 {
            return write!(f, "{sign}{whole}");
        }
        // Drop trailing zeros arithmetically (no allocation: this runs for every price macro).
        let (mut frac, mut width) = (frac, 6);
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        write!(f, "{sign}{whole}.{frac:0width$}")
    }
}

impl Serialize for Price {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Division by a power of ten is correctly rounded, and serde_json prints the shortest
        // decimal that reads back to the same double: the exact micro decimal.
        serializer.serialize_f64(self.as_cpm_f64())
    }
}

impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let cpm = f64::deserialize(deserializer)?;
        Price::from_cpm(cpm).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_prices_decode_exactly() {
        for (text, micros) in [
            ("0.07", 70_000),
            ("2.5", 2_500_000),
            ("9.43", 9_430_000),
            ("0.000001", 1),
            ("0.0000005", 1),
            ("123456.789012", 123_456_789_012),
            ("-1.25", -1_250_000),
        ] {
            let p: Price = serde_json::from_str(text).unwrap();
            assert_eq!(p.micros(), micros, "{text}");
        }
    }

    #[test]
    fn encode_prints_the_exact_decimal() {
        assert_eq!(
            serde_json::to_string(&Price::from_micros(2_500_000)).unwrap(),
            "2.5"
        );
        assert_eq!(
            serde_json::to_string(&Price::from_micros(70_000)).unwrap(),
            "0.07"
        );
        assert_eq!(Price::from_micros(1).to_string(), "0.000001");
        for micros in [1, 70_000, 2_500_000, 9_430_000, 123_456_789_012, 10_000] {
            let p = Price::from_micros(micros);
            let json = serde_json::to_string(&p).unwrap();
            let back: Price = serde_json::from_str(&json).unwrap();
            assert_eq!(back, p);
        }
    }

    #[test]
    fn out_of_range_and_non_finite_are_refused() {
        assert_eq!(Price::from_cpm(f64::NAN), Err(PriceError::NotFinite));
        assert_eq!(Price::from_cpm(2e9), Err(PriceError::OutOfRange));
        assert!(serde_json::from_str::<Price>("1e300").is_err());
        assert!(serde_json::from_str::<Price>("\"2.5\"").is_err());
    }

    #[test]
    fn per_impression_rounds_down() {
        assert_eq!(Price::from_micros(2_500_000).per_impression_micros(), 2_500);
        assert_eq!(Price::from_micros(1_999).per_impression_micros(), 1);
    }

    proptest::proptest! {
        #[test]
        fn micro_roundtrip_through_json(micros in -1_000_000_000_000_000i64..1_000_000_000_000_000i64) {
            let p = Price::from_micros(micros);
            let back: Price = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, p);
        }
    }
}
