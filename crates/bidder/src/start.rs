//! Wiring a bidder: the ledger its configuration names, the first campaign load, and the
//! background tasks (pacing tick, reservation expiry; the campaign file's watcher starts with
//! [`Bidder::watch`]). Tasks hold a weak reference and stop when the bidder is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use ledger::Balance;
use pacing::{Nanos, Timestamp};

use crate::config::{Backend, BidderConfig, RedisMode};
use crate::metrics::Metrics;
use crate::state::{Bidder, State};
use campaigns::PacingModeConfig;
use ledger::Ledger;

/// Why a bidder could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("campaigns: {0}")]
    Campaigns(String),
    #[error("ledger: {0}")]
    Ledger(String),
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
    campaigns: Vec<(String, pacing::Limits)>,
) -> Result<Ledger, StartError> {
    let l = &config.ledger;
    let reservation_ttl = Duration::from_millis(l.reservation_ttl_ms);
    let timeout = Duration::from_millis(l.redis_timeout_ms);
    if l.backend == Backend::Memory {
        return Ok(Ledger::memory(reservation_ttl));
    }
    let (addr, db) = config
        .redis_address()
        .map_err(|e| StartError::Ledger(e.to_string()))?;
    let redis = ledger::RedisLedger::new(ledger::RedisConfig {
        addr,
        db,
        prefix: l.redis_prefix.clone(),
        timeout,
        ..ledger::RedisConfig::default()
    });
    // Reachability is not required to start (fail closed, recover by itself), but say so.
    if let Err(e) = redis.ping().await {
        tracing::warn!(error = %e, url = %l.redis_url, "redis not reachable at start; no bids until it is");
    }
    Ok(match l.redis_mode {
        RedisMode::PerBid => Ledger::per_bid(redis, reservation_ttl, timeout),
        RedisMode::Lease => {
            let lease = config.lease_config(node);
            Ledger::leased(
                ledger::LeasedLedger::start(redis, lease, campaigns).await,
                reservation_ttl,
                timeout,
            )
        }
    })
}

impl Bidder {
    /// Opens the ledger, loads the campaigns (refusing to start on a bad file) and starts the
    /// background tasks. Must run inside a tokio runtime.
    pub async fn start(config: BidderConfig) -> Result<Bidder, StartError> {
        let node = config.node.clone().unwrap_or_else(default_node);
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.listen))
            .trim_end_matches('/')
            .to_owned();
        let interval = Duration::from_millis(config.pacing.control_interval_ms);
        let snapshot = crate::reload::load(&config.campaigns, None, interval)
            .await
            .map_err(|e| StartError::Campaigns(e.message))?;
        let ledger = open_ledger(&config, &node, snapshot.limits()).await?;
        let limits_pending = ledger.set_campaigns(&snapshot.limits()).await.is_err();
        let metrics = Arc::new(Metrics::default());
        metrics
            .campaigns
            .store(snapshot.states.len() as u64, Relaxed);
        let admission = Arc::new(admission::Admission::new(config.admission()));
        tokio::spawn(admission::Admission::run_controller(Arc::downgrade(
            &admission,
        )));
        let door = edge::Door::new(config.http.max_body_bytes, config.read_timeout(), admission);
        let state = Arc::new(State {
            door,
            connections: Arc::new(edge::ConnStats::default()),
            charge_on: config.ledger.charge_on,
            deadline: config.deadline.policy(),
            config,
            node,
            public_url,
            snapshot: ArcSwap::from_pointee(snapshot),
            ledger,
            metrics,
            seq: AtomicU64::new(0),
            reload_lock: tokio::sync::Mutex::new(()),
            limits_pending: AtomicBool::new(limits_pending),
        });
        tokio::spawn(pace(Arc::downgrade(&state), interval));
        tokio::spawn(expire(Arc::downgrade(&state)));
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
        let snapshot = state.snapshot.load_full();
        if state.limits_pending.load(Relaxed) {
            if state.ledger.set_campaigns(&snapshot.limits()).await.is_ok() {
                state.limits_pending.store(false, Relaxed);
            } else {
                continue;
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

/// Releases reservations whose notice never came.
async fn expire(state: Weak<State>) {
    let mut tick = tokio::time::interval(EXPIRY_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        if let Err(e) = state.ledger.expire().await {
            tracing::debug!(error = %e, "reservation expiry deferred");
        }
    }
}
