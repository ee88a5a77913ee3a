//! `[cache]` in the exchange's file: where winners' markup is stored (`markup_cache.rs`).

use serde::Deserialize;

/// `[cache]` in the exchange's file.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Where puts are POSTed: `http://host:port/cache`.
    pub url: String,
    /// The store's address as pages and players reach it, put in the bids (`{public_url}?uuid=`).
    /// Default: `url`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Longest wait for the store, in ms; never past the deadline's answer margin. Default 20.
    #[serde(default = "timeout_ms")]
    pub timeout_ms: u64,
    /// `ttlseconds` of each put. Default 300.
    #[serde(default = "ttl_s")]
    pub ttl_s: u64,
    /// Connections to the store at most; an auction that finds all busy skips the cache. Default 64.
    #[serde(default = "max_connections")]
    pub max_connections: u32,
    /// File holding this exchange's writer key for the store (at least 32 bytes; relative to the
    /// configuration file), sent as `Authorization: Bearer`: the store refuses puts without
    /// one (its `[[store.writers]]`). Default: none (a store that takes anonymous puts).
    #[serde(default)]
    pub key_file: Option<std::path::PathBuf>,
    /// Environment variable holding that key, instead of a file.
    #[serde(default)]
    pub key_env: Option<String>,
}

fn timeout_ms() -> u64 {
    20
}
fn ttl_s() -> u64 {
    300
}
fn max_connections() -> u32 {
    64
}

impl CacheConfig {
    /// Checks the values; the error names the key.
    ///
    /// # Errors
    /// [`settings::Invalid`] naming the key.
    pub fn check(&self) -> Result<(), settings::Invalid> {
        if !self.url.starts_with("http://") {
            return Err(settings::Invalid::new(
                "cache.url",
                "must be http://host:port/path (the store runs next to the exchange)",
            ));
        }
        if let Some(public) = &self.public_url
            && !(public.starts_with("http://") || public.starts_with("https://"))
        {
            return Err(settings::Invalid::new(
                "cache.public_url",
                "must be an http(s) URL",
            ));
        }
        settings::check_range("cache.timeout_ms", self.timeout_ms, 1..=10_000)?;
        settings::check_range("cache.ttl_s", self.ttl_s, 1..=86_400)?;
        settings::check_range("cache.max_connections", self.max_connections, 1..=10_000)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        let good = CacheConfig {
            url: "http://127.0.0.1:8090/cache".into(),
            public_url: None,
            timeout_ms: 20,
            ttl_s: 300,
            max_connections: 64,
            key_file: None,
            key_env: None,
        };
        assert!(good.check().is_ok());
        for (bad, key) in [
            (
                CacheConfig {
                    url: "ftp://x".into(),
                    ..good.clone()
                },
                "cache.url",
            ),
            (
                CacheConfig {
                    public_url: Some("x".into()),
                    ..good.clone()
                },
                "cache.public_url",
            ),
            (
                CacheConfig {
                    timeout_ms: 0,
                    ..good.clone()
                },
                "cache.timeout_ms",
            ),
            (
                CacheConfig {
                    ttl_s: 0,
                    ..good.clone()
                },
                "cache.ttl_s",
            ),
            (
                CacheConfig {
                    max_connections: 0,
                    ..good.clone()
                },
                "cache.max_connections",
            ),
        ] {
            assert_eq!(bad.check().map_err(|e| e.key), Err(key.to_owned()));
        }
    }
}
