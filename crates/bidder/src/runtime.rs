//! What changes while serving: the campaign set in force (swapped whole on reload) and each
//! campaign's running state (pacing, counters), which survives reloads by campaign id.
//!
//! The request path reads the set through one atomic pointer load ([`arc_swap::ArcSwap`]) and a
//! campaign's pacing share through one atomic integer; it never takes a lock. Only the pacing
//! tick, once per control interval, locks a campaign's controller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pacing::{Balance, Limits, Nanos, Pacer, PacerConfig, PacingMode, PacingState, Timestamp};

use crate::campaign::{Campaign, CampaignSet};

/// Running state of one campaign, kept across reloads while its id stays.
#[derive(Debug)]
pub struct CampaignState {
    pub id: String,
    /// Share of eligible requests that bid, in parts per million (from the pacer).
    pub share_ppm: AtomicU32,
    /// Until when (ms since epoch) the campaign is known to have no budget left: its candidates
    /// are skipped without asking the ledger.
    pub exhausted_until: AtomicU64,
    pub bids: AtomicU64,
    /// Impressions charged (by their win or billing notice, whichever came first).
    pub wins: AtomicU64,
    /// Charged by this instance, in nanos.
    pub charged: AtomicI64,
    pacer: Mutex<Pacer>,
    pacer_config: Mutex<PacerConfig>,
}

impl CampaignState {
    fn new(config: PacerConfig, now: Timestamp) -> CampaignState {
        let pacer = fresh_pacer(config, now);
        CampaignState {
            id: String::new(),
            share_ppm: AtomicU32::new(pacer.bid_share_ppm()),
            exhausted_until: AtomicU64::new(0),
            bids: AtomicU64::new(0),
            wins: AtomicU64::new(0),
            charged: AtomicI64::new(0),
            pacer: Mutex::new(pacer),
            pacer_config: Mutex::new(config),
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs the pacing controller on the ledger's figures and publishes the new share.
    pub fn pace(&self, now: Timestamp, balance: &Balance) {
        let mut pacer = Self::lock(&self.pacer);
        // Spent only: `reserved` is mostly lease headroom in Redis mode (budget parked with the
        // instances, not committed to bids), and in the other modes bids whose notices are a
        // moment away, a lag the controller absorbs like any reporting delay.
        let today = balance.daily.as_ref().map_or(Nanos::ZERO, |d| d.spent);
        pacer.update(now, balance.spent, today);
        self.share_ppm.store(pacer.bid_share_ppm(), Relaxed);
    }

    /// Steps an `asap` pacer, which needs no spend figures: it only opens and closes with the
    /// flight.
    pub fn pace_flight(&self, now: Timestamp) {
        let mut pacer = Self::lock(&self.pacer);
        pacer.update(now, Nanos::ZERO, Nanos::ZERO);
        self.share_ppm.store(pacer.bid_share_ppm(), Relaxed);
    }

    pub fn pacing_state(&self, now: Timestamp) -> PacingState {
        Self::lock(&self.pacer).state(now)
    }

    /// Whether a uniform draw in `0..1_000_000` lets this request bid.
    pub fn admits(&self, draw_ppm: u32) -> bool {
        draw_ppm < self.share_ppm.load(Relaxed)
    }

    pub fn is_exhausted(&self, now: Timestamp) -> bool {
        self.exhausted_until.load(Relaxed) > now.millis()
    }

    pub fn mark_exhausted(&self, now: Timestamp, for_how_long: Duration) {
        self.exhausted_until
            .store(now.saturating_add(for_how_long).millis(), Relaxed);
    }
}

/// A pacer that has taken its first step. A pacer admits nothing before its first update (it
/// does not know yet whether the flight has started); the spend is not known here, so the
/// step assumes none: the ledger still refuses what is not funded, and the pacing tick corrects
/// the share from the ledger's figures within one interval.
fn fresh_pacer(config: PacerConfig, now: Timestamp) -> Pacer {
    let mut pacer = Pacer::new(config);
    pacer.update(now, Nanos::ZERO, Nanos::ZERO);
    pacer
}

/// The pacing configuration a campaign asks for.
pub fn pacer_config(c: &Campaign, loaded_at: Timestamp, interval: Duration) -> PacerConfig {
    let f = c.flight();
    PacerConfig {
        mode: match c.pacing() {
            crate::campaign::PacingModeConfig::Asap => PacingMode::Asap,
            crate::campaign::PacingModeConfig::Even => PacingMode::Even,
        },
        flight: pacing::Flight {
            // An open start paces from the moment the campaign was first loaded.
            start: f.start.unwrap_or(loaded_at),
            end: f.end,
        },
        limits: limits(c),
        control_interval: interval,
    }
}

pub fn limits(c: &Campaign) -> Limits {
    Limits {
        total: c.budget().total,
        daily: c.budget().daily,
    }
}

/// The campaigns in force and their states, index for index.
#[derive(Debug)]
pub struct Snapshot {
    pub set: CampaignSet,
    pub states: Vec<Arc<CampaignState>>,
    pub loaded_at: Timestamp,
    by_id: HashMap<String, usize>,
}

impl Snapshot {
    /// Builds the snapshot for `set`, reusing the running state of campaigns that were already
    /// serving (a changed pacing configuration restarts that campaign's controller).
    pub fn build(
        set: CampaignSet,
        previous: Option<&Snapshot>,
        now: Timestamp,
        interval: Duration,
    ) -> Snapshot {
        let old: HashMap<&str, &Arc<CampaignState>> = previous
            .map(|p| p.states.iter().map(|s| (s.id.as_str(), s)).collect())
            .unwrap_or_default();
        let states: Vec<Arc<CampaignState>> = set
            .campaigns()
            .iter()
            .map(|c| {
                let config = pacer_config(c, now, interval);
                if let Some(state) = old.get(c.id()) {
                    let mut current = CampaignState::lock(&state.pacer_config);
                    if *current != config {
                        let pacer = fresh_pacer(config, now);
                        state.share_ppm.store(pacer.bid_share_ppm(), Relaxed);
                        *CampaignState::lock(&state.pacer) = pacer;
                        *current = config;
                    }
                    return Arc::clone(state);
                }
                let mut state = CampaignState::new(config, now);
                state.id = c.id().to_owned();
                Arc::new(state)
            })
            .collect();
        let by_id = states
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        Snapshot {
            set,
            states,
            loaded_at: now,
            by_id,
        }
    }

    /// The running state of campaign `id`, if it serves now.
    pub fn state(&self, id: &str) -> Option<&Arc<CampaignState>> {
        self.by_id.get(id).and_then(|&i| self.states.get(i))
    }

    pub fn limits(&self) -> Vec<(String, Limits)> {
        self.set
            .campaigns()
            .iter()
            .map(|c| (c.id().to_owned(), limits(c)))
            .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        self.states.iter().map(|s| s.id.clone()).collect()
    }
}
