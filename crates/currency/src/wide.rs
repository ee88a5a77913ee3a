//! 256-bit products and quotients of `u128`s, for `amount × numerator / denominator` when the
//! product does not fit in 128 bits (a cross rate's numerator alone can take all 128). Exact:
//! the quotient comes with whether anything was left over, which is all rounding needs.

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
/// zero or the quotient does not fit in a `u128`.
pub(crate) fn div(hi: u128, lo: u128, d: u128) -> Option<(u128, bool)> {
    if d == 0 || hi >= d {
        return None;
    }
    if hi == 0 {
        return Some((lo / d, !lo.is_multiple_of(d)));
    }
    if d <= LOW {
        // Two schoolbook steps of 64 bits each; `hi < d < 2^64` keeps both dividends in range.
        let upper = (hi << 64) | (lo >> 64);
        let (q1, r1) = (upper / d, upper % d);
        let lower = (r1 << 64) | (lo & LOW);
        let (q0, r0) = (lower / d, lower % d);
        return Some(((q1 << 64) | q0, r0 != 0));
    }
    // Bit by bit, restoring: the remainder stays below `d`, and a bit shifted out of it
    // (possible when `d ≥ 2^127`) means it exceeds `d`, so the subtraction is due and wraps
    // back into range.
    let mut rem = hi;
    let mut quotient = 0u128;
    for bit in (0..128).rev() {
        let carry = rem >> 127;
        rem = (rem << 1) | ((lo >> bit) & 1);
        quotient <<= 1;
        if carry == 1 || rem >= d {
            rem = rem.wrapping_sub(d);
            quotient |= 1;
        }
    }
    Some((quotient, rem != 0))
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
        match div(hi, lo, d) {
            Some((q, inexact)) => {
                let below = mul(q, d);
                assert!(below <= (hi, lo), "q·d > n for d = {d}");
                assert_eq!(inexact, below != (hi, lo));
                let (bh, bl) = below;
                let (next_lo, carry) = bl.overflowing_add(d);
                let next = (bh + u128::from(carry), next_lo);
                assert!(next > (hi, lo), "(q+1)·d ≤ n for d = {d}");
            }
            None => assert!(d == 0 || hi >= d, "refused a quotient that fits"),
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
        assert_eq!(div(1, 0, 2), Some((1 << 127, false)));
        assert_eq!(div(1, 0, 1), None);
        assert_eq!(div(0, 1, 0), None);
        for (hi, lo, d) in [
            (u128::MAX - 1, u128::MAX, u128::MAX),
            (1 << 126, 0, (1 << 127) + 1),
            (5, 7, LOW),
            (LOW - 1, u128::MAX, LOW),
            (1, u128::MAX, 3),
            ((1 << 127) + 5, 17, u128::MAX - 3),
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
            // Products and divisors of every size: the 64-bit path, the bit-by-bit one, and
            // quotients that do not fit.
            let (hi, lo) = mul(x >> shift, y);
            check_div(hi, lo, d);
            check_div(hi, lo, d >> shift);
            check_div(hi, lo, (d >> shift).max(hi.saturating_add(1)));
        }
    }
}
