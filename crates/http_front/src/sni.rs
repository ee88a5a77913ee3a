//! TLS with a certificate per server name (SNI), read from a directory on demand, for an edge
//! that answers for many advertiser domains.
//!
//! | file in the directory | serves |
//! | --- | --- |
//! | `{name}.crt`, `{name}.key` | the name exactly |
//! | `_wildcard.{parent}.crt`, `.key` | `*.{parent}`: one label under the parent |
//! | `default.crt`, `default.key` | clients that send no name or a name with no file |
//!
//! The handshake reads the client's hello first, then finds the certificate: from the cache,
//! or from the directory on the blocking pool (never on the handshake's thread). The cache is
//! an LRU of at most `max` names, absences included, so unknown names cost one look at the
//! directory per check interval, not one per handshake. An entry older than the check interval
//! is checked against its files (modification time and size) at its next use: changed files
//! are loaded again; a change that fails to load is counted and the old certificate kept.
//! The name from the client is checked before it becomes a file name: lowercase letters,
//! digits, `-` and dots between labels, nothing else.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::server::Acceptor;
use tokio_rustls::server::TlsStream;

/// The files of one name, as last seen: modification time and size of both.
type Stamp = Option<(SystemTime, u64, SystemTime, u64)>;

#[derive(Debug)]
struct Entry {
    /// `None`: no files for this name (remembered so as not to look again at every handshake).
    config: Option<Arc<ServerConfig>>,
    stamp: Stamp,
    checked: Instant,
    used: u64,
}

/// Counters of the certificate cache.
#[derive(Debug, Default)]
pub struct SniStats {
    pub hits: AtomicU64,
    pub loads: AtomicU64,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    pub evictions: AtomicU64,
    /// Handshakes refused: no certificate for the name and no `default`.
    pub unknown_names: AtomicU64,
}

/// The certificate directory and its cache.
pub struct SniCerts {
    dir: PathBuf,
    max: usize,
    check_interval: Duration,
    cache: Mutex<HashMap<String, Entry>>,
    clock: AtomicU64,
    pub stats: SniStats,
}

impl std::fmt::Debug for SniCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniCerts")
            .field("dir", &self.dir)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl SniCerts {
    /// Uses `dir`, keeping at most `max` names loaded and checking each against its files
    /// every `check_interval`.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn open(
        dir: &Path,
        max: usize,
        check_interval: Duration,
    ) -> Result<SniCerts, crate::CertificateError> {
        std::fs::read_dir(dir).map_err(|e| crate::CertificateError::Directory {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(SniCerts {
            dir: dir.to_owned(),
            max: max.max(1),
            check_interval,
            cache: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
            stats: SniStats::default(),
        })
    }

    /// The handshake: reads the client's hello, finds its certificate, completes.
    ///
    /// # Errors
    /// The handshake failed, or no certificate serves the name.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        let start = LazyConfigAcceptor::new(Acceptor::default(), stream).await?;
        let name = start
            .client_hello()
            .server_name()
            .map(str::to_ascii_lowercase);
        match self.config_for(name.as_deref()).await {
            Some(config) => start.into_stream(config).await,
            None => {
                self.stats.unknown_names.fetch_add(1, Relaxed);
                Err(std::io::Error::other("no certificate for the server name"))
            }
        }
    }

    /// The configuration for a server name: its own file, its parent's wildcard, or `default`.
    pub async fn config_for(&self, name: Option<&str>) -> Option<Arc<ServerConfig>> {
        let mut candidates = Vec::with_capacity(3);
        if let Some(name) = name.filter(|n| is_host_name(n)) {
            candidates.push(name.to_owned());
            if let Some((_, parent)) = name.split_once('.')
                && parent.contains('.')
            {
                candidates.push(format!("_wildcard.{parent}"));
            }
        }
        candidates.push("default".to_owned());
        for candidate in candidates {
            if let Some(config) = self.lookup(&candidate).await {
                return Some(config);
            }
        }
        None
    }

    async fn lookup(&self, name: &str) -> Option<Arc<ServerConfig>> {
        let used = self.clock.fetch_add(1, Relaxed);
        let cached = {
            let mut cache = telemetry::locks::lock(&self.cache);
            match cache.get_mut(name) {
                Some(entry) if entry.checked.elapsed() < self.check_interval => {
                    entry.used = used;
                    if entry.config.is_some() {
                        self.stats.hits.fetch_add(1, Relaxed);
                    }
                    return entry.config.clone();
                }
                Some(entry) => Some((entry.stamp, entry.config.clone())),
                None => None,
            }
        };
        let (cert, key) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        let old_stamp = cached.as_ref().and_then(|(stamp, _)| *stamp);
        let had = cached.as_ref().and_then(|(_, config)| config.clone());
        let loaded = tokio::task::spawn_blocking(move || {
            let stamp = stamp_of(&cert, &key);
            if stamp.is_none() || stamp == old_stamp {
                return (stamp, None);
            }
            (stamp, Some(crate::certificate::server_config(&cert, &key)))
        })
        .await
        .ok()?;
        let (stamp, load) = loaded;
        // A refused load keeps the old stamp, so the files are tried again at the next check.
        let keep_stamp = if matches!(load, Some(Err(_))) {
            old_stamp
        } else {
            stamp
        };
        let config = match (stamp, load) {
            (None, _) => None,
            (Some(_), None) => had,
            (Some(_), Some(Ok(config))) => {
                let counter = if had.is_some() {
                    // A changed pair, once per change: the edge's one reload while serving.
                    tracing::info!(name, "certificate reloaded");
                    &self.stats.reloads
                } else {
                    &self.stats.loads
                };
                counter.fetch_add(1, Relaxed);
                Some(config)
            }
            (Some(_), Some(Err(e))) => {
                self.stats.reload_failures.fetch_add(1, Relaxed);
                tracing::error!(name, error = %e, "certificate refused; the last good one (if any) keeps serving");
                had
            }
        };
        self.remember(name, config.clone(), keep_stamp, used);
        config
    }

    fn remember(&self, name: &str, config: Option<Arc<ServerConfig>>, stamp: Stamp, used: u64) {
        let mut cache = telemetry::locks::lock(&self.cache);
        if cache.len() >= self.max && !cache.contains_key(name) {
            let oldest = cache
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                cache.remove(&oldest);
                self.stats.evictions.fetch_add(1, Relaxed);
            }
        }
        cache.insert(
            name.to_owned(),
            Entry {
                config,
                stamp,
                checked: Instant::now(),
                used,
            },
        );
    }

    /// Names held now (loaded certificates and remembered absences).
    pub fn cached(&self) -> usize {
        telemetry::locks::lock(&self.cache).len()
    }

    /// Appends the cache's counters as `{prefix}_tls_*`.
    pub fn render(&self, prefix: &str, out: &mut String) {
        telemetry::single(
            out,
            &format!("{prefix}_tls_names_cached"),
            "gauge",
            "Server names held by the certificate cache (absences included).",
            self.cached(),
        );
        let name = format!("{prefix}_tls_certificate_events_total");
        telemetry::family(out, &name, "counter", "Certificate cache events.");
        for (event, v) in [
            ("hit", &self.stats.hits),
            ("load", &self.stats.loads),
            ("reload", &self.stats.reloads),
            ("reload_failed", &self.stats.reload_failures),
            ("evicted", &self.stats.evictions),
            ("unknown_name", &self.stats.unknown_names),
        ] {
            telemetry::sample(out, &name, &[("event", event)], v.load(Relaxed));
        }
    }
}

fn stamp_of(cert: &Path, key: &Path) -> Stamp {
    let c = std::fs::metadata(cert).ok()?;
    let k = std::fs::metadata(key).ok()?;
    Some((c.modified().ok()?, c.len(), k.modified().ok()?, k.len()))
}

/// Whether a client's server name may become a file name: a host name of lowercase labels.
fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_host_names_can_become_file_names() {
        for good in ["ads.example.com", "a", "x-1.example"] {
            assert!(is_host_name(good), "{good}");
        }
        for bad in [
            "",
            "..",
            "a..b",
            "../etc",
            "a/b",
            "Ads.example",
            "_wildcard.x",
            "-a.b",
            ".a",
        ] {
            assert!(!is_host_name(bad), "{bad}");
        }
    }
}
