//! What changes while serving: the campaign set in force (swapped whole on reload) and each
//! campaign's running state (pacing, counters), which survives reloads by campaign id.
//!
//! The request path reads the set through one atomic pointer load (the bidder keeps the [`Snapshot`] in an `ArcSwap`) and a
//! campaign's pacing share through one atomic integer; it never takes a lock. Only the pacing
//! tick, once per control interval, locks a campaign's controller.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pacing::{Pacer, PacerConfig, PacingMode, PacingState};
use units::{Limits, Nanos, Timestamp};

use crate::model::Campaign;
use crate::schema::PacingModeConfig;
use crate::set::CampaignSet;

/// Most times a campaign's skip after a budget refusal is doubled (16 × the base).
pub const MAX_EXHAUSTED_DOUBLINGS: u32 = 4;

/// Running state of one campaign, kept across reloads while its id stays.
#[derive(Debug)]
pub struct CampaignState {
    pub id: String,
    /// Share of eligible requests that bid, in parts per million (from the pacer).
    pub share_ppm: AtomicU32,
    /// Until when (ms since epoch) the campaign is known to have no budget left: its candidates
    /// are skipped without asking the ledger.
    pub exhausted_until: AtomicU64,
    /// Budget refusals in a row since the last reservation made: each doubles how long the
    /// campaign is skipped, up to [`MAX_EXHAUSTED_DOUBLINGS`].
    exhausted_streak: AtomicU32,
    pub bids: AtomicU64,
    /// Impressions charged (by their win or billing notice, whichever came first).
    pub wins: AtomicU64,
    /// Charged by this instance, in nanos.
    pub charged: AtomicI64,
    pacer: Mutex<Pacer>,
}

impl CampaignState {
    fn new(id: &str, config: PacerConfig, now: Timestamp) -> CampaignState {
        let pacer = fresh_pacer(config, now);
        CampaignState {
            id: id.to_owned(),
            share_ppm: AtomicU32::new(pacer.bid_share_ppm()),
            exhausted_until: AtomicU64::new(0),
            exhausted_streak: AtomicU32::new(0),
            bids: AtomicU64::new(0),
            wins: AtomicU64::new(0),
            charged: AtomicI64::new(0),
            pacer: Mutex::new(pacer),
        }
    }

    /// Applies a reloaded campaign's pacing configuration: an unchanged one keeps the running
    /// controller; a changed one restarts it. An open flight start stays the moment the campaign
    /// was first loaded, not the reload's.
    fn reconfigure(&self, mut config: PacerConfig, open_start: bool, now: Timestamp) {
        let mut pacer = Self::lock(&self.pacer);
        if open_start {
            config.flight.start = pacer.config().flight.start;
        }
        if *pacer.config() != config {
            *pacer = fresh_pacer(config, now);
            self.share_ppm.store(pacer.bid_share_ppm(), Relaxed);
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        telemetry::locks::lock(m)
    }

    /// Runs the pacing controller on the ledger's figures, what the campaign has `spent` in
    /// total and `spent_today`, and publishes the new share. Spent only: what is reserved is
    /// mostly lease headroom in Redis mode (budget parked with the instances, not committed to
    /// bids), and in the other modes bids whose notices are a moment away, a lag the controller
    /// absorbs like any reporting delay.
    pub fn pace(&self, now: Timestamp, spent: Nanos, spent_today: Nanos) {
        let mut pacer = Self::lock(&self.pacer);
        pacer.update(now, spent, spent_today);
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

    /// Skips the campaign from `now` for `base`, doubled for each earlier refusal in a row
    /// (at most [`MAX_EXHAUSTED_DOUBLINGS`] times): a campaign spent for good costs one ledger
    /// refusal per `base × 2^MAX` instead of a share of every request's proposals, while one
    /// whose budget comes back (a loss notice releasing a reservation, a raised limit, a new
    /// day) is tried again within that time.
    pub fn mark_exhausted(&self, now: Timestamp, base: Duration) {
        let streak = self
            .exhausted_streak
            .fetch_add(1, Relaxed)
            .min(MAX_EXHAUSTED_DOUBLINGS);
        let for_how_long = base.saturating_mul(1 << streak);
        self.exhausted_until
            .store(now.saturating_add(for_how_long).millis(), Relaxed);
    }

    /// A reservation was made: the next refusal is skipped for the base time again.
    pub fn note_funded(&self) {
        // Read first: the common case (no streak) writes nothing to a shared line.
        if self.exhausted_streak.load(Relaxed) != 0 {
            self.exhausted_streak.store(0, Relaxed);
        }
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
            PacingModeConfig::Asap => PacingMode::Asap,
            PacingModeConfig::Even => PacingMode::Even,
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
        let states = set
            .campaigns()
            .iter()
            .map(|c| {
                let config = pacer_config(c, now, interval);
                match previous.and_then(|p| p.state(c.id())) {
                    Some(state) => {
                        state.reconfigure(config, c.flight().start.is_none(), now);
                        Arc::clone(state)
                    }
                    None => Arc::new(CampaignState::new(c.id(), config, now)),
                }
            })
            .collect();
        Snapshot {
            set,
            states,
            loaded_at: now,
        }
    }

    /// The running state of campaign `id`, if it serves now.
    pub fn state(&self, id: &str) -> Option<&Arc<CampaignState>> {
        self.set
            .position(id)
            .and_then(|i| self.states.get(i as usize))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpm: f64) -> CampaignSet {
        let json = format!(
            r#"[{{"id": "c", "pacing": "even", "budget": {{"total": 1, "daily": 0.5}}, "bid": {{"cpm": {cpm}}},
               "creatives": [{{"id": "cr", "w": 300, "h": 250, "adm": "x"}}]}}]"#
        );
        CampaignSet::from_json_bytes(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn start(s: &Snapshot) -> Timestamp {
        let state = s.state("c").unwrap_or_else(|| panic!("no state"));
        CampaignState::lock(&state.pacer).config().flight.start
    }

    #[test]
    fn a_reload_keeps_the_state_and_the_first_load_as_an_open_start() {
        let second = Duration::from_secs(1);
        let t0 = Timestamp(1_800_000_000_000);
        let first = Snapshot::build(set(2.0), None, t0, second);
        first.states[0].bids.store(7, Relaxed);
        let t1 = Timestamp(t0.millis() + 60_000);
        let again = Snapshot::build(set(2.0), Some(&first), t1, second);
        assert!(Arc::ptr_eq(&first.states[0], &again.states[0]));
        assert_eq!(again.states[0].bids.load(Relaxed), 7);
        assert_eq!(
            start(&again),
            t0,
            "an unchanged campaign keeps its controller"
        );
        // A changed bid does not change the pacing configuration either.
        let third = Snapshot::build(set(3.0), Some(&again), t1, second);
        assert_eq!(start(&third), t0);
    }

    #[test]
    fn refusals_in_a_row_double_the_skip_up_to_the_cap_and_a_reservation_resets_it() {
        let t0 = Timestamp(1_800_000_000_000);
        let s = Snapshot::build(set(2.0), None, t0, Duration::from_secs(1));
        let state = &s.states[0];
        let base = Duration::from_millis(250);
        let skip = |state: &CampaignState| state.exhausted_until.load(Relaxed) - t0.millis();
        let mut skips = Vec::new();
        for _ in 0..7 {
            state.mark_exhausted(t0, base);
            skips.push(skip(state));
        }
        assert_eq!(skips, [250, 500, 1_000, 2_000, 4_000, 4_000, 4_000]);
        assert!(state.is_exhausted(Timestamp(t0.millis() + 3_999)));
        assert!(!state.is_exhausted(Timestamp(t0.millis() + 4_000)));
        state.note_funded();
        state.mark_exhausted(t0, base);
        assert_eq!(skip(state), 250);
    }
}
