//! [`Pacer`]: how much of a campaign's eligible traffic should bid, so that spend follows a curve.
//!
//! The ledger (the `ledger` crate) is what keeps spend under budget; the pacer only decides how fast
//! to get there. It throttles: a share of eligible requests bids (`admits(draw)`), the rest are
//! skipped, and a controller adjusts that share once per `control_interval` from the spend the
//! ledger reports. It never needs to know demand in advance.
//!
//! **Curves.** [`PacingMode::Asap`] wants the whole budget at once: every eligible request bids
//! while in flight. [`PacingMode::Even`] wants spend to grow linearly: over the flight for the
//! total budget when the flight has an end, and over each UTC day for the daily budget when one
//! is set (over the part of the day inside the flight, so that a flight starting at noon may
//! still spend its daily budget that day). With both, the curve asking for less spend so far
//! binds. With neither, there is no curve to follow and Even behaves like Asap. Outside the
//! flight, or with the budget (or today's) spent, the share is 0.
//!
//! **Controller.** A PI controller in log-share space:
//!
//! ```text
//! e     = (target - actual) / (rate * HORIZON)      behind (+) or ahead (-), in horizons of spend
//! I    += KI * e * dt                               unless saturated in e's direction (anti-windup)
//! share = exp(clamp(KP * e + I, ln MIN_SHARE, 0))
//! share = 0 if actual > target + rate * GATE_INTERVALS * control_interval   (hard gate)
//! ```
//!
//! where `rate` is the binding curve's slope (nanos per second). Working on `ln share` makes the
//! loop's gain independent of demand: near the set point, spend rate is proportional to share,
//! so a relative change of share is a relative change of spend rate whatever the traffic. The
//! closed loop is then a damped oscillator with `omega^2 = KI / HORIZON` and
//! `2 zeta omega = KP / HORIZON`, whether the campaign needs 100% of its traffic or 0.01%.
//! The integral term carries the share that matches the current demand (and follows it when
//! demand drifts); the proportional term catches up the spend error. The gate bounds how far
//! ahead of the curve a burst of demand can take the spend, to a few intervals' worth.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use units::{Limits, Nanos, Timestamp};

/// Error normalization: the error is measured in horizons of planned spend (seconds).
pub const HORIZON_SECS: f64 = 300.0;
/// Proportional gain on the normalized error, in `ln share` per horizon of error.
pub const KP: f64 = 2.0;
/// Integral gain, in `ln share` per horizon of error per second. With `KP`, about critically
/// damped (`zeta` ~ 1) with a natural period near half an hour: slow enough to average the
/// lumpiness of wins, fast enough to follow a daily demand cycle closely.
pub const KI: f64 = 0.004;
/// The share an Even pacer starts its flight with: enough to learn the demand without starving,
/// small enough that a campaign with far more traffic than budget does not burn its first minutes.
pub const INITIAL_SHARE: f64 = 0.1;
/// Smallest nonzero share the controller uses (1 ppm).
pub const MIN_SHARE: f64 = 1e-6;
/// The hard gate closes when spend is ahead of the curve by more than this many control
/// intervals of planned spend (30 s at the default interval). Small against any tolerance (0.035%
/// of a day), but above the random walk of wins over a few intervals, so that in steady state the
/// PI term does the pacing and the gate only cuts bursts (with 5 intervals, the simulations saw
/// the gate flap 10-35% of the time).
pub const GATE_INTERVALS: f64 = 30.0;
/// The horizon is at most this fraction of the line being followed (1/50: 300 s for lines of
/// 4 h 10 min or more, 12 s for a 10-minute flight).
pub const SPAN_PER_HORIZON: f64 = 50.0;
/// The gate's allowance is at most this fraction of the line's spend (1/20: 5% of a short flight's
/// budget).
pub const SPAN_PER_GATE: f64 = 20.0;
/// A late control step integrates at most this many intervals, so a stalled caller does not wind
/// the integrator up.
pub const MAX_STEP_INTERVALS: u32 = 10;

const FULL_PPM: u32 = 1_000_000;

/// How spend is spread over time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PacingMode {
    /// Spend as fast as demand allows.
    #[default]
    Asap,
    /// Spend along a straight line over the flight and/or over each day.
    Even,
}

/// The period a campaign runs: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flight {
    pub start: Timestamp,
    /// `None`: open-ended.
    pub end: Option<Timestamp>,
}

impl Flight {
    /// Whether `now` is inside `[start, end)`.
    pub fn contains(&self, now: Timestamp) -> bool {
        now >= self.start && self.end.is_none_or(|end| now < end)
    }
}

/// What a [`Pacer`] paces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacerConfig {
    pub mode: PacingMode,
    pub flight: Flight,
    /// The same limits as the ledger's; the pacer reads them to draw its curve.
    pub limits: Limits,
    /// How often the controller acts ([`PacerConfig::DEFAULT_CONTROL_INTERVAL`] by default).
    pub control_interval: Duration,
}

impl PacerConfig {
    pub const DEFAULT_CONTROL_INTERVAL: Duration = Duration::from_secs(1);

    /// A config with the default control interval.
    pub fn new(mode: PacingMode, flight: Flight, limits: Limits) -> PacerConfig {
        PacerConfig {
            mode,
            flight,
            limits,
            control_interval: Self::DEFAULT_CONTROL_INTERVAL,
        }
    }
}

/// A snapshot for dashboards and logs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PacingState {
    pub mode: PacingMode,
    /// Total spend the curve wants by now.
    pub target: Nanos,
    /// Total spend last reported by the ledger.
    pub actual: Nanos,
    /// `(actual - target) / max(target, 1 nano)`: positive when ahead.
    pub deviation: f64,
    /// Share of eligible requests that bid, 0..=1.
    pub bid_share: f64,
}

/// The point of the curve that binds now.
#[derive(Clone, Copy, Debug)]
struct Curve {
    /// Total spend wanted by now.
    target: Nanos,
    /// Its slope, nanos per second; zero when nothing is left to plan.
    rate: f64,
    /// Length of the line being followed, in seconds (a flight, or the in-flight part of a day).
    span_secs: f64,
}

/// A campaign's pacing controller. See the [module docs](self).
///
/// Until its first [`Pacer::update`], a pacer does not know the time and admits nothing: call
/// `update` once when the campaign is loaded.
#[derive(Clone, Debug)]
pub struct Pacer {
    config: PacerConfig,
    share_ppm: u32,
    /// The integral term: the `ln share` that matches demand.
    integral: f64,
    last_step: Option<Timestamp>,
    spent_total: Nanos,
    spent_today: Nanos,
    /// The UTC day of the last report, and total spend before it.
    observed_day: Option<u64>,
    spent_before_today: Nanos,
}

impl Pacer {
    /// A pacer that admits nothing until its first [`Pacer::update`]; an Even pacer then starts
    /// its flight at [`INITIAL_SHARE`].
    pub fn new(config: PacerConfig) -> Pacer {
        Pacer {
            config,
            share_ppm: 0,
            integral: INITIAL_SHARE.ln(),
            last_step: None,
            spent_total: Nanos::ZERO,
            spent_today: Nanos::ZERO,
            observed_day: None,
            spent_before_today: Nanos::ZERO,
        }
    }

    pub fn config(&self) -> &PacerConfig {
        &self.config
    }

    /// The total spend the curve wants by `now` (0 before the flight; everything allowed for
    /// Asap). With a daily budget this counts the spend before today as reported by `update`.
    pub fn target(&self, now: Timestamp) -> Nanos {
        self.curve(now).target
    }

    /// Reports the ledger's spend (total, and for the current UTC day) and, when a control
    /// interval has passed since the last step, runs one controller step. Calling more often is
    /// harmless: reports are recorded, the controller waits for its interval.
    pub fn update(&mut self, now: Timestamp, spent_total: Nanos, spent_today: Nanos) {
        self.spent_total = spent_total;
        self.spent_today = spent_today;
        self.spent_before_today = spent_total.saturating_sub(spent_today).max(Nanos::ZERO);
        self.observed_day = Some(self.observed_day.map_or(now.day(), |d| d.max(now.day())));

        let interval = self.config.control_interval;
        let dt = match self.last_step {
            None => Duration::ZERO,
            Some(last) if now < last => return,
            Some(last) => {
                let elapsed = now.since(last);
                if elapsed < interval {
                    return;
                }
                elapsed.min(interval.saturating_mul(MAX_STEP_INTERVALS))
            }
        };
        self.last_step = Some(now);
        let share = self.step(now, dt.as_secs_f64());
        self.share_ppm = to_ppm(share);
    }

    /// Share of eligible requests that should bid, in parts per million.
    pub fn bid_share_ppm(&self) -> u32 {
        self.share_ppm
    }

    /// Whether a request with this uniform draw in `0..1_000_000` bids.
    pub fn admits(&self, draw_ppm: u32) -> bool {
        draw_ppm < self.share_ppm
    }

    pub fn state(&self, now: Timestamp) -> PacingState {
        let target = self.target(now);
        let actual = self.spent_total;
        let gap = actual.get() as f64 - target.get() as f64;
        PacingState {
            mode: self.config.mode,
            target,
            actual,
            deviation: gap / target.get().max(1) as f64,
            bid_share: f64::from(self.share_ppm) / f64::from(FULL_PPM),
        }
    }

    /// Whether the pacer follows a curve (Even with a flight end or a daily budget).
    fn is_paced(&self) -> bool {
        self.config.mode == PacingMode::Even
            && (self.config.flight.end.is_some() || self.config.limits.daily.is_some())
    }

    /// Spend before the UTC day of `now`, as far as the reports tell.
    fn spent_before(&self, now: Timestamp) -> Nanos {
        match self.observed_day {
            Some(day) if now.day() > day => self.spent_total,
            Some(_) => self.spent_before_today,
            None => Nanos::ZERO,
        }
    }

    /// Today's spend as far as the reports tell (zero if the last report was on an earlier day).
    fn spent_on(&self, now: Timestamp) -> Nanos {
        match self.observed_day {
            Some(day) if now.day() > day => Nanos::ZERO,
            _ => self.spent_today,
        }
    }

    fn exhausted(&self, now: Timestamp) -> bool {
        let limits = self.config.limits;
        self.spent_total >= limits.total
            || limits
                .daily
                .is_some_and(|daily| self.spent_on(now) >= daily)
    }

    fn curve(&self, now: Timestamp) -> Curve {
        let flight = self.config.flight;
        let limits = self.config.limits;
        let total = limits.total.max(Nanos::ZERO);
        if now < flight.start {
            return Curve {
                target: Nanos::ZERO,
                rate: 0.0,
                span_secs: 0.0,
            };
        }
        let before = self.spent_before(now);
        if !self.is_paced() {
            // Everything allowed now is wanted now.
            let day_cap = limits
                .daily
                .map_or(total, |daily| before.saturating_add(daily.max(Nanos::ZERO)));
            return Curve {
                target: total.min(day_cap),
                rate: 0.0,
                span_secs: 0.0,
            };
        }
        let mut binding: Option<Curve> = None;
        if let Some(end) = flight.end {
            binding = Some(linear(Nanos::ZERO, total, flight.start, end, now));
        }
        if let Some(daily) = limits.daily {
            let day_start = now.start_of_day();
            let day_end = Timestamp(day_start.0.saturating_add(Timestamp::MS_PER_DAY));
            let from = day_start.max(flight.start);
            let to = flight.end.map_or(day_end, |end| end.min(day_end));
            let day = linear(before, daily.max(Nanos::ZERO), from, to, now);
            binding = Some(match binding {
                Some(flight_curve) if flight_curve.target <= day.target => flight_curve,
                _ => day,
            });
        }
        let curve = binding.unwrap_or(Curve {
            target: total,
            rate: 0.0,
            span_secs: 0.0,
        });
        Curve {
            target: curve.target.min(total),
            ..curve
        }
    }

    /// One controller step; returns the share.
    fn step(&mut self, now: Timestamp, dt_secs: f64) -> f64 {
        if !self.config.flight.contains(now) || self.exhausted(now) {
            return 0.0;
        }
        if !self.is_paced() {
            return 1.0;
        }
        let curve = self.curve(now);
        if curve.rate <= 0.0 {
            return 0.0;
        }
        let gap = curve.target.get() as f64 - self.spent_total.get() as f64;
        // A short line (a flight of minutes) gets a proportionally faster loop: the horizon and
        // the integral's time constant shrink with it, so the loop's period stays a small part
        // of the line. Lines of a few hours or more keep the constants as they are.
        let horizon = HORIZON_SECS
            .min(curve.span_secs / SPAN_PER_HORIZON)
            .max(1e-3);
        let ki = KI * HORIZON_SECS / horizon;
        let error = gap / (curve.rate * horizon);
        let floor = MIN_SHARE.ln();
        let unclamped = KP * error + self.integral;
        // Anti-windup: do not integrate further into a saturated side.
        let saturated = (unclamped >= 0.0 && error > 0.0) || (unclamped <= floor && error < 0.0);
        if !saturated {
            self.integral = (self.integral + ki * error * dt_secs).clamp(floor, 0.0);
        }
        let allowance = curve.rate
            * (GATE_INTERVALS * self.config.control_interval.as_secs_f64())
                .min(curve.span_secs / SPAN_PER_GATE);
        if -gap > allowance {
            return 0.0;
        }
        let log_share = (KP * error + self.integral).clamp(floor, 0.0);
        if log_share.is_finite() {
            log_share.exp()
        } else {
            0.0
        }
    }
}

/// A line from `base` at `from` to `base + amount` at `to`, read at `now` (flat outside).
fn linear(base: Nanos, amount: Nanos, from: Timestamp, to: Timestamp, now: Timestamp) -> Curve {
    let span = to.0.saturating_sub(from.0);
    if span == 0 {
        return Curve {
            target: base.saturating_add(amount),
            rate: 0.0,
            span_secs: 0.0,
        };
    }
    let elapsed = now.0.clamp(from.0, to.0) - from.0;
    let part = i128::from(amount.get()) * i128::from(elapsed) / i128::from(span);
    let part = i64::try_from(part).unwrap_or(i64::MAX);
    let running = now >= from && now < to;
    Curve {
        target: base.saturating_add(Nanos(part)),
        rate: if running {
            amount.get() as f64 * 1_000.0 / span as f64
        } else {
            0.0
        },
        span_secs: span as f64 / 1_000.0,
    }
}

fn to_ppm(share: f64) -> u32 {
    if share.is_nan() {
        return 0;
    }
    // Clamped to 0..=1e6 first, so the cast is exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ppm = (share.clamp(0.0, 1.0) * f64::from(FULL_PPM)).round() as u32;
    ppm
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;
    const DAY: u64 = Timestamp::MS_PER_DAY;
    const START: Timestamp = Timestamp(100 * DAY);

    fn n(v: i64) -> Nanos {
        Nanos(v)
    }

    fn config(mode: PacingMode, end: Option<u64>, total: i64, daily: Option<i64>) -> PacerConfig {
        PacerConfig::new(
            mode,
            Flight {
                start: START,
                end: end.map(|ms| Timestamp(START.0 + ms)),
            },
            Limits {
                total: n(total),
                daily: daily.map(Nanos),
            },
        )
    }

    fn at(ms: u64) -> Timestamp {
        Timestamp(START.0 + ms)
    }

    #[test]
    fn nothing_is_admitted_before_the_first_update() {
        let pacer = Pacer::new(config(PacingMode::Asap, None, 1_000, None));
        assert_eq!(pacer.bid_share_ppm(), 0);
        assert!(!pacer.admits(0));
    }

    #[test]
    fn asap_admits_everything_in_flight_and_nothing_outside() {
        let mut pacer = Pacer::new(config(PacingMode::Asap, Some(DAY), 1_000, None));
        pacer.update(Timestamp(START.0 - 1), n(0), n(0));
        assert_eq!(pacer.bid_share_ppm(), 0);
        pacer.update(at(1_000), n(0), n(0));
        assert_eq!(pacer.bid_share_ppm(), 1_000_000);
        assert!(pacer.admits(999_999));
        pacer.update(at(DAY), n(10), n(10));
        assert_eq!(pacer.bid_share_ppm(), 0);
    }

    #[test]
    fn an_even_pacer_without_end_or_daily_budget_behaves_like_asap() {
        let mut pacer = Pacer::new(config(PacingMode::Even, None, 1_000, None));
        pacer.update(at(0), n(0), n(0));
        assert_eq!(pacer.bid_share_ppm(), 1_000_000);
        assert_eq!(pacer.target(at(0)), n(1_000));
    }

    #[test]
    fn a_spent_budget_stops_bidding() {
        let mut asap = Pacer::new(config(PacingMode::Asap, None, 1_000, Some(100)));
        asap.update(at(0), n(100), n(100));
        assert_eq!(asap.bid_share_ppm(), 0, "today's budget is spent");
        asap.update(at(DAY), n(100), n(0));
        assert_eq!(asap.bid_share_ppm(), 1_000_000, "a new day");
        asap.update(at(DAY + 1_000), n(1_000), n(100));
        assert_eq!(asap.bid_share_ppm(), 0, "the total is spent");
    }

    #[test]
    fn the_even_target_is_a_line_over_the_flight() {
        let pacer = Pacer::new(config(PacingMode::Even, Some(10 * HOUR), 1_000_000, None));
        assert_eq!(pacer.target(Timestamp(START.0 - 1)), n(0));
        assert_eq!(pacer.target(at(0)), n(0));
        assert_eq!(pacer.target(at(HOUR)), n(100_000));
        assert_eq!(pacer.target(at(5 * HOUR)), n(500_000));
        assert_eq!(pacer.target(at(10 * HOUR)), n(1_000_000));
        assert_eq!(pacer.target(at(20 * HOUR)), n(1_000_000));
    }

    #[test]
    fn the_daily_target_is_the_days_fraction_of_the_daily_budget_on_top_of_earlier_spend() {
        let mut pacer = Pacer::new(config(PacingMode::Even, None, 10_000_000, Some(240_000)));
        assert_eq!(pacer.target(at(6 * HOUR)), n(60_000));
        // Next day, having spent 230,000 in all, 30,000 of it today.
        pacer.update(at(DAY + 12 * HOUR), n(230_000), n(30_000));
        assert_eq!(pacer.target(at(DAY + 12 * HOUR)), n(200_000 + 120_000));
        // The day after, before any report of that day: all the spend so far was before it.
        assert_eq!(pacer.target(at(2 * DAY + 6 * HOUR)), n(230_000 + 60_000));
    }

    #[test]
    fn the_curve_asking_for_less_binds() {
        // The flight wants 2,400 a day, the daily budget allows 1,200 a day.
        let pacer = Pacer::new(config(PacingMode::Even, Some(DAY), 2_400, Some(1_200)));
        assert_eq!(pacer.target(at(12 * HOUR)), n(600));
        let pacer = Pacer::new(config(PacingMode::Even, Some(DAY), 2_400, Some(4_800)));
        assert_eq!(pacer.target(at(12 * HOUR)), n(1_200));
    }

    #[test]
    fn a_daily_line_runs_over_the_in_flight_part_of_the_day() {
        let mut cfg = config(PacingMode::Even, None, 1_000_000, Some(1_200));
        cfg.flight.start = Timestamp(START.0 + 12 * HOUR);
        let pacer = Pacer::new(cfg);
        assert_eq!(pacer.target(at(12 * HOUR)), n(0));
        assert_eq!(pacer.target(at(18 * HOUR)), n(600));
    }

    #[test]
    fn the_controller_acts_once_per_interval() {
        let mut pacer = Pacer::new(config(PacingMode::Even, Some(DAY), 86_400_000, None));
        pacer.update(at(0), n(0), n(0));
        let first = pacer.bid_share_ppm();
        assert_eq!(first, to_ppm(INITIAL_SHARE));
        // Far behind, but within the same interval: no step.
        pacer.update(at(999), n(0), n(0));
        assert_eq!(pacer.bid_share_ppm(), first);
        pacer.update(at(1_000), n(0), n(0));
        assert!(pacer.bid_share_ppm() > first);
    }

    #[test]
    fn the_share_saturates_when_far_behind_and_the_gate_closes_when_ahead() {
        // 1,000 nanos a second.
        let mut pacer = Pacer::new(config(PacingMode::Even, Some(DAY), 86_400_000, None));
        for s in 0..=600 {
            pacer.update(at(s * 1_000), n(0), n(0));
        }
        assert_eq!(pacer.bid_share_ppm(), 1_000_000);
        // 601 s in, the line is at 601,000: 31,000 ahead is past the 30-interval allowance.
        pacer.update(at(601_000), n(632_000), n(632_000));
        assert_eq!(pacer.bid_share_ppm(), 0);
        // Within the allowance, the gate opens again.
        pacer.update(at(602_000), n(620_000), n(620_000));
        assert!(pacer.bid_share_ppm() > 0);
    }

    #[test]
    fn a_late_step_integrates_at_most_a_few_intervals() {
        let mut pacer = Pacer::new(config(PacingMode::Even, Some(DAY), 86_400_000, None));
        pacer.update(at(0), n(0), n(0));
        let before = pacer.integral;
        // An hour of silence, far behind: one step of at most MAX_STEP_INTERVALS seconds.
        pacer.update(at(HOUR), n(0), n(0));
        let error = 3_600.0 / HORIZON_SECS;
        let bound = KI * error * f64::from(MAX_STEP_INTERVALS);
        assert!(pacer.integral - before <= bound + 1e-12);
    }

    #[test]
    fn an_earlier_now_does_not_step() {
        let mut pacer = Pacer::new(config(PacingMode::Even, Some(DAY), 86_400_000, None));
        pacer.update(at(10_000), n(0), n(0));
        let share = pacer.bid_share_ppm();
        pacer.update(at(5_000), n(0), n(0));
        assert_eq!(pacer.bid_share_ppm(), share);
    }

    #[test]
    fn state_reports_the_deviation_from_the_target() {
        let mut pacer = Pacer::new(config(PacingMode::Even, Some(10 * HOUR), 1_000_000, None));
        pacer.update(at(5 * HOUR), n(550_000), n(550_000));
        let state = pacer.state(at(5 * HOUR));
        assert_eq!((state.target, state.actual), (n(500_000), n(550_000)));
        assert!((state.deviation - 0.1).abs() < 1e-9);
        assert!((0.0..=1.0).contains(&state.bid_share));
        // At the start the target is zero: the deviation is against one nano.
        assert!((pacer.state(at(0)).deviation - 550_000.0).abs() < 1e-6);
    }

    #[test]
    fn modes_are_lowercase_in_config_and_asap_by_default() {
        assert_eq!(PacingMode::default(), PacingMode::Asap);
        assert_eq!(
            serde_json::to_string(&PacingMode::Even).unwrap(),
            "\"even\""
        );
        let mode: PacingMode = serde_json::from_str("\"asap\"").unwrap();
        assert_eq!(mode, PacingMode::Asap);
    }
}
