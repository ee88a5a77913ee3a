//! `[currency]`: the exchange rates bids and floors are converted with (docs/config.md). Without
//! rates, a bid or floor in another currency than the auction's is refused, as before.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use currency::Rates;
use serde::Deserialize;
use settings::invalid;

use settings::ConfigError;

/// A rates file larger than this is refused.
pub const MAX_RATES_BYTES: usize = 1024 * 1024;

/// `[currency]` as written in the file.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CurrencySection {
    /// Rates in Prebid Server's currency-file format (`{"conversions":{"USD":{"EUR":0.92}}}`),
    /// relative to the configuration file. Read again at every reload and when it changes.
    pub rates_file: Option<PathBuf>,
    /// The same format fetched over HTTP(S) every `refresh_s`; the last good answer is kept
    /// and preferred to the file while it is younger than `max_age_s`.
    pub rates_url: Option<String>,
    /// Seconds between fetches of `rates_url`. Default 3600; 60..=86400.
    pub refresh_s: u64,
    /// Rates older than this (by the table's `generatedAt`/`dataAsOf`, else when it was read)
    /// are not used: a bid that needs them is rejected `stale_rates`. Default 259200 (3 days).
    pub max_age_s: u64,
}

impl Default for CurrencySection {
    fn default() -> Self {
        CurrencySection {
            rates_file: None,
            rates_url: None,
            refresh_s: 3_600,
            max_age_s: 3 * 86_400,
        }
    }
}

impl CurrencySection {
    pub fn check(&self) -> Result<(), ConfigError> {
        settings::check_range("currency.refresh_s", self.refresh_s, 60..=86_400)?;
        settings::check_range("currency.max_age_s", self.max_age_s, 60..=365 * 86_400)?;
        if let Some(url) = &self.rates_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(
                "currency.rates_url",
                "must be an http:// or https:// URL",
            ));
        }
        Ok(())
    }

    /// The table `rates_file` names, read and checked; `None` without one.
    pub fn load_rates(&self, dir: Option<&Path>) -> Result<Option<Arc<Rates>>, ConfigError> {
        let Some(file) = &self.rates_file else {
            return Ok(None);
        };
        let path = settings::relative_to(dir, file);
        let bytes = settings::read_bounded_bytes(&path, MAX_RATES_BYTES)
            .map_err(|e| invalid("currency.rates_file", e.to_string()))?;
        let rates = Rates::from_json(&bytes)
            .map_err(|e| invalid("currency.rates_file", format!("{}: {e}", path.display())))?;
        Ok(Some(Arc::new(rates)))
    }
}
