//! Per-bidder isolation beyond the connection cap: a circuit breaker on the bidder's failure
//! rate and an optional cap on requests per second. Both are pure state machines; the caller
//! passes the clock, so tests replay them exactly.
//!
//! The breaker: while closed, it counts calls and failures (timeouts, transport errors, invalid
//! answers) in fixed windows; when a window holds at least `min_calls` calls of which at least
//! `failure_rate` failed, it opens. While open, the bidder is skipped. After `open_for` it is
//! half-open: up to `probes` calls go through, one at a time; if they all succeed it closes, and
//! a single failure opens it again for twice as long (up to `max_open_for`). A bidder that is
//! down thus costs one probe per interval instead of a connection attempt per auction.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::outcome::SkipReason;

/// The `[breaker]` section: how bidders are isolated when they fail.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Turns breakers off when false. Default true.
    pub enabled: bool,
    /// Share of failed calls in a window that opens the breaker, 0.05 to 1. Default 0.5.
    pub failure_rate: f64,
    /// Fewest calls in a window for its failure rate to count. Default 20.
    pub min_calls: u32,
    /// Length of a counting window, in milliseconds. Default 2000.
    pub window_ms: u64,
    /// How long the breaker first stays open, in milliseconds. Default 1000.
    pub open_ms: u64,
    /// Longest it stays open after repeated failed probes, in milliseconds. Default 30000.
    pub max_open_ms: u64,
    /// Successful probe calls that close a half-open breaker. Default 3.
    pub probes: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            enabled: true,
            failure_rate: 0.5,
            min_calls: 20,
            window_ms: 2_000,
            open_ms: 1_000,
            max_open_ms: 30_000,
            probes: 3,
        }
    }
}

impl BreakerConfig {
    /// Checks the values; the error names the key and the rule.
    pub fn validate(&self) -> Result<(), settings::Invalid> {
        if !(self.failure_rate >= 0.05 && self.failure_rate <= 1.0) {
            return Err(settings::Invalid::new(
                "breaker.failure_rate",
                "must be 0.05..=1",
            ));
        }
        settings::check_range("breaker.min_calls", self.min_calls, 1..=1_000_000)?;
        if self.window_ms < 10 || self.window_ms > 600_000 {
            return Err(settings::Invalid::new(
                "breaker.window_ms",
                "must be 10..=600000",
            ));
        }
        if self.open_ms == 0 || self.open_ms > self.max_open_ms {
            return Err(settings::Invalid::new(
                "breaker.open_ms",
                "must be at least 1 and at most breaker.max_open_ms",
            ));
        }
        if self.max_open_ms > 3_600_000 {
            return Err(settings::Invalid::new(
                "breaker.max_open_ms",
                "must be at most 3600000",
            ));
        }
        settings::check_range("breaker.probes", self.probes, 1..=1_000)?;
        Ok(())
    }
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn label(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// A change of a breaker's state an operator is told about, once per change: the caller
/// compares the state before and after [`Breaker::record`] (the breaker itself logs nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Closed to open: the window's failures passed the rate.
    Opened,
    /// Half-open to open: a probe failed; it stays open, for longer.
    Reopened,
    /// Half-open to closed: the probes succeeded.
    Closed,
}

impl Transition {
    /// The change from `before` to `after`, if it is one worth telling. Open to half-open is
    /// not: the bidder is still being tested, and a failed probe reopens it without a call
    /// having gone through in the meantime.
    pub fn between(before: BreakerState, after: BreakerState) -> Option<Transition> {
        match (before, after) {
            (BreakerState::Closed, BreakerState::Open) => Some(Transition::Opened),
            (BreakerState::HalfOpen, BreakerState::Open) => Some(Transition::Reopened),
            (BreakerState::HalfOpen, BreakerState::Closed) => Some(Transition::Closed),
            _ => None,
        }
    }
}

/// What a call's answer says about the bidder's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Good,
    Bad,
}

/// One bidder's breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    config: BreakerConfig,
    state: BreakerState,
    window_start: Instant,
    calls: u32,
    failures: u32,
    open_until: Instant,
    open_for: Duration,
    probe_in_flight: bool,
    probe_successes: u32,
    /// Times it opened, for metrics.
    trips: u64,
}

impl Breaker {
    pub fn new(config: BreakerConfig, now: Instant) -> Breaker {
        let open_for = Duration::from_millis(config.open_ms);
        Breaker {
            config,
            state: BreakerState::Closed,
            window_start: now,
            calls: 0,
            failures: 0,
            open_until: now,
            open_for,
            probe_in_flight: false,
            probe_successes: 0,
            trips: 0,
        }
    }

    pub fn state(&self) -> BreakerState {
        self.state
    }

    pub fn trips(&self) -> u64 {
        self.trips
    }

    /// How long it stays open (or stayed, last time it opened).
    pub fn open_for(&self) -> Duration {
        self.open_for
    }

    /// The current counting window's failures and calls: the ones that opened it, while open.
    pub fn window(&self) -> (u32, u32) {
        (self.failures, self.calls)
    }

    /// Whether a call may go to the bidder at `now`. A `true` in half-open state is a probe and
    /// must be followed by [`Breaker::record`].
    pub fn allow(&mut self, now: Instant) -> bool {
        if !self.config.enabled {
            return true;
        }
        match self.state {
            BreakerState::Closed => true,
            BreakerState::Open if now >= self.open_until => {
                self.state = BreakerState::HalfOpen;
                self.probe_successes = 0;
                self.probe_in_flight = true;
                true
            }
            BreakerState::Open => false,
            BreakerState::HalfOpen if !self.probe_in_flight => {
                self.probe_in_flight = true;
                true
            }
            BreakerState::HalfOpen => false,
        }
    }

    /// The outcome of a call allowed at some earlier time, learnt at `now`.
    pub fn record(&mut self, health: Health, now: Instant) {
        if !self.config.enabled {
            return;
        }
        match self.state {
            BreakerState::Closed => {
                let window = Duration::from_millis(self.config.window_ms);
                if now.duration_since(self.window_start) >= window {
                    self.window_start = now;
                    self.calls = 0;
                    self.failures = 0;
                }
                self.calls += 1;
                if health == Health::Bad {
                    self.failures += 1;
                }
                if self.calls >= self.config.min_calls
                    && f64::from(self.failures) >= self.config.failure_rate * f64::from(self.calls)
                {
                    self.open(now, Duration::from_millis(self.config.open_ms));
                }
            }
            BreakerState::HalfOpen => {
                self.probe_in_flight = false;
                match health {
                    Health::Good => {
                        self.probe_successes += 1;
                        if self.probe_successes >= self.config.probes {
                            self.close(now);
                        }
                    }
                    Health::Bad => {
                        let longer =
                            (self.open_for * 2).min(Duration::from_millis(self.config.max_open_ms));
                        self.open(now, longer);
                    }
                }
            }
            // Answers of calls made before it opened change nothing.
            BreakerState::Open => {}
        }
    }

    fn open(&mut self, now: Instant, open_for: Duration) {
        self.state = BreakerState::Open;
        self.open_for = open_for;
        self.open_until = now + open_for;
        self.trips += 1;
    }

    fn close(&mut self, now: Instant) {
        self.state = BreakerState::Closed;
        self.window_start = now;
        self.calls = 0;
        self.failures = 0;
        self.open_for = Duration::from_millis(self.config.open_ms);
    }
}

/// A token bucket: at most `per_second` calls a second on average, bursts of up to one second's
/// worth. Tokens are counted in millionths, in integers, so that refills never drift.
#[derive(Debug, Clone)]
pub struct RateCap {
    per_second: u64,
    micro_tokens: u64,
    last: Instant,
}

const MICRO: u64 = 1_000_000;

impl RateCap {
    pub fn new(per_second: u32, now: Instant) -> RateCap {
        RateCap {
            per_second: u64::from(per_second),
            micro_tokens: u64::from(per_second) * MICRO,
            last: now,
        }
    }

    /// Takes a token at `now` if there is one.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let elapsed_ns = now.saturating_duration_since(self.last).as_nanos();
        self.last = self.last.max(now);
        // ns × tokens/s ÷ 1e9 × 1e6 micro-tokens per token.
        let refill = elapsed_ns.saturating_mul(u128::from(self.per_second)) / 1_000;
        let cap = self.per_second * MICRO;
        self.micro_tokens = u64::try_from(u128::from(self.micro_tokens).saturating_add(refill))
            .unwrap_or(u64::MAX)
            .min(cap);
        if self.micro_tokens >= MICRO {
            self.micro_tokens -= MICRO;
            true
        } else {
            false
        }
    }
}

/// Whether a call to a bidder may be made at `now`: its rate cap first (a call it refuses
/// must not count as a breaker probe), then its breaker, which is asked last so that a call it
/// allows (perhaps a half-open probe) is surely made and its outcome recorded. Each sits behind
/// the mutex the auctions share (a poisoned one is recovered: `telemetry::locks`).
pub fn pass_gates(
    rate_cap: Option<&Mutex<RateCap>>,
    breaker: &Mutex<Breaker>,
    now: Instant,
) -> Result<(), SkipReason> {
    if let Some(cap) = rate_cap
        && !telemetry::locks::lock(cap).try_take(now)
    {
        return Err(SkipReason::QpsCap);
    }
    if !telemetry::locks::lock(breaker).allow(now) {
        return Err(SkipReason::BreakerOpen);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BreakerConfig {
        BreakerConfig {
            min_calls: 10,
            failure_rate: 0.5,
            window_ms: 1_000,
            open_ms: 100,
            max_open_ms: 400,
            probes: 2,
            enabled: true,
        }
    }

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn failures_below_the_rate_or_the_minimum_keep_it_closed() {
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        for i in 0..9 {
            assert!(b.allow(ms(t0, i)));
            b.record(Health::Bad, ms(t0, i));
        }
        assert_eq!(
            b.state(),
            BreakerState::Closed,
            "9 calls are below min_calls"
        );
        // A new window forgets them; 4 bad of 10 is below half.
        for i in 0..10 {
            b.record(
                if i < 4 { Health::Bad } else { Health::Good },
                ms(t0, 1_000 + i),
            );
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn it_opens_probes_and_closes() {
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        for i in 0..10 {
            b.record(Health::Bad, ms(t0, i));
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.allow(ms(t0, 50)), "open: skip");
        // After open_ms: one probe at a time.
        assert!(b.allow(ms(t0, 110)));
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(!b.allow(ms(t0, 111)), "only one probe in flight");
        b.record(Health::Good, ms(t0, 115));
        assert!(b.allow(ms(t0, 116)));
        b.record(Health::Good, ms(t0, 120));
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.trips(), 1);
    }

    #[test]
    fn a_failed_probe_reopens_for_longer_up_to_the_cap() {
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        for i in 0..10 {
            b.record(Health::Bad, ms(t0, i));
        }
        // open 100 → probe fails at 110 → open 200 → probe at 310 fails → 400 → capped at 400.
        let mut at = 9;
        for expected in [100, 200, 400, 400] {
            assert!(!b.allow(ms(t0, at + expected - 1)));
            at += expected;
            assert!(b.allow(ms(t0, at)), "probe after {expected} ms");
            b.record(Health::Bad, ms(t0, at));
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.trips(), 5);
    }

    #[test]
    fn transitions_name_each_change_once_and_not_the_probing() {
        use BreakerState::{Closed, HalfOpen, Open};
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        let mut seen = Vec::new();
        let mut step = |b: &mut Breaker, f: &mut dyn FnMut(&mut Breaker)| {
            let before = b.state();
            f(b);
            seen.extend(Transition::between(before, b.state()));
        };
        for i in 0..30 {
            step(&mut b, &mut |b| b.record(Health::Bad, ms(t0, i)));
        }
        assert_eq!(b.window(), (10, 10), "the window that opened it");
        // Probe at 110 fails (reopened), probes at 320 and 330 succeed (closed).
        step(&mut b, &mut |b| assert!(b.allow(ms(t0, 110))));
        step(&mut b, &mut |b| b.record(Health::Bad, ms(t0, 110)));
        assert_eq!(b.open_for(), Duration::from_millis(200));
        step(&mut b, &mut |b| assert!(b.allow(ms(t0, 320))));
        step(&mut b, &mut |b| b.record(Health::Good, ms(t0, 320)));
        step(&mut b, &mut |b| assert!(b.allow(ms(t0, 330))));
        step(&mut b, &mut |b| b.record(Health::Good, ms(t0, 330)));
        assert_eq!(
            seen,
            [Transition::Opened, Transition::Reopened, Transition::Closed]
        );
        assert_eq!(Transition::between(Open, HalfOpen), None);
        assert_eq!(Transition::between(Closed, Closed), None);
    }

    #[test]
    fn a_disabled_breaker_always_allows() {
        let t0 = Instant::now();
        let mut b = Breaker::new(
            BreakerConfig {
                enabled: false,
                ..config()
            },
            t0,
        );
        for i in 0..100 {
            b.record(Health::Bad, ms(t0, i));
            assert!(b.allow(ms(t0, i)));
        }
    }

    #[test]
    fn the_rate_cap_allows_its_rate_and_a_one_second_burst() {
        let t0 = Instant::now();
        let mut cap = RateCap::new(100, t0);
        let burst = (0..1_000).filter(|_| cap.try_take(t0)).count();
        assert_eq!(burst, 100);
        // Over the next 2 s, one token per 10 ms.
        let steady = (1..=2_000).filter(|i| cap.try_take(ms(t0, *i))).count();
        assert_eq!(steady, 200);
    }

    #[test]
    fn breaker_configs_outside_their_ranges_name_the_key() {
        assert!(BreakerConfig::default().validate().is_ok());
        let bad = BreakerConfig {
            open_ms: 60_000,
            ..BreakerConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "breaker.open_ms");
        let bad = BreakerConfig {
            failure_rate: 0.0,
            ..BreakerConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "breaker.failure_rate");
    }
}
