//! `[fleet]`: the NATS key-value bucket a server follows for its pushed configuration. The
//! same section in the exchange's and the bidder's file; only the default key differs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use settings::{ConfigError, invalid};

/// The environment variable that holds the NATS token when `token_file` is not set.
pub const TOKEN_ENV: &str = "GAVEL_FLEET_TOKEN";
/// The bucket when none is named.
pub const DEFAULT_BUCKET: &str = "gavel-config";
/// Longest bucket or key name accepted (NATS subjects stay short).
pub const MAX_NAME_CHARS: usize = 128;
/// Bounds on `resync_ms`: often enough to catch up within seconds, never a busy loop.
pub const RESYNC_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// The `[fleet]` section. Absent: the server follows its local file only.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSection {
    /// The NATS server: `nats://host:port` or `tls://host:port`.
    pub nats_url: String,
    /// The key-value bucket. Default `gavel-config`.
    #[serde(default = "default_bucket")]
    pub bucket: String,
    /// The key this server follows. Default: `exchange.roster` for an exchange,
    /// `bidder.campaigns` for a bidder.
    #[serde(default)]
    pub key: Option<String>,
    /// CA certificate (PEM) that verifies a `tls://` server; default: the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// File holding the NATS token; else [`TOKEN_ENV`]; else no token.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// How often the latest revision is also asked for, besides the watch that pushes it:
    /// the bound on how late a node catches up when a watch was lost silently. Default 2000.
    #[serde(default = "default_resync_ms")]
    pub resync_ms: u64,
}

fn default_bucket() -> String {
    DEFAULT_BUCKET.to_owned()
}

fn default_resync_ms() -> u64 {
    2_000
}

impl FleetSection {
    /// A section for `nats_url` with every default.
    pub fn new(nats_url: impl Into<String>) -> FleetSection {
        FleetSection {
            nats_url: nats_url.into(),
            bucket: default_bucket(),
            key: None,
            ca_file: None,
            token_file: None,
            resync_ms: default_resync_ms(),
        }
    }

    /// The key followed: the configured one, else `default`.
    pub fn key_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.key.as_deref().unwrap_or(default)
    }

    /// How often the latest revision is asked for.
    pub fn resync(&self) -> Duration {
        Duration::from_millis(self.resync_ms)
    }

    /// Files named relative to the configuration file's directory `dir`.
    pub fn resolve_paths(&mut self, dir: &Path) {
        for path in [&mut self.ca_file, &mut self.token_file]
            .into_iter()
            .flatten()
        {
            *path = settings::relative_to(Some(dir), path);
        }
    }

    /// Checks every key, naming the one at fault (`fleet.bucket`...).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.nats_url.starts_with("nats://") && !self.nats_url.starts_with("tls://") {
            return Err(invalid("fleet.nats_url", "must be a nats:// or tls:// URL"));
        }
        check_bucket(&self.bucket).map_err(|p| invalid("fleet.bucket", p))?;
        if let Some(key) = &self.key {
            check_key(key).map_err(|p| invalid("fleet.key", p))?;
        }
        if !RESYNC_MS.contains(&self.resync_ms) {
            return Err(invalid(
                "fleet.resync_ms",
                format!("must be {}..={}", RESYNC_MS.start(), RESYNC_MS.end()),
            ));
        }
        Ok(())
    }
}

/// A bucket name NATS accepts: letters, digits, `-` and `_`.
pub fn check_bucket(bucket: &str) -> Result<(), String> {
    let ok = !bucket.is_empty()
        && bucket.len() <= MAX_NAME_CHARS
        && bucket
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{bucket:?}: must be 1-{MAX_NAME_CHARS} ASCII letters, digits, '-' or '_'"
        ))
    }
}

/// A key NATS accepts: letters, digits and `-/_=.`, not starting or ending with `.`.
pub fn check_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.len() <= MAX_NAME_CHARS
        && !key.starts_with('.')
        && !key.ends_with('.')
        && !key.contains("..")
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_' | '=' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{key:?}: must be 1-{MAX_NAME_CHARS} ASCII letters, digits or '-/_=.', \
             not starting or ending with '.'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_value_is_refused_by_its_key() {
        let ok = FleetSection::new("nats://127.0.0.1:4222");
        assert!(ok.validate().is_ok());
        let bad = [
            ("fleet.nats_url", FleetSection::new("http://127.0.0.1:4222")),
            (
                "fleet.bucket",
                FleetSection {
                    bucket: "a.b".into(),
                    ..ok.clone()
                },
            ),
            (
                "fleet.bucket",
                FleetSection {
                    bucket: String::new(),
                    ..ok.clone()
                },
            ),
            (
                "fleet.key",
                FleetSection {
                    key: Some("exchange.".into()),
                    ..ok.clone()
                },
            ),
            (
                "fleet.key",
                FleetSection {
                    key: Some("a b".into()),
                    ..ok.clone()
                },
            ),
            (
                "fleet.resync_ms",
                FleetSection {
                    resync_ms: 0,
                    ..ok.clone()
                },
            ),
        ];
        for (key, section) in bad {
            let err = section.validate().expect_err(key).to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn defaults_and_unknown_keys() {
        let parse = |text: &str| toml::from_str::<FleetSection>(text).map_err(|e| e.to_string());
        let s = parse("nats_url = \"tls://n:4222\"").unwrap();
        assert_eq!(s.bucket, DEFAULT_BUCKET);
        assert_eq!(s.key_or("exchange.roster"), "exchange.roster");
        assert_eq!(s.resync(), Duration::from_secs(2));
        assert!(
            parse("nats_url = \"nats://n\"\nkeys = \"x\"")
                .unwrap_err()
                .contains("keys")
        );
        assert!(parse("bucket = \"b\"").unwrap_err().contains("nats_url"));
    }
}
