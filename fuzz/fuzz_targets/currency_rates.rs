//! Any bytes, as a currency file (`currency::Rates::from_json`) and as a request's own rates
//! (`Rates::from_conversions_json`): neither panics; a refusal has a message and a label; an
//! accepted table names at most `MAX_CURRENCIES` currencies, sorted and unique, and converts
//! amounts of every size between any two of its first eight currencies without panicking:
//! - a pair converts one way exactly when it converts the other;
//! - `Up` is `Down` or one micro more, and fails alone only when `Down` is `i64::MAX`;
//! - a round trip rounded down never gains (and the way back never overflows);
//! - the same currency gives the amount back.
//!
//! The input's conversions, wrapped as `{"conversions": ...}`, also load as a file to the same
//! table (without a date).
#![no_main]

use currency::{
    ConvertError, Converter, Currency, MAX_CURRENCIES, MAX_DOCUMENT_BYTES, Rates, Round,
};
use libfuzzer_sys::fuzz_target;

/// Currencies of one table checked pairwise (64 pairs: bounded work per input).
const CHECKED_CURRENCIES: usize = 8;
const AMOUNTS: [i64; 8] = [
    0,
    1,
    999_999,
    1_000_000,
    123_456_789,
    1_000_000_000_000,
    i64::MAX / 3,
    i64::MAX,
];

fuzz_target!(|data: &[u8]| {
    // One more amount from the input itself.
    let tail: [u8; 8] = data
        .get(data.len().saturating_sub(8)..)
        .and_then(|t| t.try_into().ok())
        .unwrap_or([0; 8]);
    let extra = i64::from_le_bytes(tail).unsigned_abs() >> 1;
    let extra = i64::try_from(extra).unwrap_or(0);

    let file = Rates::from_json(data);
    let request = Rates::from_conversions_json(data);
    for outcome in [&file, &request] {
        match outcome {
            Ok(rates) => check(rates, extra),
            Err(e) => {
                assert!(!e.to_string().is_empty());
                assert!(!e.label().is_empty());
            }
        }
    }
    if let Ok(request) = &request {
        assert_eq!(request.as_of(), None);
        if data.len() + 32 <= MAX_DOCUMENT_BYTES {
            let mut wrapped = b"{\"conversions\":".to_vec();
            wrapped.extend_from_slice(data);
            wrapped.push(b'}');
            let as_file = Rates::from_json(&wrapped).expect("the same conversions as a file");
            assert_eq!(&as_file, request);
        }
    }
});

fn check(rates: &Rates, extra: i64) {
    let codes = rates.currencies();
    assert!(codes.len() <= MAX_CURRENCIES);
    assert!(
        codes.windows(2).all(|w| w.first() < w.last()),
        "sorted and unique"
    );
    let tables = [rates];
    let converter = Converter::new(&tables);
    let checked = codes.get(..CHECKED_CURRENCIES).unwrap_or(codes);
    for &from in checked {
        for &to in checked {
            assert_eq!(
                converter.rate(from, to).is_some(),
                converter.rate(to, from).is_some(),
                "{from} <-> {to}"
            );
            for x in AMOUNTS.into_iter().chain([extra]) {
                check_amount(&converter, x, from, to);
            }
        }
    }
}

fn check_amount(converter: &Converter<'_>, x: i64, from: Currency, to: Currency) {
    let down = converter.convert(x, from, to, Round::Down);
    let up = converter.convert(x, from, to, Round::Up);
    if from == to {
        assert_eq!((down, up), (Ok(x), Ok(x)));
        return;
    }
    match (down, up) {
        (Ok(down), Ok(up)) => {
            assert!(
                up == down || up == down + 1,
                "{x} {from}->{to}: down {down}, up {up}"
            );
            let back = converter.convert(down, to, from, Round::Down);
            assert!(
                matches!(back, Ok(b) if b <= x),
                "{x} {from} -> {down} {to} -> {back:?} {from}"
            );
        }
        (Ok(down), Err(ConvertError::Overflow { .. })) => assert_eq!(down, i64::MAX),
        (Err(ConvertError::Overflow { .. }), Err(ConvertError::Overflow { .. })) => {}
        (Err(ConvertError::NoRate { .. }), Err(ConvertError::NoRate { .. })) => {
            assert!(converter.rate(from, to).is_none());
        }
        other => panic!("{x} {from} -> {to}: {other:?}"),
    }
}
