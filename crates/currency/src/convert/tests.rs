use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::wide;

fn code(text: &str) -> Currency {
    Currency::parse(text).expect(text)
}

fn table(json: &str) -> Rates {
    Rates::from_conversions_json(json.as_bytes()).expect(json)
}

#[test]
fn exact_values() {
    let file = table(r#"{"USD":{"EUR":0.9213,"GBP":0.7862,"JPY":156.238},"EUR":{"USD":1.0854}}"#);
    let tables = [&file];
    let converter = Converter::new(&tables);
    let (usd, eur, gbp, jpy) = (code("USD"), code("EUR"), code("GBP"), code("JPY"));
    // (amount, from, to, down, up)
    for (micros, from, to, down, up) in [
        // 1.000000 USD at 0.9213 is 0.921300 EUR, exactly.
        (1_000_000, usd, eur, 921_300, 921_300),
        (2_500_000, usd, eur, 2_303_250, 2_303_250),
        // 0.000001 USD is 0.0000009213 EUR: nothing rounding down, one micro up.
        (1, usd, eur, 0, 1),
        // 0.000001 EUR at EUR's own listing 1.0854 is 0.0000010854 USD.
        (1, eur, usd, 1, 2),
        (1_000_000, eur, usd, 1_085_400, 1_085_400),
        // The inverse: 1 GBP = 1 / 0.7862 USD = 1.27194098...
        (1_000_000, gbp, usd, 1_271_940, 1_271_941),
        (3_931, gbp, usd, 5_000, 5_000),
        // Through USD: 1 EUR = 1.0854 × 156.238 JPY = 169.5807252.
        (1_000_000, eur, jpy, 169_580_725, 169_580_726),
        (10_000_000, eur, jpy, 1_695_807_252, 1_695_807_252),
        // Same currency: unchanged.
        (1_234_567, jpy, jpy, 1_234_567, 1_234_567),
        (0, usd, jpy, 0, 0),
        (i64::MAX, usd, usd, i64::MAX, i64::MAX),
    ] {
        let got = |round| converter.convert(micros, from, to, round);
        assert_eq!(got(Round::Down), Ok(down), "{micros} {from} -> {to} down");
        assert_eq!(got(Round::Up), Ok(up), "{micros} {from} -> {to} up");
    }
}

#[test]
fn failures_are_typed() {
    let file = table(r#"{"USD":{"JPY":156.238}}"#);
    let tables = [&file];
    let converter = Converter::new(&tables);
    let (usd, jpy, chf) = (code("USD"), code("JPY"), code("CHF"));
    assert_eq!(
        converter.convert(1, usd, chf, Round::Down),
        Err(ConvertError::NoRate { from: usd, to: chf })
    );
    assert_eq!(
        converter.convert(-1, usd, usd, Round::Down),
        Err(ConvertError::Negative { micros: -1 })
    );
    assert_eq!(
        converter.convert(i64::MAX / 100, usd, jpy, Round::Down),
        Err(ConvertError::Overflow {
            micros: i64::MAX / 100,
            from: usd,
            to: jpy
        })
    );
    // Just below the edge: the largest amount whose conversion fits.
    let largest = i64::try_from(i128::from(i64::MAX) * 1000 / 156_238).unwrap();
    assert!(converter.convert(largest, usd, jpy, Round::Down).is_ok());
    assert!(
        converter
            .convert(largest + 1, usd, jpy, Round::Down)
            .is_err()
    );
    let message = converter
        .convert(1, usd, chf, Round::Up)
        .unwrap_err()
        .to_string();
    assert_eq!(message, "no exchange rate from USD to CHF");
    assert_eq!(
        Converter::new(&[]).convert(5, usd, usd, Round::Up),
        Ok(5),
        "the same currency needs no table"
    );
}

#[test]
fn the_first_table_that_can_convert_a_pair_wins() {
    let request = table(r#"{"USD":{"EUR":0.95}}"#);
    let file = table(r#"{"USD":{"EUR":0.9213,"GBP":0.7862}}"#);
    let tables = [&request, &file];
    let converter = Converter::new(&tables);
    let (usd, eur, gbp) = (code("USD"), code("EUR"), code("GBP"));
    assert_eq!(
        converter.convert(1_000_000, usd, eur, Round::Down),
        Ok(950_000)
    );
    assert_eq!(
        converter.convert(950_000, eur, usd, Round::Down),
        Ok(1_000_000)
    );
    // The request has no GBP: the file converts, its own EUR rate included (no mixing).
    assert_eq!(converter.rate(eur, gbp), file.rate(eur, gbp));
    let only_file = [&file];
    assert_eq!(
        Converter::new(&only_file).convert(1_000_000, usd, eur, Round::Down),
        Ok(921_300)
    );
}

#[test]
fn inconsistent_listings_cannot_be_exploited() {
    // 0.9 one way, 1.2 back: a naive converter turns 1 USD into 0.9 EUR into 1.08 USD. Here
    // each way takes the inverse of the other (1/1.2, 1/0.9), and a round trip pays the
    // spread instead: 1/1.08 of the amount comes back.
    let greedy = table(r#"{"USD":{"EUR":0.9},"EUR":{"USD":1.2}}"#);
    let tables = [&greedy];
    let converter = Converter::new(&tables);
    let (usd, eur) = (code("USD"), code("EUR"));
    let there = converter.convert(1_000_000, usd, eur, Round::Down).unwrap();
    let back = converter.convert(there, eur, usd, Round::Down).unwrap();
    assert_eq!((there, back), (833_333, 925_925));
    let there = converter.convert(1_000_000, eur, usd, Round::Down).unwrap();
    let back = converter.convert(there, usd, eur, Round::Down).unwrap();
    assert_eq!((there, back), (1_111_111, 925_925));
}

/// Six currencies, so that random tables have direct, inverse and cross pairs, and pairs
/// with no rate.
const CODES: [&str; 6] = ["AUD", "CHF", "EUR", "GBP", "JPY", "USD"];

/// A rate's text, `m × 10^-s` within 1e-9..=1e9, written plainly or with an exponent.
fn rate_text() -> impl Strategy<Value = String> {
    (0u32..=18, any::<u64>(), any::<bool>()).prop_map(|(s, seed, plain)| {
        // m in [10^(s-9), 10^(s+9)], capped to 19 digits.
        let low = 10u64.pow(s.saturating_sub(9));
        let high = 10u64
            .checked_pow(s + 9)
            .unwrap_or(u64::MAX)
            .min(9_999_999_999_999_999_999);
        let m = low + seed % (high - low + 1);
        if plain {
            let digits = format!("{m:0>width$}", width = s as usize + 1);
            let (int, frac) = digits.split_at(digits.len() - s as usize);
            if frac.is_empty() {
                int.to_string()
            } else {
                format!("{int}.{frac}")
            }
        } else {
            format!("{m}e-{s}")
        }
    })
}

/// A table's JSON: up to twelve listed pairs over [`CODES`], both directions of a pair
/// possibly listed with unrelated rates.
fn table_json() -> impl Strategy<Value = String> {
    prop::collection::vec((0..CODES.len(), 0..CODES.len(), rate_text()), 0..12).prop_map(
        |entries| {
            let mut rows: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
            for (from, to, text) in entries {
                if from != to {
                    rows.entry(CODES[from])
                        .or_default()
                        .entry(CODES[to])
                        .or_insert(text);
                }
            }
            let rows: Vec<String> = rows
                .iter()
                .map(|(from, row)| {
                    let cells: Vec<String> =
                        row.iter().map(|(to, t)| format!("\"{to}\":{t}")).collect();
                    format!("\"{from}\":{{{}}}", cells.join(","))
                })
                .collect();
            format!("{{{}}}", rows.join(","))
        },
    )
}

/// Amounts of every size: micros of a cheap CPM up to the edge of i64.
fn amount() -> impl Strategy<Value = i64> {
    prop_oneof![
        0i64..1_000,
        0i64..100_000_000,
        0i64..=i64::MAX,
        Just(i64::MAX)
    ]
}

fn currency() -> impl Strategy<Value = Currency> {
    (0..CODES.len()).prop_map(|i| code(CODES[i]))
}

/// `y` is `x × rate` rounded as told: `y·d ≤ x·n < (y+1)·d` for Down, `(y-1)·d < x·n ≤ y·d`
/// for Up (checked by multiplication only).
fn is_rounded(x: i64, rate: Rate, y: i64, round: Round) -> bool {
    let (x, y) = (u128::try_from(x).unwrap(), u128::try_from(y).unwrap());
    let (n, d) = (rate.numerator(), rate.denominator());
    let exact = wide::mul(x, n);
    match round {
        Round::Down => wide::mul(y, d) <= exact && exact < wide::mul(y + 1, d),
        Round::Up => exact <= wide::mul(y, d) && (y == 0 || wide::mul(y - 1, d) < exact),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1_000,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x00c0_ffee),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_round_trip_never_gains(
        first in table_json(),
        second in table_json(),
        from in currency(),
        to in currency(),
        x in amount(),
    ) {
        let (first, second) = (table(&first), table(&second));
        for tables in [&[&first][..], &[&first, &second][..]] {
            let converter = Converter::new(tables);
            prop_assert_eq!(converter.rate(from, to).is_some(), converter.rate(to, from).is_some());
            let Ok(there) = converter.convert(x, from, to, Round::Down) else { continue };
            let back = converter.convert(there, to, from, Round::Down);
            prop_assert!(matches!(back, Ok(b) if b <= x), "{x} -> {there} -> {back:?}");
            if let (Some(a), Some(b)) = (converter.rate(from, to), converter.rate(to, from)) {
                prop_assert!(a.product_at_most_one(b));
            }
        }
    }

    #[test]
    fn up_and_down_are_the_exact_product_rounded(
        json in table_json(),
        from in currency(),
        to in currency(),
        x in amount(),
    ) {
        let rates = table(&json);
        let tables = [&rates];
        let converter = Converter::new(&tables);
        let Some(rate) = converter.rate(from, to) else {
            prop_assert!(from != to);
            prop_assert_eq!(converter.convert(x, from, to, Round::Down), Err(ConvertError::NoRate { from, to }));
            return Ok(());
        };
        let down = converter.convert(x, from, to, Round::Down);
        let up = converter.convert(x, from, to, Round::Up);
        match (down, up) {
            (Ok(down), Ok(up)) => {
                prop_assert!(is_rounded(x, rate, down, Round::Down));
                prop_assert!(is_rounded(x, rate, up, Round::Up));
                prop_assert!(up == down || up == down + 1, "{down} {up}");
            }
            // Up can only fail where Down lands on the very last micro.
            (Ok(down), Err(ConvertError::Overflow { .. })) => prop_assert_eq!(down, i64::MAX),
            (Err(ConvertError::Overflow { .. }), Err(ConvertError::Overflow { .. })) => {}
            other => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn conversion_is_monotonic_and_the_same_currency_is_identity(
        json in table_json(),
        from in currency(),
        to in currency(),
        x in amount(),
        y in amount(),
    ) {
        let rates = table(&json);
        let tables = [&rates];
        let converter = Converter::new(&tables);
        let (low, high) = (x.min(y), x.max(y));
        for round in [Round::Down, Round::Up] {
            prop_assert_eq!(converter.convert(x, from, from, round), Ok(x));
            if let (Ok(a), Ok(b)) = (
                converter.convert(low, from, to, round),
                converter.convert(high, from, to, round),
            ) {
                prop_assert!(a <= b, "{low} -> {a}, {high} -> {b}");
            }
            // A larger amount fails only by overflow, where a smaller one might not.
            if converter.convert(low, from, to, round) == Err(ConvertError::Overflow { micros: low, from, to }) {
                prop_assert!(converter.convert(high, from, to, round).is_err());
            }
        }
    }
}

#[test]
fn random_tables_reach_direct_inverse_and_cross_rates() {
    // The property tests above are only as good as the pairs they meet: count the kinds.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let mut runner = TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(0x00c0_ffee),
        ..Config::default()
    });
    let (mut direct, mut inverse, mut cross, mut none) = (0, 0, 0, 0);
    for _ in 0..200 {
        let json = table_json().new_tree(&mut runner).unwrap().current();
        let listed: serde_json::Value = serde_json::from_str(&json).unwrap();
        let rates = table(&json);
        for from in CODES {
            for to in CODES.iter().filter(|&&to| to != from) {
                let is_listed = |a: &str, b: &str| listed.get(a).and_then(|r| r.get(b)).is_some();
                match (
                    rates.rate(code(from), code(to)),
                    is_listed(from, to),
                    is_listed(to, from),
                ) {
                    (None, ..) => none += 1,
                    (Some(_), true, _) => direct += 1,
                    (Some(_), false, true) => inverse += 1,
                    (Some(_), false, false) => cross += 1,
                }
            }
        }
    }
    assert!(
        direct > 500 && inverse > 500 && cross > 500 && none > 500,
        "{direct} {inverse} {cross} {none}"
    );
}
