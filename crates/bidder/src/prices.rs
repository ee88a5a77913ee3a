//! Which clearing price a win or billing notice may charge. The exchange writes it into the
//! bid's `${AUCTION_PRICE}` either as a plain decimal CPM, which anyone holding the URL can
//! change, or as a price token sealed with a key this bidder shares with that exchange
//! (`price_token`), which only the exchange can make and which is bound to the auction, the
//! imp and the bid.
//!
//! | `require_price_token` | plain price | valid token | forged, moved or expired token |
//! | --- | --- | --- | --- |
//! | false (default) | charged | charged | 403 |
//! | true | 403 (`cleartext_price`) | charged | 403 |
//!
//! A token that arrives while this bidder holds no price key cannot be checked: 403
//! (`price_token_unkeyed`), never charged on trust. Pure: no I/O, time from the caller.

use openrtb::Price;
use price_token::{Binding, PriceKey, TokenError};

use crate::metrics::NoticeRefusal;

/// The price text of a notice (`price=`), as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticePrice {
    /// A decimal CPM.
    Plain(Price),
    /// A price token (`gp1.`...), not checked yet.
    Token(String),
}

/// Why a notice's price was refused (403).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PriceRefusal {
    #[error("a plain price is not accepted: this bidder requires the exchange's price token")]
    Cleartext,
    #[error("{0}")]
    Token(TokenError),
    #[error("a price token came, but this bidder holds no price key to check it")]
    Unkeyed,
}

impl PriceRefusal {
    /// Its metric label.
    pub const fn metric(self) -> NoticeRefusal {
        match self {
            PriceRefusal::Cleartext => NoticeRefusal::CleartextPrice,
            PriceRefusal::Token(TokenError::Malformed) => NoticeRefusal::PriceTokenMalformed,
            PriceRefusal::Token(TokenError::Forged) => NoticeRefusal::PriceTokenForged,
            PriceRefusal::Token(TokenError::Expired) => NoticeRefusal::PriceTokenExpired,
            PriceRefusal::Unkeyed => NoticeRefusal::PriceTokenUnkeyed,
        }
    }
}

/// The price keys in force and whether a token is required: replaced whole when the key file
/// changes (rotation without a restart).
#[derive(Debug, Clone, Default)]
pub struct PriceKeys {
    keys: Vec<PriceKey>,
    require: bool,
}

impl PriceKeys {
    /// No key, a plain price accepted: a bidder that shares no key with its exchanges.
    pub const PLAIN: PriceKeys = PriceKeys {
        keys: Vec::new(),
        require: false,
    };

    /// `require` with no key would refuse every charge: the configuration refuses it first.
    pub fn new(keys: Vec<PriceKey>, require: bool) -> PriceKeys {
        PriceKeys { keys, require }
    }

    /// The ids of the keys accepted, for logs and `check-config` (never the keys).
    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(PriceKey::id).collect()
    }

    pub fn required(&self) -> bool {
        self.require
    }

    /// The price `price` may charge for the bid `bound`, at `now_s` (Unix seconds).
    pub fn resolve(
        &self,
        price: &NoticePrice,
        bound: &Binding<'_>,
        now_s: u64,
    ) -> Result<Price, PriceRefusal> {
        match price {
            NoticePrice::Plain(_) if self.require => Err(PriceRefusal::Cleartext),
            NoticePrice::Plain(p) => Ok(*p),
            NoticePrice::Token(_) if self.keys.is_empty() => Err(PriceRefusal::Unkeyed),
            NoticePrice::Token(t) => {
                price_token::open(&self.keys, t, bound, now_s).map_err(PriceRefusal::Token)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Binding<'static> = Binding {
        auction: "gavel-1-2a",
        imp: "1",
        bid: "n1-00ff",
        currency: "USD",
    };
    const NOW: u64 = 1_764_100_000;

    fn key(fill: u8) -> PriceKey {
        PriceKey::new(&[fill; 32])
    }

    #[test]
    fn the_table_in_the_module_doc_holds() {
        let plain = NoticePrice::Plain(Price::from_micros(1_500_000));
        let sealed = key(1).seal(Price::from_micros(900_000), &BOUND, NOW + 60);
        let token = NoticePrice::Token(sealed.clone());
        let moved = Binding {
            bid: "n1-00fe",
            ..BOUND
        };
        let expired = NoticePrice::Token(key(1).seal(Price::from_micros(1), &BOUND, NOW));

        let optional = PriceKeys::new(vec![key(1)], false);
        assert_eq!(
            optional.resolve(&plain, &BOUND, NOW).map(|p| p.micros()),
            Ok(1_500_000)
        );
        assert_eq!(
            optional.resolve(&token, &BOUND, NOW).map(|p| p.micros()),
            Ok(900_000)
        );
        assert_eq!(
            optional.resolve(&token, &moved, NOW),
            Err(PriceRefusal::Token(TokenError::Forged))
        );
        assert_eq!(
            optional.resolve(&expired, &BOUND, NOW),
            Err(PriceRefusal::Token(TokenError::Expired))
        );

        let required = PriceKeys::new(vec![key(2), key(1)], true);
        assert_eq!(
            required.resolve(&plain, &BOUND, NOW),
            Err(PriceRefusal::Cleartext)
        );
        assert_eq!(
            required.resolve(&token, &BOUND, NOW).map(|p| p.micros()),
            Ok(900_000)
        );
        let garbled = NoticePrice::Token(format!("{sealed}x"));
        assert_eq!(
            required.resolve(&garbled, &BOUND, NOW),
            Err(PriceRefusal::Token(TokenError::Malformed))
        );

        let none = PriceKeys::default();
        assert_eq!(
            none.resolve(&plain, &BOUND, NOW).map(|p| p.micros()),
            Ok(1_500_000)
        );
        assert_eq!(
            none.resolve(&token, &BOUND, NOW),
            Err(PriceRefusal::Unkeyed)
        );
        assert_eq!(PriceRefusal::Cleartext.metric().label(), "cleartext_price");
        assert_eq!(
            PriceRefusal::Unkeyed.metric().label(),
            "price_token_unkeyed"
        );
        assert_eq!(required.ids(), [key(2).id(), key(1).id()]);
    }
}
