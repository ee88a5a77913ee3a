//! Win / billing / loss notice parsing: query strings, exact decimal prices, macro detection.

use openrtb::Price;

use crate::stats::{Notice, NoticeKind};

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

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// `(key, value)` pairs of a query string, percent-decoded; the first occurrence of a key wins
/// in [`param`].
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

fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Parses one notice. `bad` is set when any value still holds a `${` macro (raw or
/// percent-encoded), when a win or bill notice has no parsable `price`, or when a present
/// `price` or `loss` does not parse.
pub fn parse_notice(bidder: &str, kind: NoticeKind, query: &str) -> Notice {
    let pairs = query_pairs(query);
    let unreplaced = query.contains("${")
        || pairs
            .iter()
            .any(|(k, v)| k.contains("${") || v.contains("${"));
    let price_text = param(&pairs, "price");
    let price = price_text.and_then(parse_cpm);
    let loss_text = param(&pairs, "loss");
    let loss = loss_text.and_then(|l| l.trim().parse::<i32>().ok());
    let price_bad = match (price_text, price) {
        (Some(_), None) => true,
        (None, _) => kind != NoticeKind::Loss,
        (Some(_), Some(_)) => false,
    };
    let loss_bad = loss_text.is_some() && loss.is_none();
    let owned = |key| param(&pairs, key).map(str::to_owned);
    Notice {
        bidder: bidder.to_owned(),
        kind,
        query: query.to_owned(),
        price,
        bid_price: param(&pairs, "bid_price").and_then(parse_cpm),
        auction: owned("auction"),
        imp: owned("imp"),
        bid: owned("bid"),
        cur: owned("cur"),
        loss,
        bad: unreplaced || price_bad || loss_bad,
    }
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
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("%24%7BAUCTION_PRICE%7D"), "${AUCTION_PRICE}");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[test]
    fn notices() {
        let n = parse_notice(
            "b",
            NoticeKind::Win,
            "auction=a1&imp=1&bid=x&price=1.23&cur=USD",
        );
        assert!(!n.bad);
        assert_eq!(n.price, Some(Price::from_micros(1_230_000)));
        assert_eq!(n.auction.as_deref(), Some("a1"));

        assert!(parse_notice("b", NoticeKind::Win, "price=${AUCTION_PRICE}").bad);
        assert!(parse_notice("b", NoticeKind::Win, "price=1&auction=%24%7BAUCTION_ID%7D").bad);
        assert!(parse_notice("b", NoticeKind::Bill, "auction=1").bad);
        assert!(parse_notice("b", NoticeKind::Bill, "price=x").bad);
        assert!(!parse_notice("b", NoticeKind::Loss, "auction=1&loss=102").bad);
        assert!(parse_notice("b", NoticeKind::Loss, "loss=${AUCTION_LOSS}").bad);
        assert!(parse_notice("b", NoticeKind::Loss, "loss=x").bad);
        assert!(parse_notice("b", NoticeKind::Win, "").bad);
    }
}
