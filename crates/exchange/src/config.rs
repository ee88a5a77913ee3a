//! The exchange's configuration: a TOML file parsed into typed structs, every key documented,
//! unknown keys refused, and validated as a whole before anything starts serving.
//!
//! A loaded [`Config`] is immutable; the server holds it behind an `Arc` so that a reload can build
//! a new one aside and swap it in (see ARCHITECTURE.md).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openrtb::Price;
use serde::Deserialize;

pub use crate::bidder_config::{BidderConfig, OpenRtbVersion};
pub use crate::live::{Live, Omitted};
use crate::sellers::{KeySources, Sellers};
pub use upstream::endpoint::{Endpoint, EndpointTls, parse_endpoint, resolve};
use upstream::outbound::{NoticeHosts, Scheme};
use upstream::tls::ClientTls;

/// Largest accepted configuration file; a bigger one is certainly not a config.
pub const MAX_CONFIG_BYTES: usize = 4 * 1024 * 1024;
/// Keys that moved to `[deadline]` (shared with the bidder) from this file's `[auction]`: a
/// file that still has them is refused with their new name.
/// And keys that moved from `[http]` to `[upstream]` (issue 33: `[http]` is one section shared
/// by every server, what it accepts from its own clients).
const MOVED_KEYS: [(&str, &str); 7] = [
    http_front::MOVED_SHUTDOWN_GRACE,
    ("auction.default_tmax_ms", "deadline.default_tmax_ms"),
    ("auction.max_tmax_ms", "deadline.max_tmax_ms"),
    ("auction.answer_margin_ms", "deadline.answer_margin_ms"),
    (
        "http.max_bidder_response_bytes",
        "upstream.max_response_bytes",
    ),
    ("http.bidder_drain_ms", "upstream.drain_ms"),
    ("http.dns_refresh_ms", "upstream.dns_refresh_ms"),
];
/// The exchange's variables are `GAVEL_EXCHANGE__<KEY>__...`.
pub const ENV_SERVER: &str = "EXCHANGE";

/// Upper bound on configured bidders: fan-out beyond this is a mistake, not a plan.
pub const MAX_BIDDERS: usize = 1024;

pub use settings::ConfigError;
use settings::invalid;

/// The whole exchange configuration (`gavel exchange --config FILE`).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config<L: Default = Live> {
    /// `listen` (default `127.0.0.1:8080`), `admin_listen` (default `127.0.0.1:8081`),
    /// `[security]` and `[http]`: every server's front door ([`http_front::Front`]).
    #[serde(flatten, skip_deserializing, default = "front")]
    pub front: http_front::Front,
    /// `node` (default `gavel`), `[deadline]`, `[admission]` (mode `deadline` unless set),
    /// `[records]` and `[fleet]` (the bidders and sellers pushed to a NATS bucket): the
    /// sections shared with the bidder ([`rtb_config::Rtb`]).
    #[serde(flatten, skip_deserializing)]
    pub rtb: rtb_config::Rtb,
    /// How the calls to bidders behave (`[upstream]`; these keys were `http.*` before).
    #[serde(default)]
    pub upstream: upstream::UpstreamSection,
    #[serde(default)]
    pub auction: AuctionSection,
    #[serde(default)]
    pub schain: SchainConfig,
    #[serde(default)]
    pub notices: NoticeConfig,
    /// Circuit breakers that stop calling a failing bidder for a while.
    #[serde(default)]
    pub breaker: crate::breaker::BreakerConfig,
    /// `[[bidders]]`, `[[sellers]]`, `open_to_all_sellers`, `[privacy]` and `[currency]`: the
    /// sections a reload applies ([`Live`]). What runs keeps [`Omitted`] here instead.
    #[serde(flatten, skip_deserializing)]
    pub live: L,
    /// HTTPS on the auction listener. Default: plain HTTP (TLS ended in front).
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    /// Store winners' markup in a Prebid-Cache-compatible store (`gavel edge`) before
    /// answering (docs/edge.md). Default: none.
    #[serde(default)]
    pub cache: Option<crate::cache_config::CacheConfig>,
    /// Which pages may call the auction endpoint from a browser (Prebid.js): every origin by
    /// default, echoed with credentials; a listed origin only, when listed.
    #[serde(default)]
    pub cors: http_front::cors::CorsSection,
}

/// `[tls]`: the auction listener's certificate, read again whenever either file changes.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ListenerTls {
    /// PEM certificate chain, leaf first (relative to the configuration file).
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
}

/// `[http]`: the same section as the bidder's and the creative edge's.
pub use http_front::HttpSection as HttpConfig;

/// The `[auction]` section as written in the file.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuctionSection {
    /// Amount added to the second price in second-price auctions, CPM in the request currency.
    /// Default 0.01.
    pub second_price_increment: f64,
    /// Auction currency when a request names none (`cur` absent). Default "USD", as the spec says.
    pub default_currency: String,
    /// Most imps one request may carry. Default 64 (`openrtb::validate::MAX_IMPS`, also the
    /// most this may be). Bots send 30-150.
    pub max_imps: usize,
    /// What a request with more imps gets: `drop` (the first `max_imps` go to auction, the
    /// rest are dropped and counted) or `refuse` (400). Default `drop`.
    pub imp_overflow: ImpOverflow,
}

/// What becomes of the imps past `auction.max_imps`.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ImpOverflow {
    Drop,
    Refuse,
}

impl Default for AuctionSection {
    fn default() -> Self {
        AuctionSection {
            second_price_increment: 0.01,
            default_currency: "USD".to_owned(),
            max_imps: openrtb::validate::MAX_IMPS,
            imp_overflow: ImpOverflow::Drop,
        }
    }
}

/// The exchange's own node in `source.schain`.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
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

/// Which notices the exchange fires itself, and how. Notices wait in one bounded queue per
/// notice host, sent by that host's own workers, so a host that hangs delays only its own.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NoticeConfig {
    /// Fire the winner's `nurl` (win notice). When false, the seller gets `nurl` in the
    /// answer and fires it. Default true.
    pub fire_nurl: bool,
    /// Default of each seller's `bill_on_win`: fire the winner's `burl` at auction end. When
    /// false the seller fires `burl` on render (the IAB's billing definition), so the answer
    /// carries it. Default false.
    pub fire_burl: bool,
    /// Fire losers' `lurl` with `${AUCTION_LOSS}` set. Default false.
    pub fire_lurl: bool,
    /// Time allowed for one attempt of one notice, in milliseconds. Default 2000.
    pub timeout_ms: u64,
    /// Notices waiting per notice host; beyond this that host's notices are dropped and
    /// counted. Default 10000.
    pub queue: usize,
    /// Concurrent senders per notice host. Default 8.
    pub workers: usize,
    /// Attempts per notice (1: no retry). A notice that failed to connect, timed out or got a
    /// 5xx/429 is tried again after a backoff with jitter. Default 3.
    pub max_attempts: u32,
    /// First retry after about this long, in milliseconds; doubled each attempt. Default 200.
    pub retry_base_ms: u64,
    /// Let notice and markup URLs reach loopback, private, link-local and other internal
    /// addresses. Only for tests, demos and closed networks. Default false.
    pub allow_private_addresses: bool,
    /// An idle connection to a notice host is closed after this long, in ms. Default 30000.
    pub idle_timeout_ms: u64,
    /// Idle connections kept per notice host. Default 32.
    pub max_idle_per_host: usize,
    /// How long a price token (a keyed bidder's `${AUCTION_PRICE}`) stays valid, in seconds.
    /// Billing on render may fire `burl` long after the auction; the bidder's own notice URLs
    /// expire too. Default 3600.
    pub price_token_ttl_s: u64,
    /// Notices to one host sent together, pipelined on one connection, at most. Default 32.
    pub batch_max: usize,
    /// A sender waits this long for more notices to its host before sending, in ms; 0 sends
    /// what is queued at once. Default 10.
    pub batch_linger_ms: u64,
}

impl Default for NoticeConfig {
    fn default() -> Self {
        NoticeConfig {
            fire_nurl: true,
            fire_burl: false,
            fire_lurl: false,
            timeout_ms: 2_000,
            queue: 10_000,
            workers: 8,
            max_attempts: 3,
            retry_base_ms: 200,
            allow_private_addresses: false,
            idle_timeout_ms: 30_000,
            max_idle_per_host: 32,
            price_token_ttl_s: 3_600,
            batch_max: 32,
            batch_linger_ms: 10,
        }
    }
}

fn front() -> http_front::Front {
    http_front::Front::listening(
        SocketAddr::from(([127, 0, 0, 1], 8080)),
        SocketAddr::from(([127, 0, 0, 1], 8081)),
    )
}

/// The verifier of one bidder: its CA file, else the system's roots (`None` if there are none;
/// only an `https` endpoint makes that an error).
fn bidder_tls(b: &BidderConfig, dir: Option<&Path>) -> Result<Option<ClientTls>, String> {
    match &b.ca_file {
        Some(file) => {
            let path = settings::relative_to(dir, file);
            Ok(Some(ClientTls::from_ca_file(&path)?))
        }
        None => Ok(ClientTls::system().ok()),
    }
}

/// One secret key from a file (`{prefix}key_file`, one line) or an environment variable
/// (`{prefix}key_env`), not both: a bidder's price key, the markup store's writer key. At least
/// [`settings::MIN_SECRET_BYTES`] bytes. `owner` names whose key it is in a permissions warning.
fn read_single_key(
    owner: &str,
    file: Option<&PathBuf>,
    var: Option<&str>,
    dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<settings::Secret>, settings::Invalid> {
    let path = file.map(|file| settings::relative_to(dir, file));
    let Some((field, keys)) = settings::read_key_source(owner, path.as_deref(), var, env)? else {
        return Ok(None);
    };
    if keys
        .iter()
        .any(|k| !k.bytes().all(|b| b.is_ascii_graphic()))
    {
        return Err(settings::Invalid::new(
            field,
            "a key must be visible ASCII (it is sent in a header); the key is not shown",
        ));
    }
    let [key] = keys.as_slice() else {
        return Err(settings::Invalid::new(
            field,
            format!(
                "holds {} keys; the exchange sends exactly one (the other side may accept several while rotating)",
                keys.len()
            ),
        ));
    };
    settings::Secret::new(key.as_bytes(), field)
        .map(Some)
        .map_err(|e| settings::Invalid::new(field, e.to_string()))
}

/// A configuration that passed validation, with the derived values the server uses.
#[derive(Debug, Clone)]
pub struct Validated {
    pub config: Config,
    /// The file it was read from ([`Config::load`]): what [`crate::Exchange::watch`] follows
    /// and [`crate::Exchange::reload`] reads again. `None` for a configuration built from text.
    pub source: Option<PathBuf>,
    pub second_price_increment: Price,
    /// Each bidder of `config.live.bidders`, in order, with what its configuration resolved to.
    pub bidders: Vec<ResolvedBidder>,
    /// Sellers and their keys, read when the file was loaded.
    pub sellers: Arc<Sellers>,
    /// The listener's certificate, when `[tls]` is set.
    pub listener_tls: Option<Arc<http_front::ServerTls>>,
    /// The `[cache]` store's address, resolved at load.
    pub cache_endpoint: Option<Endpoint>,
    /// The writer key sent to the `[cache]` store, read at load.
    pub cache_key: Option<settings::Secret>,
    /// The Global Vendor List (`privacy.gvl_file`), read at load: TCF is enforced with it.
    pub gvl: Option<Arc<consent::gvl::VendorList>>,
    /// The rates of `currency.rates_file`, read at load.
    pub rates: Option<Arc<currency::Rates>>,
}

/// One bidder's configuration and what it resolved to when the file was loaded.
#[derive(Debug, Clone)]
pub struct ResolvedBidder {
    pub config: BidderConfig,
    pub endpoint: Endpoint,
    /// Where its notices may go.
    pub notice_hosts: NoticeHosts,
    /// What verifies its `https` notice hosts (its `ca_file`, else the system's roots; `None`
    /// when the system has none).
    pub tls: Option<ClientTls>,
    /// Its price-token key.
    pub price_key: Option<price_token::PriceKey>,
}

impl Validated {
    /// The admission gate's configuration with the exchange's defaults filled in.
    pub fn admission(&self) -> admission::AdmissionConfig {
        self.config.admission()
    }

    pub fn read_timeout(&self) -> Duration {
        self.config.front.http.read_timeout()
    }

    /// Largest accepted auction request body.
    pub fn max_body_bytes(&self) -> usize {
        self.config.max_body_bytes()
    }

    /// The files a reload reads: the configuration itself, then every seller key file and
    /// price key file it names (relative ones resolved). A change to any of them is a reload,
    /// so keys rotate without a restart. Empty for a configuration built from text.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let Some(source) = &self.source else {
            return Vec::new();
        };
        let at = |p: &PathBuf| settings::relative_to(source.parent(), p);
        let c = &self.config;
        std::iter::once(source.clone())
            .chain(
                c.live
                    .sellers
                    .iter()
                    .filter_map(|s| s.key_file.as_ref())
                    .map(at),
            )
            .chain(
                c.live
                    .bidders
                    .iter()
                    .filter_map(|b| b.price_key_file.as_ref())
                    .map(at),
            )
            .chain(c.live.privacy.gvl_file.as_ref().map(at))
            .chain(c.live.currency.rates_file.as_ref().map(at))
            .collect()
    }
    /// What the server accepts from client connections.
    pub fn limits(&self) -> http_front::Limits {
        self.config.front.http.limits()
    }
}

impl settings::WithShared for Config {
    type Shared = (http_front::Front, (rtb_config::Rtb, Live));
    fn shared_defaults() -> Self::Shared {
        (front(), (rtb_config::Rtb::default(), Live::default()))
    }
    fn set_shared(&mut self, (front, (rtb, live)): Self::Shared) {
        self.front = front;
        self.rtb = rtb;
        self.live = live;
    }
}

impl settings::ServerFile for Config {
    const RULES: settings::FileRules = settings::FileRules {
        server: "the exchange",
        max_bytes: MAX_CONFIG_BYTES,
        moved: &MOVED_KEYS,
    };
    const ENV_SERVER: &'static str = ENV_SERVER;

    fn resolve_paths(&mut self, dir: &Path) {
        self.front.resolve_paths(dir);
        self.rtb.resolve_paths(dir);
    }
}

impl<L: Default> Config<L> {
    /// This exchange's node name: `node`, else `gavel`.
    pub fn node(&self) -> &str {
        self.rtb.node_or("gavel")
    }

    /// The admission gate's configuration with the exchange's defaults filled in: `deadline`
    /// mode, since every auction tells its deadline before its work starts.
    pub fn admission(&self) -> admission::AdmissionConfig {
        self.rtb
            .admission
            .clone()
            .or_mode(admission::Mode::Deadline)
    }

    /// Largest accepted auction request body.
    pub fn max_body_bytes(&self) -> usize {
        self.front
            .http
            .body_limit(http_front::DEFAULT_MAX_BODY_BYTES)
    }

    /// The sections fixed at start, and the live ones apart.
    pub fn split(mut self) -> (Config<Omitted>, L) {
        let live = std::mem::take(&mut self.live);
        (self.with_live(Omitted), live)
    }

    /// These fixed sections with `live` in place of the live ones.
    pub fn with_live<M: Default>(self, live: M) -> Config<M> {
        let Config {
            front,
            rtb,
            upstream,
            auction,
            schain,
            notices,
            breaker,
            live: _,
            tls,
            cache,
            cors,
        } = self;
        Config {
            front,
            rtb,
            upstream,
            auction,
            schain,
            notices,
            breaker,
            live,
            tls,
            cache,
            cors,
        }
    }
}

impl Config {
    /// Reads (at most [`MAX_CONFIG_BYTES`]), parses and validates the file at `path`; files it
    /// names (seller keys, the admin token) are relative to its directory.
    /// `GAVEL_EXCHANGE__...` variables are laid over the file (docs/config.md).
    pub fn load(path: &Path) -> Result<Validated, ConfigError> {
        Config::load_with(path, |config| config)
    }

    /// [`Config::load`], the file's configuration passed through `edit` before it is
    /// validated: a fleet node puts the pushed bidders and sellers in place of the file's
    /// (`fleet_doc`). The environment's overlay applies here too, so a push is validated
    /// against the configuration the node actually runs.
    pub fn load_with(
        path: &Path,
        edit: impl FnOnce(Config) -> Config,
    ) -> Result<Validated, ConfigError> {
        let config = edit(settings::load_file::<Config>(path)?);
        let mut validated = config.validate_in(path.parent())?;
        validated.source = Some(path.to_owned());
        Ok(validated)
    }

    /// Parses and validates a TOML document (files it names are relative to the working
    /// directory).
    pub fn from_toml(text: &str) -> Result<Validated, ConfigError> {
        Config::from_toml_with(text, &settings::EnvOverlay::default())
    }

    /// [`Config::from_toml`] with `overlay`'s variables laid over the document.
    pub fn from_toml_with(
        text: &str,
        overlay: &settings::EnvOverlay,
    ) -> Result<Validated, ConfigError> {
        settings::parse_text::<Config>(text, overlay)?.validate()
    }

    /// A configuration from the process's `GAVEL_EXCHANGE__...` variables alone, over the
    /// defaults (no file: nothing to follow; files it names are relative to the working
    /// directory).
    pub fn load_env() -> Result<Validated, ConfigError> {
        settings::load_env::<Config>()?.validate()
    }

    /// Checks every value, resolves bidder endpoints and reads seller keys.
    pub fn validate(self) -> Result<Validated, ConfigError> {
        self.validate_in(None)
    }

    /// [`Config::validate`], with relative files under `dir`.
    pub fn validate_in(self, dir: Option<&Path>) -> Result<Validated, ConfigError> {
        self.front.check()?;
        self.rtb.check()?;
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
        self.upstream.check()?;
        self.breaker.validate()?;
        self.cors.check("cors")?;
        let n = &self.notices;
        settings::check_range("notices.timeout_ms", n.timeout_ms, 1..=60_000)?;
        settings::check_range("notices.queue", n.queue, 1..=1_000_000)?;
        settings::check_range("notices.workers", n.workers, 1..=1024)?;
        settings::check_range("notices.batch_max", n.batch_max, 1..=1024)?;
        if n.batch_linger_ms > 1_000 {
            return Err(invalid("notices.batch_linger_ms", "must be at most 1000"));
        }
        settings::check_range("notices.max_attempts", n.max_attempts, 1..=10)?;
        settings::check_range("notices.retry_base_ms", n.retry_base_ms, 1..=60_000)?;
        settings::check_range("notices.idle_timeout_ms", n.idle_timeout_ms, 1..=3_600_000)?;
        if n.price_token_ttl_s < 60 || n.price_token_ttl_s > 7 * 86_400 {
            return Err(invalid(
                "notices.price_token_ttl_s",
                "must be 60..=604800 (a minute to a week)",
            ));
        }
        if n.max_idle_per_host > 4096 {
            return Err(invalid("notices.max_idle_per_host", "must be at most 4096"));
        }
        if self.schain.asi.is_empty() {
            return Err(invalid("schain.asi", "must not be empty"));
        }
        if a.max_imps == 0 || a.max_imps > openrtb::validate::MAX_IMPS {
            return Err(invalid(
                "auction.max_imps",
                format!("must be 1..={}", openrtb::validate::MAX_IMPS),
            ));
        }
        self.live.currency.check()?;
        if self.live.bidders.len() > MAX_BIDDERS {
            return Err(invalid("bidders", format!("at most {MAX_BIDDERS} bidders")));
        }
        let mut names = HashSet::new();
        let mut resolved = Vec::with_capacity(self.live.bidders.len());
        let env = |var: &str| std::env::var(var).ok();
        for (i, b) in self.live.bidders.iter().enumerate() {
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
            settings::check_range(key("max_connections"), b.max_connections, 1..=65_536)?;
            if b.max_qps.is_some_and(|q| q == 0 || q > 1_000_000) {
                return Err(invalid(key("max_qps"), "must be 1..=1000000"));
            }
            if b.gvl_vendor_id == Some(0) {
                return Err(invalid(key("gvl_vendor_id"), "must be 1..=65535"));
            }
            if let Some(c) = &b.currency {
                currency::Currency::parse(c)
                    .map_err(|e| invalid(key("currency"), e.to_string()))?;
            }
            let mut endpoint =
                parse_endpoint(&b.endpoint).map_err(|e| invalid(key("endpoint"), e))?;
            let tls = bidder_tls(b, dir).map_err(|e| invalid(key("ca_file"), e))?;
            if endpoint.scheme == Scheme::Https {
                let client = tls.clone().ok_or_else(|| {
                    invalid(
                        key("ca_file"),
                        "no system root certificates: name a ca_file",
                    )
                })?;
                let name = b.tls_server_name.as_deref().unwrap_or(&endpoint.host);
                let server_name = upstream::tls::server_name(name)
                    .map_err(|e| invalid(key("tls_server_name"), e))?;
                endpoint.tls = Some(EndpointTls {
                    client,
                    server_name,
                });
            } else if b.tls_server_name.is_some() {
                return Err(invalid(key("tls_server_name"), "only for https endpoints"));
            }
            let owner = format!("bidder {:?}", b.name);
            let price_key = read_single_key(
                &owner,
                b.price_key_file.as_ref(),
                b.price_key_env.as_deref(),
                dir,
                &env,
            )
            .map_err(|e| e.rekey(|field| key(&format!("price_{field}"))))?;
            let notice_hosts = NoticeHosts::new(&endpoint.host, endpoint.port, &b.notice_hosts)
                .map_err(|e| invalid(key("notice_hosts"), e))?;
            resolved.push(ResolvedBidder {
                config: b.clone(),
                endpoint,
                notice_hosts,
                tls,
                price_key: price_key.map(|s| price_token::PriceKey::new(s.expose())),
            });
        }
        let sellers = Sellers::build(
            &self.live.sellers,
            self.live.open_to_all_sellers,
            self.notices.fire_burl,
            &names,
            &KeySources { dir, env: &env },
        )?;
        let listener_tls = match &self.tls {
            None => None,
            Some(t) => {
                let at = |p: &Path| settings::relative_to(dir, p);
                let tls = http_front::ServerTls::load(&at(&t.cert_file), &at(&t.key_file))
                    .map_err(|e| invalid("tls", e.to_string()))?;
                Some(Arc::new(tls))
            }
        };
        let (cache_endpoint, cache_key) = match &self.cache {
            None => (None, None),
            Some(c) => {
                c.check()?;
                let endpoint = parse_endpoint(&c.url).map_err(|e| invalid("cache.url", e))?;
                // The store runs next to the exchange: a name that does not resolve is a
                // mistake to stop at, not a partner to wait for.
                if endpoint.addr.is_none() {
                    let why = resolve(&endpoint.host, endpoint.port)
                        .err()
                        .map(String::from)
                        .unwrap_or_default();
                    return Err(invalid("cache.url", why));
                }
                let key = read_single_key(
                    "the markup store ([cache])",
                    c.key_file.as_ref(),
                    c.key_env.as_deref(),
                    dir,
                    &env,
                )
                .map_err(|e| e.rekey(|field| format!("cache.{field}")))?;
                (Some(endpoint), key)
            }
        };
        let gvl = self.live.privacy.load_gvl(dir)?;
        let rates = self.live.currency.load_rates(dir)?;
        Ok(Validated {
            gvl,
            rates,
            listener_tls,
            cache_endpoint,
            cache_key,
            source: None,
            second_price_increment: increment,
            bidders: resolved,
            sellers: Arc::new(sellers),
            config: self,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
listen = "127.0.0.1:8080"
open_to_all_sellers = true
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
        assert_eq!(
            v.bidders[0].endpoint.addr,
            Some("127.0.0.1:9001".parse().unwrap())
        );
        assert_eq!(v.bidders[0].endpoint.path, "/openrtb2");
        assert_eq!(v.bidders[0].endpoint.authority, "127.0.0.1:9001");
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
    fn an_exchange_without_sellers_must_say_it_is_open_to_all() {
        let e = error_of("");
        assert!(
            e.starts_with("sellers:") && e.contains("open_to_all_sellers"),
            "{e}"
        );
        let v = Config::from_toml("open_to_all_sellers = true").unwrap();
        assert!(v.config.live.bidders.is_empty());
        assert_eq!(v.config.rtb.deadline.default_tmax_ms, 100);
        assert!(
            !v.config.notices.fire_burl,
            "billing is on render unless a seller says"
        );
    }

    #[test]
    fn https_endpoints_and_notice_hosts_are_checked() {
        let bidder = |extra: &str| {
            format!("open_to_all_sellers = true\n[[bidders]]\nname = \"a\"\n{extra}\n")
        };
        let v = Config::from_toml(&bidder(
            "endpoint = \"http://127.0.0.1:9001/\"\nnotice_hosts = [\"n.example\", \"m.example:81\"]",
        ))
        .unwrap();
        assert!(
            v.bidders[0]
                .notice_hosts
                .check("http://127.0.0.1:9001/w")
                .is_ok()
        );
        assert!(
            v.bidders[0]
                .notice_hosts
                .check("http://n.example/w")
                .is_ok()
        );
        assert!(
            v.bidders[0]
                .notice_hosts
                .check("http://m.example:81/w")
                .is_ok()
        );
        assert!(
            v.bidders[0]
                .notice_hosts
                .check("http://127.0.0.1:9002/w")
                .is_err()
        );
        let e = error_of(&bidder(
            "endpoint = \"http://127.0.0.1:9001/\"\nnotice_hosts = [\"http://x/\"]",
        ));
        assert!(e.contains("bidders[0].notice_hosts"), "{e}");
        let e = error_of(&bidder(
            "endpoint = \"http://127.0.0.1:9001/\"\ntls_server_name = \"x\"",
        ));
        assert!(e.contains("bidders[0].tls_server_name"), "{e}");
        let e = error_of(&bidder(
            "endpoint = \"https://127.0.0.1:9001/\"\nca_file = \"/nonexistent/ca.pem\"",
        ));
        assert!(
            e.contains("bidders[0].ca_file") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let e = error_of(&bidder("endpoint = \"http://u:p@127.0.0.1:9001/\""));
        assert!(e.contains("credentials"), "{e}");
    }

    #[test]
    fn wrong_key_is_named() {
        let e = error_of("[auction]\ndefault_tmax = 100\n");
        assert!(e.contains("default_tmax"), "{e}");
    }

    /// Yesterday's file keeps loading: a key under its old name is read at its new place (and
    /// logged); one set under both names is refused, naming both.
    #[test]
    fn a_key_in_its_old_place_is_read_at_its_new_one() {
        let open = "open_to_all_sellers = true\n";
        let v = Config::from_toml(&format!("{open}[auction]\ndefault_tmax_ms = 100\n")).unwrap();
        assert_eq!(v.config.rtb.deadline.default_tmax_ms, 100);
        let e = error_of("[auction]\ndefault_tmax_ms = 100\n[deadline]\ndefault_tmax_ms = 90\n");
        assert_eq!(
            e,
            "auction.default_tmax_ms has moved to deadline.default_tmax_ms, and both are set: \
             keep deadline.default_tmax_ms only"
        );
        // The bidder's old place is not one the exchange ever had: a plain unknown key.
        let e = error_of("[http]\ndefault_tmax_ms = 100\n");
        assert!(!e.contains("moved") && e.contains("default_tmax_ms"), "{e}");
        // `[http]` is the section every server shares; the bidder calls' keys left it.
        let v = Config::from_toml(&format!(
            "{open}[http]\nmax_bidder_response_bytes = 1024\nbidder_drain_ms = 5\ndns_refresh_ms = 500\n"
        ))
        .unwrap();
        let u = &v.config.upstream;
        assert_eq!(
            (u.max_response_bytes, u.drain_ms, u.dns_refresh_ms),
            (1024, 5, 500)
        );
        // An old name keeps its new place's checks.
        let e = error_of("[http]\nbidder_drain_ms = \"soon\"\n");
        assert!(e.contains("upstream.drain_ms"), "{e}");
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
            Err(ConfigError::Parse { .. })
        ));
        let huge = "#".repeat(MAX_CONFIG_BYTES + 1);
        assert!(matches!(
            Config::from_toml(&huge),
            Err(ConfigError::TooLarge { .. })
        ));
    }
}

#[cfg(test)]
mod example_file {
    #[test]
    fn the_shipped_example_loads() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/exchange.toml");
        let v = super::Config::load(&path).unwrap();
        assert_eq!(v.config.live.bidders.len(), 3);
        assert!(!v.config.live.bidders[2].enabled);
        let key = b"example-only-pub-a-0123456789abcdef";
        let seller = v.sellers.authenticate(Some(key)).unwrap();
        assert_eq!(seller.name, "pub-a");
        assert!(v.sellers.authenticate(None).is_err(), "not open to all");
    }
}
