use super::*;

fn code(text: &str) -> Currency {
    Currency::parse(text).expect(text)
}

fn rate(text: &str) -> Rate {
    Rate::parse(text).expect(text)
}

/// The `i`th code of AAA, AAB, ... (17,576 of them).
fn nth_code(i: usize) -> String {
    let letter = |k: usize| char::from(b'A' + u8::try_from(k % 26).unwrap());
    [letter(i / 676), letter(i / 26), letter(i)]
        .iter()
        .collect()
}

const PREBID_EXAMPLE: &str = r#"{"dataAsOf":"2024-05-21","generatedAt":"2024-05-22T11:18:39.013Z",
    "conversions":{"USD":{"EUR":0.9213,"GBP":0.7862},"EUR":{"USD":1.0854}}}"#;

#[test]
fn the_prebid_file_reads_with_its_date_and_rates() {
    let rates = Rates::from_json(PREBID_EXAMPLE.as_bytes()).unwrap();
    assert_eq!(rates.as_of(), Some(1_716_376_719));
    assert_eq!(rates.currencies(), [code("EUR"), code("GBP"), code("USD")]);
    let (usd, eur, gbp) = (code("USD"), code("EUR"), code("GBP"));
    assert_eq!(rates.rate(usd, eur), Some(rate("0.9213")));
    // Listed both ways and 0.9213 × 1.0854 ≤ 1: each way keeps its own.
    assert_eq!(rates.rate(eur, usd), Some(rate("1.0854")));
    // Listed one way: the other is the exact inverse.
    assert_eq!(rates.rate(gbp, usd), Some(rate("0.7862").inverse()));
    // Not listed: through USD, the one currency with a rate to both.
    let cross = rate("1.0854").numerator() * rate("0.7862").numerator();
    let through = rates.rate(eur, gbp).unwrap();
    assert_eq!(through, rate("0.85334148"));
    assert_eq!(through.numerator(), cross);
    assert_eq!(
        rates.rate(gbp, eur),
        Some(rate("0.7862").inverse().times(rate("0.9213")))
    );
    assert_eq!(rates.rate(usd, usd), Some(Rate::ONE));
    assert_eq!(rates.rate(usd, code("JPY")), None);
    assert_eq!(rates.rate(code("JPY"), code("CHF")), None);
}

#[test]
fn as_of_is_generated_at_else_data_as_of_else_none() {
    let with = |fields: &str| {
        Rates::from_json(format!(r#"{{{fields}"conversions":{{}}}}"#).as_bytes()).map(|r| r.as_of())
    };
    assert_eq!(with(r#""dataAsOf":"2024-05-21","#), Ok(Some(1_716_249_600)));
    assert_eq!(
        with(r#""generatedAt":"2024-05-22T13:18:39+02:00","dataAsOf":"2024-05-21","#),
        Ok(Some(1_716_376_719))
    );
    assert_eq!(with(""), Ok(None));
    assert_eq!(
        with(r#""dataAsOf":"21/05/2024","#),
        Err(RatesError::BadDate {
            field: "dataAsOf",
            value: "21/05/2024".into()
        })
    );
    assert_eq!(
        with(r#""generatedAt":"2024-05-22","#).map_err(|e| e.label()),
        Err("bad_date")
    );
    let request = Rates::from_conversions_json(br#"{"USD":{"EUR":0.9}}"#).unwrap();
    assert_eq!(request.as_of(), None);
    assert_eq!(
        request.rate(code("EUR"), code("USD")),
        Some(rate("0.9").inverse())
    );
}

#[test]
fn a_pair_listed_both_ways_never_pays_on_the_way_back() {
    // 0.9 × 1.2 = 1.08 > 1: each way takes the inverse of the other, the lower.
    let rates = Rates::from_conversions_json(br#"{"USD":{"EUR":0.9},"EUR":{"USD":1.2}}"#).unwrap();
    let (usd, eur) = (code("USD"), code("EUR"));
    assert_eq!(rates.rate(usd, eur), Some(rate("1.2").inverse()));
    assert_eq!(rates.rate(eur, usd), Some(rate("0.9").inverse()));
    // Consistent within rounding (0.9 × 1.1 = 0.99): each keeps its own.
    let rates = Rates::from_conversions_json(br#"{"EUR":{"USD":1.1},"USD":{"EUR":0.9}}"#).unwrap();
    assert_eq!(rates.rate(usd, eur), Some(rate("0.9")));
    assert_eq!(rates.rate(eur, usd), Some(rate("1.1")));
}

#[test]
fn the_intermediate_is_the_first_shared_currency_alphabetically() {
    // AAA and ZZZ share BBB and CCC, with different cross rates; BBB is used both ways.
    let json = br#"{"AAA":{"CCC":3,"BBB":2},"ZZZ":{"CCC":5,"BBB":7}}"#;
    let rates = Rates::from_conversions_json(json).unwrap();
    let (a, z) = (code("AAA"), code("ZZZ"));
    assert_eq!(rates.rate(a, z), Some(rate("2").times(rate("7").inverse())));
    assert_eq!(rates.rate(z, a), Some(rate("7").times(rate("2").inverse())));
    // Only one hop: AAA -> BBB -> YYY -> XXX is not found.
    let json = br#"{"AAA":{"BBB":2},"BBB":{"YYY":3},"YYY":{"XXX":4}}"#;
    let rates = Rates::from_conversions_json(json).unwrap();
    assert!(rates.rate(code("AAA"), code("YYY")).is_some());
    assert_eq!(rates.rate(code("AAA"), code("XXX")), None);
}

#[test]
fn a_rate_to_itself_must_be_one_and_is_not_needed() {
    // Prebid's file lists "GBP": {"GBP": 1}.
    let rates = Rates::from_conversions_json(br#"{"GBP":{"GBP":1,"USD":1.27}}"#).unwrap();
    assert_eq!(rates.rate(code("GBP"), code("GBP")), Some(Rate::ONE));
    assert_eq!(
        rates.rate(code("USD"), code("GBP")),
        Some(rate("1.27").inverse())
    );
    let rates = Rates::from_conversions_json(br#"{"GBP":{"GBP":1.0}}"#).unwrap();
    assert!(rates.is_empty());
    assert_eq!(rates.currencies(), [code("GBP")]);
}

#[test]
fn refusals_name_what_is_wrong() {
    let (usd, eur) = (code("USD"), code("EUR"));
    for (json, error, words) in [
        (
            r#"{"usd":{"EUR":1}}"#,
            RatesError::BadCode {
                code: "usd".into(),
                within: None,
            },
            "\"usd\"",
        ),
        (
            r#"{"USD":{"EURO":1}}"#,
            RatesError::BadCode {
                code: "EURO".into(),
                within: Some(usd),
            },
            "\"EURO\" (a target of USD)",
        ),
        (
            r#"{"USD":{"EUR":1},"USD":{"GBP":1}}"#,
            RatesError::DuplicateSource { code: usd },
            "USD is listed twice",
        ),
        (
            r#"{"USD":{"EUR":0.9,"GBP":0.8,"EUR":0.9}}"#,
            RatesError::DuplicateRate { from: usd, to: eur },
            "USD -> EUR is listed twice",
        ),
        (
            r#"{"USD":{"EUR":0}}"#,
            RatesError::BadRate {
                from: usd,
                to: eur,
                problem: RateError::NotPositive,
            },
            "USD -> EUR is refused: not above zero",
        ),
        (
            r#"{"USD":{"EUR":"0.9"}}"#,
            RatesError::BadRate {
                from: usd,
                to: eur,
                problem: RateError::NotANumber,
            },
            "not a JSON number",
        ),
        (
            r#"{"USD":{"EUR":null}}"#,
            RatesError::BadRate {
                from: usd,
                to: eur,
                problem: RateError::NotANumber,
            },
            "USD -> EUR",
        ),
        (
            r#"{"USD":{"EUR":1e10}}"#,
            RatesError::BadRate {
                from: usd,
                to: eur,
                problem: RateError::TooLarge,
            },
            "above the largest rate accepted, 1000000000",
        ),
        (
            r#"{"USD":{"EUR":1e-10}}"#,
            RatesError::BadRate {
                from: usd,
                to: eur,
                problem: RateError::TooSmall,
            },
            "below the smallest rate accepted, 0.000000001",
        ),
        (
            r#"{"EUR":{"EUR":2}}"#,
            RatesError::SelfRate { code: eur },
            "EUR -> EUR must be 1",
        ),
    ] {
        let refused = Rates::from_conversions_json(json.as_bytes()).unwrap_err();
        assert_eq!(refused, error, "{json}");
        assert!(refused.to_string().contains(words), "{json}: {refused}");
        // The same content inside a currency file is refused the same way.
        let file = format!(r#"{{"conversions":{json}}}"#);
        assert_eq!(Rates::from_json(file.as_bytes()), Err(error), "{file}");
    }
}

#[test]
fn shape_errors_are_json_errors_with_a_bounded_message() {
    for json in [
        "",
        "[]",
        "{\"USD\":[]}",
        "{\"USD\":{\"EUR\":1}",
        "{\"USD\":{\"EUR\":1}} x",
        "{\"USD\":{\"EUR\":01}}",
    ] {
        let refused = Rates::from_conversions_json(json.as_bytes()).unwrap_err();
        assert_eq!(refused.label(), "json", "{json}: {refused}");
    }
    let long_string = format!("\"{}\"", "x".repeat(100_000));
    let refused = Rates::from_conversions_json(long_string.as_bytes()).unwrap_err();
    assert!(refused.to_string().len() < 300, "{refused}");
    assert_eq!(Rates::from_json(b"{}"), Err(RatesError::MissingConversions));
    assert_eq!(
        Rates::from_json(br#"{"conversions":{},"conversions":{}}"#),
        Err(RatesError::DuplicateField {
            field: "conversions"
        })
    );
}

#[test]
fn limits_hold_at_their_edges() {
    // One byte over the document limit, whitespace and all.
    let mut big = b"{}".to_vec();
    big.resize(MAX_DOCUMENT_BYTES, b' ');
    assert!(Rates::from_conversions_json(&big).is_ok());
    big.push(b' ');
    assert_eq!(
        Rates::from_conversions_json(&big),
        Err(RatesError::TooLarge {
            size: MAX_DOCUMENT_BYTES + 1,
            limit: MAX_DOCUMENT_BYTES
        })
    );
    // Currencies: targets count too.
    let table = |targets: usize| {
        let row: Vec<String> = (1..=targets)
            .map(|i| format!("\"{}\":1.5", nth_code(i)))
            .collect();
        format!(r#"{{"AAA":{{{}}}}}"#, row.join(","))
    };
    let full = Rates::from_conversions_json(table(MAX_CURRENCIES - 1).as_bytes()).unwrap();
    assert_eq!(full.currencies().len(), MAX_CURRENCIES);
    assert_eq!(
        Rates::from_conversions_json(table(MAX_CURRENCIES).as_bytes()),
        Err(RatesError::TooManyCurrencies {
            limit: MAX_CURRENCIES
        })
    );
    // Sources are capped while reading.
    let rows: Vec<String> = (0..=MAX_CURRENCIES)
        .map(|i| format!("\"{}\":{{}}", nth_code(i)))
        .collect();
    let json = format!("{{{}}}", rows.join(","));
    assert_eq!(
        Rates::from_conversions_json(json.as_bytes()),
        Err(RatesError::TooManyCurrencies {
            limit: MAX_CURRENCIES
        })
    );
    // Rates: a full matrix of 65 currencies lists 65 × 64 = 4160 rates.
    let matrix = |n: usize, skip: usize| {
        let mut rows = Vec::new();
        let mut listed = 0;
        for i in 0..n {
            let mut row = Vec::new();
            for j in (0..n).filter(|&j| j != i) {
                if listed == MAX_RATES + 1 - skip {
                    break;
                }
                row.push(format!(
                    "\"{}\":{}",
                    nth_code(j),
                    if i < j { "2" } else { "0.5" }
                ));
                listed += 1;
            }
            rows.push(format!("\"{}\":{{{}}}", nth_code(i), row.join(",")));
        }
        format!("{{{}}}", rows.join(","))
    };
    let at_limit = Rates::from_conversions_json(matrix(65, 1).as_bytes()).unwrap();
    assert_eq!(at_limit.rate(code("AAA"), code("AAB")), Some(rate("2")));
    assert_eq!(
        Rates::from_conversions_json(matrix(65, 0).as_bytes()),
        Err(RatesError::TooManyRates { limit: MAX_RATES })
    );
}

/// A realistic currency file (`testdata/README.md`): thirty-one currencies, rows for USD, EUR
/// and GBP as Prebid's file has them, each with its rate to itself.
pub(crate) const CURRENCY_FILE: &[u8] = include_bytes!("../../testdata/currency-file.json");

#[test]
fn a_realistic_file_converts_every_pair_of_its_currencies() {
    let rates = Rates::from_json(CURRENCY_FILE).unwrap();
    assert_eq!(rates.currencies().len(), 31);
    assert_eq!(rates.as_of(), Some(1_716_376_719));
    assert_eq!(rates.rate(code("USD"), code("JPY")), Some(rate("156.238")));
    for &from in rates.currencies() {
        for &to in rates.currencies() {
            let there = rates.rate(from, to).expect("every pair converts");
            let back = rates.rate(to, from).expect("and back");
            assert!(there.product_at_most_one(back), "{from} -> {to} -> {from}");
        }
    }
}
