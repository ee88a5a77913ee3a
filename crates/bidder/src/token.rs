//! Notice tokens: what makes a notice URL unforgeable.
//!
//! Each notice URL the bidder emits carries `t`, an HMAC-SHA256 (truncated to 128 bits) over
//! what that notice may do: its kind, the reservation, the campaign, the imp, the highest price
//! it may charge (the bid's), when it stops being valid and the auction it was bid in. Anyone can read a URL that passed
//! through an exchange; without the key nobody can make one for another reservation, another
//! kind, a higher price or a later expiry. Pure: no I/O, time comes from the caller.
//!
//! Rotation: a notice is checked against the current key, then against the previous one while
//! its overlap lasts (docs/security.md has the procedure).

use hmac::{Hmac, Mac};
use openrtb::Price;
use sha2::Sha256;
use units::Timestamp;

use crate::metrics::NoticeKind;

/// Bytes of the tag kept (hex-encoded in the URL: twice as many characters).
pub const TAG_BYTES: usize = 16;

/// A notice key, ready to sign (the HMAC's inner and outer pads are computed once).
#[derive(Clone)]
pub struct NoticeKey(Hmac<Sha256>);

impl std::fmt::Debug for NoticeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoticeKey(..)")
    }
}

impl NoticeKey {
    /// `None` only if the HMAC refused the key, which it does for no length (`Secret`
    /// enforces the minimum).
    pub fn new(secret: &settings::Secret) -> Option<NoticeKey> {
        <Hmac<Sha256> as Mac>::new_from_slice(secret.expose())
            .ok()
            .map(NoticeKey)
    }

    fn mac(&self, claims: &Claims<'_>) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        // Each field length-prefixed: no two different claims encode to the same bytes.
        let max_price = claims.max_price.micros().to_be_bytes();
        let expires = claims.expires_at_s.to_be_bytes();
        let fields: [&[u8]; 7] = [
            b"gavel-notice-v1",
            claims.kind.label().as_bytes(),
            claims.reservation.as_bytes(),
            claims.campaign.as_bytes(),
            claims.imp.as_bytes(),
            &max_price,
            &expires,
        ];
        // The auction id came later: a URL without one (signed before it did) keeps its tag.
        for field in fields.into_iter().chain(claims.auction.map(str::as_bytes)) {
            let len = u32::try_from(field.len()).unwrap_or(u32::MAX);
            mac.update(&len.to_be_bytes());
            mac.update(field);
        }
        mac
    }
}

/// What one notice URL may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claims<'a> {
    pub kind: NoticeKind,
    pub reservation: &'a str,
    pub campaign: &'a str,
    pub imp: &'a str,
    /// The most a win or billing notice may charge: the bid's price.
    pub max_price: Price,
    /// Unix seconds after which the notice is refused.
    pub expires_at_s: u64,
    /// The auction the bid was made in (`BidRequest.id`): what a price token must be bound to.
    pub auction: Option<&'a str>,
}

/// Why a notice's token was refused (403); `metrics::NoticeRefusal` holds the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no token (t) in the notice URL")]
    Missing,
    #[error("the token (t) is not 32 hex digits")]
    Malformed,
    #[error("the token does not match the notice")]
    BadSignature,
    #[error("the notice has expired")]
    Expired,
}

/// The keys a bidder signs and checks notices with.
#[derive(Debug, Clone)]
pub struct NoticeKeys {
    current: NoticeKey,
    /// Still accepted until the timestamp (rotation overlap); never used to sign.
    previous: Option<(NoticeKey, Timestamp)>,
}

impl NoticeKeys {
    pub fn new(current: NoticeKey, previous: Option<(NoticeKey, Timestamp)>) -> NoticeKeys {
        NoticeKeys { current, previous }
    }

    /// The token of `claims`: 32 lowercase hex digits.
    pub fn sign(&self, claims: &Claims<'_>) -> String {
        let tag = self.current.mac(claims).finalize().into_bytes();
        hex(tag.get(..TAG_BYTES).unwrap_or(&[]))
    }

    /// Checks `token` against `claims` at `now`. The signature is checked before the expiry, so
    /// that a forged expiry reads as forged. Comparisons are constant-time.
    pub fn verify(
        &self,
        claims: &Claims<'_>,
        token: Option<&str>,
        now: Timestamp,
    ) -> Result<(), TokenError> {
        let token = token.ok_or(TokenError::Missing)?;
        let tag = unhex(token).ok_or(TokenError::Malformed)?;
        let matches = |key: &NoticeKey| key.mac(claims).verify_truncated_left(&tag).is_ok();
        let previous_ok = || {
            self.previous
                .as_ref()
                .is_some_and(|(key, until)| now < *until && matches(key))
        };
        if !(matches(&self.current) || previous_ok()) {
            return Err(TokenError::BadSignature);
        }
        if now.0 / 1000 >= claims.expires_at_s {
            return Err(TokenError::Expired);
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn unhex(s: &str) -> Option<[u8; TAG_BYTES]> {
    if s.len() != TAG_BYTES * 2 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; TAG_BYTES];
    for (o, pair) in out.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
        *o = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fill: u8) -> NoticeKey {
        let secret = settings::Secret::new(&[fill; 32], "k").unwrap_or_else(|e| panic!("{e}"));
        NoticeKey::new(&secret).unwrap_or_else(|| panic!("HMAC refused a 32-byte key"))
    }

    fn claims() -> Claims<'static> {
        Claims {
            kind: NoticeKind::Win,
            reservation: "n1-00ff",
            campaign: "summer",
            imp: "1",
            max_price: Price::from_micros(2_500_000),
            expires_at_s: 1_000,
            auction: Some("gavel-1-2a"),
        }
    }

    const BEFORE: Timestamp = Timestamp(999_999);

    #[test]
    fn a_signed_notice_verifies_and_any_change_breaks_it() {
        let keys = NoticeKeys::new(key(1), None);
        let c = claims();
        let t = keys.sign(&c);
        assert_eq!(t.len(), 32);
        assert_eq!(keys.verify(&c, Some(&t), BEFORE), Ok(()));
        assert_eq!(keys.verify(&c, Some(&t.to_uppercase()), BEFORE), Ok(()));
        let changed = [
            Claims {
                kind: NoticeKind::Bill,
                ..c
            },
            Claims {
                reservation: "n1-00fe",
                ..c
            },
            Claims {
                campaign: "summe",
                ..c
            },
            Claims { imp: "2", ..c },
            Claims {
                max_price: Price::from_micros(2_500_001),
                ..c
            },
            Claims {
                expires_at_s: 1_001,
                ..c
            },
            Claims {
                auction: Some("gavel-1-2b"),
                ..c
            },
            Claims { auction: None, ..c },
            // Length prefixes: moving a byte from one field to the next is a change too.
            Claims {
                reservation: "n1-00ffs",
                campaign: "ummer",
                ..c
            },
        ];
        for other in changed {
            assert_eq!(
                keys.verify(&other, Some(&t), BEFORE),
                Err(TokenError::BadSignature),
                "{other:?}"
            );
        }
    }

    #[test]
    fn refusals_are_told_apart() {
        let keys = NoticeKeys::new(key(1), None);
        let c = claims();
        let t = keys.sign(&c);
        assert_eq!(keys.verify(&c, None, BEFORE), Err(TokenError::Missing));
        assert_eq!(
            keys.verify(&c, Some("zz"), BEFORE),
            Err(TokenError::Malformed)
        );
        assert_eq!(
            keys.verify(&c, Some(&"g".repeat(32)), BEFORE),
            Err(TokenError::Malformed)
        );
        assert_eq!(
            keys.verify(&c, Some(&t), Timestamp(1_000_000)),
            Err(TokenError::Expired)
        );
        let other = NoticeKeys::new(key(2), None);
        assert_eq!(
            other.verify(&c, Some(&t), BEFORE),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn the_previous_key_is_accepted_during_its_overlap_only() {
        let old = NoticeKeys::new(key(1), None);
        let c = claims();
        let t = old.sign(&c);
        let rotated = NoticeKeys::new(key(2), Some((key(1), Timestamp(500_000))));
        assert_eq!(rotated.verify(&c, Some(&t), Timestamp(499_999)), Ok(()));
        assert_eq!(
            rotated.verify(&c, Some(&t), Timestamp(500_000)),
            Err(TokenError::BadSignature)
        );
        // The new key signs.
        assert_ne!(rotated.sign(&c), t);
    }
}
