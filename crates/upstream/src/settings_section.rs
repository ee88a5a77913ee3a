//! `[upstream]`: how the exchange's calls to its bidders behave, whatever the bidder.

use serde::{Deserialize, Serialize};

/// The `[upstream]` section (before issue 33 these keys were in `[http]`, which now holds only
/// what a server accepts from its own clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamSection {
    /// Largest bidder answer read, in bytes; a larger one counts as that bidder's error.
    /// Default 256 KiB.
    pub max_response_bytes: usize,
    /// How long after the auction's deadline a late answer is still read (and thrown away) so
    /// that its connection can be reused, in milliseconds. Default 1000.
    pub drain_ms: u64,
    /// How often bidder hosts given by name are looked up again, in ms: a changed address
    /// moves the bidder's pool there, and a bidder that did not resolve is called once it
    /// does. Default 30000.
    pub dns_refresh_ms: u64,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        UpstreamSection {
            max_response_bytes: 256 * 1024,
            drain_ms: 1_000,
            dns_refresh_ms: 30_000,
        }
    }
}

impl UpstreamSection {
    /// The limits of a pool of `max_connections` under these settings.
    pub fn pool_limits(&self, max_connections: u32) -> crate::pool::PoolLimits {
        crate::pool::PoolLimits {
            max_connections,
            max_response_bytes: self.max_response_bytes,
            drain: std::time::Duration::from_millis(self.drain_ms),
        }
    }

    /// The keys that moved here from `[http]`, for `settings::FileRules::moved`.
    pub const MOVED_FROM_HTTP: [(&'static str, &'static str); 3] = [
        (
            "http.max_bidder_response_bytes",
            "upstream.max_response_bytes",
        ),
        ("http.bidder_drain_ms", "upstream.drain_ms"),
        ("http.dns_refresh_ms", "upstream.dns_refresh_ms"),
    ];

    /// Checks every key; the error names it.
    pub fn check(&self) -> Result<(), settings::Invalid> {
        settings::check_range(
            "upstream.max_response_bytes",
            self.max_response_bytes,
            1..=64 * 1024 * 1024,
        )?;
        if self.drain_ms > 60_000 {
            return Err(settings::Invalid::new(
                "upstream.drain_ms",
                "must be at most 60000",
            ));
        }
        settings::check_range(
            "upstream.dns_refresh_ms",
            self.dns_refresh_ms,
            100..=3_600_000,
        )?;
        Ok(())
    }
}
