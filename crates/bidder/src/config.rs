//! The bidder's configuration (`gavel bidder --config bidder.toml`): typed, every key documented
//! (docs/bidder.md), unknown keys refused, validated as a whole with errors naming the key.
//!
//! The campaigns themselves live in their own file (`campaigns = "..."`), which is watched and
//! reloaded while serving; this file is read once at start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use units::Nanos;

/// Largest accepted configuration file.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// Keys that moved to `[deadline]` (shared with the exchange) from this file's `[http]`: a file
/// that still has them is refused with their new name.
/// The bidder's variables are `GAVEL_BIDDER__<KEY>__...`.
pub const ENV_SERVER: &str = "BIDDER";

const MOVED_KEYS: [(&str, &str); 4] = [
    http_front::MOVED_SHUTDOWN_GRACE,
    ("http.default_tmax_ms", "deadline.default_tmax_ms"),
    ("http.max_tmax_ms", "deadline.max_tmax_ms"),
    ("http.answer_margin_ms", "deadline.answer_margin_ms"),
];

pub use settings::ConfigError;
use settings::invalid;

/// The whole bidder configuration.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BidderConfig {
    /// `listen` (default `127.0.0.1:9100`), `admin_listen` (default `127.0.0.1:9101`),
    /// `[security]` (the notice keys, price keys and admin access: [`SecuritySection`]) and
    /// `[http]`: every server's front door ([`http_front::Front`]).
    #[serde(flatten, skip_deserializing, default = "front")]
    pub front: http_front::Front<SecuritySection>,
    /// `node` (default `bidder-<pid>-<start time>`), `[deadline]`, `[admission]`
    /// (`max_busy_ms` [`DEFAULT_MAX_BUSY_MS`] unless set; notices are never shed),
    /// `[records]` (the ledger records) and `[fleet]` (a campaign set pushed to a NATS
    /// bucket): the sections shared with the exchange ([`rtb_config::Rtb`]).
    #[serde(flatten, skip_deserializing)]
    pub rtb: rtb_config::Rtb,
    /// Campaign file (JSON, or TOML when it ends in `.toml`), relative to this file's directory.
    /// Watched and reloaded on change. Required.
    pub campaigns: PathBuf,
    /// Base URL the notice URLs in bids point to (`{public_url}/notice/win?...`). Default
    /// `http://{listen}`; set it when the bidder sits behind a proxy or listens on 0.0.0.0.
    #[serde(default)]
    pub public_url: Option<String>,
    /// `seatbid.seat` of this bidder's answers. Default "gavel".
    #[serde(default = "default_seat")]
    pub seat: String,
    /// The currency of every campaign's budget and CPMs (ISO 4217). A request that does not
    /// allow it (`cur`; USD when absent) gets no bid: money is never mixed. Default "USD".
    #[serde(default = "default_currency")]
    pub currency: String,
    /// Notices handled at once, at most; beyond, a notice is answered 503 (the sender retries)
    /// rather than queued. Notices have this gate of their own, so a flood of them (forged
    /// ones included) never sheds bid requests. Default 4096.
    #[serde(default = "default_notices_in_flight")]
    pub max_notices_in_flight: usize,
    #[serde(default)]
    pub ledger: LedgerSection,
    #[serde(default)]
    pub pacing: PacingSection,
    /// What `/metrics` shows per campaign.
    #[serde(default)]
    pub metrics: MetricsSection,
}

/// The `[metrics]` section.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSection {
    /// Campaigns labelled by id on `/metrics`: the first this many of the campaign file; the
    /// rest are summed under `campaign="_other"`, so the series count stays bounded however
    /// many campaigns serve. 0..=10000, default 100.
    pub max_labelled_campaigns: usize,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            max_labelled_campaigns: 100,
        }
    }
}

/// The `[security]` section. Keys and tokens come from files (or the environment), never
/// from this file; relative paths are resolved against this file's directory.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecuritySection {
    /// Sign every notice URL and refuse notices without a valid token. Default true; turning it
    /// off lets anyone who can reach the bid port charge or release budget.
    pub sign_notices: bool,
    /// File holding the notice key (at least 32 bytes), or set `GAVEL_NOTICE_KEY`. Required
    /// while `sign_notices` is on. Every instance sharing a ledger needs the same key.
    pub notice_key_file: Option<PathBuf>,
    /// The key before the last rotation (or `GAVEL_PREVIOUS_NOTICE_KEY`): its tokens are still
    /// accepted for `previous_key_overlap_ms` after start; it never signs.
    pub previous_notice_key_file: Option<PathBuf>,
    /// How long after start the previous key is accepted, in ms. Default: how long a notice
    /// stays valid (`ledger.reservation_ttl_ms + ledger.reservation_grace_ms`).
    pub previous_key_overlap_ms: Option<u64>,
    /// File of the keys shared with exchanges for price tokens, one per line (each at least 32
    /// bytes), or set `GAVEL_PRICE_KEYS` (separated by commas). A token made with any of them
    /// is accepted; the file is read again when it changes, so a key is rotated by adding the
    /// new one, moving the exchange to it, then removing the old one. Default: none.
    pub price_key_file: Option<PathBuf>,
    /// Refuse (403, `cleartext_price`) a win or billing notice whose price is not a price token
    /// made with one of the price keys. Needs a price key. Default false: a plain price is
    /// still charged (an exchange without the key), a token is checked.
    pub require_price_token: bool,
    /// The admin keys, as in the exchange's `[security]`: see [`http_front::AdminSettings`].
    pub admin_token_file: Option<PathBuf>,
    pub admin_reads_need_token: bool,
    pub admin_remote: bool,
    pub audit_log: Option<PathBuf>,
    pub metrics_need_token: bool,
}

impl http_front::SecuritySection for SecuritySection {
    /// The admin part, as every server's admin door takes it.
    fn admin(&self) -> http_front::AdminSettings {
        http_front::AdminSettings {
            admin_token_file: self.admin_token_file.clone(),
            admin_reads_need_token: self.admin_reads_need_token,
            admin_remote: self.admin_remote,
            metrics_need_token: self.metrics_need_token,
            audit_log: self.audit_log.clone(),
        }
    }

    fn resolve_paths(&mut self, dir: &Path) {
        for p in [
            &mut self.notice_key_file,
            &mut self.previous_notice_key_file,
            &mut self.price_key_file,
            &mut self.admin_token_file,
            &mut self.audit_log,
        ] {
            if let Some(path) = p.as_mut()
                && path.is_relative()
            {
                *path = dir.join(&*path);
            }
        }
    }
}

impl Default for SecuritySection {
    fn default() -> Self {
        SecuritySection {
            sign_notices: true,
            notice_key_file: None,
            previous_notice_key_file: None,
            previous_key_overlap_ms: None,
            price_key_file: None,
            require_price_token: false,
            admin_token_file: None,
            admin_reads_need_token: http_front::AdminSettings::default().admin_reads_need_token,
            admin_remote: false,
            audit_log: None,
            metrics_need_token: false,
        }
    }
}

/// The bidder's `admission.max_busy_ms` when the file leaves it out. A decision finishes in one
/// poll, so requests never wait in flight, only unread in socket buffers; the runtime going
/// this long without a pause is how the bidder sees them (admission::busy_streak). 10 ms is a tenth
/// of a typical tmax, and a bidder at its capacity (p99 within 5 ms) rarely runs that long
/// without one.
pub const DEFAULT_MAX_BUSY_MS: u64 = 10;

/// `[http]`: the same section as the exchange's and the creative edge's.
pub use http_front::HttpSection;

/// Which ledger holds the budget of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// In this process only: for one instance.
    #[default]
    Memory,
    /// Shared by every instance through Redis.
    Redis,
    /// Shared by every instance through a Redis Cluster (`ledger.redis_cluster_nodes`).
    #[serde(rename = "redis-cluster")]
    RedisCluster,
}

impl Backend {
    /// Whether the budget of record is shared through Redis (one server or a cluster).
    pub fn is_redis(self) -> bool {
        matches!(self, Backend::Redis | Backend::RedisCluster)
    }
}

/// In Redis mode, whether each bid reserves in Redis or spends from a local lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RedisMode {
    /// Leases of budget in chunks; no Redis round trip on the bid path.
    #[default]
    Lease,
    /// One Redis script call per bid and per notice.
    PerBid,
}

/// Who writes the campaigns' limits to a shared (Redis) ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LimitsSource {
    /// This instance writes its campaign file's limits (as `file:<node>`), never over a change
    /// another writer made since: exactly one instance of a fleet, or none when the admin API
    /// is the writer. A lone instance's setting.
    #[default]
    File,
    /// This instance never writes limits: it spends by the ledger's and reports a campaign file
    /// that differs. A campaign the ledger does not hold is not bid on.
    Follow,
}

/// Which notice charges the campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ChargeOn {
    /// The win notice (`nurl`); a billing notice after it is a duplicate that charges nothing.
    #[default]
    Win,
    /// The billing notice (`burl`) only: an impression that is won but never rendered costs
    /// nothing, and its reservation expires.
    Bill,
}

/// The `[ledger]` section.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerSection {
    /// `memory` (default), `redis` or `redis-cluster`.
    pub backend: Backend,
    /// For `backend = "redis-cluster"`: seed URLs of some of the cluster's nodes
    /// (`redis://[[user]:password@]host:port`, the same syntax as `redis_url`, database 0; the
    /// client learns the rest of the cluster from them). All with the same credentials; a
    /// password may come from `GAVEL_REDIS_URL` instead (its user and password are used). At
    /// most 64. `rediss://` (TLS, every node) needs `redis_ca_file`.
    #[serde(serialize_with = "crate::redis_url::serialize_hidden_all")]
    pub redis_cluster_nodes: Vec<String>,
    /// Redis URL (`redis[s]://[[user]:password@]host[:port][/db]`), for `backend = "redis"`.
    /// `rediss://` is TLS and needs `redis_ca_file`. Default `redis://127.0.0.1:6379`.
    #[serde(serialize_with = "crate::redis_url::serialize_hidden")]
    pub redis_url: String,
    /// PEM file of the CA certificates trusted for `rediss://`. Relative to the config file.
    pub redis_ca_file: Option<PathBuf>,
    /// Removed: a start never creates a ledger (a Redis that lost its data would reopen every
    /// budget). `true` is refused with what to do instead (`gavel ledger create`); `false`,
    /// the old default, is accepted and means nothing.
    #[serde(skip_serializing)]
    pub create_if_missing: Option<bool>,
    /// Directory where this instance keeps its ledger marker: the id of the ledger it last
    /// opened in its Redis, evidence that `gavel ledger create` and `POST /admin/ledger/open`
    /// weigh after a data loss. Default: the configuration file's directory. Keep it on disk
    /// that survives a restart.
    pub state_dir: Option<PathBuf>,
    /// Key prefix in Redis, so several ledgers can share one server. Default "gavel:".
    pub redis_prefix: String,
    /// `lease` (default) or `per-bid`.
    pub redis_mode: RedisMode,
    /// Bound on one Redis call, in milliseconds. Default 20.
    pub redis_timeout_ms: u64,
    /// Size of one lease of budget, in currency units: what an instance takes from Redis at a
    /// time and may spend without asking again. Smaller chunks share a small budget more evenly
    /// between instances; larger ones mean fewer Redis calls. Default 0.05.
    pub lease_chunk: f64,
    /// How often a lease's spend is reported to Redis and its expiry extended, in ms. Default 200.
    pub lease_report_ms: u64,
    /// How long a lease lives without a report, in milliseconds. Default 10000.
    pub lease_ttl_ms: u64,
    /// How long a bid's reservation waits for its notice, in milliseconds. Default 60000.
    pub reservation_ttl_ms: u64,
    /// After `reservation_ttl_ms`, how much longer a reservation with no notice is still held
    /// as unconfirmed spend (a win may yet come), in ms; then it is released and counted as
    /// expired. Notice URLs are valid for the two together. Default 30000.
    pub reservation_grace_ms: u64,
    /// `win` (default) or `bill`.
    pub charge_on: ChargeOn,
    /// Who writes the campaigns' limits to Redis: `file` (default: this instance writes its
    /// campaign file's; exactly one instance of a fleet, or none when the admin API is the
    /// writer) or `follow` (never writes; spends by the ledger's limits and reports a file that
    /// differs). docs/bidder.md, "Who writes budgets".
    pub limits: LimitsSource,
    /// How often the limits of record are read back and compared with the campaign file (a
    /// follower picks up a writer's change then, or on a reload), in ms. Default 10000.
    pub limits_check_ms: u64,
}

impl Default for LedgerSection {
    fn default() -> Self {
        LedgerSection {
            backend: Backend::Memory,
            redis_url: "redis://127.0.0.1:6379".to_owned(),
            redis_cluster_nodes: Vec::new(),
            redis_ca_file: None,
            create_if_missing: None,
            state_dir: None,
            redis_prefix: "gavel:".to_owned(),
            redis_mode: RedisMode::Lease,
            redis_timeout_ms: 20,
            lease_chunk: 0.05,
            lease_report_ms: 200,
            lease_ttl_ms: 10_000,
            reservation_ttl_ms: 60_000,
            reservation_grace_ms: 30_000,
            charge_on: ChargeOn::Win,
            limits: LimitsSource::File,
            limits_check_ms: 10_000,
        }
    }
}

/// The `[pacing]` section.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PacingSection {
    /// How often each campaign's pacing controller runs, in milliseconds. Default 1000.
    pub control_interval_ms: u64,
    /// Seed of the draws that decide which eligible requests bid under `even` pacing.
    pub seed: u64,
}

impl Default for PacingSection {
    fn default() -> Self {
        PacingSection {
            control_interval_ms: 1_000,
            seed: 1,
        }
    }
}

fn front() -> http_front::Front<SecuritySection> {
    http_front::Front::listening(
        SocketAddr::from(([127, 0, 0, 1], 9100)),
        SocketAddr::from(([127, 0, 0, 1], 9101)),
    )
}

fn default_notices_in_flight() -> usize {
    4096
}

fn default_currency() -> String {
    "USD".to_owned()
}

fn default_seat() -> String {
    "gavel".to_owned()
}

impl settings::WithShared for BidderConfig {
    type Shared = (http_front::Front<SecuritySection>, rtb_config::Rtb);
    fn shared_defaults() -> Self::Shared {
        (front(), rtb_config::Rtb::default())
    }
    fn set_shared(&mut self, (front, rtb): Self::Shared) {
        self.front = front;
        self.rtb = rtb;
    }
}

impl settings::ServerFile for BidderConfig {
    const RULES: settings::FileRules = settings::FileRules {
        server: "the bidder",
        max_bytes: MAX_CONFIG_BYTES,
        moved: &MOVED_KEYS,
    };
    const ENV_SERVER: &'static str = ENV_SERVER;

    /// The campaign file, every key and CA file, the ledger's state directory (this directory
    /// when unset) and the fleet's files.
    fn resolve_paths(&mut self, dir: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        resolve(&mut self.campaigns);
        self.front.resolve_paths(dir);
        self.rtb.resolve_paths(dir);
        for p in [&mut self.ledger.redis_ca_file, &mut self.ledger.state_dir] {
            p.as_mut().map(resolve);
        }
        if self.ledger.state_dir.is_none() {
            self.ledger.state_dir = Some(dir.to_owned());
        }
    }
}

impl BidderConfig {
    /// Reads, parses and validates a configuration file; a relative `campaigns` path is
    /// resolved against the file's directory.
    /// `GAVEL_BIDDER__...` variables are laid over the file (docs/config.md).
    pub fn load(path: &Path) -> Result<BidderConfig, ConfigError> {
        let config = settings::load_file::<BidderConfig>(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Parses and validates a TOML document.
    pub fn from_toml(text: &str) -> Result<BidderConfig, ConfigError> {
        BidderConfig::from_toml_with(text, &settings::EnvOverlay::default())
    }

    /// A configuration from the process's `GAVEL_BIDDER__...` variables alone, over the
    /// defaults (`campaigns` is still required; paths are relative to the working directory).
    pub fn load_env() -> Result<BidderConfig, ConfigError> {
        let config = settings::load_env::<BidderConfig>()?;
        config.validate()?;
        Ok(config)
    }

    /// [`BidderConfig::from_toml`] with `overlay`'s variables laid over the document.
    pub fn from_toml_with(
        text: &str,
        overlay: &settings::EnvOverlay,
    ) -> Result<BidderConfig, ConfigError> {
        let config = settings::parse_text::<BidderConfig>(text, overlay)?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.front.check()?;
        self.rtb.check()?;
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid("public_url", "must start with http:// or https://"));
        }
        if self.seat.is_empty() || self.seat.len() > 64 {
            return Err(invalid("seat", "must be 1-64 characters"));
        }
        settings::check_range(
            "max_notices_in_flight",
            self.max_notices_in_flight,
            1..=1_000_000,
        )?;
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(invalid(
                "currency",
                "must be an ISO 4217 code: three capital letters, such as \"USD\"",
            ));
        }
        if self.metrics.max_labelled_campaigns > 10_000 {
            return Err(invalid(
                "metrics.max_labelled_campaigns",
                "must be 0..=10000 (each labelled campaign adds 8 series to every scrape)",
            ));
        }
        let l = &self.ledger;
        if l.create_if_missing == Some(true) {
            return Err(invalid(
                "ledger.create_if_missing",
                "was removed: a start never creates a ledger, since a Redis that lost its data would reopen every budget. \
                 Delete the key, and create the ledger once with `gavel ledger create --config FILE` \
                 (or POST /admin/ledger/open); docs/bidder.md, \"The ledger\"",
            ));
        }
        if l.limits == LimitsSource::Follow && !l.backend.is_redis() {
            return Err(invalid(
                "ledger.limits",
                "\"follow\" needs a shared ledger (backend = \"redis\" or \"redis-cluster\"): in memory the campaign file is the only source",
            ));
        }
        settings::check_range("ledger.limits_check_ms", l.limits_check_ms, 100..=3_600_000)?;
        let url = self.redis_url()?;
        // A cluster's TLS is its seeds' (checked with them).
        let url_tls = match l.backend {
            Backend::RedisCluster => l.redis_ca_file.is_some(),
            _ => url.tls,
        };
        match (&l.redis_ca_file, url_tls) {
            (None, true) => {
                return Err(invalid(
                    "ledger.redis_ca_file",
                    "is required with rediss:// (the PEM file of the CA that signed Redis's certificate)",
                ));
            }
            (Some(_), false) => {
                return Err(invalid(
                    "ledger.redis_ca_file",
                    "is only used with rediss:// (TLS); the URL is redis://",
                ));
            }
            _ => {}
        }
        if l.redis_prefix.len() > 64 {
            return Err(invalid("ledger.redis_prefix", "must be at most 64 bytes"));
        }
        if l.redis_prefix.contains(['{', '}']) {
            return Err(invalid(
                "ledger.redis_prefix",
                "must not hold a brace: the ledger puts each campaign's hash tag after it",
            ));
        }
        self.validate_cluster_nodes()?;
        settings::check_range("ledger.redis_timeout_ms", l.redis_timeout_ms, 1..=10_000)?;
        // 1e-10 is more than 0 but rounds to 0 nanos: the integer amount is what must be positive.
        let chunk_nanos = Nanos::from_units(l.lease_chunk).unwrap_or(Nanos::ZERO);
        if !(chunk_nanos.is_positive() && l.lease_chunk <= 1e6) {
            return Err(invalid(
                "ledger.lease_chunk",
                "must be at least 0.000000001 (one nano) and at most 1000000 currency units",
            ));
        }
        settings::check_range("ledger.lease_report_ms", l.lease_report_ms, 1..=60_000)?;
        if l.lease_ttl_ms < 4 * l.lease_report_ms || l.lease_ttl_ms > 3_600_000 {
            return Err(invalid(
                "ledger.lease_ttl_ms",
                "must be at least 4 x ledger.lease_report_ms (a lease must survive a few missed reports) and at most 3600000",
            ));
        }
        if l.reservation_ttl_ms < 1_000 || l.reservation_ttl_ms > 86_400_000 {
            return Err(invalid(
                "ledger.reservation_ttl_ms",
                "must be 1000..=86400000 (notices often arrive seconds after the auction)",
            ));
        }
        if l.reservation_grace_ms > 86_400_000 {
            return Err(invalid(
                "ledger.reservation_grace_ms",
                "must be 0..=86400000",
            ));
        }
        let sec = &self.front.security;
        if !sec.sign_notices && sec.notice_key_file.is_some() {
            return Err(invalid(
                "security.notice_key_file",
                "is set while sign_notices = false: remove one (a key that is never used is a mistake waiting to happen)",
            ));
        }
        if sec
            .previous_key_overlap_ms
            .is_some_and(|ms| ms > 7 * 86_400_000)
        {
            return Err(invalid(
                "security.previous_key_overlap_ms",
                "must be at most 604800000 (a week)",
            ));
        }
        // What the ledger derives from these keys must satisfy its own rules too, so that it
        // never has to repair a configuration that loaded.
        self.lease_config("validate")
            .validate()
            .map_err(|why| invalid("ledger", why))?;
        let p = &self.pacing;
        settings::check_range(
            "pacing.control_interval_ms",
            p.control_interval_ms,
            10..=60_000,
        )?;
        Ok(())
    }

    pub fn read_timeout(&self) -> Duration {
        self.front.http.read_timeout()
    }

    /// Largest accepted bid request body.
    pub fn max_body_bytes(&self) -> usize {
        self.front
            .http
            .body_limit(http_front::DEFAULT_MAX_BODY_BYTES)
    }

    /// The admission gate's configuration with the bidder's defaults filled in.
    pub fn admission(&self) -> admission::AdmissionConfig {
        self.rtb
            .admission
            .clone()
            .or_max_busy_ms(DEFAULT_MAX_BUSY_MS)
    }

    /// What the server accepts from client connections.
    pub fn limits(&self) -> http_front::Limits {
        self.front.http.limits()
    }

    /// `ledger.lease_chunk` in integer money.
    pub fn lease_chunk(&self) -> Nanos {
        Nanos::from_units(self.ledger.lease_chunk).unwrap_or(Nanos(1))
    }

    /// The lease ledger's settings for instance `node` (`redis_mode = "lease"`).
    pub fn lease_config(&self, node: &str) -> ledger::LeaseConfig {
        let l = &self.ledger;
        let defaults = ledger::LeaseConfig::default();
        let lease_ttl = Duration::from_millis(l.lease_ttl_ms);
        let report_interval = Duration::from_millis(l.lease_report_ms);
        ledger::LeaseConfig {
            instance_id: node.to_owned(),
            lease_chunk: self.lease_chunk(),
            report_interval,
            lease_ttl,
            // Local spending stops well before Redis may reclaim the lease.
            safety_margin: lease_ttl / 4,
            // An idle lease is closed by a report round, so it waits at least two of them.
            idle_close: defaults.idle_close.max(report_interval * 2),
            limits: self.limits_role(node),
            ..defaults
        }
    }

    /// Whether instance `node` writes limits (`ledger.limits`), and as whom.
    pub fn limits_role(&self, node: &str) -> ledger::LimitsRole {
        match self.ledger.limits {
            LimitsSource::File => ledger::LimitsRole::Writer(format!("file:{node}")),
            LimitsSource::Follow => ledger::LimitsRole::Follower,
        }
    }

    /// How long a notice URL stays valid after its bid: the reservation's TTL and grace.
    pub fn notice_lifetime(&self) -> Duration {
        Duration::from_millis(self.ledger.reservation_ttl_ms + self.ledger.reservation_grace_ms)
    }

    /// `ledger.redis_cluster_nodes`: required (and only used) with `backend = "redis-cluster"`;
    /// each a plain `redis://` URL of database 0, all with the same credentials.
    fn validate_cluster_nodes(&self) -> Result<(), ConfigError> {
        let l = &self.ledger;
        let key = "ledger.redis_cluster_nodes";
        if l.backend != Backend::RedisCluster {
            if !l.redis_cluster_nodes.is_empty() {
                return Err(invalid(
                    key,
                    "is only used with backend = \"redis-cluster\"",
                ));
            }
            return Ok(());
        }
        if l.redis_cluster_nodes.is_empty() || l.redis_cluster_nodes.len() > 64 {
            return Err(invalid(
                key,
                "must list 1..=64 seed URLs of the cluster's nodes",
            ));
        }
        let mut first: Option<crate::redis_url::RedisUrl> = None;
        for (i, text) in l.redis_cluster_nodes.iter().enumerate() {
            let url =
                crate::redis_url::parse(text).map_err(|e| invalid(key, format!("[{i}] {e}")))?;
            if url.tls != l.redis_ca_file.is_some() {
                let why = if url.tls {
                    "is rediss:// (TLS): set ledger.redis_ca_file, the PEM file of the CA that signed the nodes' certificates"
                } else {
                    "is redis:// but ledger.redis_ca_file is set: every node is rediss:// (TLS) or none"
                };
                return Err(invalid(key, format!("[{i}] {why}")));
            }
            if url.db != 0 {
                return Err(invalid(
                    key,
                    format!(
                        "[{i}] names database {}: a cluster has only database 0",
                        url.db
                    ),
                ));
            }
            match &first {
                Some(f) if (&f.username, &f.password) != (&url.username, &url.password) => {
                    return Err(invalid(
                        key,
                        format!("[{i}] has other credentials than [0]: one cluster, one user"),
                    ));
                }
                Some(_) => {}
                None => first = Some(url),
            }
        }
        Ok(())
    }

    /// `ledger.redis_url`, parsed.
    pub fn redis_url(&self) -> Result<crate::redis_url::RedisUrl, ConfigError> {
        crate::redis_url::parse(&self.ledger.redis_url).map_err(|e| invalid("ledger.redis_url", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_loads_with_defaults() {
        let c = BidderConfig::from_toml(
            r#"
listen = "127.0.0.1:9100"
campaigns = "campaigns.json"
[ledger]
backend = "redis"
redis_url = "redis://127.0.0.1:6379"
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.ledger.backend, Backend::Redis);
        assert_eq!(c.ledger.redis_mode, RedisMode::Lease);
        assert_eq!(c.ledger.charge_on, ChargeOn::Win);
        assert_eq!(c.rtb.deadline.default_tmax_ms, 100);
        assert_eq!(c.admission().max_busy(), Duration::from_millis(10));
        let off = BidderConfig::from_toml("campaigns = \"c.json\"\n[admission]\nmax_busy_ms = 0")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(off.admission().max_busy(), Duration::ZERO, "the file wins");
        assert_eq!(
            c.redis_url().ok().map(|u| (u.addr, u.db)),
            Some(("127.0.0.1:6379".to_owned(), 0))
        );
    }

    #[test]
    fn a_redis_cluster_is_named_by_its_seeds_and_refused_naming_the_key() {
        let c = BidderConfig::from_toml(
            "campaigns = \"c.json\"\n[ledger]\nbackend = \"redis-cluster\"\n\
             redis_cluster_nodes = [\"redis://u:pw@10.0.0.1:7000\", \"redis://u:pw@10.0.0.2:7000\"]",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.ledger.backend, Backend::RedisCluster);
        assert!(c.ledger.backend.is_redis());
        // A follower of the limits on a cluster, as on one Redis.
        let follower = BidderConfig::from_toml(
            "campaigns = \"c.json\"\n[ledger]\nbackend = \"redis-cluster\"\nlimits = \"follow\"\n\
             redis_cluster_nodes = [\"redis://10.0.0.1:7000\"]",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(follower.ledger.limits, LimitsSource::Follow);
        let base = "campaigns = \"c.json\"\n[ledger]\n";
        for (rest, key, why) in [
            (
                "backend = \"redis-cluster\"",
                "ledger.redis_cluster_nodes",
                "1..=64",
            ),
            (
                "redis_cluster_nodes = [\"redis://h:1\"]",
                "ledger.redis_cluster_nodes",
                "only used with",
            ),
            (
                "backend = \"redis-cluster\"\nredis_cluster_nodes = [\"http://h:1\"]",
                "ledger.redis_cluster_nodes",
                "[0]",
            ),
            (
                "backend = \"redis-cluster\"\nredis_cluster_nodes = [\"redis://h:1/2\"]",
                "ledger.redis_cluster_nodes",
                "database 2",
            ),
            (
                "backend = \"redis-cluster\"\nredis_cluster_nodes = [\"rediss://h:1\"]",
                "ledger.redis_cluster_nodes",
                "set ledger.redis_ca_file",
            ),
            (
                "backend = \"redis-cluster\"\nredis_ca_file = \"ca.pem\"\n\
                 redis_cluster_nodes = [\"rediss://h:1\", \"redis://h:2\"]",
                "ledger.redis_cluster_nodes",
                "[1] is redis://",
            ),
            (
                "backend = \"redis-cluster\"\nredis_cluster_nodes = [\"redis://:a@h:1\", \"redis://:b@h:2\"]",
                "ledger.redis_cluster_nodes",
                "[1] has other credentials",
            ),
            (
                "backend = \"redis\"\nredis_prefix = \"{g}:\"",
                "ledger.redis_prefix",
                "brace",
            ),
        ] {
            let text = format!("{base}{rest}");
            let e = BidderConfig::from_toml(&text).err().map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|m| m.starts_with(key) && m.contains(why)),
                "{text:?} gave {e:?}"
            );
            // The password never shows in the message.
            assert!(!e.unwrap_or_default().contains(":a@"));
        }
    }

    #[test]
    fn the_lease_settings_loaded_satisfy_the_ledger() {
        // Found by the bidder_config fuzz target: a 40 s report interval loaded, but the lease
        // ledger's 30 s idle close was shorter, and the ledger repaired it at start.
        let text = "campaigns = \"c.json\"\n[ledger]\nbackend = \"redis\"\n\
                    lease_report_ms = 40000\nlease_ttl_ms = 160000";
        let config = BidderConfig::from_toml(text).unwrap();
        let lease = config.lease_config("n");
        assert_eq!(lease.validate(), Ok(()));
        assert_eq!(lease.idle_close, Duration::from_secs(80));
        assert_eq!(lease.lease_chunk, Nanos(50_000_000));
        let defaults = BidderConfig::from_toml("campaigns = \"c.json\"").unwrap();
        assert_eq!(
            defaults.lease_config("n").limits,
            ledger::LimitsRole::Writer("file:n".to_owned())
        );
        let unknown = BidderConfig::from_toml("campaigns = \"c.json\"\n[ledger]\nlimits = \"all\"");
        assert!(
            unknown
                .err()
                .is_some_and(|e| e.to_string().contains("expected `file` or `follow`")),
            "an unknown value is refused with the ones allowed"
        );
        let follower = BidderConfig::from_toml(
            "campaigns = \"c.json\"\n[ledger]\nbackend = \"redis\"\nlimits = \"follow\"",
        )
        .unwrap();
        assert_eq!(follower.limits_role("n"), ledger::LimitsRole::Follower);
        assert_eq!(
            defaults.lease_config("n").idle_close,
            Duration::from_secs(30)
        );
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("campaigns = \"c.json\"\nnode = \"a b\"", "node"),
            (
                "campaigns = \"c.json\"\n[ledger]\nlimits = \"follow\"",
                "ledger.limits",
            ),
            (
                "campaigns = \"c.json\"\n[ledger]\nlimits_check_ms = 0",
                "ledger.limits_check_ms",
            ),
            (
                "campaigns = \"c.json\"\n[ledger]\nredis_url = \"http://x\"",
                "ledger.redis_url",
            ),
            (
                "campaigns = \"c.json\"\n[ledger]\nlease_ttl_ms = 100",
                "ledger.lease_ttl_ms",
            ),
            (
                "campaigns = \"c.json\"\n[deadline]\nanswer_margin_ms = 500",
                "deadline.answer_margin_ms",
            ),
            (
                "campaigns = \"c.json\"\n[http]\nanswer_margin_ms = 5\n[deadline]\nanswer_margin_ms = 6",
                "http.answer_margin_ms has moved to deadline.answer_margin_ms, and both are set",
            ),
            (
                "campaigns = \"c.json\"\n[http]\nidle_timeout_ms = 0",
                "http.idle_timeout_ms",
            ),
            (
                "campaigns = \"c.json\"\n[admission]\nmax_busy_ms = 20000",
                "admission.max_busy_ms",
            ),
        ] {
            let e = BidderConfig::from_toml(text).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|m| m.starts_with(key)),
                "{text:?} gave {e:?}"
            );
        }
        // Found by the bidder_config fuzz target (fuzz/regressions/bidder_config).
        let e = BidderConfig::from_toml("campaigns = \"c.json\"\n[ledger]\nlease_chunk = 1e-10")
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|m| m.starts_with("ledger.lease_chunk")),
            "{e:?}"
        );
        // The exchange's old place is not one the bidder ever had: a plain unknown section.
        let e = BidderConfig::from_toml("campaigns = \"c.json\"\n[auction]\ndefault_tmax_ms = 5")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!e.contains("moved") && e.contains("auction"), "{e}");
        let unknown = BidderConfig::from_toml("campaigns = \"c.json\"\nbogus = 1")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(unknown.contains("bogus"), "{unknown}");
        let missing = BidderConfig::from_toml("").err().map(|e| e.to_string());
        assert!(
            missing.as_deref().is_some_and(|m| m.contains("campaigns")),
            "{missing:?}"
        );
    }
}
