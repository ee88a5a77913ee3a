//! Substitution macros of OpenRTB 2.6 section 4.4, as found in `nurl`, `burl`, `lurl` and `adm`.
//!
//! [`substitute`] replaces every known `${NAME}` and `${NAME:B64}` in one left-to-right pass and
//! returns the template itself (borrowed, no allocation) when there is nothing to replace.
//!
//! Rules, following the spec:
//! - The replacement is plain text, inserted "without regard for syntax correctness": values are
//!   not URL- or HTML-escaped.
//! - A macro whose value is not available (a `None`, or an empty string) is removed, i.e.
//!   replaced by the empty string (4.4: an unspecified optional value "will simply be removed").
//!   `${AUCTION_MIN_TO_WIN}` follows the same rule (4.4.1: empty when the exchange does not
//!   disclose it).
//! - The output is never re-scanned: a value containing `${AUCTION_PRICE}`, or text that only
//!   spells a macro once a neighbouring macro has been removed, stays as it is.
//! - Anything else in `${...}` is left untouched, including other encodings such as
//!   `${AUCTION_PRICE:OXCRYPT}` and `${AUCTION_MULTIPLIER}`, for which [`MacroValues`] has no
//!   field.
//! - `${AUCTION_PRICE}` is [`MacroValues::price_token`] when one is given (an authenticated
//!   price for a bidder that holds a key), else the price.
//! - Prices print through [`Price`]'s `Display`: the exact decimal CPM, no exponent, no
//!   trailing zeros (`2.5`, `0.000001`). `${AUCTION_MBR}` prints the shortest decimal that reads
//!   back as the same `f64` (Rust's `Display`, never an exponent); a non-finite ratio is
//!   treated as unavailable. `${AUCTION_LOSS}` is the integer code, `${AUCTION_IMP_TS}` integer
//!   Unix milliseconds.
//!
//! `:B64` suffix: the spec (4.4) leaves encodings to the parties and gives Base64 under the code
//! `B64` only as an example, without fixing the alphabet. Gavel uses the URL- and filename-safe
//! alphabet of RFC 4648 section 5 (`-` and `_`) without `=` padding, because the result lands
//! unescaped in URLs, where `+`, `/` and `=` would change meaning. The bytes encoded are the
//! UTF-8 text the plain macro would produce (so `${AUCTION_PRICE:B64}` at 1.25 is `MS4yNQ`); an
//! unavailable value encodes to the empty string.

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::codes::LossReason;
use crate::price::Price;

/// Values for the auction macros of one bid. Empty strings and `None` mean "not available"
/// (the macro is removed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MacroValues<'a> {
    /// `${AUCTION_ID}`: `BidRequest.id`.
    pub auction_id: &'a str,
    /// `${AUCTION_BID_ID}`: `BidResponse.bidid`.
    pub bid_id: &'a str,
    /// `${AUCTION_IMP_ID}`: `Imp.id` of the impression won.
    pub imp_id: &'a str,
    /// `${AUCTION_SEAT_ID}`: `SeatBid.seat`.
    pub seat_id: &'a str,
    /// `${AUCTION_AD_ID}`: `Bid.adid`.
    pub ad_id: &'a str,
    /// `${AUCTION_PRICE}`: clearing price, CPM in the bid's currency.
    pub price: Option<Price>,
    /// When set, `${AUCTION_PRICE}` is this text instead of `price`: the authenticated price
    /// token of a bidder that shares a key with the exchange (the `price_token` crate).
    pub price_token: Option<&'a str>,
    /// `${AUCTION_CURRENCY}`: the bid's currency.
    pub currency: &'a str,
    /// `${AUCTION_MBR}`: market bid ratio, clearing price / bid price.
    pub mbr: Option<f64>,
    /// `${AUCTION_LOSS}`: loss reason code.
    pub loss: Option<LossReason>,
    /// `${AUCTION_MIN_TO_WIN}`: minimum bid that would have won (or tied), CPM.
    pub min_to_win: Option<Price>,
    /// `${AUCTION_IMP_TS}`: impression time, Unix milliseconds.
    pub imp_ts_ms: Option<i64>,
}

#[derive(Clone, Copy)]
enum Macro {
    AuctionId,
    BidId,
    ImpId,
    SeatId,
    AdId,
    Price,
    Currency,
    Mbr,
    Loss,
    MinToWin,
    ImpTs,
}

impl Macro {
    fn from_name(name: &str) -> Option<Macro> {
        Some(match name {
            "AUCTION_ID" => Macro::AuctionId,
            "AUCTION_BID_ID" => Macro::BidId,
            "AUCTION_IMP_ID" => Macro::ImpId,
            "AUCTION_SEAT_ID" => Macro::SeatId,
            "AUCTION_AD_ID" => Macro::AdId,
            "AUCTION_PRICE" => Macro::Price,
            "AUCTION_CURRENCY" => Macro::Currency,
            "AUCTION_MBR" => Macro::Mbr,
            "AUCTION_LOSS" => Macro::Loss,
            "AUCTION_MIN_TO_WIN" => Macro::MinToWin,
            "AUCTION_IMP_TS" => Macro::ImpTs,
            _ => return None,
        })
    }
}

/// Suffix selecting Base64 (RFC 4648 section 5, unpadded) encoding of a macro's value.
pub const B64_SUFFIX: &str = ":B64";

/// Replaces the auction macros in `template`; see the module documentation for the rules.
///
/// Borrows `template` when it contains no known macro. Never panics; runs in one pass over the
/// template.
pub fn substitute<'t>(template: &'t str, v: &MacroValues<'_>) -> Cow<'t, str> {
    let mut out: Option<String> = None;
    // Scratch for numbers that must be Base64-encoded, allocated only if one occurs.
    let mut scratch = String::new();
    let mut copied = 0; // template[..copied] is already in `out`
    let mut search = 0; // where to look for the next "${"
    while let Some(start) = find_open(template, search) {
        let name_start = start + 2;
        let Some(len) = template[name_start..].find('}') else {
            break; // no closing brace anywhere after: nothing more can match
        };
        let name_end = name_start + len;
        let name = &template[name_start..name_end];
        let (name, b64) = match name.strip_suffix(B64_SUFFIX) {
            Some(base) => (base, true),
            None => (name, false),
        };
        let Some(which) = Macro::from_name(name) else {
            // Unknown: keep it, and look for a macro starting inside it (`${X${AUCTION_ID}`).
            search = name_start;
            continue;
        };
        let buf = out.get_or_insert_with(|| String::with_capacity(template.len() + 32));
        buf.push_str(&template[copied..start]);
        if b64 {
            scratch.clear();
            let text = value_text(which, v, &mut scratch);
            URL_SAFE_NO_PAD.encode_string(text.as_bytes(), buf);
        } else {
            write_value(which, v, buf);
        }
        copied = name_end + 1;
        search = copied;
    }
    match out {
        None => Cow::Borrowed(template),
        Some(mut buf) => {
            buf.push_str(&template[copied..]);
            Cow::Owned(buf)
        }
    }
}

/// Index of the next `${` at or after `from` (a char boundary). Searches for the byte `$` with
/// `str::find(char)`, which is memchr-backed; `str::find("${")` would build a two-way
/// searcher per call, costing more than the whole scan of a URL.
#[inline]
fn find_open(template: &str, from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(off) = template.get(i..)?.find('$') {
        let dollar = i + off;
        if template.as_bytes().get(dollar + 1) == Some(&b'{') {
            return Some(dollar);
        }
        i = dollar + 1; // `$` is one byte: still a char boundary
    }
    None
}

/// Appends the plain text of `which` to `out`.
fn write_value(which: Macro, v: &MacroValues<'_>, out: &mut String) {
    match string_value(which, v) {
        Some(s) => out.push_str(s),
        None => write_number(which, v, out),
    }
}

/// The plain text of `which`, borrowed for string values, formatted into `scratch` otherwise.
fn value_text<'v>(which: Macro, v: &MacroValues<'v>, scratch: &'v mut String) -> &'v str {
    match string_value(which, v) {
        Some(s) => s,
        None => {
            write_number(which, v, scratch);
            scratch
        }
    }
}

fn string_value<'v>(which: Macro, v: &MacroValues<'v>) -> Option<&'v str> {
    match which {
        Macro::AuctionId => Some(v.auction_id),
        Macro::BidId => Some(v.bid_id),
        Macro::ImpId => Some(v.imp_id),
        Macro::SeatId => Some(v.seat_id),
        Macro::AdId => Some(v.ad_id),
        Macro::Currency => Some(v.currency),
        Macro::Price => v.price_token,
        Macro::Mbr | Macro::Loss | Macro::MinToWin | Macro::ImpTs => None,
    }
}

/// Appends a numeric macro's text; nothing when the value is unavailable. Writing to a
/// `String` cannot fail, so the `fmt::Result`s are ignored.
fn write_number(which: Macro, v: &MacroValues<'_>, out: &mut String) {
    match which {
        Macro::Price => {
            if let Some(price) = v.price {
                let _ = write!(out, "{price}");
            }
        }
        Macro::MinToWin => {
            if let Some(price) = v.min_to_win {
                let _ = write!(out, "{price}");
            }
        }
        Macro::Mbr => {
            if let Some(mbr) = v.mbr.filter(|m| m.is_finite()) {
                let _ = write!(out, "{mbr}");
            }
        }
        Macro::Loss => {
            if let Some(loss) = v.loss {
                let _ = write!(out, "{}", loss.0);
            }
        }
        Macro::ImpTs => {
            if let Some(ts) = v.imp_ts_ms {
                let _ = write!(out, "{ts}");
            }
        }
        Macro::AuctionId
        | Macro::BidId
        | Macro::ImpId
        | Macro::SeatId
        | Macro::AdId
        | Macro::Currency => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> MacroValues<'static> {
        MacroValues {
            auction_id: "req-1",
            bid_id: "bid-9",
            imp_id: "imp-2",
            seat_id: "seat-7",
            ad_id: "ad-3",
            price: Some(Price::from_micros(1_250_000)),
            price_token: None,
            currency: "EUR",
            mbr: Some(0.85),
            loss: Some(LossReason::LOST_TO_HIGHER_BID),
            min_to_win: Some(Price::from_micros(1_010_000)),
            imp_ts_ms: Some(1_700_000_000_123),
        }
    }

    fn b64(s: &str) -> String {
        URL_SAFE_NO_PAD.encode(s)
    }

    #[test]
    fn every_macro_is_replaced() {
        let v = full();
        for (name, expected) in [
            ("AUCTION_ID", "req-1"),
            ("AUCTION_BID_ID", "bid-9"),
            ("AUCTION_IMP_ID", "imp-2"),
            ("AUCTION_SEAT_ID", "seat-7"),
            ("AUCTION_AD_ID", "ad-3"),
            ("AUCTION_PRICE", "1.25"),
            ("AUCTION_CURRENCY", "EUR"),
            ("AUCTION_MBR", "0.85"),
            ("AUCTION_LOSS", "102"),
            ("AUCTION_MIN_TO_WIN", "1.01"),
            ("AUCTION_IMP_TS", "1700000000123"),
        ] {
            let plain = format!("a=${{{name}}}&b");
            assert_eq!(substitute(&plain, &v), format!("a={expected}&b"), "{name}");
            let encoded = format!("a=${{{name}:B64}}&b");
            assert_eq!(
                substitute(&encoded, &v),
                format!("a={}&b", b64(expected)),
                "{name}:B64"
            );
        }
    }

    #[test]
    fn a_price_token_replaces_the_price_wherever_it_appears() {
        let v = MacroValues {
            price_token: Some("gp1.1250000.99.tag"),
            ..full()
        };
        assert_eq!(
            substitute(
                "p=${AUCTION_PRICE}&e=${AUCTION_PRICE:B64}&m=${AUCTION_MIN_TO_WIN}",
                &v
            ),
            format!(
                "p=gp1.1250000.99.tag&e={}&m=1.01",
                b64("gp1.1250000.99.tag")
            )
        );
        // Without a price there is no token either: the exchange seals only clearing prices.
        let loser = MacroValues {
            price: None,
            price_token: None,
            ..full()
        };
        assert_eq!(substitute("p=${AUCTION_PRICE}", &loser), "p=");
    }

    #[test]
    fn b64_uses_the_url_safe_alphabet_without_padding() {
        let v = MacroValues {
            auction_id: "\u{fb}\u{ff}?", // bytes c3 bb c3 bf 3f: standard Base64 "w7vDvz8="
            price: Some(Price::from_micros(1_250_000)),
            ..MacroValues::default()
        };
        assert_eq!(substitute("${AUCTION_ID:B64}", &v), "w7vDvz8");
        assert_eq!(substitute("${AUCTION_PRICE:B64}", &v), "MS4yNQ");
    }

    #[test]
    fn unavailable_values_become_empty() {
        let v = MacroValues::default();
        let t = "p=${AUCTION_PRICE}&m=${AUCTION_MIN_TO_WIN}&l=${AUCTION_LOSS}&r=${AUCTION_MBR}\
                 &t=${AUCTION_IMP_TS}&id=${AUCTION_ID}&e=${AUCTION_PRICE:B64}";
        assert_eq!(substitute(t, &v), "p=&m=&l=&r=&t=&id=&e=");
        let nan = MacroValues {
            mbr: Some(f64::NAN),
            ..MacroValues::default()
        };
        assert_eq!(substitute("${AUCTION_MBR}", &nan), "");
    }

    #[test]
    fn nothing_to_replace_borrows() {
        let v = full();
        for t in [
            "",
            "https://dsp.example/win?x=1",
            "${UNKNOWN} and ${AUCTION_PRICE:OXCRYPT} and ${AUCTION_MULTIPLIER}",
            "dangling ${AUCTION_PRICE",
            "$AUCTION_PRICE {AUCTION_PRICE}",
        ] {
            assert!(
                matches!(substitute(t, &v), Cow::Borrowed(s) if s == t),
                "{t}"
            );
        }
    }

    #[test]
    fn unknown_macros_stay_and_nested_known_ones_are_found() {
        let v = full();
        assert_eq!(substitute("${X${AUCTION_ID}", &v), "${Xreq-1");
        assert_eq!(
            substitute("${auction_price}${AUCTION_PRICE}", &v),
            "${auction_price}1.25"
        );
        assert_eq!(substitute("${${AUCTION_PRICE}}", &v), "${1.25}");
        assert_eq!(substitute("€${AUCTION_CURRENCY}€", &v), "€EUR€");
    }

    #[test]
    fn output_is_never_rescanned() {
        // One pass: text that only becomes a macro once a value is removed stays as it is.
        let empty = MacroValues::default();
        assert_eq!(
            substitute("${AUCT${AUCTION_PRICE}ION_ID}", &empty),
            "${AUCTION_ID}"
        );
        let v = MacroValues {
            auction_id: "${AUCTION_PRICE}",
            ..full()
        };
        assert_eq!(substitute("${AUCTION_ID}", &v), "${AUCTION_PRICE}");
    }

    #[test]
    fn typical_win_notice() {
        let v = full();
        let nurl = "https://dsp.example/win?id=${AUCTION_ID}&imp=${AUCTION_IMP_ID}\
                    &p=${AUCTION_PRICE}&cur=${AUCTION_CURRENCY}";
        assert_eq!(
            substitute(nurl, &v),
            "https://dsp.example/win?id=req-1&imp=imp-2&p=1.25&cur=EUR"
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_is_identity_without_macros(s in "\\PC*") {
            let v = full();
            let out = substitute(&s, &v);
            if !s.contains("${") {
                proptest::prop_assert!(matches!(out, Cow::Borrowed(_)));
            }
        }

        #[test]
        fn never_panics_on_macro_like_noise(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("${".to_owned()),
                    proptest::strategy::Just("}".to_owned()),
                    proptest::strategy::Just(":B64".to_owned()),
                    proptest::strategy::Just("AUCTION_PRICE".to_owned()),
                    proptest::strategy::Just("AUCTION_ID".to_owned()),
                    "\\PC{0,3}",
                ],
                0..24,
            )
        ) {
            let s: String = parts.concat();
            let v = full();
            let out = substitute(&s, &v);
            // Every known macro is gone from the output unless it came from a value.
            let leftover = out.contains("${AUCTION_PRICE}");
            proptest::prop_assert!(!leftover, "{:?} -> {:?}", s, out);
        }

        #[test]
        fn price_prints_exactly(micros in -1_000_000_000_000_000i64..1_000_000_000_000_000i64) {
            let v = MacroValues { price: Some(Price::from_micros(micros)), ..MacroValues::default() };
            let out = substitute("${AUCTION_PRICE}", &v);
            let back = Price::from_cpm(out.parse::<f64>().unwrap()).unwrap();
            proptest::prop_assert_eq!(back, Price::from_micros(micros));
        }
    }
}
