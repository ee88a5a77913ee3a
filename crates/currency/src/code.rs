//! [`Currency`]: an ISO 4217 code, three ASCII upper-case letters, kept inline (`Copy`, no
//! allocation). Only the shape is checked, not ISO's list: a code the list gains next year,
//! or an `X..` code two parties agreed on, converts as soon as a rate table names it.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Longest prefix of a refused code that an error repeats: enough to recognise it, never a
/// megabyte of someone's input in a log line.
const SHOWN_CHARS: usize = 16;

/// A currency code: three ASCII upper-case letters. Ordered alphabetically.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency([u8; 3]);

/// A text that is not a currency code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CurrencyError {
    #[error("currency code {code:?} is not three upper-case ASCII letters (ISO 4217)")]
    NotIso4217 { code: String },
}

impl Currency {
    /// US dollars, OpenRTB's currency when a request or a bid names none.
    pub const USD: Currency = Currency(*b"USD");
    /// Euros.
    pub const EUR: Currency = Currency(*b"EUR");

    /// `text` as a code: exactly three ASCII upper-case letters, nothing around them.
    pub fn parse(text: &str) -> Result<Currency, CurrencyError> {
        match *text.as_bytes() {
            [a, b, c] if [a, b, c].iter().all(u8::is_ascii_uppercase) => Ok(Currency([a, b, c])),
            _ => Err(CurrencyError::NotIso4217 { code: shown(text) }),
        }
    }

    /// The three letters.
    pub fn as_str(&self) -> &str {
        // Always ASCII: `parse` is the only way in.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

/// Alphabetical, compared as one integer: tables sort and search codes, and a derived order
/// compares the three bytes as a slice (a `memcmp` call each time).
impl Ord for Currency {
    fn cmp(&self, other: &Currency) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Currency {
    fn partial_cmp(&self, other: &Currency) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Currency {
    fn key(self) -> u32 {
        let [a, b, c] = self.0;
        u32::from_be_bytes([0, a, b, c])
    }
}

/// At most [`SHOWN_CHARS`] characters of `text`, for an error message.
pub(crate) fn shown(text: &str) -> String {
    text.chars().take(SHOWN_CHARS).collect()
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Currency({})", self.as_str())
    }
}

impl FromStr for Currency {
    type Err = CurrencyError;
    fn from_str(text: &str) -> Result<Currency, CurrencyError> {
        Currency::parse(text)
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Currency, D::Error> {
        struct Code;
        impl Visitor<'_> for Code {
            type Value = Currency;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a currency code, three upper-case letters")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Currency, E> {
                Currency::parse(text).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_three_upper_case_letters() {
        for good in ["USD", "EUR", "JPY", "XAU", "AAA", "ZZZ"] {
            let code = Currency::parse(good).expect(good);
            assert_eq!(code.as_str(), good);
            assert_eq!(code.to_string(), good);
            assert_eq!(good.parse::<Currency>(), Ok(code));
        }
        for bad in [
            "",
            "US",
            "USDD",
            "usd",
            "Usd",
            "US1",
            "U D",
            " USD",
            "USD ",
            "ÜSD",
            "US\u{0}",
            "€",
            "ＵＳＤ",
        ] {
            assert!(Currency::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_refused_code_is_named_but_not_at_any_length() {
        let long = "x".repeat(10_000);
        let Err(CurrencyError::NotIso4217 { code }) = Currency::parse(&long) else {
            panic!("accepted");
        };
        assert_eq!(code.len(), SHOWN_CHARS);
        let message = Currency::parse("usd").map(|_| ()).unwrap_err().to_string();
        assert!(message.contains("\"usd\""), "{message}");
    }

    #[test]
    fn order_is_alphabetical_and_serde_round_trips() {
        let mut codes: Vec<Currency> = ["USD", "AUD", "EUR", "USB"]
            .iter()
            .map(|c| Currency::parse(c).unwrap())
            .collect();
        codes.sort();
        let names: Vec<&str> = codes.iter().map(Currency::as_str).collect();
        assert_eq!(names, ["AUD", "EUR", "USB", "USD"]);
        assert_eq!(serde_json::to_string(&Currency::USD).unwrap(), "\"USD\"");
        assert_eq!(
            serde_json::from_str::<Currency>("\"EUR\"").unwrap(),
            Currency::EUR
        );
        assert!(serde_json::from_str::<Currency>("\"eur\"").is_err());
        assert!(serde_json::from_str::<Currency>("7").is_err());
    }
}
