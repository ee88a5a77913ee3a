//! `gavel edge --config FILE`: the creative edge's TOML, typed, every key documented, unknown
//! keys refused, and validated as a whole with errors naming the key. Restart-only.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use sha2::Digest as _;

use crate::freshness::TtlBounds;
use crate::policy::TierRule;

/// Largest accepted configuration file.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
/// Most origins one edge fronts.
pub const MAX_ORIGINS: usize = 256;
/// Most writers of the markup store.
pub const MAX_WRITERS: usize = 64;

pub use settings::ConfigError;
use settings::invalid;

/// The whole file.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `listen` (default `127.0.0.1:8090`), `admin_listen` (`/metrics` and `/healthz`, default
    /// `127.0.0.1:8091`), `[security]` (who may scrape `/metrics`) and `[http]`: every server's
    /// front door ([`http_front::Front`]).
    #[serde(flatten, skip_deserializing, default = "front")]
    pub front: http_front::Front,
    /// Lifetime of an origin answer that states none, in seconds. Default 300.
    #[serde(default = "default_ttl")]
    pub default_ttl_s: u64,
    /// Longest lifetime kept, whatever the origin says, in seconds. Default 86400.
    #[serde(default = "max_ttl")]
    pub max_ttl_s: u64,
    /// How long past its lifetime a copy may still be served while its origin fails, in
    /// seconds. Default 3600; 0 never serves stale.
    #[serde(default = "stale_if_error")]
    pub stale_if_error_s: u64,
    /// How long an origin's 404 or 410, or its failure, is remembered before it is asked
    /// again, in seconds. Default 10; 0 remembers nothing.
    #[serde(default = "negative_ttl")]
    pub negative_ttl_s: u64,
    /// Largest object carried at all; larger ones get 502. Default 64 MiB.
    #[serde(default = "max_object")]
    pub max_object_bytes: u64,
    /// `Access-Control-Allow-Origin` on assets and stored markup (players fetch VAST from the
    /// page). Default `*`; empty sends none.
    #[serde(default = "default_cors")]
    pub cors_allow_origin: String,
    #[serde(default)]
    pub memory: MemorySection,
    /// The disk tier; without this section there is none.
    #[serde(default)]
    pub disk: Option<DiskSection>,
    /// The origins assets are fetched from: `/assets/{name}/{path}`.
    #[serde(default)]
    pub origins: Vec<OriginConfig>,
    #[serde(default)]
    pub store: StoreSection,
    /// HTTPS with a certificate per server name; without this section, plain HTTP.
    #[serde(default)]
    pub tls: Option<TlsSection>,
}

/// `[memory]`: the memory tier and which objects it takes.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct MemorySection {
    /// Byte budget. Default 256 MiB; 0 keeps nothing in memory.
    pub max_bytes: u64,
    /// Smallest object kept, in bytes. Default 0.
    pub min_object_bytes: u64,
    /// Largest object kept, in bytes. Default 1 MiB.
    pub max_object_bytes: u64,
    /// Media types kept (`image/png`, `video/*`); empty keeps every type. Default empty.
    pub content_types: Vec<String>,
}

impl Default for MemorySection {
    fn default() -> Self {
        MemorySection {
            max_bytes: 256 * 1024 * 1024,
            min_object_bytes: 0,
            max_object_bytes: 1024 * 1024,
            content_types: Vec::new(),
        }
    }
}

/// `[disk]`: the disk tier.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DiskSection {
    /// Directory of the tier (relative to the configuration file); created if missing.
    pub dir: PathBuf,
    /// Byte budget. Default 1 GiB.
    #[serde(default = "disk_max_bytes")]
    pub max_bytes: u64,
    /// Smallest object kept, in bytes. Default 0.
    #[serde(default)]
    pub min_object_bytes: u64,
    /// Largest object kept, in bytes. Default 64 MiB.
    #[serde(default = "max_object")]
    pub max_object_bytes: u64,
    /// Media types kept; empty keeps every type. Default empty.
    #[serde(default)]
    pub content_types: Vec<String>,
}

/// `[[origins]]`: one origin.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct OriginConfig {
    /// The name in `/assets/{name}/...`: letters, digits, `-` and `_`.
    pub name: String,
    /// `http://host[:port][/prefix]`.
    pub url: String,
    /// Connections open to it at most, busy or idle. Default 32.
    #[serde(default = "max_connections")]
    pub max_connections: u32,
    /// Default 1000.
    #[serde(default = "connect_timeout")]
    pub connect_timeout_ms: u64,
    /// From asking to the answer's head, waiting for a pooled connection included. Default 5000.
    #[serde(default = "response_timeout")]
    pub response_timeout_ms: u64,
    /// Longest pause between two body chunks. Default 5000.
    #[serde(default = "response_timeout")]
    pub read_timeout_ms: u64,
    /// A pooled connection idle longer is closed rather than reused. Default 30000.
    #[serde(default = "idle_timeout")]
    pub idle_timeout_ms: u64,
    /// The URL, read (set by validation).
    #[serde(skip)]
    pub parsed: OriginUrl,
}

/// An origin's URL, taken apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginUrl {
    pub host: String,
    pub port: u16,
    /// `host` or `host:port`, as the `Host` header.
    pub authority: String,
    /// The path prefix, `/` at least.
    pub path: String,
}

/// `[store]`: the markup store (`/cache`, compatible with Prebid Cache).
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// Byte budget; the least recently used entries go first beyond it. Default 64 MiB.
    pub max_bytes: u64,
    /// Largest value of one put, in bytes. Default 100 KiB.
    pub max_value_bytes: usize,
    /// Most puts in one request. Default 10.
    pub max_puts: usize,
    /// Lifetime of a put without `ttlseconds`. Default 300.
    pub default_ttl_s: u64,
    /// Longest lifetime; a longer `ttlseconds` is cut to it. Default 3600.
    pub max_ttl_s: u64,
    /// Who may put (`[[store.writers]]`): each with its keys and its own share of `max_bytes`,
    /// so that no writer's puts evict another's entries. Default: none.
    pub writers: Vec<WriterConfig>,
    /// Accept puts without a key (Prebid.js writing VAST from the page, which can hold no
    /// secret). They go to a share of their own, limited per client address. Default false:
    /// a put without a writer's key is refused (401).
    pub anonymous_puts: bool,
    /// Share of `max_bytes` that anonymous puts may hold. Default 0.1.
    pub anonymous_share: f64,
    /// Anonymous put requests per second from one client address (an IPv6 client's /64), with
    /// a burst of one second's worth. Default 20.
    pub anonymous_puts_per_s: u64,
    /// Anonymous put bytes per second from one client address. Default 262144.
    pub anonymous_bytes_per_s: u64,
    /// The writers' key digests, read from their files or variables when the file is
    /// validated; index-aligned with `writers`.
    #[serde(skip)]
    pub writer_keys: Vec<Vec<[u8; 32]>>,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            max_bytes: 64 * 1024 * 1024,
            max_value_bytes: 100 * 1024,
            max_puts: 10,
            default_ttl_s: 300,
            max_ttl_s: 3_600,
            writers: Vec::new(),
            anonymous_puts: false,
            anonymous_share: 0.1,
            anonymous_puts_per_s: 20,
            anonymous_bytes_per_s: 256 * 1024,
            writer_keys: Vec::new(),
        }
    }
}

/// One writer of the markup store (`[[store.writers]]`): an exchange, a Prebid Server.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WriterConfig {
    /// Its name, in metrics and logs.
    pub name: String,
    /// File of its keys, one per line (several while rotating; relative to this file). It
    /// sends one as `Authorization: Bearer <key>`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Environment variable holding its keys (comma-separated), instead of a file.
    #[serde(default)]
    pub key_env: Option<String>,
    /// Share of `store.max_bytes` its entries may hold; beyond it, its own least recently used
    /// go. Default: what the other shares leave, split evenly among writers without one.
    #[serde(default)]
    pub share: Option<f64>,
    /// Put requests per second at most (a burst of one second's worth); 0: no cap. Default 0.
    #[serde(default)]
    pub max_puts_per_s: u64,
    /// Put bytes per second at most; 0: no cap. Default 0.
    #[serde(default)]
    pub max_bytes_per_s: u64,
}

impl StoreSection {
    /// Each writer's byte budget, index-aligned with `writers`, then the anonymous puts' (0
    /// when they are refused). Validation makes the shares sum to at most 1.
    pub fn budgets(&self) -> Vec<u64> {
        // In millionths, so that the split is exact integer arithmetic.
        let ppm = |share: f64| (share * 1e6).round() as u64;
        let anonymous = if self.anonymous_puts {
            ppm(self.anonymous_share)
        } else {
            0
        };
        let explicit: u64 = self.writers.iter().filter_map(|w| w.share).map(ppm).sum();
        let unshared = self.writers.iter().filter(|w| w.share.is_none()).count() as u64;
        let rest = 1_000_000u64
            .saturating_sub(anonymous + explicit)
            .checked_div(unshared)
            .unwrap_or(0);
        let bytes = |ppm: u64| {
            u64::try_from(u128::from(self.max_bytes) * u128::from(ppm) / 1_000_000).unwrap_or(0)
        };
        self.writers
            .iter()
            .map(|w| bytes(w.share.map_or(rest, ppm)))
            .chain(std::iter::once(bytes(anonymous)))
            .collect()
    }
}

impl StoreSection {
    /// Largest `POST /cache` body: every put at its largest, JSON-escaped, plus the envelope.
    pub fn max_request_bytes(&self) -> usize {
        self.max_puts
            .saturating_mul(self.max_value_bytes.saturating_mul(2).saturating_add(256))
            .saturating_add(1024)
    }
}

/// `[http]`: the same section as the exchange's and the bidder's. `max_body_bytes`, when set,
/// caps a request body below what `[store]` allows a put.
pub use http_front::HttpSection;

/// `[tls]`: certificates per server name (SNI), read from a directory.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// Directory of `{name}.crt` and `{name}.key` pairs (relative to the configuration file);
    /// `_wildcard.{parent}` serves `*.{parent}`, and `default` clients without a known name.
    pub cert_dir: PathBuf,
    /// Certificates kept loaded at most; the least recently used is dropped beyond. Default 1000.
    #[serde(default = "max_certs")]
    pub max_certs: usize,
    /// A loaded certificate is checked against its files again after this long, in seconds,
    /// and reloaded if they changed. Default 60.
    #[serde(default = "cert_check")]
    pub check_interval_s: u64,
}

/// The edge's variables are `GAVEL_EDGE__<KEY>__...`.
pub const ENV_SERVER: &str = "EDGE";

fn front() -> http_front::Front {
    http_front::Front::listening(
        SocketAddr::from(([127, 0, 0, 1], 8090)),
        SocketAddr::from(([127, 0, 0, 1], 8091)),
    )
}
fn default_ttl() -> u64 {
    300
}
fn max_ttl() -> u64 {
    86_400
}
fn stale_if_error() -> u64 {
    3_600
}
fn negative_ttl() -> u64 {
    10
}
fn max_object() -> u64 {
    64 * 1024 * 1024
}
fn default_cors() -> String {
    "*".into()
}
fn disk_max_bytes() -> u64 {
    1024 * 1024 * 1024
}
fn max_connections() -> u32 {
    32
}
fn connect_timeout() -> u64 {
    1_000
}
fn response_timeout() -> u64 {
    5_000
}
fn idle_timeout() -> u64 {
    30_000
}
fn max_certs() -> usize {
    1_000
}
fn cert_check() -> u64 {
    60
}

impl settings::WithShared for Config {
    type Shared = http_front::Front;
    fn shared_defaults() -> http_front::Front {
        front()
    }
    fn set_shared(&mut self, front: http_front::Front) {
        self.front = front;
    }
}

impl settings::ServerFile for Config {
    const RULES: settings::FileRules = settings::FileRules {
        server: "the edge",
        max_bytes: MAX_CONFIG_BYTES,
        moved: &[http_front::MOVED_SHUTDOWN_GRACE],
    };
    const ENV_SERVER: &'static str = ENV_SERVER;

    /// `[security]`'s files, the disk tier's directory and the certificates' directory (as
    /// [`Config::validate_in`] does for a configuration given as text).
    fn resolve_paths(&mut self, dir: &Path) {
        self.front.resolve_paths(dir);
        if let Some(disk) = &mut self.disk
            && disk.dir.is_relative()
            && !disk.dir.as_os_str().is_empty()
        {
            disk.dir = dir.join(&disk.dir);
        }
        if let Some(tls) = &mut self.tls
            && tls.cert_dir.is_relative()
        {
            tls.cert_dir = dir.join(&tls.cert_dir);
        }
    }
}

impl Config {
    /// Reads, parses and validates `path`; relative paths in it are taken from its directory.
    ///
    /// # Errors
    /// A message naming the file or the key at fault.
    /// `GAVEL_EDGE__...` variables are laid over the file (docs/config.md).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        // The file's relative paths were resolved as it loaded: checked, not joined again.
        settings::load_file::<Config>(path)?.check(path.parent())
    }

    /// A configuration from the process's `GAVEL_EDGE__...` variables alone, over the
    /// defaults (paths relative to the working directory).
    ///
    /// # Errors
    /// A message naming the variable or the key at fault.
    pub fn load_env() -> Result<Config, ConfigError> {
        settings::load_env::<Config>()?.validate_in(None)
    }

    /// Parses a TOML document (not yet validated).
    ///
    /// # Errors
    /// The TOML error, with the key it stopped at.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse_with(text, &settings::EnvOverlay::default())
    }

    /// [`Config::parse`] with `overlay`'s variables laid over the document.
    ///
    /// # Errors
    /// The TOML error, with the key or the variable it stopped at.
    pub fn parse_with(text: &str, overlay: &settings::EnvOverlay) -> Result<Config, ConfigError> {
        settings::parse_text::<Config>(text, overlay)
    }

    /// Makes relative paths start at `dir` (as loading a file does), then [`Config::check`]s.
    ///
    /// # Errors
    /// The first key at fault.
    pub fn validate_in(mut self, dir: Option<&Path>) -> Result<Config, ConfigError> {
        if let Some(d) = dir {
            settings::ServerFile::resolve_paths(&mut self, d);
        }
        self.check(dir)
    }

    /// Checks every value, reads the origins' URLs and the writers' keys (a relative key file
    /// from `dir`); paths are taken as they are.
    ///
    /// # Errors
    /// The first key at fault.
    fn check(mut self, dir: Option<&Path>) -> Result<Config, ConfigError> {
        const YEAR_S: u64 = 365 * 86_400;
        const GIB: u64 = 1024 * 1024 * 1024;
        settings::check_range("max_ttl_s", self.max_ttl_s, 1..=YEAR_S)?;
        if !(1..=self.max_ttl_s).contains(&self.default_ttl_s) {
            return Err(invalid("default_ttl_s", "must be 1..=max_ttl_s"));
        }
        if self.stale_if_error_s > YEAR_S {
            return Err(invalid("stale_if_error_s", "must be at most 31536000"));
        }
        if self.negative_ttl_s > 3_600 {
            return Err(invalid("negative_ttl_s", "must be at most 3600"));
        }
        settings::check_range("max_object_bytes", self.max_object_bytes, 1..=GIB)?;
        if self.cors_allow_origin.len() > 256
            || http::HeaderValue::from_str(&self.cors_allow_origin).is_err()
        {
            return Err(invalid(
                "cors_allow_origin",
                "must be a header value of at most 256 bytes",
            ));
        }
        check_rule("memory", &self.memory_rule())?;
        if self.memory.max_bytes > 1024 * GIB {
            return Err(invalid("memory.max_bytes", "must be at most 1 TiB"));
        }
        if let Some(disk) = &mut self.disk {
            if disk.dir.as_os_str().is_empty() {
                return Err(invalid("disk.dir", "must name a directory"));
            }
            if disk.max_bytes == 0 {
                return Err(invalid("disk.max_bytes", "must be at least 1"));
            }
        }
        if let Some(rule) = self.disk_rule() {
            check_rule("disk", &rule)?;
        }
        self.front.check()?;
        self.check_origins()?;
        self.check_store()?;
        self.read_writer_keys(dir)?;
        if let Some(tls) = &self.tls {
            settings::check_range("tls.max_certs", tls.max_certs, 1..=1_000_000)?;
            settings::check_range("tls.check_interval_s", tls.check_interval_s, 1..=86_400)?;
        }
        Ok(self)
    }

    fn check_origins(&mut self) -> Result<(), ConfigError> {
        if self.origins.len() > MAX_ORIGINS {
            return Err(invalid("origins", format!("at most {MAX_ORIGINS}")));
        }
        let mut names = HashSet::new();
        for (i, origin) in self.origins.iter_mut().enumerate() {
            let key = |field: &str| format!("origins[{i}].{field}");
            let name_ok = !origin.name.is_empty()
                && origin.name.len() <= 64
                && origin
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !name_ok {
                return Err(invalid(
                    key("name"),
                    "must be 1 to 64 letters, digits, '-' or '_'",
                ));
            }
            if !names.insert(origin.name.clone()) {
                return Err(invalid(
                    key("name"),
                    format!("{:?} is named twice", origin.name),
                ));
            }
            origin.parsed = parse_origin_url(&origin.url).map_err(|p| invalid(key("url"), p))?;
            settings::check_range(key("max_connections"), origin.max_connections, 1..=10_000)?;
            for (field, ms) in [
                ("connect_timeout_ms", origin.connect_timeout_ms),
                ("response_timeout_ms", origin.response_timeout_ms),
                ("read_timeout_ms", origin.read_timeout_ms),
                ("idle_timeout_ms", origin.idle_timeout_ms),
            ] {
                settings::check_range(key(field), ms, 1..=600_000)?;
            }
        }
        Ok(())
    }

    fn check_store(&self) -> Result<(), ConfigError> {
        let s = &self.store;
        settings::check_range(
            "store.max_value_bytes",
            s.max_value_bytes,
            1..=16 * 1024 * 1024,
        )?;
        settings::check_range("store.max_puts", s.max_puts, 1..=1_000)?;
        settings::check_range("store.max_ttl_s", s.max_ttl_s, 1..=86_400)?;
        if !(1..=s.max_ttl_s).contains(&s.default_ttl_s) {
            return Err(invalid(
                "store.default_ttl_s",
                "must be 1..=store.max_ttl_s",
            ));
        }
        if s.max_request_bytes() > 256 * 1024 * 1024 {
            return Err(invalid(
                "store.max_puts",
                "max_puts x max_value_bytes must stay under 128 MiB",
            ));
        }
        if s.writers.len() > MAX_WRITERS {
            return Err(invalid("store.writers", format!("at most {MAX_WRITERS}")));
        }
        let share_ok = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if !share_ok(s.anonymous_share) || (s.anonymous_puts && s.anonymous_share <= 0.0) {
            return Err(invalid(
                "store.anonymous_share",
                "must be a fraction above 0 and at most 1 (with anonymous_puts)",
            ));
        }
        if s.anonymous_puts && (s.anonymous_puts_per_s == 0 || s.anonymous_bytes_per_s == 0) {
            return Err(invalid(
                "store.anonymous_puts_per_s",
                "anonymous puts need both per-client limits above 0 (anonymous_puts_per_s, anonymous_bytes_per_s)",
            ));
        }
        let mut names = HashSet::new();
        for (i, w) in s.writers.iter().enumerate() {
            let key = |field: &str| format!("store.writers[{i}].{field}");
            let name_ok = !w.name.is_empty()
                && w.name.len() <= 64
                && w.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !name_ok || w.name == "anonymous" {
                return Err(invalid(
                    key("name"),
                    "must be 1 to 64 letters, digits, '-' or '_', and not \"anonymous\"",
                ));
            }
            if !names.insert(w.name.as_str()) {
                return Err(invalid(key("name"), format!("{:?} is named twice", w.name)));
            }
            if w.share.is_some_and(|x| !share_ok(x) || x <= 0.0) {
                return Err(invalid(
                    key("share"),
                    "must be a fraction above 0 and at most 1",
                ));
            }
        }
        let anonymous = if s.anonymous_puts {
            s.anonymous_share
        } else {
            0.0
        };
        let explicit: f64 = s.writers.iter().filter_map(|w| w.share).sum::<f64>() + anonymous;
        let unshared = s.writers.iter().any(|w| w.share.is_none());
        if explicit > 1.0 + 1e-9 || (unshared && explicit >= 1.0) {
            return Err(invalid(
                "store.writers",
                "the shares (and anonymous_share) must sum to at most 1, leaving room for writers without a share",
            ));
        }
        Ok(())
    }

    /// Reads every writer's keys (blocking: at load), kept as SHA-256 digests.
    fn read_writer_keys(&mut self, dir: Option<&Path>) -> Result<(), ConfigError> {
        let mut seen = HashSet::new();
        let mut all = Vec::with_capacity(self.store.writers.len());
        for (i, w) in self.store.writers.iter().enumerate() {
            let key = |field: &str| format!("store.writers[{i}].{field}");
            let path = w
                .key_file
                .as_ref()
                .map(|file| settings::relative_to(dir, file));
            let owner = format!("store writer {:?}", w.name);
            let env = |var: &str| std::env::var(var).ok();
            let (_, keys) =
                settings::read_key_source(&owner, path.as_deref(), w.key_env.as_deref(), &env)
                    .map_err(|e| e.rekey(key))?
                    .ok_or_else(|| {
                        invalid(key("key_file"), "give exactly one of key_file and key_env")
                    })?;
            if keys.is_empty() || keys.len() > 8 {
                return Err(invalid(key("key_file"), "must hold 1 to 8 keys"));
            }
            let mut digests = Vec::with_capacity(keys.len());
            for (n, k) in keys.iter().enumerate() {
                if k.len() < settings::MIN_SECRET_BYTES {
                    return Err(invalid(
                        key("key_file"),
                        format!(
                            "key {} is {} bytes; at least {} (e.g. `openssl rand -hex 32`)",
                            n + 1,
                            k.len(),
                            settings::MIN_SECRET_BYTES
                        ),
                    ));
                }
                let d: [u8; 32] = sha2::Sha256::digest(k.as_bytes()).into();
                if !seen.insert(d) {
                    return Err(invalid(
                        key("key_file"),
                        "a key is also another writer's (or listed twice)",
                    ));
                }
                digests.push(d);
            }
            all.push(digests);
        }
        self.store.writer_keys = all;
        Ok(())
    }

    /// The memory tier's rule.
    pub fn memory_rule(&self) -> TierRule {
        TierRule {
            min_object_bytes: self.memory.min_object_bytes,
            max_object_bytes: self.memory.max_object_bytes,
            content_types: self.memory.content_types.clone(),
        }
    }

    /// The disk tier's rule, when there is a disk tier.
    pub fn disk_rule(&self) -> Option<TierRule> {
        self.disk.as_ref().map(|d| TierRule {
            min_object_bytes: d.min_object_bytes,
            max_object_bytes: d.max_object_bytes,
            content_types: d.content_types.clone(),
        })
    }

    /// The lifetime bounds of assets.
    pub fn ttl_bounds(&self) -> TtlBounds {
        TtlBounds {
            default: Duration::from_secs(self.default_ttl_s),
            max: Duration::from_secs(self.max_ttl_s),
        }
    }

    /// The listener's limits.
    pub fn http_limits(&self) -> http_front::Limits {
        self.front.http.limits()
    }

    /// Largest request body read: a store put's, capped by `http.max_body_bytes` when set.
    pub fn max_request_bytes(&self) -> usize {
        let store = self.store.max_request_bytes();
        self.front.http.body_limit(store).min(store)
    }
}

fn check_rule(tier: &str, rule: &TierRule) -> Result<(), ConfigError> {
    if rule.min_object_bytes > rule.max_object_bytes {
        return Err(invalid(
            format!("{tier}.min_object_bytes"),
            "must not exceed max_object_bytes",
        ));
    }
    if let Some(bad) = rule.bad_pattern() {
        return Err(invalid(
            format!("{tier}.content_types"),
            format!("{bad:?} is not \"type/subtype\" or \"type/*\""),
        ));
    }
    Ok(())
}

/// Takes `http://host[:port][/prefix]` apart.
///
/// # Errors
/// What is wrong with it, for the message naming the key.
pub(crate) fn parse_origin_url(url: &str) -> Result<OriginUrl, String> {
    let rest = match url.strip_prefix("http://") {
        Some(rest) => rest,
        None if url.starts_with("https://") => {
            return Err("https origins are not supported; reach the origin over http (a private network or a local TLS-ending proxy)".into());
        }
        None => return Err(format!("{url:?} must start with http://")),
    };
    if url.len() > 2_048 || url.contains(['?', '#', '@', ' ', '\\']) {
        return Err(format!(
            "{url:?} must be at most 2048 bytes, without query, fragment, user or spaces"
        ));
    }
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("{url:?} has an unclosed IPv6 address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("{url:?} has junk after its IPv6 address")),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{url:?} has no host"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{url:?} has a bad port"))?,
        None => 80,
    };
    Ok(OriginUrl {
        host: host.to_owned(),
        port,
        authority: authority.to_owned(),
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(toml: &str) -> String {
        match Config::parse(toml).and_then(|c| c.validate_in(None)) {
            Ok(_) => panic!("accepted: {toml}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_empty_file_is_a_working_edge_without_origins_or_disk() {
        let c = Config::parse("")
            .and_then(|c| c.validate_in(None))
            .expect("valid");
        assert_eq!(c.front.listen.port(), 8090);
        assert!(c.disk.is_none() && c.origins.is_empty() && c.tls.is_none());
        assert_eq!(c.memory.max_object_bytes, 1024 * 1024);
    }

    #[test]
    fn a_full_file_reads_with_relative_paths_under_its_directory() {
        let toml = r#"
            listen = "127.0.0.1:9999"
            [memory]
            max_bytes = 1000000
            content_types = ["image/*"]
            [disk]
            dir = "cache"
            max_bytes = 5000000
            [[origins]]
            name = "cdn"
            url = "http://[::1]:9000/creatives/"
            [tls]
            cert_dir = "certs"
        "#;
        let c = Config::parse(toml)
            .and_then(|c| c.validate_in(Some(Path::new("/etc/gavel"))))
            .expect("valid");
        assert_eq!(
            c.disk.as_ref().map(|d| d.dir.clone()),
            Some("/etc/gavel/cache".into())
        );
        assert_eq!(
            c.tls.as_ref().map(|t| t.cert_dir.clone()),
            Some("/etc/gavel/certs".into())
        );
        let url = &c.origins[0].parsed;
        assert_eq!(
            (url.host.as_str(), url.port, url.path.as_str()),
            ("::1", 9000, "/creatives/")
        );
        assert_eq!(url.authority, "[::1]:9000");
    }

    /// A file named by a relative path (`--config conf/edge.toml`): its relative paths start
    /// at `conf` once, not at `conf/conf`. Loading resolves them (`ServerFile::resolve_paths`)
    /// and then only checks; a configuration given as text is resolved by `validate_in`.
    #[test]
    fn relative_paths_of_a_relative_file_are_joined_once() {
        let text = "[disk]\ndir = \"cache\"\nmax_bytes = 1000\n[tls]\ncert_dir = \"certs\"\n";
        let conf = Path::new("conf");
        let mut loaded = Config::parse(text).unwrap();
        settings::ServerFile::resolve_paths(&mut loaded, conf);
        let loaded = loaded.check(Some(conf)).expect("valid");
        let given = Config::parse(text)
            .and_then(|c| c.validate_in(Some(conf)))
            .expect("valid");
        for c in [loaded, given] {
            assert_eq!(c.disk.unwrap().dir, Path::new("conf/cache"));
            assert_eq!(c.tls.unwrap().cert_dir, Path::new("conf/certs"));
        }
    }

    #[test]
    fn every_bad_value_is_refused_naming_its_key() {
        for (toml, key) in [
            ("default_ttl_s = 0", "default_ttl_s"),
            ("max_ttl_s = 10\ndefault_ttl_s = 20", "default_ttl_s"),
            ("max_object_bytes = 0", "max_object_bytes"),
            ("cors_allow_origin = \"a\\nb\"", "cors_allow_origin"),
            (
                "[memory]\nmin_object_bytes = 5\nmax_object_bytes = 4",
                "memory.min_object_bytes",
            ),
            (
                "[memory]\ncontent_types = [\"image\"]",
                "memory.content_types",
            ),
            ("[disk]\ndir = \"\"", "disk.dir"),
            ("[disk]\ndir = \"d\"\nmax_bytes = 0", "disk.max_bytes"),
            (
                "[[origins]]\nname = \"a b\"\nurl = \"http://x\"",
                "origins[0].name",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"ftp://x\"",
                "origins[0].url",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"https://x\"",
                "origins[0].url",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"http://x:0\"",
                "origins[0].url",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"http://u@x\"",
                "origins[0].url",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"http://x\"\nmax_connections = 0",
                "origins[0].max_connections",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"http://x\"\nread_timeout_ms = 0",
                "origins[0].read_timeout_ms",
            ),
            (
                "[[origins]]\nname = \"a\"\nurl = \"http://x\"\n[[origins]]\nname = \"a\"\nurl = \"http://y\"",
                "origins[1].name",
            ),
            ("[store]\nmax_puts = 0", "store.max_puts"),
            (
                "[store]\nmax_ttl_s = 100\ndefault_ttl_s = 101",
                "store.default_ttl_s",
            ),
            ("[http]\nmax_connections = 0", "http.max_connections"),
            ("[tls]\ncert_dir = \"c\"\nmax_certs = 0", "tls.max_certs"),
        ] {
            let e = error_of(toml);
            assert!(e.starts_with(&format!("{key}:")), "{toml:?} gave {e:?}");
        }
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let e = error_of("[memory]\nmax_byte = 5");
        assert!(e.contains("max_byte"), "{e}");
    }
}
