//! Notice URL query strings: percent decoding, `key=value` pairs, and decimal CPMs read exactly
//! (a win notice's `${AUCTION_PRICE}` arrives as text; going through a float could change it).

use crate::Price;

/// Parses a CPM written as a decimal (`1.23`, `0.5`, `7`, `.25`) into exact micros, without
/// going through a float: digits past the sixth decimal round half away from zero, like
/// [`Price::from_cpm`]. Exponent forms (`1e-6`, which serde_json may print for tiny prices)
/// fall back to [`Price::from_cpm`]. Negative, non-finite and out-of-range values are `None`.
pub fn parse_cpm(s: &str) -> Option<Price> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if !(int.is_empty() && frac.is_empty()) && digits(int) && digits(frac) {
        // 10 integer digits cover MAX_CPM (1e9); leading zeros are harmless.
        let int = int.trim_start_matches('0');
        if int.len() > 10 {
            return None;
        }
        let whole: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut micros = whole.checked_mul(Price::MICROS_PER_UNIT)?;
        let mut scale = Price::MICROS_PER_UNIT / 10;
        for (i, b) in frac.bytes().enumerate() {
            let d = i64::from(b - b'0');
            if i < 6 {
                micros += d * scale;
                scale /= 10;
            } else {
                // The seventh decimal decides: >= 5 rounds up (ties away from zero).
                if d >= 5 {
                    micros += 1;
                }
                break;
            }
        }
        let price = Price::from_micros(micros);
        return (price.as_cpm_f64() <= Price::MAX_CPM).then_some(price);
    }
    // Not a plain decimal: accept a float literal with an exponent only (no "inf", "NaN").
    if !s.bytes().any(|b| b == b'e' || b == b'E')
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b))
    {
        return None;
    }
    let cpm: f64 = s.parse().ok()?;
    if cpm < 0.0 {
        return None;
    }
    Price::from_cpm(cpm).ok()
}

/// Decodes `%XX` escapes and `+` (form encoding) in a query component. Invalid escapes are kept
/// literally; invalid UTF-8 is replaced.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|c| hex(*c)),
                bytes.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(if b == b'+' { b' ' } else { b });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes `%XX` escapes strictly, for a URL's path or userinfo: `None` unless every `%` is
/// followed by two hex digits and the decoded bytes are UTF-8 (an overlong form such as
/// `%c0%ae` is not). `+` stays `+`.
pub fn percent_decode_exact(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let h = hex(*bytes.get(i + 1)?)?;
            let l = hex(*bytes.get(i + 2)?)?;
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// `(key, value)` pairs of a query string, percent-decoded, in order (a caller that looks a
/// key up takes its first occurrence).
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_prices_are_exact() {
        for (s, micros) in [
            ("1.23", 1_230_000),
            ("0.5", 500_000),
            ("7", 7_000_000),
            ("7.", 7_000_000),
            (".25", 250_000),
            ("0.000001", 1),
            ("0.0000005", 1),
            ("0.0000004999", 0),
            ("123456.789012", 123_456_789_012),
            ("1e-6", 1),
            ("2.5E1", 25_000_000),
            ("0001.10", 1_100_000),
            ("1000000000", 1_000_000_000_000_000),
        ] {
            assert_eq!(parse_cpm(s).map(Price::micros), Some(micros), "{s}");
        }
        for s in [
            "",
            ".",
            "-1",
            "abc",
            "1.2.3",
            "NaN",
            "inf",
            "1,5",
            "${AUCTION_PRICE}",
            "1e400",
            "1000000001",
            "99999999999999999999",
            " 1",
        ] {
            assert_eq!(parse_cpm(s), None, "{s:?}");
        }
    }

    #[test]
    fn exact_percent_decoding_refuses_what_could_be_read_two_ways() {
        assert_eq!(
            percent_decode_exact("a%20b+c%C3%A9").as_deref(),
            Some("a b+cé")
        );
        for bad in ["%", "%4", "%zz", "%+1", "%-1", "%c0%ae", "%ff"] {
            assert_eq!(percent_decode_exact(bad), None, "{bad}");
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("%24%7BAUCTION_PRICE%7D"), "${AUCTION_PRICE}");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
