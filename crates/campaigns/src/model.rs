//! Validated campaigns: the typed values the bidder works with.
//!
//! A [`Campaign`] can only be built by validation ([`Campaign::from_spec`]), so holding one
//! means every invariant below holds: ids non-empty, at least one creative, money converted to
//! integers and positive, lists normalized (lowercase where comparison is case-insensitive,
//! sorted and deduplicated for binary search), limits of [`super::limits`] respected.

use std::fmt;

use openrtb::Price;
use units::{Nanos, Timestamp};

use crate::schema::PacingModeConfig;

/// A banner size in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size {
    pub w: u32,
    pub h: u32,
}

impl Size {
    pub const fn new(w: u32, h: u32) -> Size {
        Size { w, h }
    }

    /// One `u64` key for hashing: `w` in the high half.
    pub(crate) const fn key(self) -> u64 {
        ((self.w as u64) << 32) | self.h as u64
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.w, self.h)
    }
}

/// An ISO-3166-1 alpha-3 country code, upper case ASCII (`USA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Country([u8; 3]);

impl Country {
    /// Three ASCII letters in any case; `None` otherwise.
    pub fn parse(code: &str) -> Option<Country> {
        match code.as_bytes() {
            &[a, b, c] if [a, b, c].iter().all(u8::is_ascii_alphabetic) => Some(Country([
                a.to_ascii_uppercase(),
                b.to_ascii_uppercase(),
                c.to_ascii_uppercase(),
            ])),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &str {
        // Built from ASCII letters only.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl fmt::Display for Country {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated campaign. Fields are read through accessors; build one with
/// [`Campaign::from_spec`] or load a whole file with [`super::CampaignSet`].
#[derive(Clone, Debug, PartialEq)]
pub struct Campaign {
    pub(super) id: String,
    pub(super) creatives: Vec<Creative>,
    pub(super) targeting: Targeting,
    pub(super) bid: BidRule,
    pub(super) budget: Budget,
    pub(super) flight: Flight,
    pub(super) pacing: PacingModeConfig,
}

impl Campaign {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// At least one, at most [`super::limits::MAX_CREATIVES`]; ids unique.
    pub fn creatives(&self) -> &[Creative] {
        &self.creatives
    }

    pub fn targeting(&self) -> &Targeting {
        &self.targeting
    }

    pub fn bid(&self) -> &BidRule {
        &self.bid
    }

    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    pub fn flight(&self) -> &Flight {
        &self.flight
    }

    pub fn pacing(&self) -> PacingModeConfig {
        self.pacing
    }
}

/// One validated ad.
#[derive(Clone, Debug, PartialEq)]
pub struct Creative {
    pub(super) id: String,
    pub(super) media: Media,
    pub(super) adm: String,
    pub(super) cat: Vec<String>,
    pub(super) adomain: Vec<String>,
}

impl Creative {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn media(&self) -> &Media {
        &self.media
    }

    /// The markup template, macros untouched.
    pub fn adm(&self) -> &str {
        &self.adm
    }

    /// IAB categories of the ad, as written.
    pub fn cat(&self) -> &[String] {
        &self.cat
    }

    /// Advertiser domains, lower case: the creative's own, else the campaign's (may be empty).
    pub fn adomain(&self) -> &[String] {
        &self.adomain
    }
}

/// What kind of impression a creative can fill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Media {
    Banner(Size),
    Video(VideoCreative),
}

/// A video creative's properties.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VideoCreative {
    /// Lower case, sorted, deduplicated, non-empty.
    pub mimes: Vec<String>,
    /// Seconds, 1..=[`super::limits::MAX_VIDEO_SECONDS`].
    pub duration: u32,
    /// OpenRTB protocol codes; empty means "not stated" (fits any impression).
    pub protocols: Vec<i32>,
}

/// The bidding rule, in integer money.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BidRule {
    /// The CPM the campaign values an impression at; > 0.
    pub cpm: Price,
    /// The most it may bid to clear a floor; >= `cpm` (equal to `cpm` when not configured).
    pub max_cpm: Price,
    /// First-price shading in parts per million, 1..=1_000_000; `None` = no shading.
    pub shading_ppm: Option<u32>,
}

/// The budget, in integer money.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// > 0.
    pub total: Nanos,
    /// > 0 and <= `total`.
    pub daily: Option<Nanos>,
}

/// The flight: `start` inclusive, `end` exclusive; `None` is unbounded on that side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flight {
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
}

impl Flight {
    /// Whether the campaign runs at `now`.
    pub fn contains(&self, now: Timestamp) -> bool {
        self.start.is_none_or(|s| now >= s) && self.end.is_none_or(|e| now < e)
    }
}

/// Validated targeting. `None` for a dimension means "any"; lists are non-empty, normalized,
/// sorted and deduplicated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targeting {
    pub(super) countries: Option<Vec<Country>>,
    pub(super) regions: Option<Vec<String>>,
    pub(super) device_types: Option<Vec<i32>>,
    pub(super) os: Option<Vec<String>>,
    pub(super) domains: Option<Vec<String>>,
    pub(super) block_domains: Option<Vec<String>>,
    pub(super) publishers: Option<Vec<String>>,
    pub(super) categories: Option<Vec<String>>,
    pub(super) sizes: Option<Vec<Size>>,
    pub(super) deals: Option<Vec<String>>,
    /// Bit `h` set = hour `h` allowed.
    pub(super) hours: Option<u32>,
    pub(super) segments: Option<Vec<String>>,
}

impl Targeting {
    pub fn countries(&self) -> Option<&[Country]> {
        self.countries.as_deref()
    }
    /// Lower case.
    pub fn regions(&self) -> Option<&[String]> {
        self.regions.as_deref()
    }
    pub fn device_types(&self) -> Option<&[i32]> {
        self.device_types.as_deref()
    }
    /// Lower case.
    pub fn os(&self) -> Option<&[String]> {
        self.os.as_deref()
    }
    /// Lower case, without leading `*.`/`.` or trailing `.`.
    pub fn domains(&self) -> Option<&[String]> {
        self.domains.as_deref()
    }
    /// Lower case, like `domains`.
    pub fn block_domains(&self) -> Option<&[String]> {
        self.block_domains.as_deref()
    }
    pub fn publishers(&self) -> Option<&[String]> {
        self.publishers.as_deref()
    }
    pub fn categories(&self) -> Option<&[String]> {
        self.categories.as_deref()
    }
    pub fn sizes(&self) -> Option<&[Size]> {
        self.sizes.as_deref()
    }
    pub fn deals(&self) -> Option<&[String]> {
        self.deals.as_deref()
    }
    /// Whether hour `hour` (0-23) is allowed.
    pub fn allows_hour(&self, hour: u8) -> bool {
        self.hours
            .is_none_or(|mask| hour < 24 && mask & (1 << hour) != 0)
    }
    /// The allowed hours as a bit mask (bit `h` = hour `h`), `None` = any.
    pub fn hours_mask(&self) -> Option<u32> {
        self.hours
    }
    pub fn segments(&self) -> Option<&[String]> {
        self.segments.as_deref()
    }
}
