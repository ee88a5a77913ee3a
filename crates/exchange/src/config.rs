//! The exchange's configuration: a TOML file parsed into typed structs, every key documented,
//! unknown keys refused, and validated as a whole before anything starts serving.
//!
//! A loaded [`Config`] is immutable; the server holds it behind an `Arc` so that a reload can build
//! a new one aside and swap it in (see ARCHITECTURE.md).

use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use admission::DeadlineConfig;

use openrtb::Price;
use serde::Deserialize;

/// Largest accepted configuration file; a bigger one is certainly not a config.
pub const MAX_CONFIG_BYTES: usize = 4 * 1024 * 1024;
/// Keys that moved to `[deadline]` (shared with the bidder) from this file's `[auction]`: a
/// file that still has them is refused with their new name.
const MOVED_KEYS: [(&str, &str); 3] = [
    ("auction.default_tmax_ms", "deadline.default_tmax_ms"),
    ("auction.max_tmax_ms", "deadline.max_tmax_ms"),
    ("auction.answer_margin_ms", "deadline.answer_margin_ms"),
];
/// Upper bound on configured bidders: fan-out beyond this is a mistake, not a plan.
pub const MAX_BIDDERS: usize = 1024;

/// Why a configuration was refused. Messages name the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Read(#[from] settings::ReadError),
    #[error("config is {0} bytes; the limit is {MAX_CONFIG_BYTES}")]
    TooLarge(usize),
    #[error("{old} has moved: write it as {new}")]
    Moved {
        old: &'static str,
        new: &'static str,
    },
    #[error("config is not valid TOML for the exchange: {0}")]
    Parse(String),
    #[error("{key}: {problem}")]
    Invalid { key: String, problem: String },
}

fn invalid(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        problem: problem.into(),
    }
}

/// The whole exchange configuration (`gavel exchange --config FILE`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on. Default `127.0.0.1:8080`; `--listen` overrides it.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Address of the admin endpoints (`/admin/*`). Default `127.0.0.1:8081`; a non-loopback
    /// address needs `security.admin_remote = true`.
    #[serde(default = "default_admin_listen")]
    pub admin_listen: SocketAddr,
    /// Admin access: token, audit log (docs/security.md).
    #[serde(default)]
    pub security: edge::AdminSettings,
    /// Name of this exchange node: prefix of its auction ids, so ids from several nodes differ.
    #[serde(default = "default_node")]
    pub node: String,
    #[serde(default)]
    pub http: HttpConfig,
    /// How a request's `tmax` becomes its deadline (shared with the bidder).
    #[serde(default)]
    pub deadline: DeadlineConfig,
    #[serde(default)]
    pub auction: AuctionSection,
    #[serde(default)]
    pub schain: SchainConfig,
    #[serde(default)]
    pub notices: NoticeConfig,
    /// Bound on auctions in flight; the excess gets an immediate no-bid (docs/config.md).
    #[serde(default)]
    pub admission: admission::AdmissionConfig,
    /// Circuit breakers that stop calling a failing bidder for a while.
    #[serde(default)]
    pub breaker: crate::breaker::BreakerConfig,
    /// The demand partners every auction fans out to.
    #[serde(default)]
    pub bidders: Vec<BidderConfig>,
}

/// Limits on what the server reads.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Largest accepted request body in bytes; larger bodies get 413. Default 256 KiB.
    pub max_body_bytes: usize,
    /// Time allowed to receive a request's headers, then its body, before the connection is
    /// closed (slowloris defence), in milliseconds. Default 5000.
    pub read_timeout_ms: u64,
    /// Largest bidder response body read, in bytes; larger answers count as errors. Default 256 KiB.
    pub max_bidder_response_bytes: usize,
    /// How long after the auction's deadline a late bidder answer is still read (and thrown
    /// away) so that its connection can be reused, in milliseconds. Default 1000.
    pub bidder_drain_ms: u64,
    /// Open client connections at most; more are closed as soon as accepted. Default 4096.
    pub max_connections: u32,
    /// How long a kept-alive connection may wait for its next request, in ms. Default 60000.
    pub idle_timeout_ms: u64,
    /// Largest request line plus headers, in bytes (431 beyond). Default 16384.
    pub max_header_bytes: usize,
    /// On SIGTERM, how long auctions in flight may take to finish, in ms. Default 5000.
    pub shutdown_grace_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body_bytes: 256 * 1024,
            read_timeout_ms: 5_000,
            max_bidder_response_bytes: 256 * 1024,
            bidder_drain_ms: 1_000,
            max_connections: 4_096,
            idle_timeout_ms: 60_000,
            max_header_bytes: 16 * 1024,
            shutdown_grace_ms: 5_000,
        }
    }
}

/// The `[auction]` section as written in the file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuctionSection {
    /// Amount added to the second price in second-price auctions, CPM in the request currency.
    /// Default 0.01.
    pub second_price_increment: f64,
    /// Auction currency when a request names none (`cur` absent). Default "USD", as the spec says.
    pub default_currency: String,
}

impl Default for AuctionSection {
    fn default() -> Self {
        AuctionSection {
            second_price_increment: 0.01,
            default_currency: "USD".to_owned(),
        }
    }
}

/// The exchange's own node in `source.schain`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SchainConfig {
    /// Canonical domain of this exchange's advertising system (`asi`). Default "gavel.example".
    pub asi: String,
    /// Seller id the exchange appends as `sid`. Default "gavel".
    pub sid: String,
}

impl Default for SchainConfig {
    fn default() -> Self {
        SchainConfig {
            asi: "gavel.example".to_owned(),
            sid: "gavel".to_owned(),
        }
    }
}

/// Which notices the exchange fires itself, and how.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NoticeConfig {
    /// Fire the winner's `nurl` (win notice). Default true.
    pub fire_nurl: bool,
    /// Fire the winner's `burl` at auction end: Gavel treats a won auction as billable, since it
    /// has no render tracker of its own. Set false when the seller fires `burl` on render.
    /// Default true.
    pub fire_burl: bool,
    /// Fire losers' `lurl` with `${AUCTION_LOSS}` set. Default false.
    pub fire_lurl: bool,
    /// Time allowed for one notice, in milliseconds. Default 2000.
    pub timeout_ms: u64,
    /// Notices waiting to be sent; beyond this they are dropped and counted. Default 10000.
    pub queue: usize,
    /// Concurrent notice senders. Default 8.
    pub workers: usize,
}

impl Default for NoticeConfig {
    fn default() -> Self {
        NoticeConfig {
            fire_nurl: true,
            fire_burl: true,
            fire_lurl: false,
            timeout_ms: 2_000,
            queue: 10_000,
            workers: 8,
        }
    }
}

/// One demand partner.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BidderConfig {
    /// Unique name, used in metrics and reports.
    pub name: String,
    /// `http://host:port/path` the bid requests are POSTed to. The host is resolved when the
    /// configuration loads.
    pub endpoint: String,
    /// Cap on open connections (and so on concurrent requests) to this bidder. Default 64.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// A disabled bidder stays configured but gets no traffic. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Requests per second at most (a token bucket with one second of burst); auctions beyond
    /// it skip this bidder. Default: no cap.
    #[serde(default)]
    pub max_qps: Option<u32>,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_admin_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8081))
}
fn default_node() -> String {
    "gavel".to_owned()
}
fn default_max_connections() -> u32 {
    64
}
fn default_true() -> bool {
    true
}

/// A bidder endpoint split into what the connection pool needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// Value of the `Host` header.
    pub authority: String,
    /// Path and query sent in the request line.
    pub path: String,
}

/// Parses `http://host[:port]/path` and resolves the host (blocking; call at load time only).
pub fn parse_endpoint(url: &str) -> Result<Endpoint, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(format!(
                "{url:?}: scheme {other:?} is not supported, use http"
            ));
        }
        None => {
            return Err(format!(
                "{url:?}: no scheme, expected http://host:port/path"
            ));
        }
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{url:?}: no host"))?
        .clone();
    let host = authority.host();
    if host.is_empty() {
        return Err(format!("{url:?}: empty host"));
    }
    let port = authority.port_u16().unwrap_or(80);
    let host_for_lookup = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (host_for_lookup, port)
        .to_socket_addrs()
        .map_err(|e| format!("{url:?}: cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url:?}: {host} resolves to no address"))?;
    // The request line needs origin form: `http://h:1?q` has an empty path, which becomes "/".
    let path = match (uri.path(), uri.query()) {
        ("", None) => "/".to_owned(),
        ("", Some(q)) => format!("/?{q}"),
        (p, None) => p.to_owned(),
        (p, Some(q)) => format!("{p}?{q}"),
    };
    Ok(Endpoint {
        addr,
        authority: authority.as_str().to_owned(),
        path,
    })
}

/// A configuration that passed validation, with the derived values the server uses.
#[derive(Debug, Clone)]
pub struct Validated {
    pub config: Config,
    /// The file it was read from ([`Config::load`]): what [`crate::Exchange::watch`] follows
    /// and [`crate::Exchange::reload`] reads again. `None` for a configuration built from text.
    pub source: Option<PathBuf>,
    pub second_price_increment: Price,
    /// Index-aligned with `config.bidders`.
    pub endpoints: Vec<Endpoint>,
}

impl Validated {
    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.config.http.read_timeout_ms)
    }
    /// What the server accepts from client connections.
    pub fn limits(&self) -> edge::Limits {
        http_limits(&self.config.http).limits()
    }
}

fn http_limits(h: &HttpConfig) -> edge::HttpLimits {
    edge::HttpLimits {
        max_connections: h.max_connections,
        read_timeout_ms: h.read_timeout_ms,
        idle_timeout_ms: h.idle_timeout_ms,
        max_header_bytes: h.max_header_bytes,
        shutdown_grace_ms: h.shutdown_grace_ms,
    }
}

impl Config {
    /// Reads (at most [`MAX_CONFIG_BYTES`]), parses and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Validated, ConfigError> {
        let mut validated = Config::from_toml(&settings::read_bounded(path, MAX_CONFIG_BYTES)?)?;
        if let Some(dir) = path.parent() {
            validated.config.security.resolve_paths(dir);
        }
        validated.source = Some(path.to_owned());
        Ok(validated)
    }

    /// Parses and validates a TOML document.
    pub fn from_toml(text: &str) -> Result<Validated, ConfigError> {
        if text.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge(text.len()));
        }
        let config: Config =
            toml::from_str(text).map_err(|e| match settings::moved_key(text, &MOVED_KEYS) {
                Some((old, new)) => ConfigError::Moved { old, new },
                None => ConfigError::Parse(e.to_string()),
            })?;
        config.validate()
    }

    /// Checks every value and resolves bidder endpoints.
    pub fn validate(self) -> Result<Validated, ConfigError> {
        if self.node.is_empty() || self.node.len() > 64 || !self.node.is_ascii() {
            return Err(invalid("node", "must be 1-64 ASCII characters"));
        }
        self.deadline
            .validate()
            .map_err(|(key, problem)| invalid(key, problem))?;
        self.security
            .validate(self.admin_listen)
            .map_err(|(key, problem)| invalid(key, problem))?;
        if self.admin_listen == self.listen && self.listen.port() != 0 {
            return Err(invalid(
                "admin_listen",
                "must differ from listen: the auction port never serves /admin",
            ));
        }
        let a = &self.auction;
        let increment = Price::from_cpm(a.second_price_increment)
            .map_err(|e| invalid("auction.second_price_increment", e.to_string()))?;
        if increment.micros() < 0 {
            return Err(invalid(
                "auction.second_price_increment",
                "must not be negative",
            ));
        }
        if a.default_currency.len() != 3
            || !a.default_currency.chars().all(|c| c.is_ascii_uppercase())
        {
            return Err(invalid(
                "auction.default_currency",
                "must be an ISO-4217 code such as \"USD\"",
            ));
        }
        let h = &self.http;
        if h.max_body_bytes == 0 || h.max_body_bytes > 64 * 1024 * 1024 {
            return Err(invalid("http.max_body_bytes", "must be 1..=67108864"));
        }
        if h.max_bidder_response_bytes == 0 || h.max_bidder_response_bytes > 64 * 1024 * 1024 {
            return Err(invalid(
                "http.max_bidder_response_bytes",
                "must be 1..=67108864",
            ));
        }
        if h.bidder_drain_ms > 60_000 {
            return Err(invalid("http.bidder_drain_ms", "must be at most 60000"));
        }
        if h.read_timeout_ms == 0 || h.read_timeout_ms > 600_000 {
            return Err(invalid("http.read_timeout_ms", "must be 1..=600000"));
        }
        http_limits(h)
            .check()
            .map_err(|(key, problem)| invalid(key, problem))?;
        self.admission
            .validate()
            .map_err(|(key, problem)| invalid(key, problem))?;
        self.breaker
            .validate()
            .map_err(|(key, problem)| invalid(key, problem))?;
        let n = &self.notices;
        if n.timeout_ms == 0 || n.timeout_ms > 60_000 {
            return Err(invalid("notices.timeout_ms", "must be 1..=60000"));
        }
        if n.queue == 0 || n.queue > 1_000_000 {
            return Err(invalid("notices.queue", "must be 1..=1000000"));
        }
        if n.workers == 0 || n.workers > 1024 {
            return Err(invalid("notices.workers", "must be 1..=1024"));
        }
        if self.schain.asi.is_empty() {
            return Err(invalid("schain.asi", "must not be empty"));
        }
        if self.bidders.len() > MAX_BIDDERS {
            return Err(invalid("bidders", format!("at most {MAX_BIDDERS} bidders")));
        }
        let mut names = HashSet::new();
        let mut endpoints = Vec::with_capacity(self.bidders.len());
        for (i, b) in self.bidders.iter().enumerate() {
            let key = |field: &str| format!("bidders[{i}].{field} ({:?})", b.name);
            if b.name.is_empty() || b.name.len() > 64 {
                return Err(invalid(key("name"), "must be 1-64 characters"));
            }
            if !b
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(invalid(
                    key("name"),
                    "may hold only ASCII letters, digits, '-', '_' and '.'",
                ));
            }
            if !names.insert(b.name.as_str()) {
                return Err(invalid(key("name"), "duplicate bidder name"));
            }
            if b.max_connections == 0 || b.max_connections > 65_536 {
                return Err(invalid(key("max_connections"), "must be 1..=65536"));
            }
            if b.max_qps.is_some_and(|q| q == 0 || q > 1_000_000) {
                return Err(invalid(key("max_qps"), "must be 1..=1000000"));
            }
            endpoints.push(parse_endpoint(&b.endpoint).map_err(|e| invalid(key("endpoint"), e))?);
        }
        Ok(Validated {
            source: None,
            second_price_increment: increment,
            endpoints,
            config: self,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
listen = "127.0.0.1:8080"
[deadline]
default_tmax_ms = 100
max_tmax_ms = 1000
[auction]
second_price_increment = 0.01
[[bidders]]
name = "dsp-a"
endpoint = "http://127.0.0.1:9001/openrtb2"
max_connections = 64
"#;

    fn error_of(text: &str) -> String {
        Config::from_toml(text).unwrap_err().to_string()
    }

    #[test]
    fn the_documented_example_loads() {
        let v = Config::from_toml(EXAMPLE).unwrap();
        assert_eq!(v.second_price_increment, Price::from_micros(10_000));
        assert_eq!(v.endpoints[0].addr, "127.0.0.1:9001".parse().unwrap());
        assert_eq!(v.endpoints[0].path, "/openrtb2");
        assert_eq!(v.endpoints[0].authority, "127.0.0.1:9001");
    }

    #[test]
    fn an_endpoint_without_a_path_is_sent_to_the_root() {
        // Found by the exchange_config fuzz target (fuzz/regressions/exchange_config).
        let path = |url: &str| parse_endpoint(url).unwrap().path;
        assert_eq!(path("http://127.0.0.1:9001?openrtb2"), "/?openrtb2");
        assert_eq!(path("http://127.0.0.1:9001"), "/");
        assert_eq!(path("http://127.0.0.1:9001/bid?x=1"), "/bid?x=1");
        for url in ["http://127.0.0.1:9001?openrtb2", "http://127.0.0.1:9001"] {
            let p = path(url);
            let request = http::Request::post(p.as_str()).body(());
            assert!(request.is_ok(), "{url} gives {p:?}, not a request target");
        }
    }

    #[test]
    fn an_empty_file_is_a_valid_exchange_without_bidders() {
        let v = Config::from_toml("").unwrap();
        assert!(v.config.bidders.is_empty());
        assert_eq!(v.config.deadline.default_tmax_ms, 100);
    }

    #[test]
    fn wrong_key_is_named() {
        let e = error_of("[auction]\ndefault_tmax = 100\n");
        assert!(e.contains("default_tmax"), "{e}");
    }

    #[test]
    fn a_deadline_key_in_its_old_section_says_where_it_went() {
        let e = error_of("[auction]\ndefault_tmax_ms = 100\n");
        assert_eq!(
            e,
            "auction.default_tmax_ms has moved: write it as deadline.default_tmax_ms"
        );
        // The bidder's old place is not one the exchange ever had: a plain unknown key.
        let e = error_of("[http]\ndefault_tmax_ms = 100\n");
        assert!(!e.contains("moved") && e.contains("default_tmax_ms"), "{e}");
    }

    #[test]
    fn bad_url_is_named() {
        let e = error_of("[[bidders]]\nname = \"x\"\nendpoint = \"ftp://127.0.0.1/\"\n");
        assert!(
            e.contains("bidders[0].endpoint") && e.contains("ftp"),
            "{e}"
        );
        let e = error_of("[[bidders]]\nname = \"x\"\nendpoint = \"not a url\"\n");
        assert!(e.contains("bidders[0].endpoint"), "{e}");
    }

    #[test]
    fn duplicate_bidder_is_named() {
        let e = error_of(
            "[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:1/\"\n\
             [[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:2/\"\n",
        );
        assert!(
            e.contains("bidders[1].name") && e.contains("duplicate"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_values_are_named() {
        assert!(error_of("[deadline]\nmax_tmax_ms = 10\n").contains("deadline.max_tmax_ms"));
        assert!(
            error_of("[auction]\nsecond_price_increment = -1\n").contains("second_price_increment")
        );
        assert!(
            error_of("[deadline]\nanswer_margin_ms = 500\n").contains("deadline.answer_margin_ms")
        );
        assert!(error_of("[http]\nmax_body_bytes = 0\n").contains("http.max_body_bytes"));
        assert!(error_of("[auction]\ndefault_currency = \"usd\"\n").contains("default_currency"));
        assert!(error_of("[http]\nmax_header_bytes = 100\n").contains("http.max_header_bytes"));
        assert!(error_of("[http]\nmax_connections = 0\n").contains("http.max_connections"));
        assert!(error_of("[admission]\nmin_in_flight = 0\n").contains("admission.min_in_flight"));
        assert!(error_of("[admission]\nno_bid = \"maybe\"\n").contains("no_bid"));
        assert!(error_of("[breaker]\nprobes = 0\n").contains("breaker.probes"));
        assert!(
            error_of(
                "[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:1/\"\nmax_qps = 0\n"
            )
            .contains("bidders[0].max_qps")
        );
    }

    #[test]
    fn garbage_and_huge_files_are_refused() {
        assert!(matches!(
            Config::from_toml("[[[ nope"),
            Err(ConfigError::Parse(_))
        ));
        let huge = "#".repeat(MAX_CONFIG_BYTES + 1);
        assert!(matches!(
            Config::from_toml(&huge),
            Err(ConfigError::TooLarge(_))
        ));
    }
}

#[cfg(test)]
mod example_file {
    #[test]
    fn the_shipped_example_loads() {
        let text = include_str!("../../../examples/exchange.toml");
        let v = super::Config::from_toml(text).unwrap();
        assert_eq!(v.config.bidders.len(), 3);
        assert!(!v.config.bidders[2].enabled);
    }
}
