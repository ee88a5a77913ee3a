//! Creating the ledger in Redis: an explicit, audited, one-time act that refuses when there is
//! evidence a ledger lived there before.
//!
//! A Redis that lost its data (a restart without persistence, a failover to an empty replica,
//! a flush) looks exactly like a new one. Creating a ledger in it would reopen every budget:
//! whatever was spent can be spent again. So no start creates one; `gavel ledger create` or
//! `POST /admin/ledger/open` does, after looking for evidence:
//!
//! | evidence | where | survives |
//! | --- | --- | --- |
//! | the marker: the id of the ledger this instance last opened there | a file in `ledger.state_dir` (one per Redis and prefix) | anything Redis does, as long as that disk lives |
//! | keys under the prefix without a ledger (campaigns, reservations, leases) | Redis | a partial loss (eviction), not a flush |
//!
//! With evidence, creating needs the operator to say the data is lost (`--after-loss`,
//! `?after_loss=true`): after restoring what could be restored from a backup, or accepting
//! that the campaigns start again from zero spend. Every creation is audited.

use std::path::{Path, PathBuf};

use ledger::{KeyScan, LedgerError, RedisLedger};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{Backend, BidderConfig};

/// Overrides `ledger.redis_url` (so that a password stays out of the config file).
pub const REDIS_URL_ENV: &str = "GAVEL_REDIS_URL";

/// The Redis the configuration names (the environment's URL first, since it may carry a
/// password that stays out of the file) and, for `rediss://` with a CA file, its TLS settings.
pub(crate) fn redis_target(
    config: &BidderConfig,
) -> Result<(crate::redis_url::RedisUrl, Option<ledger::RedisTls>), String> {
    let url = redis_url_in_force(config)?;
    let tls = match (&config.ledger.redis_ca_file, url.tls) {
        (Some(ca), true) => Some(
            ledger::RedisTls::from_ca_file(ca, &url.host)
                .map_err(|e| format!("ledger.redis_ca_file: {e}"))?,
        ),
        _ => None,
    };
    Ok((url, tls))
}

/// The Redis URL in force: `GAVEL_REDIS_URL` when set, else `ledger.redis_url`.
fn redis_url_in_force(config: &BidderConfig) -> Result<crate::redis_url::RedisUrl, String> {
    match std::env::var(REDIS_URL_ENV) {
        Ok(text) => crate::redis_url::parse(&text).map_err(|e| format!("{REDIS_URL_ENV} {e}")),
        Err(_) => config.redis_url().map_err(|e| e.to_string()),
    }
}

/// The seeds of the Redis Cluster a configuration names (`host:port` each) and the URL that
/// stands for it in messages (the first seed's, with the credentials in force: those of
/// `GAVEL_REDIS_URL` when set, so that a password stays out of the file).
pub(crate) fn cluster_target(
    config: &BidderConfig,
) -> Result<(Vec<String>, crate::redis_url::RedisUrl), String> {
    let key = "ledger.redis_cluster_nodes";
    let mut seeds = Vec::with_capacity(config.ledger.redis_cluster_nodes.len());
    let mut shown: Option<crate::redis_url::RedisUrl> = None;
    for text in &config.ledger.redis_cluster_nodes {
        let url = crate::redis_url::parse(text).map_err(|e| format!("{key} {e}"))?;
        seeds.push(url.addr.clone());
        shown.get_or_insert(url);
    }
    let mut shown = shown.ok_or_else(|| format!("{key} lists no node"))?;
    if let Ok(text) = std::env::var(REDIS_URL_ENV) {
        let env = crate::redis_url::parse(&text).map_err(|e| format!("{REDIS_URL_ENV} {e}"))?;
        shown.username = env.username;
        shown.password = env.password;
    }
    Ok((seeds, shown))
}

/// The marker of the Redis ledger a configuration names: `None` in memory mode or without a
/// `ledger.state_dir`. A cluster's is named by its seeds, sorted.
pub(crate) fn marker_of(config: &BidderConfig) -> Option<Marker> {
    let l = &config.ledger;
    let (addr, db) = match l.backend {
        Backend::Memory => return None,
        Backend::Redis => {
            let url = redis_url_in_force(config).ok()?;
            (url.addr, url.db)
        }
        Backend::RedisCluster => {
            let (mut seeds, _) = cluster_target(config).ok()?;
            seeds.sort();
            (format!("cluster:{}", seeds.join(",")), 0)
        }
    };
    Some(Marker::new(
        l.state_dir.as_deref()?,
        &addr,
        db,
        &l.redis_prefix,
    ))
}

/// Why the marker of the Redis ledger a configuration names could not be kept (its directory
/// is missing or not writable, a read-only ConfigMap say): then a Redis that loses its data
/// leaves no evidence on this host. `None` when it can, or in memory mode. Writes and removes
/// a probe file.
pub fn state_dir_problem(config: &BidderConfig) -> Option<String> {
    marker_of(config)?.problem()
}

/// A handle on the Redis ledger the configuration names, and the marker that goes with it.
/// Connects lazily: nothing is sent until it is used.
pub(crate) fn redis_handle(
    config: &BidderConfig,
) -> Result<(RedisLedger, crate::redis_url::RedisUrl, Option<Marker>), String> {
    let l = &config.ledger;
    if l.backend == Backend::RedisCluster {
        let (seeds, url) = cluster_target(config)?;
        let redis = RedisLedger::try_new(ledger::RedisConfig {
            cluster_nodes: seeds,
            prefix: l.redis_prefix.clone(),
            timeout: std::time::Duration::from_millis(l.redis_timeout_ms),
            username: url.username.clone(),
            password: url.password.clone(),
            cluster_ca_file: l.redis_ca_file.clone(),
            ..ledger::RedisConfig::default()
        })
        .map_err(|e| format!("ledger.redis_cluster_nodes: {e}"))?;
        return Ok((redis, url, marker_of(config)));
    }
    let (url, tls) = redis_target(config)?;
    let redis = RedisLedger::new(ledger::RedisConfig {
        addr: url.addr.clone(),
        db: url.db,
        prefix: l.redis_prefix.clone(),
        timeout: std::time::Duration::from_millis(l.redis_timeout_ms),
        username: url.username.clone(),
        password: url.password.clone(),
        tls,
        ..ledger::RedisConfig::default()
    });
    Ok((redis, url, marker_of(config)))
}

/// What a marker file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerRecord {
    /// The ledger's id in Redis.
    pub ledger: String,
    /// `host:port/db` and the prefix: which ledger this is the marker of.
    pub redis: String,
    pub prefix: String,
    /// When this instance last saw it open (RFC 3339).
    pub seen_at: String,
}

/// The marker of one Redis ledger, kept on this instance's disk.
#[derive(Debug, Clone)]
pub struct Marker {
    path: PathBuf,
    redis: String,
    prefix: String,
}

/// Largest marker file read.
const MAX_MARKER_BYTES: usize = 4096;

impl Marker {
    /// The marker of the ledger at `addr`, database `db`, under `prefix`, in `dir`. Its name
    /// carries a hash of the three, so one directory can keep the markers of several ledgers.
    pub fn new(dir: &Path, addr: &str, db: u32, prefix: &str) -> Marker {
        let redis = format!("{addr}/{db}");
        let mut h = Sha256::new();
        h.update(redis.as_bytes());
        h.update([0]);
        h.update(prefix.as_bytes());
        let hash: String = h
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        Marker {
            path: dir.join(format!("gavel-ledger-{hash}.json")),
            redis,
            prefix: prefix.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why this marker could not be written now (its directory missing or not writable), or
    /// `None`. Writes and removes a probe file beside it.
    pub fn problem(&self) -> Option<String> {
        let dir = self.path.parent()?;
        let probe = dir.join(format!(".gavel-probe-{}", std::process::id()));
        match std::fs::write(&probe, b"probe") {
            Ok(()) => {
                let _ = std::fs::remove_file(&probe);
                None
            }
            Err(e) => Some(format!(
                "ledger.state_dir {} is not writable ({e}): if Redis loses its data, nothing on \
                 this host will say a ledger lived there; set it to a persistent, writable \
                 directory",
                dir.display()
            )),
        }
    }

    /// What the marker file says: `Ok(None)` only when there is none; a file that cannot be
    /// read or is not a marker of this ledger is `Err` (evidence all the same: something was
    /// written there).
    pub fn read(&self) -> Result<Option<MarkerRecord>, String> {
        let text = match settings::read_bounded(&self.path, MAX_MARKER_BYTES) {
            Ok(text) => text,
            Err(_) if !self.path.exists() => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let record: MarkerRecord = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a ledger marker: {e}", self.path.display()))?;
        if record.redis != self.redis || record.prefix != self.prefix {
            return Err(format!(
                "{} names another ledger ({} {})",
                self.path.display(),
                record.redis,
                record.prefix
            ));
        }
        Ok(Some(record))
    }

    /// The id the marker records, if it is readable (for log lines).
    pub fn recorded(&self) -> Option<MarkerRecord> {
        self.read().ok().flatten()
    }

    /// Records `ledger` as the one open now: written aside, then renamed over the old file.
    pub fn write(&self, ledger: &str) -> std::io::Result<()> {
        if self.recorded().is_some_and(|r| r.ledger == ledger) {
            return Ok(());
        }
        let record = MarkerRecord {
            ledger: ledger.to_owned(),
            redis: self.redis.clone(),
            prefix: self.prefix.clone(),
            seen_at: units::Timestamp::now().to_rfc3339(),
        };
        // One aside file per process: a server and the CLI writing at once never share one.
        let aside = self
            .path
            .with_extension(format!("json.{}.new", std::process::id()));
        let text = serde_json::to_string(&record).map_err(std::io::Error::other)?;
        // Readable by its owner only: it says which ledger lives where.
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&aside).and_then(|mut file| {
            use std::io::Write as _;
            file.write_all(format!("{text}\n").as_bytes())?;
            file.sync_all()
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&aside);
            return Err(e);
        }
        std::fs::rename(&aside, &self.path)
    }
}

/// What says a ledger lived in a Redis that holds none now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The id this instance's marker records (the ledger that was lost).
    pub marker: Option<String>,
    /// A marker file that could not be read or is not this ledger's: evidence too.
    pub marker_unreadable: Option<String>,
    /// Keys under the prefix.
    pub keys: u64,
    /// Some of them.
    pub sample: Vec<String>,
    /// The scan stopped before the end: counted as evidence.
    pub scan_incomplete: bool,
}

impl Evidence {
    pub fn any(&self) -> bool {
        self.marker.is_some()
            || self.marker_unreadable.is_some()
            || self.keys > 0
            || self.scan_incomplete
    }

    /// The evidence `marker` and a scan of Redis give.
    fn of(marker: Option<&Marker>, scan: KeyScan) -> Evidence {
        let (marker, marker_unreadable) = match marker.map(Marker::read) {
            None | Some(Ok(None)) => (None, None),
            Some(Ok(Some(record))) => (Some(record.ledger), None),
            Some(Err(why)) => (None, Some(why)),
        };
        Evidence {
            marker,
            marker_unreadable,
            keys: scan.keys,
            sample: scan.sample,
            scan_incomplete: scan.incomplete,
        }
    }

    /// One line for an operator.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(id) = &self.marker {
            parts.push(format!("this instance's marker records ledger {id}"));
        }
        if let Some(why) = &self.marker_unreadable {
            parts.push(format!("this instance's marker cannot be read ({why})"));
        }
        if self.keys > 0 {
            parts.push(format!(
                "Redis holds {}{} keys under the prefix (such as {})",
                self.keys,
                if self.scan_incomplete { "+" } else { "" },
                self.sample.join(", ")
            ));
        } else if self.scan_incomplete {
            parts.push("the scan of Redis did not finish".to_owned());
        }
        parts.join("; ")
    }
}

/// What opening did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Opened {
    /// A ledger was there already: nothing created.
    Existing { ledger: String },
    /// Created now, over this evidence (empty at a first start).
    Created { ledger: String, evidence: Evidence },
}

/// Why a ledger was not created.
#[derive(Debug, thiserror::Error)]
pub enum OpenRefused {
    #[error(
        "Redis holds no ledger, but one lived there: {}. Creating one now would reopen every \
         budget from zero spend. Restore Redis from a backup if you have one (the ledger comes \
         back by itself); otherwise say the data is lost: `gavel ledger create --after-loss` \
         (or POST /admin/ledger/open?after_loss=true). docs/bidder.md, \"The ledger\"",
        .0.describe()
    )]
    Evidence(Evidence),
    #[error(
        "the ledger marker cannot be written: {0}. Without it, a later loss of Redis's data \
         leaves no evidence on this host and a second `create` would reopen every budget; fix \
         ledger.state_dir, or pass --no-marker (?no_marker=true) to create it without one"
    )]
    NoMarker(String),
    #[error(
        "ledger {ledger} was created, but its marker could not be written ({reason}): fix \
         ledger.state_dir; the next start of a bidder writes it"
    )]
    MarkerNotWritten { ledger: String, reason: String },
    #[error("redis: {0}")]
    Redis(#[from] LedgerError),
}

/// Whether creating a ledger needs its marker written on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerRule {
    /// Refused when the marker cannot be written (the default).
    Required,
    /// The operator said to create it without one (`--no-marker`).
    Waived,
}

/// Opens the ledger in `redis`, creating it only when Redis holds none and there is no
/// evidence one lived there, or the operator says it was lost (`after_loss`). Records the id in
/// `marker`; creating needs that marker writable unless `rule` waives it (a ledger created with
/// no marker leaves nothing on this host to stop a second `create` after a loss). The caller
/// audits.
pub async fn open_or_create(
    redis: &RedisLedger,
    marker: Option<&Marker>,
    after_loss: bool,
    rule: MarkerRule,
) -> Result<Opened, OpenRefused> {
    if let Some(id) = redis.open_ledger(false).await? {
        remember(marker, &id);
        return Ok(Opened::Existing { ledger: id });
    }
    let evidence = Evidence::of(marker, redis.keys_under_prefix().await?);
    if evidence.any() && !after_loss {
        return Err(OpenRefused::Evidence(evidence));
    }
    if rule == MarkerRule::Required {
        let problem = match marker {
            None => Some("no ledger.state_dir is set".to_owned()),
            Some(m) => m.problem(),
        };
        if let Some(problem) = problem {
            return Err(OpenRefused::NoMarker(problem));
        }
    }
    let id = redis
        .open_ledger(true)
        .await?
        .ok_or_else(|| LedgerError::Protocol("open_ledger created nothing".to_owned()))?;
    match (rule, marker.map(|m| m.write(&id))) {
        (MarkerRule::Required, Some(Err(e))) => Err(OpenRefused::MarkerNotWritten {
            ledger: id,
            reason: e.to_string(),
        }),
        _ => {
            remember(marker, &id);
            Ok(Opened::Created {
                ledger: id,
                evidence,
            })
        }
    }
}

/// Writes the marker; a marker that cannot be written costs evidence, not service: logged.
pub(crate) fn remember(marker: Option<&Marker>, id: &str) {
    if let Some(m) = marker
        && let Err(e) = m.write(id)
    {
        tracing::warn!(file = %m.path().display(), error = %e, "ledger marker not written (ledger.state_dir): a later loss of Redis's data will have less evidence");
    }
}

/// What `gavel ledger status` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerState {
    /// The Redis, password hidden.
    pub redis: String,
    /// The ledger's id, when Redis holds one.
    pub ledger: Option<String>,
    /// When it holds none: what says one lived there.
    pub evidence: Evidence,
}

/// Reads, without changing anything, whether the Redis a configuration names holds a ledger.
pub async fn status(config: &BidderConfig) -> Result<LedgerState, String> {
    if !config.ledger.backend.is_redis() {
        return Err("ledger.backend is memory: there is no shared ledger".to_owned());
    }
    let (redis, url, marker) = redis_handle(config)?;
    let redis_text = url.to_string();
    if let Some(id) = redis.open_ledger(false).await.map_err(|e| e.to_string())? {
        return Ok(LedgerState {
            redis: redis_text,
            ledger: Some(id),
            evidence: Evidence::default(),
        });
    }
    let scan = redis.keys_under_prefix().await.map_err(|e| e.to_string())?;
    Ok(LedgerState {
        redis: redis_text,
        ledger: None,
        evidence: Evidence::of(marker.as_ref(), scan),
    })
}

/// `gavel ledger create`: [`open_or_create`] for the Redis a configuration names, audited in
/// its `security.audit_log` (and the log) as `who`.
pub async fn create(
    config: &BidderConfig,
    after_loss: bool,
    rule: MarkerRule,
    who: &str,
) -> Result<Opened, String> {
    if !config.ledger.backend.is_redis() {
        return Err("ledger.backend is memory: there is no shared ledger to create".to_owned());
    }
    let admin =
        http_front::AdminDoor::open(&http_front::SecuritySection::admin(&config.front.security))
            .map_err(|e| e.to_string())?;
    let (redis, url, marker) = redis_handle(config)?;
    let result = open_or_create(&redis, marker.as_ref(), after_loss, rule).await;
    let before = serde_json::json!({
        "redis": url.to_string(),
        "after_loss": after_loss,
        "no_marker": rule == MarkerRule::Waived,
    });
    let after = match &result {
        Ok(opened) => serde_json::to_value(opened).unwrap_or_default(),
        Err(e) => serde_json::json!({ "refused": e.to_string() }),
    };
    if matches!(
        result,
        Ok(Opened::Created { .. })
            | Err(OpenRefused::Evidence(_) | OpenRefused::MarkerNotWritten { .. })
    ) {
        let caller = http_front::Caller {
            who: who.to_owned(),
        };
        admin.audit(&caller, "gavel ledger create", &before, &after);
    }
    result.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_names_its_ledger_and_is_replaced_whole() {
        let dir = testkit::TempDir::new("ledger-marker");
        let m = Marker::new(dir.path(), "127.0.0.1:6379", 0, "gavel:");
        assert_eq!(m.read(), Ok(None));
        m.write("L1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.recorded().map(|r| r.ledger), Some("L1".to_owned()));
        m.write("L2").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.recorded().map(|r| r.ledger), Some("L2".to_owned()));
        // Another Redis, database or prefix has a marker of its own.
        for other in [
            Marker::new(dir.path(), "127.0.0.1:6380", 0, "gavel:"),
            Marker::new(dir.path(), "127.0.0.1:6379", 1, "gavel:"),
            Marker::new(dir.path(), "127.0.0.1:6379", 0, "other:"),
        ] {
            assert_ne!(other.path(), m.path());
            assert_eq!(other.read(), Ok(None));
        }
        // A file that is not a marker is evidence all the same (found by review: a marker
        // emptied by a crash, or unreadable, once counted as no evidence).
        std::fs::write(m.path(), "garbage").unwrap_or_default();
        assert!(m.read().is_err_and(|e| e.contains("not a ledger marker")));
        let ev = Evidence::of(Some(&m), KeyScan::default());
        assert!(ev.any(), "{ev:?}");
        assert!(
            ev.describe().contains("cannot be read"),
            "{}",
            ev.describe()
        );
    }

    #[test]
    fn evidence_says_what_it_found() {
        assert!(!Evidence::default().any());
        let e = Evidence {
            marker: Some("L1".into()),
            marker_unreadable: None,
            keys: 3,
            sample: vec!["gavel:c:a".into()],
            scan_incomplete: false,
        };
        assert!(e.any());
        assert_eq!(
            e.describe(),
            "this instance's marker records ledger L1; Redis holds 3 keys under the prefix (such as gavel:c:a)"
        );
        let refused = OpenRefused::Evidence(e).to_string();
        assert!(
            refused.contains("--after-loss") && refused.contains("backup"),
            "{refused}"
        );
    }
}
