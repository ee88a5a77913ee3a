//! Price tokens: a clearing price that the exchange vouches for and a bidder can check.
//!
//! A bidder's win and billing URLs carry the clearing price in `${AUCTION_PRICE}`. In plain
//! text, anyone who holds the URL (the seller that was handed the `burl`, a page script) can
//! fire it again with another price, and the first notice to arrive decides the charge. With a
//! key shared by the exchange and one bidder, the exchange writes a token instead:
//!
//! ```text
//! gp1.<price in CPM micros>.<expiry, Unix seconds>.<tag>
//! gp1.1250000.1764100000.Qx3bm6Qj0tR5hZ9yUq1x2A
//! ```
//!
//! `tag` is HMAC-SHA256 truncated to 128 bits, in base64url without padding (22 characters),
//! over the price, the expiry and what the price belongs to ([`Binding`]): the auction id the
//! bidder was sent, the impression, the bid's id and the currency. Without the key nobody can
//! make a token; a token moved to another bid, auction or impression, or given another price
//! or a later expiry, fails. The price stays readable: the seller already has it in the
//! answer, so this is authentication, not secrecy.
//!
//! Every part has one spelling (digits without leading zeros, the tag's canonical base64), so
//! a token cannot be re-spelled into a second valid one. A bidder accepts several keys at once
//! ([`open`] tries each), which is how a key is rotated without a restart on either side
//! (docs/security.md).
//!
//! Pure: no I/O; the time comes from the caller.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use openrtb::Price;
use sha2::{Digest, Sha256};

/// What every token starts with: the format's name and version.
pub const PREFIX: &str = "gp1.";
/// Bytes of the HMAC kept.
pub const TAG_BYTES: usize = 16;
/// Characters of the tag: 16 bytes in unpadded base64.
const TAG_CHARS: usize = 22;
/// Longest token: the prefix, 19 digits of price, 20 of expiry, two dots and the tag.
pub const MAX_TOKEN_CHARS: usize = PREFIX.len() + 19 + 1 + 20 + 1 + TAG_CHARS;
/// Most keys a bidder checks a token against (rotation needs two; several exchanges, more).
pub const MAX_KEYS: usize = 8;
/// Label hashed first, so that a key shared by mistake with another signer (the bidder's own
/// notice tokens) can never make one of these.
const DOMAIN: &[u8] = b"gavel-price-v1";

/// One shared key, ready to sign and check (the HMAC's pads are computed once).
#[derive(Clone)]
pub struct PriceKey {
    mac: Hmac<Sha256>,
    id: [u8; 4],
}

impl std::fmt::Debug for PriceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PriceKey({})", self.id())
    }
}

impl PartialEq for PriceKey {
    /// Keys are told apart by their id: two keys with the same id are, for all purposes, the
    /// same key (2^-32 aside), which is what a reload needs to see a rotation.
    fn eq(&self, other: &PriceKey) -> bool {
        self.id == other.id
    }
}

/// What a price belongs to; the same values on both sides, or the token fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// `BidRequest.id` as the bidder received it (the exchange's auction id).
    pub auction: &'a str,
    /// `Bid.impid`.
    pub imp: &'a str,
    /// `Bid.id`.
    pub bid: &'a str,
    /// The currency of the price (the bid's).
    pub currency: &'a str,
}

/// Why a token was not accepted. Labels are bounded (metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the price token is not gp1.<micros>.<expiry>.<tag>")]
    Malformed,
    #[error("the price token was not made for this bid with a key this bidder holds")]
    Forged,
    #[error("the price token has expired")]
    Expired,
}

impl TokenError {
    pub const fn label(self) -> &'static str {
        match self {
            TokenError::Malformed => "price_token_malformed",
            TokenError::Forged => "price_token_forged",
            TokenError::Expired => "price_token_expired",
        }
    }
}

impl PriceKey {
    /// A key from its secret bytes. The caller enforces a length (`settings::Secret`: at
    /// least 32 bytes); HMAC itself takes any.
    pub fn new(secret: &[u8]) -> PriceKey {
        // HMAC-SHA256 accepts keys of every length, so this never fails; an empty fallback
        // would still be a valid (if useless) key rather than a panic.
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
            .unwrap_or_else(|_| <Hmac<Sha256> as Mac>::new(&Default::default()));
        let mut digest = Sha256::new();
        digest.update(b"gavel-price-key-id");
        digest.update(secret);
        let mut id = [0u8; 4];
        id.copy_from_slice(digest.finalize().get(..4).unwrap_or(&[0; 4]));
        PriceKey { mac, id }
    }

    /// A short public name of the key (8 hex digits of a hash of it): what logs, `check-config`
    /// and the admin roster show, so that both sides can tell which key is in use without
    /// showing it.
    pub fn id(&self) -> String {
        self.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The token for `price` of the bid `bound`, valid until `expires_at_s` (Unix seconds).
    /// A negative price (never a clearing price) makes a token no bidder accepts.
    pub fn seal(&self, price: Price, bound: &Binding<'_>, expires_at_s: u64) -> String {
        let tag = self.mac(price.micros(), expires_at_s, bound).finalize();
        let mut out = String::with_capacity(MAX_TOKEN_CHARS);
        out.push_str(PREFIX);
        out.push_str(&price.micros().to_string());
        out.push('.');
        out.push_str(&expires_at_s.to_string());
        out.push('.');
        URL_SAFE_NO_PAD.encode_string(tag.into_bytes().get(..TAG_BYTES).unwrap_or(&[]), &mut out);
        out
    }

    fn mac(&self, micros: i64, expires_at_s: u64, bound: &Binding<'_>) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        let micros = micros.to_be_bytes();
        let expires = expires_at_s.to_be_bytes();
        // Each field length-prefixed: no two different bindings hash the same bytes.
        let fields: [&[u8]; 7] = [
            DOMAIN,
            bound.auction.as_bytes(),
            bound.imp.as_bytes(),
            bound.bid.as_bytes(),
            bound.currency.as_bytes(),
            &micros,
            &expires,
        ];
        for field in fields {
            let len = u32::try_from(field.len()).unwrap_or(u32::MAX);
            mac.update(&len.to_be_bytes());
            mac.update(field);
        }
        mac
    }
}

/// Whether `text` is meant as a token (rather than a plain decimal CPM).
pub fn is_token(text: &str) -> bool {
    text.starts_with(PREFIX)
}

/// The price in `token` if one of `keys` made it for `bound` and it has not expired at
/// `now_s` (Unix seconds). The tag is checked before the expiry, so a forged expiry reads as
/// forged; comparisons are constant-time.
pub fn open(
    keys: &[PriceKey],
    token: &str,
    bound: &Binding<'_>,
    now_s: u64,
) -> Result<Price, TokenError> {
    let (micros, expires_at_s, tag) = parse(token).ok_or(TokenError::Malformed)?;
    let matches = |key: &PriceKey| {
        key.mac(micros, expires_at_s, bound)
            .verify_truncated_left(&tag)
            .is_ok()
    };
    if !keys.iter().any(matches) {
        return Err(TokenError::Forged);
    }
    if now_s >= expires_at_s {
        return Err(TokenError::Expired);
    }
    Ok(Price::from_micros(micros))
}

/// Splits a token into its price, expiry and tag; `None` unless every part has its one
/// spelling.
fn parse(token: &str) -> Option<(i64, u64, [u8; TAG_BYTES])> {
    if token.len() > MAX_TOKEN_CHARS {
        return None;
    }
    let rest = token.strip_prefix(PREFIX)?;
    let mut parts = rest.split('.');
    let (micros, expires, tag) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || tag.len() != TAG_CHARS {
        return None;
    }
    let micros: i64 = canonical_digits(micros)?.parse().ok()?;
    let expires: u64 = canonical_digits(expires)?.parse().ok()?;
    // The decoder refuses non-zero trailing bits, so each tag has one spelling.
    let bytes = URL_SAFE_NO_PAD.decode(tag).ok()?;
    let tag: [u8; TAG_BYTES] = bytes.try_into().ok()?;
    Some((micros, expires, tag))
}

/// `digits` if it is a non-empty run of ASCII digits without a leading zero (or "0").
fn canonical_digits(digits: &str) -> Option<&str> {
    let ok = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    ok.then_some(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fill: u8) -> PriceKey {
        PriceKey::new(&[fill; 32])
    }

    const BOUND: Binding<'static> = Binding {
        auction: "gavel-18f-2a",
        imp: "1",
        bid: "n1-00ff",
        currency: "USD",
    };
    const NOW: u64 = 1_764_100_000;

    #[test]
    fn a_sealed_price_opens_with_its_key_and_binding() {
        let k = key(1);
        let t = k.seal(Price::from_micros(1_250_000), &BOUND, NOW + 60);
        assert!(t.starts_with("gp1.1250000.1764100060."), "{t}");
        assert_eq!(t.len(), "gp1.1250000.1764100060.".len() + 22);
        assert!(is_token(&t));
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        );
        assert_eq!(
            open(&[k], &t, &BOUND, NOW),
            Ok(Price::from_micros(1_250_000))
        );
        let zero = key(1).seal(Price::ZERO, &BOUND, NOW + 1);
        assert_eq!(open(&[key(1)], &zero, &BOUND, NOW), Ok(Price::ZERO));
    }

    #[test]
    fn another_bid_auction_imp_currency_or_key_is_forged() {
        let t = key(1).seal(Price::from_micros(1_250_000), &BOUND, NOW + 60);
        let others = [
            Binding {
                auction: "gavel-18f-2b",
                ..BOUND
            },
            Binding { imp: "2", ..BOUND },
            Binding {
                bid: "n1-00fe",
                ..BOUND
            },
            Binding {
                currency: "EUR",
                ..BOUND
            },
            // Length prefixes: moving a byte from one field to the next is a change too.
            Binding {
                auction: "gavel-18f-2a1",
                imp: "",
                ..BOUND
            },
        ];
        for other in others {
            assert_eq!(
                open(&[key(1)], &t, &other, NOW),
                Err(TokenError::Forged),
                "{other:?}"
            );
        }
        assert_eq!(open(&[key(2)], &t, &BOUND, NOW), Err(TokenError::Forged));
        assert_eq!(open(&[], &t, &BOUND, NOW), Err(TokenError::Forged));
    }

    #[test]
    fn a_changed_price_or_expiry_is_forged_and_a_late_one_expired() {
        let t = key(1).seal(Price::from_micros(1_250_000), &BOUND, NOW + 60);
        let cheaper = t.replace(".1250000.", ".1.");
        let dearer = t.replace(".1250000.", ".9250000.");
        let later = t.replace(".1764100060.", ".1864100060.");
        for changed in [cheaper, dearer, later] {
            assert_eq!(
                open(&[key(1)], &changed, &BOUND, NOW),
                Err(TokenError::Forged)
            );
        }
        assert_eq!(
            open(&[key(1)], &t, &BOUND, NOW + 60),
            Err(TokenError::Expired)
        );
        assert_eq!(
            open(&[key(1)], &t, &BOUND, NOW + 59).map(|p| p.micros()),
            Ok(1_250_000)
        );
    }

    #[test]
    fn any_of_several_keys_opens_a_token() {
        let t = key(2).seal(Price::from_micros(7), &BOUND, NOW + 1);
        assert_eq!(
            open(&[key(1), key(2)], &t, &BOUND, NOW),
            Ok(Price::from_micros(7))
        );
    }

    #[test]
    fn other_spellings_are_malformed() {
        let t = key(1).seal(Price::from_micros(1_250_000), &BOUND, NOW + 60);
        let tag = t.rsplit('.').next().unwrap_or_default().to_owned();
        let bad = [
            String::new(),
            "1.25".to_owned(),
            "gp1.".to_owned(),
            t.replace("gp1.", "gp2."),
            t.replace(".1250000.", ".01250000."),
            t.replace(".1250000.", ".+1250000."),
            t.replace(".1250000.", ".-1250000."),
            t.replace(".1250000.", ".."),
            format!("{t}.x"),
            format!("{t}A"),
            t.replace(&tag, &tag[..21]),
            t.replace(&tag, &format!("{}=", &tag[..21])),
            // Same bytes in non-canonical base64 (trailing bits set).
            t.replace(
                &tag,
                &format!("{}{}", &tag[..21], flip_trailing(&tag[21..])),
            ),
            format!("gp1.{}.1.{tag}", "9".repeat(30)),
        ];
        for b in bad {
            assert_eq!(
                open(&[key(1)], &b, &BOUND, NOW),
                Err(TokenError::Malformed),
                "{b:?}"
            );
        }
    }

    /// The last base64 character of a 16-byte tag carries 2 data bits and 4 zero bits: the
    /// same 2 data bits with a low bit set.
    fn flip_trailing(last: &str) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let i = ALPHABET
            .iter()
            .position(|&c| c.to_string() == last)
            .unwrap_or(0);
        char::from(ALPHABET[(i | 1) % 64]).to_string()
    }

    #[test]
    fn a_key_has_a_short_public_id() {
        assert_eq!(key(1).id().len(), 8);
        assert_eq!(key(1), key(1));
        assert_ne!(key(1), key(2));
        assert_eq!(
            format!("{:?}", key(1)),
            format!("PriceKey({})", key(1).id())
        );
    }

    #[test]
    fn labels_are_bounded() {
        assert_eq!(TokenError::Forged.label(), "price_token_forged");
        assert_eq!(TokenError::Expired.label(), "price_token_expired");
        assert_eq!(TokenError::Malformed.label(), "price_token_malformed");
    }

    proptest::proptest! {
        #[test]
        fn opening_never_panics_and_only_the_sealed_price_opens(
            text in "\\PC{0,90}",
            micros in 0i64..=i64::MAX,
            expires in 1u64..=u64::MAX,
        ) {
            let k = key(3);
            let _ = open(std::slice::from_ref(&k), &text, &BOUND, NOW);
            let t = k.seal(Price::from_micros(micros), &BOUND, expires);
            proptest::prop_assert!(t.len() <= MAX_TOKEN_CHARS);
            let opened = open(&[k], &t, &BOUND, expires - 1);
            proptest::prop_assert_eq!(opened, Ok(Price::from_micros(micros)));
        }
    }
}
