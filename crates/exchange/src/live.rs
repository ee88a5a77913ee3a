//! What a reload changes, as a type: [`Live`] holds the sections a reload applies; everything
//! else in `config::Config` is fixed at start. What runs keeps [`Omitted`] in its place
//! (`running::Running`).

use serde::de::MapAccess;

use crate::bidder_config::BidderConfig;
use crate::currency_config::CurrencySection;
use crate::privacy_config::PrivacySection;
use crate::sellers::SellerConfig;

/// The keys [`Live`] owns in the exchange's file.
const LIVE_KEYS: [&str; 5] = [
    "bidders",
    "sellers",
    "open_to_all_sellers",
    "privacy",
    "currency",
];

/// The sections a reload (a file change, SIGHUP, a fleet push) applies while serving.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Live {
    /// `[[bidders]]`: the demand partners every auction fans out to.
    pub bidders: Vec<BidderConfig>,
    /// `[[sellers]]`: who may ask for auctions, with their API keys (docs/security.md).
    pub sellers: Vec<SellerConfig>,
    /// `open_to_all_sellers`: serve auctions to callers without a seller key. Needed when no
    /// `[[sellers]]` is configured; for closed networks, tests and the demo. Default false.
    pub open_to_all_sellers: bool,
    /// `[privacy]`: the Global Vendor List and the GDPR default (docs/privacy.md).
    pub privacy: PrivacySection,
    /// `[currency]`: exchange rates for bids and floors in other currencies.
    pub currency: CurrencySection,
}

impl settings::Sections for Live {
    fn owns(key: &str) -> bool {
        LIVE_KEYS.contains(&key)
    }
    fn keys() -> Vec<&'static str> {
        LIVE_KEYS.to_vec()
    }
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "bidders" => self.bidders = map.next_value()?,
            "sellers" => self.sellers = map.next_value()?,
            "open_to_all_sellers" => self.open_to_all_sellers = map.next_value()?,
            "privacy" => self.privacy = map.next_value()?,
            _ => self.currency = map.next_value()?,
        }
        Ok(())
    }
}

/// In place of [`Live`] in what a running exchange keeps: nothing, written as nothing.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct Omitted;
