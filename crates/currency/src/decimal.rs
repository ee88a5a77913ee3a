//! A rate's decimal text (a JSON number, as written) to an exact fraction of two `u64`s,
//! without passing through a float.
//!
//! The value kept is the text's value rounded once, to nearest with ties up, at the coarser
//! of two positions: the 19th significant digit and the 19th digit after the point. Text
//! within both (every rate a JavaScript double prints between 0.01 and 1e9, every rate of
//! Prebid's currency file) is kept exactly. The rounded value must lie in
//! [`MIN_RATE`]`..=`[`MAX_RATE`]; it is then `m / 10^s` with `m < 2^64` and `s ≤ 19`, reduced
//! to lowest terms, so both terms fit in a `u64` and a product of two rates fits in a `u128`.

/// Digits kept, counted from the first non-zero one.
pub const SIGNIFICANT_DIGITS: u32 = 19;
/// Digits kept after the decimal point.
pub const FRACTION_DIGITS: u32 = 19;
/// Smallest rate accepted, as text: one unit buys at least a billionth of the other.
pub const MIN_RATE: &str = "0.000000001";
/// Largest rate accepted, as text.
pub const MAX_RATE: &str = "1000000000";

/// Decimal exponent of [`MIN_RATE`] and [`MAX_RATE`].
const RANGE_EXPONENT: u32 = 9;
/// Exponents beyond this are out of range for any text of up to a mebibyte of digits; capping
/// keeps the position arithmetic far from overflow.
const EXPONENT_CAP: i64 = 1 << 40;

/// Why a text is not a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    #[error("not a JSON number")]
    NotANumber,
    #[error("not above zero")]
    NotPositive,
    #[error("below the smallest rate accepted, {MIN_RATE}")]
    TooSmall,
    #[error("above the largest rate accepted, {MAX_RATE}")]
    TooLarge,
}

/// `text`, a JSON number, as `(numerator, denominator)` in lowest terms; see the module docs
/// for the rounding and the range.
pub(crate) fn parse(text: &str) -> Result<(u64, u64), RateError> {
    let number = Number::split(text.as_bytes()).ok_or(RateError::NotANumber)?;
    let digits = || {
        number
            .int
            .iter()
            .chain(number.frac.iter())
            .map(|d| d - b'0')
    };
    let Some(leading_zeros) = digits().position(|d| d != 0) else {
        return Err(RateError::NotPositive);
    };
    if number.negative {
        return Err(RateError::NotPositive);
    }
    // Position (power of ten) of the first non-zero digit; the int and frac slices are at
    // most a mebibyte, so these `as` conversions and sums stay far inside i64.
    let first = number.int.len() as i64 - 1 + number.exponent - leading_zeros as i64;
    if first > i64::from(RANGE_EXPONENT) {
        return Err(RateError::TooLarge);
    }
    // Below 1e-10 nothing rounds up to 1e-9; between, the exact check below decides.
    if first < -i64::from(RANGE_EXPONENT) - 1 {
        return Err(RateError::TooSmall);
    }
    let last = (first - i64::from(SIGNIFICANT_DIGITS) + 1).max(-i64::from(FRACTION_DIGITS));
    let kept = usize::try_from(first - last + 1).unwrap_or(0);
    let mut rest = digits().skip(leading_zeros);
    let mut mantissa = 0u64;
    for _ in 0..kept {
        // At most 19 digits: below 10^19, inside u64.
        mantissa = mantissa * 10 + u64::from(rest.next().unwrap_or(0));
    }
    if rest.next().is_some_and(|d| d >= 5) {
        // 10^19 at most, still inside u64 (1.8·10^19).
        mantissa += 1;
    }
    let mut scale = u32::try_from(-last).unwrap_or(0);
    while mantissa.is_multiple_of(10) && scale > 0 {
        mantissa /= 10;
        scale -= 1;
    }
    // m / 10^s within [10^-9, 10^9]: s ≤ 19, so every term fits in a u128.
    let (m, den) = (u128::from(mantissa), 10u128.pow(scale));
    if m * 10u128.pow(RANGE_EXPONENT) < den {
        return Err(RateError::TooSmall);
    }
    if m > den * 10u128.pow(RANGE_EXPONENT) {
        return Err(RateError::TooLarge);
    }
    // Lowest terms: 10^s = 2^s·5^s, so only factors 2 and 5 can be shared (no gcd loop of
    // divisions).
    let twos = mantissa.trailing_zeros().min(scale);
    mantissa >>= twos;
    let mut fives = 0;
    while fives < scale && mantissa.is_multiple_of(5) {
        mantissa /= 5;
        fives += 1;
    }
    let den = (1u64 << (scale - twos)) * 5u64.pow(scale - fives);
    Ok((mantissa, den))
}

/// A JSON number's parts: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
struct Number<'a> {
    negative: bool,
    int: &'a [u8],
    frac: &'a [u8],
    exponent: i64,
}

impl<'a> Number<'a> {
    fn split(text: &'a [u8]) -> Option<Number<'a>> {
        let (negative, text) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, text),
        };
        let (int, text) = take_digits(text);
        if int.is_empty() || (int.len() > 1 && int.first() == Some(&b'0')) {
            return None;
        }
        let (frac, text) = match text.split_first() {
            Some((b'.', rest)) => {
                let (frac, rest) = take_digits(rest);
                if frac.is_empty() {
                    return None;
                }
                (frac, rest)
            }
            _ => (&[][..], text),
        };
        let (exponent, text) = match text.split_first() {
            Some((b'e' | b'E', rest)) => {
                let (sign, rest) = match rest.split_first() {
                    Some((b'-', r)) => (-1, r),
                    Some((b'+', r)) => (1, r),
                    _ => (1, rest),
                };
                let (digits, rest) = take_digits(rest);
                if digits.is_empty() {
                    return None;
                }
                let magnitude = digits.iter().fold(0i64, |acc, d| {
                    (acc * 10 + i64::from(d - b'0')).min(EXPONENT_CAP)
                });
                (sign * magnitude, rest)
            }
            _ => (0, text),
        };
        text.is_empty().then_some(Number {
            negative,
            int,
            frac,
            exponent,
        })
    }
}

/// The leading ASCII digits of `text`, and what follows them.
fn take_digits(text: &[u8]) -> (&[u8], &[u8]) {
    let n = text.iter().take_while(|b| b.is_ascii_digit()).count();
    text.split_at(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_text_is_kept_exactly() {
        for (text, fraction) in [
            ("1", (1, 1)),
            ("0.9213", (9213, 10_000)),
            ("1.0854", (5427, 5000)),
            ("0.5", (1, 2)),
            ("2.50", (5, 2)),
            ("1e0", (1, 1)),
            ("9.213E-1", (9213, 10_000)),
            ("0.09213e1", (9213, 10_000)),
            ("18689.5123766983", (186_895_123_766_983, 10_000_000_000)),
            ("1000000000", (1_000_000_000, 1)),
            ("1e9", (1_000_000_000, 1)),
            ("0.000000001", (1, 1_000_000_000)),
            ("1e-9", (1, 1_000_000_000)),
            (
                "1.0854000000000001",
                (10_854_000_000_000_001, 10_000_000_000_000_000),
            ),
            // 19 significant digits at a rate above 1: all kept.
            (
                "123456789.0123456789",
                (1_234_567_890_123_456_789, 10_000_000_000),
            ),
            // 19 fractional digits below 1: all kept.
            (
                "0.0000535058982630431",
                (535_058_982_630_431, 10_000_000_000_000_000_000),
            ),
            ("-0e5", (0, 0)),
        ] {
            if fraction == (0, 0) {
                assert_eq!(parse(text), Err(RateError::NotPositive), "{text}");
            } else {
                assert_eq!(parse(text), Ok(fraction), "{text}");
            }
        }
    }

    #[test]
    fn digits_beyond_the_precision_round_to_nearest_ties_up() {
        for (text, fraction) in [
            // 20 significant digits above 1: the 20th rounds.
            ("1.0000000000000000004", (1, 1)),
            (
                "1.0000000000000000005",
                (1_000_000_000_000_000_001, 10u64.pow(18)),
            ),
            ("9.9999999999999999995", (10, 1)),
            // 20 fractional digits below 1: the 20th rounds.
            ("0.00000000100000000014", (10_000_000_001, 10u64.pow(19))),
            ("0.00000000100000000015", (5_000_000_001, 5 * 10u64.pow(18))),
            (
                "0.000053505898263043123",
                (535_058_982_630_431, 10u64.pow(19)),
            ),
            // Rounds up to the smallest rate accepted.
            ("0.00000000099999999995", (1, 10u64.pow(9))),
            // Rounds down onto the largest.
            ("1000000000.0000000004", (1_000_000_000, 1)),
        ] {
            assert_eq!(parse(text), Ok(fraction), "{text}");
        }
    }

    #[test]
    fn refusals_say_why() {
        use RateError::*;
        for (text, error) in [
            ("", NotANumber),
            ("abc", NotANumber),
            ("\"0.9\"", NotANumber),
            ("0.9 ", NotANumber),
            ("+0.9", NotANumber),
            ("01", NotANumber),
            (".9", NotANumber),
            ("9.", NotANumber),
            ("1e", NotANumber),
            ("1e+", NotANumber),
            ("0x10", NotANumber),
            ("NaN", NotANumber),
            ("Infinity", NotANumber),
            ("null", NotANumber),
            ("١", NotANumber),
            ("0", NotPositive),
            ("0.000", NotPositive),
            ("-1", NotPositive),
            ("-0.9213", NotPositive),
            ("0.0000000009", TooSmall),
            ("0.00000000099999999994", TooSmall),
            ("1e-10", TooSmall),
            ("1e-99999999999999999999999", TooSmall),
            ("1000000000.0000000005", TooLarge),
            ("1000000001", TooLarge),
            ("1e10", TooLarge),
            ("1e99999999999999999999999", TooLarge),
        ] {
            assert_eq!(parse(text), Err(error), "{text}");
        }
    }

    #[test]
    fn a_long_text_costs_time_not_memory() {
        let text = format!("1.{}", "0".repeat(1 << 20));
        assert_eq!(parse(&text), Ok((1, 1)));
        let text = format!("0.{}1", "0".repeat(1 << 20));
        assert_eq!(parse(&text), Err(RateError::TooSmall));
        let text = format!("{}e-1000000", "1".repeat(1_000_005));
        assert_eq!(
            parse(&text),
            Ok((1_111_111_111_111_111_111, 100_000_000_000_000))
        );
    }
}
