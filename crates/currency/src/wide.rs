//! 256-bit products of `u128`s and their quotients, for `amount × numerator / denominator`
//! when the product does not fit in 128 bits (a cross rate's numerator alone can take all
//! 128). Only quotients that fit in 64 bits are worked out, the only ones money in micros
//! can use. Exact: the quotient comes with whether anything was left over, which is all
//! rounding needs.

const LOW: u128 = u64::MAX as u128;

/// `x × y` as its high and low 128-bit halves. Never overflows: the product of two `u128`s
/// fits in 256 bits.
pub(crate) fn mul(x: u128, y: u128) -> (u128, u128) {
    let (x1, x0) = (x >> 64, x & LOW);
    let (y1, y0) = (y >> 64, y & LOW);
    // Each partial product of two 64-bit halves fits in 128 bits.
    let low = x0 * y0;
    let (middle, carry_a) = (x0 * y1).overflowing_add(x1 * y0);
    let (middle, carry_b) = middle.overflowing_add(low >> 64);
    let carries = (u128::from(carry_a) + u128::from(carry_b)) << 64;
    let lo = (middle << 64) | (low & LOW);
    let hi = x1 * y1 + (middle >> 64) + carries;
    (hi, lo)
}

/// `(hi·2^128 + lo) / d`, rounded down, and whether a remainder was left; `None` when `d` is
/// zero or the quotient does not fit in a `u64` (money in micros fits in an `i64`, so a larger
/// quotient is an overflow whatever its value).
pub(crate) fn div(hi: u128, lo: u128, d: u128) -> Option<(u64, bool)> {
    // The quotient fits in 64 bits exactly when n < d·2^64, that is when n >> 64 < d.
    if d == 0 || hi > LOW {
        return None;
    }
    let upper = (hi << 64) | (lo >> 64);
    if upper >= d {
        return None;
    }
    // Remainders are taken as `n - q·d` (a multiplication) rather than `n % d`: a second
    // 128-bit division costs more than the rest of a conversion.
    let (quotient, inexact) = if let (Ok(n), Ok(d)) = (u64::try_from(lo), u64::try_from(d))
        && hi == 0
    {
        // The common case, a bid times a listed rate: one machine division.
        let q = n / d;
        (u128::from(q), n - q * d != 0)
    } else if hi == 0 {
        let q = lo / d;
        (q, lo - q * d != 0)
    } else if d <= LOW {
        // One schoolbook step of 64 bits: `upper < d ≤ 2^64 - 1` keeps the dividend in range.
        let lower = (upper << 64) | (lo & LOW);
        let q = lower / d;
        (q, lower - q * d != 0)
    } else {
        // Bit by bit over the low 64 bits, restoring: the remainder stays below `d`, and a
        // bit shifted out of it (possible when `d ≥ 2^127`) means it exceeds `d`, so the
        // subtraction is due and wraps back into range.
        let mut rem = upper;
        let mut q = 0u128;
        for bit in (0..64).rev() {
            let carry = rem >> 127;
            rem = (rem << 1) | ((lo >> bit) & 1);
            q <<= 1;
            if carry == 1 || rem >= d {
                rem = rem.wrapping_sub(d);
                q |= 1;
            }
        }
        (q, rem != 0)
    };
    u64::try_from(quotient).ok().map(|q| (q, inexact))
}

/// Compares `a × b` with `c × d` exactly.
pub(crate) fn cmp_products(a: u128, b: u128, c: u128, d: u128) -> std::cmp::Ordering {
    mul(a, b).cmp(&mul(c, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `(hi·2^128 + lo) mod p`, computed one 32-bit piece at a time (never the product).
    fn residue(hi: u128, lo: u128, p: u128) -> u128 {
        let mut r = 0u128;
        for word in [hi, lo] {
            for shift in (0..4).rev() {
                r = ((r << 32) | ((word >> (shift * 32)) & 0xffff_ffff)) % p;
            }
        }
        r
    }

    const PRIMES: [u128; 3] = [4_294_967_291, 2_147_483_647, 1_000_000_007];

    /// The product checked without the code under test: its low half by wrapping
    /// multiplication, the whole by residues modulo three primes (a wrong high half would
    /// have to agree with the truth modulo all three, about 2^93 apart).
    fn check_mul(x: u128, y: u128) {
        let (hi, lo) = mul(x, y);
        assert_eq!(lo, x.wrapping_mul(y));
        for p in PRIMES {
            assert_eq!(
                residue(hi, lo, p),
                (x % p) * (y % p) % p,
                "{x} × {y} mod {p}"
            );
        }
    }

    /// A quotient is right when `q·d ≤ n < (q+1)·d`, with the remainder flag meaning `q·d < n`;
    /// checked with `mul` (itself checked above), not with `div`.
    fn check_div(hi: u128, lo: u128, d: u128) {
        let fits = d != 0 && mul(d, 1 << 64) > (hi, lo);
        match div(hi, lo, d) {
            Some((q, inexact)) => {
                assert!(fits);
                let below = mul(u128::from(q), d);
                assert!(below <= (hi, lo), "q·d > n for d = {d}");
                assert_eq!(inexact, below != (hi, lo));
                let next = mul(u128::from(q) + 1, d);
                assert!(next > (hi, lo), "(q+1)·d ≤ n for d = {d}");
            }
            None => assert!(!fits, "refused a quotient that fits in 64 bits, d = {d}"),
        }
    }

    #[test]
    fn products_at_the_edges() {
        for (x, y) in [
            (0, u128::MAX),
            (1, u128::MAX),
            (u128::MAX, u128::MAX),
            (u128::MAX, 2),
            (1 << 64, 1 << 64),
            (LOW, LOW),
            (LOW + 1, LOW),
        ] {
            check_mul(x, y);
        }
        assert_eq!(mul(1 << 64, 1 << 64), (1, 0));
        assert_eq!(mul(u128::MAX, u128::MAX), (u128::MAX - 1, 1));
    }

    #[test]
    fn quotients_at_the_edges() {
        assert_eq!(div(0, 10, 3), Some((3, true)));
        assert_eq!(div(0, 9, 3), Some((3, false)));
        assert_eq!(div(0, u128::from(u64::MAX), 1), Some((u64::MAX, false)));
        assert_eq!(div(0, 1 << 64, 1), None);
        assert_eq!(div(1, 0, 1 << 64), None);
        assert_eq!(div(1, 0, (1 << 64) + 1), Some((u64::MAX, true)));
        assert_eq!(div(0, 1, 0), None);
        for (hi, lo, d) in [
            (LOW, u128::MAX, u128::MAX),
            (LOW - 1, 0, u128::MAX),
            (1 << 62, 0, (1 << 127) + 1),
            (1 << 63, 0, 1 << 127),
            (5, 7, LOW),
            (LOW - 1, u128::MAX, LOW),
            (1, u128::MAX, 3),
            (2, 17, u128::MAX - 3),
            (LOW + 1, 0, u128::MAX),
        ] {
            check_div(hi, lo, d);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5_1de),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn mul_is_the_product(x in any::<u128>(), y in any::<u128>(), shift in 0u32..128) {
            check_mul(x, y);
            check_mul(x >> shift, y);
        }

        #[test]
        fn div_is_the_quotient(x in any::<u128>(), y in any::<u128>(), d in any::<u128>(), shift in 0u32..128) {
            // Products and divisors of every size: the 128-bit, 64-bit step and bit-by-bit
            // paths, and quotients that do not fit.
            let (hi, lo) = mul(x >> shift, y);
            check_div(hi, lo, d);
            check_div(hi, lo, d >> shift);
            let upper = (hi << 64) | (lo >> 64);
            check_div(hi, lo, (d >> shift).max(upper.saturating_add(1)));
            check_div(hi, lo, upper.saturating_add(d >> shift));
        }

        #[test]
        fn exact_multiples_divide_exactly(q in any::<u64>(), d in any::<u128>(), shift in 0u32..128) {
            // Remainders equal to the divisor mid-way: rare among random dividends, certain in
            // a multiple.
            let d = (d >> shift).max(1);
            let (hi, lo) = mul(u128::from(q), d);
            prop_assert_eq!(div(hi, lo, d), Some((q, false)));
            let (lo_less, borrow) = lo.overflowing_sub(1);
            if q > 0 {
                check_div(hi - u128::from(borrow), lo_less, d);
            }
        }
    }
}
