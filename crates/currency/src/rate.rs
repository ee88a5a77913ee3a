//! [`Rate`]: how many units of one currency a unit of another buys, as an exact fraction, and
//! its one use: an amount of integer micros times the rate, rounded as [`Round`] says.
//!
//! A rate read from text is a [`Ratio`] of two `u64`s (`decimal` says how it is read); the
//! inverse swaps them; a rate through an intermediate currency multiplies two of them, so
//! every [`Rate`] is a fraction of two `u128`s and `amount × numerator` fits in 256 bits
//! (`wide`). The product is divided once and rounded once: no error accumulates along a
//! cross rate.

use std::cmp::Ordering;
use std::fmt;

use crate::decimal::{self, RateError};
use crate::wide;

/// Which way a conversion rounds when the exact product is not a whole micro.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Round {
    /// Toward zero: a bid brought into the auction's currency never becomes more.
    Down,
    /// Away from zero: a floor taken into a bidder's currency never becomes lower.
    Up,
}

/// A rate as a table stores it: `num / den`, both terms non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ratio {
    pub num: u64,
    pub den: u64,
}

impl Ratio {
    /// Decimal text, read as `decimal` says.
    pub fn parse(text: &str) -> Result<Ratio, RateError> {
        decimal::parse(text).map(|(num, den)| Ratio { num, den })
    }

    pub fn inverse(self) -> Ratio {
        Ratio {
            num: self.den,
            den: self.num,
        }
    }

    pub fn is_one(self) -> bool {
        self.num == self.den
    }

    /// The smaller of the two, compared exactly.
    pub fn min(self, other: Ratio) -> Ratio {
        let lhs = u128::from(self.num) * u128::from(other.den);
        let rhs = u128::from(other.num) * u128::from(self.den);
        if lhs <= rhs { self } else { other }
    }
}

/// An exchange rate, `numerator / denominator` units of the target currency per unit of the
/// source, exact. Compared by value (`1/2 == 2/4`).
#[derive(Clone, Copy)]
pub struct Rate {
    num: u128,
    den: u128,
}

impl Rate {
    /// One for one: the rate between a currency and itself.
    pub const ONE: Rate = Rate { num: 1, den: 1 };

    /// A rate's decimal text, as a JSON number (`0.9213`, `1.0854e0`): kept exactly to 19
    /// significant and 19 fractional digits, rounded to nearest beyond, within 1e-9..=1e9
    /// (the crate's docs).
    pub fn parse(text: &str) -> Result<Rate, RateError> {
        Ratio::parse(text).map(Rate::from)
    }

    pub fn numerator(&self) -> u128 {
        self.num
    }

    pub fn denominator(&self) -> u128 {
        self.den
    }

    /// The rate of the opposite direction: exactly `1 / self`.
    pub fn inverse(self) -> Rate {
        Rate {
            num: self.den,
            den: self.num,
        }
    }

    /// `first` then `second`: a rate through an intermediate currency, exact.
    pub(crate) fn through(first: Ratio, second: Ratio) -> Rate {
        Rate {
            num: u128::from(first.num) * u128::from(second.num),
            den: u128::from(first.den) * u128::from(second.den),
        }
    }

    /// `micros × self`, rounded as `round` says, in integers throughout; `None` when `micros`
    /// is negative or the result would exceed `i64::MAX`.
    pub fn apply(self, micros: i64, round: Round) -> Option<i64> {
        let amount = u128::try_from(micros).ok()?;
        let (hi, lo) = wide::mul(amount, self.num);
        let (quotient, inexact) = wide::div(hi, lo, self.den)?;
        let rounded = match round {
            Round::Down => quotient,
            Round::Up => quotient.checked_add(u64::from(inexact))?,
        };
        i64::try_from(rounded).ok()
    }
}

#[cfg(test)]
impl Rate {
    /// `self × other`, for tests of small rates (panics if a term overflows).
    pub(crate) fn times(self, other: Rate) -> Rate {
        Rate {
            num: self.num.checked_mul(other.num).expect("small terms"),
            den: self.den.checked_mul(other.den).expect("small terms"),
        }
    }

    /// Whether `self × other ≤ 1`, exactly, for rates of any terms.
    pub(crate) fn product_at_most_one(self, other: Rate) -> bool {
        wide::cmp_products(self.num, other.num, self.den, other.den) != Ordering::Greater
    }
}

impl From<Ratio> for Rate {
    fn from(ratio: Ratio) -> Rate {
        Rate {
            num: u128::from(ratio.num),
            den: u128::from(ratio.den),
        }
    }
}

impl PartialEq for Rate {
    fn eq(&self, other: &Rate) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Rate {}

impl PartialOrd for Rate {
    fn partial_cmp(&self, other: &Rate) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Rate {
    fn cmp(&self, other: &Rate) -> Ordering {
        wide::cmp_products(self.num, other.den, other.num, self.den)
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rate({}/{})", self.num, self.den)
    }
}

/// `numerator/denominator`: exact, where a decimal would have to round an inverse.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(text: &str) -> Rate {
        Rate::parse(text).expect(text)
    }

    #[test]
    fn exact_products_round_as_told() {
        // (amount, rate, down, up)
        for (micros, text, down, up) in [
            (1_000_000, "0.9213", 921_300, 921_300),
            (1_250_000, "0.9213", 1_151_625, 1_151_625),
            (1, "0.9213", 0, 1),
            (1, "1.0854", 1, 2),
            (3, "0.5", 1, 2),
            (999_999, "1.0000001", 999_999, 1_000_000),
            (0, "1.0854", 0, 0),
            (1, "1e9", 1_000_000_000, 1_000_000_000),
            (1_000_000_000, "1e-9", 1, 1),
            (999_999_999, "1e-9", 0, 1),
            (1_000_000, "149.2841", 149_284_100, 149_284_100),
            (1_000_000, "0.0000535058982630431", 53, 54),
            (i64::MAX, "1", i64::MAX, i64::MAX),
            (i64::MAX, "0.5", i64::MAX / 2, i64::MAX / 2 + 1),
        ] {
            assert_eq!(
                rate(text).apply(micros, Round::Down),
                Some(down),
                "{micros} × {text}"
            );
            assert_eq!(
                rate(text).apply(micros, Round::Up),
                Some(up),
                "{micros} × {text}"
            );
        }
    }

    #[test]
    fn inverse_and_cross_rates_are_exact() {
        let eur_per_usd = Ratio::parse("0.9213").unwrap();
        // 1 EUR in USD at the inverse: 1 / 0.9213 = 1.085422772..., so 1_085_422.77 micros.
        let inverse = Rate::from(eur_per_usd).inverse();
        assert_eq!(inverse.apply(1_000_000, Round::Down), Some(1_085_422));
        assert_eq!(inverse.apply(1_000_000, Round::Up), Some(1_085_423));
        // The inverse of an exact rate, applied to what the rate gave, is the amount again.
        assert_eq!(inverse.apply(921_300, Round::Down), Some(1_000_000));
        // GBP -> USD -> JPY: 1.27 × 155.3 = 197.231, exactly.
        let cross = Rate::through(
            Ratio::parse("1.27").unwrap(),
            Ratio::parse("155.3").unwrap(),
        );
        assert_eq!(cross, rate("197.231"));
        assert_eq!(cross.apply(2_000_000, Round::Down), Some(394_462_000));
        // Terms that need all 256 bits: 19-digit terms on both legs, a near-maximal amount.
        let fine = Ratio::parse("0.9999999999999999999").unwrap();
        let cross = Rate::through(fine, fine);
        assert!(cross.numerator() > u128::from(u64::MAX));
        // x × (1 - 1e-19)^2 = x - 2x·1e-19 + x·1e-38; for x = i64::MAX, 2x·1e-19 ≈ 1.84.
        assert_eq!(cross.apply(i64::MAX, Round::Down), Some(i64::MAX - 2));
        assert_eq!(cross.apply(i64::MAX, Round::Up), Some(i64::MAX - 1));
    }

    #[test]
    fn negative_amounts_and_overflow_are_refused() {
        assert_eq!(rate("0.9").apply(-1, Round::Down), None);
        assert_eq!(rate("1.0000001").apply(i64::MAX, Round::Down), None);
        assert_eq!(
            rate("1e9").apply(i64::MAX / 1_000_000_000 + 1, Round::Down),
            None
        );
        assert_eq!(
            rate("1e9").apply(i64::MAX / 1_000_000_000, Round::Down),
            Some(i64::MAX / 1_000_000_000 * 1_000_000_000)
        );
        // Up can overflow where Down does not: i64::MAX / 0.9999999999999999999 is
        // i64::MAX + 0.92...
        let just_over_one = rate("0.9999999999999999999").inverse();
        assert_eq!(
            just_over_one.apply(i64::MAX - 1, Round::Down),
            Some(i64::MAX - 1)
        );
        assert_eq!(just_over_one.apply(i64::MAX - 1, Round::Up), Some(i64::MAX));
        assert_eq!(just_over_one.apply(i64::MAX, Round::Down), Some(i64::MAX));
        assert_eq!(just_over_one.apply(i64::MAX, Round::Up), None);
    }

    #[test]
    fn rates_compare_by_value() {
        assert_eq!(rate("0.5"), Rate::from(Ratio { num: 2, den: 4 }));
        assert!(rate("0.9213") < rate("0.9214"));
        assert!(rate("1.0854").inverse() > rate("0.9213"));
        assert_eq!(rate("4").inverse(), rate("0.25"));
        assert_eq!(Rate::ONE.to_string(), "1/1");
        assert_eq!(rate("1.0854").to_string(), "5427/5000");
    }
}
