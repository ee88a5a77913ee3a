//! Wiring a bidder: the ledger its configuration names, the first campaign load, and the
//! background tasks (pacing tick, reservation expiry; the campaign file's watcher starts with
//! [`Bidder::watch`]). Tasks hold a weak reference and stop when the bidder is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use ledger::Balance;
use units::{Nanos, Timestamp};

use crate::config::{Backend, BidderConfig, RedisMode};
use crate::metrics::Metrics;
use crate::state::{Bidder, State};
use crate::token::{NoticeKey, NoticeKeys};
use campaigns::PacingModeConfig;
use ledger::Ledger;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// Why a bidder could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("campaigns: {0}")]
    Campaigns(String),
    #[error("ledger: {0}")]
    Ledger(String),
    /// A key or token `[security]` names, refused: the error names the setting.
    #[error("{0}")]
    Security(#[from] settings::Invalid),
    /// The admin token or the audit log.
    #[error("{0}")]
    Admin(#[from] http_front::AdminError),
    /// No random source for the instance's name.
    #[error("no OS random source for ids: {0}")]
    Random(String),
}

/// Environment variables holding the notice keys when their files are not set.
pub const NOTICE_KEY_ENV: &str = "GAVEL_NOTICE_KEY";
pub const PREVIOUS_NOTICE_KEY_ENV: &str = "GAVEL_PREVIOUS_NOTICE_KEY";

/// The notice keys of `security`: `None` when signing is off; an error naming the setting when
/// signing is on and no key is found.
fn notice_keys(config: &BidderConfig) -> Result<Option<NoticeKeys>, settings::Invalid> {
    let s = &config.front.security;
    let load = |key, file: &Option<std::path::PathBuf>, env| {
        settings::load_secret(key, file.as_deref(), env).map_err(settings::Invalid::from)
    };
    let current = load(
        "security.notice_key_file",
        &s.notice_key_file,
        NOTICE_KEY_ENV,
    )?;
    let previous = load(
        "security.previous_notice_key_file",
        &s.previous_notice_key_file,
        PREVIOUS_NOTICE_KEY_ENV,
    )?;
    if !s.sign_notices {
        tracing::warn!(
            "security.sign_notices = false: anyone who can reach the bid port can charge or release budget"
        );
        return Ok(None);
    }
    let key = |secret: &settings::Secret, name: &str| {
        NoticeKey::new(secret).ok_or_else(|| settings::Invalid::new(name, "refused"))
    };
    let Some(current) = current else {
        return Err(settings::Invalid::new(
            "security.notice_key_file",
            format!(
                "is required to sign notices (or set {NOTICE_KEY_ENV}); create one with \
                 `openssl rand -hex 32 > notice.key`, or set security.sign_notices = false to \
                 run unsigned"
            ),
        ));
    };
    let overlap = s
        .previous_key_overlap_ms
        .map_or_else(|| config.notice_lifetime(), Duration::from_millis);
    let previous = match previous {
        Some(p) => Some((
            key(&p, "security.previous_notice_key_file")?,
            Timestamp::now().saturating_add(overlap),
        )),
        None => None,
    };
    Ok(Some(NoticeKeys::new(
        key(&current, "security.notice_key_file")?,
        previous,
    )))
}

/// How often expired reservations are released.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);

fn default_node() -> String {
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("bidder-{}-{started:x}", std::process::id())
}

async fn open_ledger(
    config: &BidderConfig,
    node: &str,
    campaigns: Vec<(String, units::Limits)>,
) -> Result<Ledger, StartError> {
    let l = &config.ledger;
    // A reservation is held as long as its notices are valid: TTL, then grace (unconfirmed).
    let reservation_ttl = config.notice_lifetime();
    let timeout = Duration::from_millis(l.redis_timeout_ms);
    if l.backend == Backend::Memory {
        return Ok(Ledger::memory(reservation_ttl));
    }
    let (redis, url, marker) =
        crate::ledger_open::redis_handle(config).map_err(StartError::Ledger)?;
    // A start never creates a ledger: an empty Redis may be one that lost its data.
    redis.expect_ledger(false);
    // Reachability is not required to start (fail closed, recover by itself), but say so. A
    // refusal (wrong password, untrusted certificate) will not fix itself: stop here.
    match redis.ping().await {
        Ok(()) => {}
        Err(e @ ledger::LedgerError::Refused(_)) => {
            return Err(StartError::Ledger(format!("{url}: {e}")));
        }
        Err(e) => {
            tracing::warn!(error = %e, url = %url, "redis not reachable at start; no bids until it is");
        }
    }
    Ok(match l.redis_mode {
        RedisMode::PerBid => {
            match redis.reopen().await {
                Ok(true) => {}
                Ok(false) => missing_at_start(&url, marker.as_ref()),
                Err(e) => tracing::warn!(error = %e, "ledger not checked at start"),
            }
            Ledger::per_bid(redis, reservation_ttl, timeout, config.limits_role(node))
        }
        RedisMode::Lease => {
            let lease = config.lease_config(node);
            let leased = ledger::LeasedLedger::start(redis, lease, campaigns).await;
            if leased.ledger_missing() {
                missing_at_start(&url, marker.as_ref());
            }
            Ledger::leased(leased, reservation_ttl, timeout)
        }
    })
}

/// Says, at start, that Redis holds no ledger: lost (this instance's marker names the one it
/// last opened there) or never created.
fn missing_at_start(url: &crate::redis_url::RedisUrl, marker: Option<&crate::ledger_open::Marker>) {
    match marker.and_then(crate::ledger_open::Marker::recorded) {
        Some(lost) => tracing::error!(
            url = %url,
            lost = %lost.ledger,
            last_seen = %lost.seen_at,
            "redis holds no Gavel ledger, but this instance last opened ledger {} there: it lost its data. \
             No bids (nothing is re-created) until an operator restores it from a backup or runs \
             `gavel ledger create --after-loss`",
            lost.ledger
        ),
        None => tracing::error!(
            url = %url,
            "redis holds no Gavel ledger (a first start, or it lost its data): no bids until an \
             operator runs `gavel ledger create` (or POST /admin/ledger/open)"
        ),
    }
}

/// What [`Bidder::check`] found in a configuration that would start.
#[derive(Debug)]
pub struct CheckReport {
    /// The serving campaigns' ids, in file order.
    pub campaigns: Vec<String>,
    /// Whether notices are signed (a key was found).
    pub signs_notices: bool,
    /// The ids of the price keys accepted (never the keys).
    pub price_keys: Vec<String>,
    /// Whether a plain price is refused.
    pub requires_price_token: bool,
    /// What would weaken it without stopping it (an unwritable `ledger.state_dir`).
    pub warnings: Vec<String>,
    /// Whether the admin API has a token (without one, admin mutations are refused).
    pub admin_token: bool,
    /// The ledger of record, with a Redis URL's password hidden.
    pub ledger: String,
}

/// What a bidder reads before it serves: its notice keys, its admin token and its campaigns.
/// [`Bidder::start`] and [`Bidder::check`] read them the same way.
struct Inputs {
    keys: Option<NoticeKeys>,
    prices: crate::prices::PriceKeys,
    admin: http_front::AdminDoor,
    snapshot: campaigns::Snapshot,
}

async fn read_inputs(config: &BidderConfig) -> Result<Inputs, StartError> {
    let keys = notice_keys(config)?;
    let prices = crate::reload::load_price_keys(config)?;
    let admin =
        http_front::AdminDoor::open(&http_front::SecuritySection::admin(&config.front.security))?;
    let interval = Duration::from_millis(config.pacing.control_interval_ms);
    let snapshot = crate::reload::load(&config.campaigns, None, interval)
        .await
        .map_err(|e| StartError::Campaigns(e.message))?;
    Ok(Inputs {
        keys,
        prices,
        admin,
        snapshot,
    })
}

impl Bidder {
    /// Checks everything [`Bidder::start`] checks before it serves (the notice keys, the admin
    /// token, the campaign file, the Redis URL and CA file), without opening the ledger or any
    /// socket: for `gavel bidder --check` and `gavel check-config`.
    pub async fn check(config: &BidderConfig) -> Result<CheckReport, StartError> {
        let Inputs {
            keys,
            prices,
            admin,
            snapshot,
        } = read_inputs(config).await?;
        let l = &config.ledger;
        let ledger = match l.backend {
            Backend::Memory => "memory".to_owned(),
            Backend::Redis => {
                let (url, _) =
                    crate::ledger_open::redis_target(config).map_err(StartError::Ledger)?;
                format!("redis at {url}, {:?} mode", l.redis_mode).to_lowercase()
            }
            Backend::RedisCluster => {
                let (seeds, _) =
                    crate::ledger_open::cluster_target(config).map_err(StartError::Ledger)?;
                format!(
                    "redis cluster seeded by {}, {:?} mode",
                    seeds.join(", "),
                    l.redis_mode
                )
                .to_lowercase()
            }
        };
        Ok(CheckReport {
            campaigns: snapshot
                .set
                .campaigns()
                .iter()
                .map(|c| c.id().to_owned())
                .collect(),
            signs_notices: keys.is_some(),
            price_keys: prices.ids(),
            requires_price_token: prices.required(),
            warnings: crate::ledger_open::state_dir_problem(config)
                .into_iter()
                .collect(),
            admin_token: admin.has_token(),
            ledger,
        })
    }

    /// Opens the ledger, loads the campaigns (refusing to start on a bad file) and starts the
    /// background tasks. Must run inside a tokio runtime.
    pub async fn start(config: BidderConfig) -> Result<Bidder, StartError> {
        Bidder::start_with_journal(config, journal::Journal::off()).await
    }

    /// As [`Bidder::start`], writing a ledger record per reservation, refusal and notice to
    /// `journal` (started by the caller from `[records]`, which owns its writer and flushes it
    /// at shutdown).
    pub async fn start_with_journal(
        config: BidderConfig,
        journal: journal::Journal,
    ) -> Result<Bidder, StartError> {
        let Inputs {
            keys,
            prices,
            admin,
            snapshot,
        } = read_inputs(&config).await?;
        if let Some(problem) = crate::ledger_open::state_dir_problem(&config) {
            tracing::warn!("{problem}");
        }
        if !prices.ids().is_empty() && !prices.required() {
            tracing::warn!(
                "price keys are set but security.require_price_token = false: a plain price in a notice is still charged; require the token once every exchange sends it"
            );
        }
        if !admin.has_token() {
            tracing::warn!(
                "no admin token (security.admin_token_file or GAVEL_ADMIN_TOKEN): admin mutations are refused"
            );
        }
        let id_seeds = StdRng::try_from_rng(&mut rand::rngs::SysRng)
            .map_err(|e| StartError::Random(e.to_string()))?;
        let node = config.rtb.node.clone().unwrap_or_else(default_node);
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.front.listen))
            .trim_end_matches('/')
            .to_owned();
        let ledger = open_ledger(&config, &node, snapshot.limits()).await?;
        let statuses = ledger
            .set_campaigns(&snapshot.limits(), ledger::LimitsFrom::Own)
            .await;
        let limits_pending = statuses.is_err();
        let metrics = Arc::new(Metrics::default());
        metrics.campaigns.set(snapshot.states.len() as u64);
        let admission = Arc::new(admission::Admission::new(config.admission()));
        tokio::spawn(admission::Admission::run_controller(Arc::downgrade(
            &admission,
        )));
        let door = http_front::Door::new(config.max_body_bytes(), config.read_timeout(), admission);
        let state = Arc::new(State {
            door,
            connections: Arc::new(http_front::ConnStats::default()),
            charge_on: config.ledger.charge_on,
            keys,
            prices: ArcSwap::from_pointee(prices),
            notice_lifetime: config.notice_lifetime(),
            admin,
            marker: crate::ledger_open::marker_of(&config),
            marker_recorded: std::sync::Mutex::new(None),
            id_seeds: std::sync::Mutex::new(id_seeds),
            deadline: config.rtb.deadline.policy(),
            config,
            node,
            public_url,
            snapshot: ArcSwap::from_pointee(snapshot),
            ledger,
            metrics,
            reload_lock: tokio::sync::Mutex::new(()),
            notices_in_flight: std::sync::atomic::AtomicUsize::new(0),
            limits_pending: AtomicBool::new(limits_pending),
            limits_pushed: AtomicBool::new(false),
            refusal_samples: crate::ledger_record::RefusalSamples::default(),
            limits_written_once: AtomicBool::new(!limits_pending),
            readiness: Arc::new(http_front::Readiness::new()),
            limits: ArcSwap::from_pointee(crate::limits_check::LimitsView::default()),
            journal,
        });
        let interval = Duration::from_millis(state.config.pacing.control_interval_ms);
        tokio::spawn(pace(Arc::downgrade(&state), interval));
        tokio::spawn(expire(Arc::downgrade(&state)));
        if let Ok(statuses) = statuses {
            crate::reload::note_limits(&state, statuses);
        }
        let every = Duration::from_millis(state.config.ledger.limits_check_ms);
        tokio::spawn(check_limits(Arc::downgrade(&state), every));
        Ok(Bidder { state })
    }

    /// Hands leased budget back to the ledger (call after `serve` returns).
    pub async fn shutdown(&self) {
        self.state.ledger.shutdown().await;
    }

    /// The base of this bidder's notice URLs.
    pub fn public_url(&self) -> &str {
        &self.state.public_url
    }
}

/// The pacing tick: reads every campaign's balance of record and runs its controller.
async fn pace(state: Weak<State>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        // The ledger open now is the one to remember: evidence if Redis ever loses it.
        if let Some(id) = state.ledger.redis().and_then(|r| r.open_ledger_id()) {
            let mut recorded = telemetry::locks::lock(&state.marker_recorded);
            if recorded.as_deref() != Some(id.as_str()) {
                crate::ledger_open::remember(state.marker.as_ref(), &id);
                *recorded = Some(id);
            }
        }
        let snapshot = state.snapshot.load_full();
        if state.limits_pending.load(Relaxed) {
            let from = crate::reload::limits_from(&state);
            match state.ledger.set_campaigns(&snapshot.limits(), from).await {
                Ok(statuses) => {
                    state.limits_pending.store(false, Relaxed);
                    state.limits_written_once.store(true, Relaxed);
                    crate::reload::note_limits(&state, statuses);
                }
                Err(_) => continue,
            }
        }
        // Only `even` campaigns need their spend to pace: an `asap` pacer only gates the flight,
        // and the ledger refuses what is not funded. Reading every campaign's balance each tick
        // would cost a Redis pass over 100,000 campaigns per second per instance.
        let now = Timestamp::now();
        let mut paced = Vec::new();
        for (s, c) in snapshot.states.iter().zip(snapshot.set.campaigns()) {
            match c.pacing() {
                PacingModeConfig::Even => paced.push(s.id.clone()),
                // Without a flight the share of an asap campaign never changes: skip it, so
                // that 100,000 such campaigns cost nothing here.
                PacingModeConfig::Asap => {
                    let f = c.flight();
                    if f.start.is_some() || f.end.is_some() {
                        s.pace_flight(now);
                    }
                }
            }
        }
        if paced.is_empty() {
            continue;
        }
        let balances = match state.ledger.balances(&paced).await {
            Ok(b) => b,
            // Keep the last shares: the ledger still refuses what is not funded.
            Err(_) => continue,
        };
        // A campaign the ledger does not know (a Redis restarted without persistence): write
        // the limits again on the next tick; meanwhile its reservations are refused.
        if balances.len() < paced.len() {
            state.limits_pending.store(true, Relaxed);
        }
        let by_id: HashMap<&str, &Balance> =
            balances.iter().map(|b| (b.campaign.as_str(), b)).collect();
        for s in &snapshot.states {
            if let Some(b) = by_id.get(s.id.as_str()) {
                let today = b.daily.as_ref().map_or(Nanos::ZERO, |d| d.spent);
                s.pace(now, b.spent, today);
            }
        }
    }
}

/// Compares the limits of record with the campaign file every `every` (the first comparison
/// was the start's).
async fn check_limits(state: Weak<State>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        crate::reload::check_limits(&state).await;
    }
}

/// Releases reservations whose notice never came.
async fn expire(state: Weak<State>) {
    let mut tick = tokio::time::interval(EXPIRY_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        match state.ledger.expire().await {
            Ok(n) => {
                state.metrics.reservations_expired.add(n as u64);
            }
            Err(e) => tracing::debug!(error = %e, "reservation expiry deferred"),
        }
    }
}
