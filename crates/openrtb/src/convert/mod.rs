//! OpenRTB 2.5 <-> 2.6 for bid requests: the exchange works in 2.6 and sends each bidder its
//! own version; sellers may still send 2.5-shaped requests.
//!
//! - [`down_to_2_5`]: every 2.6 field with a 2.5 home is moved into that `ext` (overwriting
//!   what was there), every other 2.6-only field is removed (`down.rs` has the list and the
//!   reasons), so that a strict 2.5 bidder finds no key it does not know.
//! - [`up_from_2_5`]: every 2.5 `ext` value with a 2.6 field is moved up unless the 2.6 field is
//!   set already (the 2.6 value wins) and removed from the `ext` either way (`up.rs`).
//!   Idempotent, and a no-op on a 2.6 request.
//!
//! Both work in place, report what they did as bounded field labels ([`Converted`]) and touch
//! an `ext` only when a field moves in or out of it: an untouched `ext` keeps its text and is
//! not reserialized. The homes are those of Prebid Server's `ConvertDownTo25`/`ConvertUpTo26`,
//! because 2.5 bidders expect what Prebid sends them.
//!
//! The response needs no conversion, so there is no `response_from_2_5`: 2.6 moved no response
//! field out of `ext`. Its response additions (`bid.cattax`, `apis`, `langb`, `dur`, `mtype`,
//! `slotinpod`) are new, optional fields whose absence means what a 2.5 response meant:
//! `cattax` defaults to 1 (IAB Content Taxonomy 1.0, the 2.5 list), the deprecated `bid.api`
//! stays valid, and a missing `mtype` leaves the markup type to be inferred from the imp, as
//! for any 2.6 bidder that omits it.

mod down;
mod error;
mod ext;
mod fields;
#[cfg(test)]
mod tests;
mod up;

use std::fmt;
use std::str::FromStr;

use crate::request::BidRequest;

pub use self::error::{ConvertError, JsonPath};
pub use self::fields::{Converted, Field, FieldSet};

/// An OpenRTB version a party speaks (`x-openrtb-version`). Parses from and displays as
/// `"2.5"` / `"2.6"`, nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    V2_5,
    V2_6,
}

impl Version {
    pub const fn as_str(self) -> &'static str {
        match self {
            Version::V2_5 => "2.5",
            Version::V2_6 => "2.6",
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version string other than `2.5` and `2.6`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown OpenRTB version {0:?}: expected \"2.5\" or \"2.6\"")]
pub struct UnknownVersion(String);

impl FromStr for Version {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Version, UnknownVersion> {
        match s {
            "2.5" => Ok(Version::V2_5),
            "2.6" => Ok(Version::V2_6),
            // Bounded: an error message never carries more than a short prefix of the input.
            other => Err(UnknownVersion(other.chars().take(16).collect())),
        }
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// In place: every 2.6 field that has a 2.5 home moved into that `ext` (an existing `ext` key
/// is overwritten by the 2.6 value), every 2.6-only field removed. Returns what was done.
///
/// Fails only when an `ext` a field must go into (or `imp.ext.prebid`) is not a JSON object;
/// the request may then be partly converted.
pub fn down_to_2_5(request: &mut BidRequest) -> Result<Converted, ConvertError> {
    down::down_to_2_5(request)
}

/// In place: every 2.5 `ext` field with a 2.6 home moved up when the 2.6 field is absent (the
/// 2.6 field wins when both exist), and removed from the `ext` either way (an `ext` left empty
/// is dropped). Idempotent on a 2.6 request.
///
/// Fails when an `ext` it reads is not a JSON object or a value has the wrong type for its 2.6
/// field; the request may then be partly converted.
pub fn up_from_2_5(request: &mut BidRequest) -> Result<Converted, ConvertError> {
    up::up_from_2_5(request)
}

/// Converts a 2.6 request (the exchange's own shape) for a party speaking `version`: down for
/// 2.5, nothing for 2.6.
pub fn for_version(request: &mut BidRequest, version: Version) -> Result<Converted, ConvertError> {
    match version {
        Version::V2_5 => down_to_2_5(request),
        Version::V2_6 => Ok(Converted::default()),
    }
}
