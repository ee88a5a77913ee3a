//! `[fleet]`: the NATS key-value bucket a server follows for its pushed configuration. The
//! same section in the exchange's and the bidder's file; only the default key differs.
//!
//! Anyone who can publish to NATS can put a value in the bucket, so a node takes only
//! documents signed by a key in `trusted_keys_file` (required), and connects with credentials:
//! a NATS server off loopback without them is refused unless `allow_unauthenticated = true`
//! says the operator meant it.

use std::net::IpAddr;
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
    /// NATS user name, with `password_file`.
    #[serde(default)]
    pub user: Option<String>,
    /// File holding the NATS user's password.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// File holding an NKey seed (`SU...`, from `nk -gen user`): the server's `nkey` user.
    #[serde(default)]
    pub nkey_seed_file: Option<PathBuf>,
    /// A NATS credentials file (a user JWT and its NKey seed, as `nsc` writes it).
    #[serde(default)]
    pub creds_file: Option<PathBuf>,
    /// Client certificate (PEM) for a server that verifies clients, with `client_key_file`.
    #[serde(default)]
    pub client_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(default)]
    pub client_key_file: Option<PathBuf>,
    /// Start without credentials on a NATS server that is not on loopback. Default false:
    /// refused, since anyone reaching that server could then read the fleet's configuration.
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// The operator's public keys (PEM `PUBLIC KEY` blocks, Ed25519): a pushed document is
    /// taken only when signed by one of them. Several while keys rotate. Read again at each
    /// push, so a key is added or removed without a restart. Required.
    #[serde(default)]
    pub trusted_keys_file: Option<PathBuf>,
    /// Key files a pushed document may name (a seller's `key_file`, a bidder's
    /// `price_key_file`), as this node's file would name them. Any other is refused.
    #[serde(default)]
    pub allowed_key_files: Vec<PathBuf>,
    /// Environment variables a pushed document may name (`key_env`, `price_key_env`). Any
    /// other is refused.
    #[serde(default)]
    pub allowed_key_env: Vec<String>,
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
            user: None,
            password_file: None,
            nkey_seed_file: None,
            creds_file: None,
            client_cert_file: None,
            client_key_file: None,
            allow_unauthenticated: false,
            trusted_keys_file: None,
            allowed_key_files: Vec::new(),
            allowed_key_env: Vec::new(),
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
        for path in [
            &mut self.ca_file,
            &mut self.token_file,
            &mut self.password_file,
            &mut self.nkey_seed_file,
            &mut self.creds_file,
            &mut self.client_cert_file,
            &mut self.client_key_file,
            &mut self.trusted_keys_file,
        ]
        .into_iter()
        .flatten()
        {
            *path = settings::relative_to(Some(dir), path);
        }
        for path in &mut self.allowed_key_files {
            *path = settings::relative_to(Some(dir), path);
        }
    }

    /// How this node proves who it is to NATS, if at all: the first credential set.
    pub fn credentials(&self) -> Option<&'static str> {
        if self.token_file.is_some() || std::env::var_os(TOKEN_ENV).is_some_and(|v| !v.is_empty()) {
            Some("token")
        } else if self.user.is_some() {
            Some("user and password")
        } else if self.nkey_seed_file.is_some() {
            Some("nkey")
        } else if self.creds_file.is_some() {
            Some("credentials file")
        } else if self.client_cert_file.is_some() {
            Some("client certificate")
        } else {
            None
        }
    }

    /// Checks every key of a node's section, naming the one at fault (`fleet.bucket`...):
    /// the connection's, a trusted keys file, and credentials off loopback.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_connection()?;
        if self.trusted_keys_file.is_none() {
            return Err(invalid(
                "fleet.trusted_keys_file",
                "is required: the operator's public keys (PEM), so that only signed documents \
                 are taken (`gavel config keygen` makes a key pair)",
            ));
        }
        if self.credentials().is_none()
            && !self.allow_unauthenticated
            && let Some(host) = first_remote_host(&self.nats_url)
        {
            return Err(invalid(
                "fleet.nats_url",
                format!(
                    "{host} is not loopback and no NATS credentials are set (token_file, user \
                     and password_file, nkey_seed_file, creds_file or client_cert_file): anyone \
                     reaching it could read the fleet's configuration and flood its bucket; set \
                     credentials, or allow_unauthenticated = true"
                ),
            ));
        }
        for (n, var) in self.allowed_key_env.iter().enumerate() {
            if var.is_empty() || var.len() > MAX_NAME_CHARS || var.contains(['=', '\0']) {
                return Err(invalid(
                    format!("fleet.allowed_key_env[{n}]"),
                    "must be a variable name",
                ));
            }
        }
        Ok(())
    }

    /// Checks what any connection needs (the CLI's too), naming the key at fault.
    pub fn check_connection(&self) -> Result<(), ConfigError> {
        for url in self.nats_url.split(',') {
            let url = url.trim();
            let Some(rest) = url
                .strip_prefix("nats://")
                .or_else(|| url.strip_prefix("tls://"))
            else {
                return Err(invalid("fleet.nats_url", "must be a nats:// or tls:// URL"));
            };
            if rest.contains('@') {
                return Err(invalid(
                    "fleet.nats_url",
                    "must not hold credentials (user:password@): use token_file, or user and \
                     password_file",
                ));
            }
        }
        let credential_sets = [
            self.token_file.is_some(),
            self.user.is_some() || self.password_file.is_some(),
            self.nkey_seed_file.is_some(),
            self.creds_file.is_some(),
        ];
        if credential_sets.iter().filter(|set| **set).count() > 1 {
            return Err(invalid(
                "fleet.token_file",
                "give one of token_file, user and password_file, nkey_seed_file, creds_file",
            ));
        }
        if self.user.is_some() != self.password_file.is_some() {
            return Err(invalid("fleet.user", "user and password_file go together"));
        }
        if let Some(user) = &self.user
            && (user.is_empty()
                || user.len() > MAX_NAME_CHARS
                || user.chars().any(char::is_control))
        {
            return Err(invalid("fleet.user", "must be 1-128 printable characters"));
        }
        if self.client_cert_file.is_some() != self.client_key_file.is_some() {
            return Err(invalid(
                "fleet.client_cert_file",
                "client_cert_file and client_key_file go together",
            ));
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

/// The first host of a `nats_url` list that is not loopback (`localhost`, `127.0.0.0/8`,
/// `::1`), if any.
fn first_remote_host(urls: &str) -> Option<String> {
    urls.split(',').find_map(|url| {
        let url = url.trim();
        let rest = url
            .strip_prefix("nats://")
            .or_else(|| url.strip_prefix("tls://"))
            .unwrap_or(url);
        let authority = rest.split('/').next().unwrap_or(rest);
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(v6),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        (!loopback).then(|| host.to_owned())
    })
}

/// A bucket name NATS accepts: letters, digits, `-` and `_`.
pub(crate) fn check_bucket(bucket: &str) -> Result<(), String> {
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
pub(crate) fn check_key(key: &str) -> Result<(), String> {
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
        let ok = FleetSection {
            trusted_keys_file: Some("fleet.pub".into()),
            ..FleetSection::new("nats://127.0.0.1:4222")
        };
        assert!(ok.validate().is_ok());
        let remote = FleetSection {
            nats_url: "nats://127.0.0.1:4222,tls://nats.internal:4222".into(),
            ..ok.clone()
        };
        let with = |f: &dyn Fn(&mut FleetSection)| {
            let mut s = remote.clone();
            f(&mut s);
            s
        };
        // Off loopback: credentials, or the operator's explicit word.
        for fine in [
            with(&|s| s.token_file = Some("t".into())),
            with(&|s| {
                s.user = Some("gavel".into());
                s.password_file = Some("p".into());
            }),
            with(&|s| s.nkey_seed_file = Some("n".into())),
            with(&|s| s.creds_file = Some("c".into())),
            with(&|s| {
                s.client_cert_file = Some("c.pem".into());
                s.client_key_file = Some("k.pem".into());
            }),
            with(&|s| s.allow_unauthenticated = true),
            FleetSection {
                nats_url: "nats://localhost:4222,nats://[::1]:4222,tls://127.0.0.2".into(),
                ..ok.clone()
            },
        ] {
            assert!(fine.validate().is_ok(), "{fine:?}");
        }
        let e = remote.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("fleet.nats_url") && e.contains("nats.internal is not loopback"),
            "{e}"
        );
        let bad = [
            ("fleet.nats_url", FleetSection::new("http://127.0.0.1:4222")),
            (
                "fleet.nats_url",
                FleetSection {
                    nats_url: "nats://gavel:secret@127.0.0.1:4222".into(),
                    ..ok.clone()
                },
            ),
            (
                "fleet.trusted_keys_file",
                FleetSection {
                    trusted_keys_file: None,
                    ..ok.clone()
                },
            ),
            ("fleet.user", with(&|s| s.user = Some("gavel".into()))),
            ("fleet.user", with(&|s| s.password_file = Some("p".into()))),
            (
                "fleet.token_file",
                with(&|s| {
                    s.token_file = Some("t".into());
                    s.nkey_seed_file = Some("n".into());
                }),
            ),
            (
                "fleet.client_cert_file",
                with(&|s| s.client_cert_file = Some("c.pem".into())),
            ),
            (
                "fleet.allowed_key_env[0]",
                FleetSection {
                    allowed_key_env: vec!["A=B".into()],
                    ..ok.clone()
                },
            ),
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
