//! The campaign file as written: serde structs that mirror it key for key.
//!
//! Nothing here is trusted yet. Amounts are the decimals the operator wrote (`f64`), lists are
//! as written, timestamps are strings; [`super::validate`] turns a [`CampaignSpec`] into a
//! typed [`super::Campaign`] with integer money, normalized lists and checked limits. Every
//! struct refuses unknown keys (`deny_unknown_fields`), so a typo such as `countires` is an
//! error that names the key instead of a silently untargeted campaign.
//!
//! Two spellings of one document are accepted (see `docs/campaigns.md`):
//! - JSON: a top-level array of campaigns, or an object `{"campaign": [...]}`;
//! - TOML: `[[campaign]]` tables (the top-level key `campaign`, an array of tables).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

/// The document form used by TOML (and accepted from JSON): `{ campaign = [ ... ] }`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    /// The campaigns, in file order (`[[campaign]]` tables in TOML).
    #[serde(default)]
    pub campaign: Vec<CampaignSpec>,
}

/// One campaign as written in the file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CampaignSpec {
    /// Unique, non-empty identifier; also the key of the campaign's budget in the ledger.
    pub id: String,
    /// Advertiser domains of the campaign: the default `adomain` of creatives that have none.
    #[serde(default)]
    pub adomain: Vec<String>,
    /// The ads; at least one.
    pub creatives: Vec<CreativeSpec>,
    /// Who may see the ads; an absent key (or an absent table) means "any".
    #[serde(default)]
    pub targeting: TargetingSpec,
    /// What to bid.
    pub bid: BidSpec,
    /// How much may be spent.
    pub budget: BudgetSpec,
    /// When the campaign runs; absent means always.
    #[serde(default)]
    pub flight: FlightSpec,
    /// How the budget is spread over the flight; `"asap"` when absent.
    #[serde(default)]
    pub pacing: PacingModeConfig,
}

/// One ad: a banner of a fixed size (`w`/`h`) or a video (`video`), exactly one of the two.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CreativeSpec {
    /// Unique within the campaign; returned as `Bid.crid`.
    pub id: String,
    /// Banner width in device-independent pixels.
    pub w: Option<i64>,
    /// Banner height in device-independent pixels.
    pub h: Option<i64>,
    /// Video properties, for a video creative.
    pub video: Option<VideoSpec>,
    /// Markup returned as `Bid.adm`; OpenRTB macros such as `${AUCTION_PRICE}` pass through.
    pub adm: String,
    /// IAB content categories of the ad (`Bid.cat`), checked against the request's `bcat`.
    #[serde(default)]
    pub cat: Vec<String>,
    /// Advertiser domains (`Bid.adomain`), checked against `badv`; the campaign's when absent.
    pub adomain: Option<Vec<String>>,
}

/// A video creative: what the player must accept for the ad to play.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VideoSpec {
    /// MIME types of the media files (e.g. `video/mp4`); one of them must be in `video.mimes`.
    pub mimes: Vec<String>,
    /// Length of the ad in seconds; must lie within the impression's min/max duration.
    pub duration: i64,
    /// OpenRTB protocol codes the ad is available in (e.g. 3 = VAST 3.0); one of them must be in
    /// `video.protocols` when the impression lists protocols.
    #[serde(default)]
    pub protocols: Vec<i32>,
}

/// Targeting as written: every key optional, absent meaning "any value, or none".
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TargetingSpec {
    /// ISO-3166-1 alpha-3 codes of `device.geo.country`.
    pub countries: Option<Vec<String>>,
    /// Region codes of `device.geo.region` (ISO-3166-2 subdivision, without country prefix).
    pub regions: Option<Vec<String>>,
    /// OpenRTB `device.devicetype` codes.
    pub device_types: Option<Vec<i32>>,
    /// `device.os` values, compared case-insensitively.
    pub os: Option<Vec<String>>,
    /// Allowed `site.domain` / `app.bundle` / `app.domain` (a domain also allows its subdomains).
    pub domains: Option<Vec<String>>,
    /// Blocked domains (a domain also blocks its subdomains).
    pub block_domains: Option<Vec<String>>,
    /// Allowed `site.publisher.id` / `app.publisher.id`.
    pub publishers: Option<Vec<String>>,
    /// Content categories (`cat`, `sectioncat`, `pagecat` of the site or app), any of them.
    pub categories: Option<Vec<String>>,
    /// Allowed banner sizes `"WxH"`, in addition to the creative sizes.
    pub sizes: Option<Vec<String>>,
    /// Deal ids: the campaign bids only on impressions offering one of them, through the deal.
    pub deals: Option<Vec<String>>,
    /// Hours of the day, 0-23, in the user's local time (`device.geo.utcoffset`), else UTC.
    pub hours: Option<Vec<i64>>,
    /// User segment ids (`user.data[].segment[].id`), any of them.
    pub segments: Option<Vec<String>>,
}

/// The bidding rule.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BidSpec {
    /// Bid CPM in currency units (decimal).
    pub cpm: f64,
    /// Highest CPM the campaign may bid to clear a floor above `cpm`; `cpm` when absent.
    pub max_cpm: Option<f64>,
    /// First-price shading factor in (0, 1]; absent means no shading.
    pub shading: Option<f64>,
}

/// The budget, in currency units (decimal).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// Total budget of the flight; required, > 0.
    pub total: f64,
    /// Budget per UTC day; > 0 and <= total.
    pub daily: Option<f64>,
}

/// The flight: `start` inclusive, `end` exclusive, RFC 3339 UTC (`2025-03-01T00:00:00Z`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlightSpec {
    pub start: Option<TimestampText>,
    pub end: Option<TimestampText>,
}

/// How the pacer spends the budget over the flight.
///
/// The campaign crate's own copy of the pacer's mode (same names, same serde spelling), kept
/// here so that the file format does not depend on the pacer's type; map it where the pacer is
/// wired.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum PacingModeConfig {
    /// Spend as fast as matching traffic allows, within the budget.
    #[default]
    Asap,
    /// Spread the budget evenly over the flight (or the day, with a daily budget).
    Even,
}

/// A timestamp as written: a string, or in TOML also a native (unquoted) datetime, which is
/// read back as its RFC 3339 text. [`super::validate`] parses it strictly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimestampText(pub String);

impl<'de> Deserialize<'de> for TimestampText {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;

        impl<'de> Visitor<'de> for TextVisitor {
            type Value = TimestampText;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 UTC timestamp such as \"2025-03-01T00:00:00Z\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<TimestampText, E> {
                Ok(TimestampText(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TimestampText, A::Error> {
                // TOML datetimes reach serde as a private one-key map; toml's own type reads it.
                let dt =
                    toml::value::Datetime::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(TimestampText(dt.to_string()))
            }
        }

        deserializer.deserialize_any(TextVisitor)
    }
}
