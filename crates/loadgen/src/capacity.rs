//! Capacity search: the highest constant rate a target sustains with its p99 inside an SLO
//! and nearly every request answered.
//!
//! [`Search`] is the pure decision part (which rate to try next, given the verdicts so far);
//! [`find_capacity`] runs the trials. The search doubles the rate from a starting guess until
//! a trial fails (or halves it until one passes), then bisects between the highest pass and
//! the lowest fail until they are within `precision` of each other.
//!
//! A failed trial is run a second time before the rate counts as failed: on a shared or
//! virtualised machine a single scheduler stall of tens of milliseconds fails a p99 at low
//! rates, and such noise only ever makes a trial look worse, never better.
//!
//! Walking down, the search stops when lowering the rate no longer lowers the p99: after
//! [`FLOOR_HALVINGS`] halvings in a row that each cut the p99 (the better of a rate's two
//! runs) by less than [`FLOOR_FALL`], with every p99 above the SLO, the latency is a floor of
//! the target's (a slow path, a fixed delay, a bidder's own deadline), not this load's doing,
//! and no lower rate will pass. Without this rule a target whose floor is above the SLO was
//! halved down to 1/s, 22 trials for a verdict the first few had shown ([`Stop::LatencyFloor`]).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::spec::num;
use crate::{Arrivals, Corpus, LoadError, LoadSpec, Report};

/// What counts as sustaining a rate, and how hard to look.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySpec {
    /// A trial passes only if its p99 (from scheduled send time) is at most this.
    pub slo_p99: Duration,
    /// ... and at least this share of its requests were answered 2xx (0..=1).
    pub min_success: f64,
    /// First rate tried, requests per second.
    pub start_rate: f64,
    /// No rate above this is tried; reaching it ends the search with it as the capacity.
    pub max_rate: f64,
    /// No rate below this is tried; failing it ends the search with no capacity.
    pub min_rate: f64,
    /// Stop when the lowest failing rate is within this fraction above the highest passing.
    pub precision: f64,
    /// Most trials in all (retries included).
    pub max_trials: usize,
    /// Run a failed trial again before believing it.
    pub retry_failures: bool,
    /// Idle time between trials, for the target to drain its queues and sockets.
    pub pause: Duration,
}

impl CapacitySpec {
    /// p99 ≤ `slo_p99`, ≥ 99.9% answered 2xx, from 1,000/s up to 1,000,000/s, within 5%.
    pub fn new(slo_p99: Duration) -> CapacitySpec {
        CapacitySpec {
            slo_p99,
            min_success: 0.999,
            start_rate: 1000.0,
            max_rate: crate::MAX_RATE,
            min_rate: 1.0,
            precision: 0.05,
            max_trials: 24,
            retry_failures: true,
            pause: Duration::from_secs(1),
        }
    }

    /// Checks the fields; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |field: &'static str, reason: String| LoadError::InvalidSpec { field, reason };
        if self.slo_p99.is_zero() {
            return Err(bad("slo_p99", "must be more than 0".to_owned()));
        }
        if !(0.0..=1.0).contains(&self.min_success) {
            return Err(bad(
                "min_success",
                format!("must be within 0..=1, got {}", self.min_success),
            ));
        }
        let rate_ok = |r: f64| r.is_finite() && r > 0.0 && r <= crate::MAX_RATE;
        if !(rate_ok(self.min_rate) && rate_ok(self.max_rate) && self.min_rate <= self.max_rate) {
            return Err(bad(
                "max_rate",
                format!(
                    "need 0 < min_rate <= max_rate <= {}, got {} and {}",
                    crate::MAX_RATE,
                    self.min_rate,
                    self.max_rate
                ),
            ));
        }
        if !(self.min_rate..=self.max_rate).contains(&self.start_rate) {
            return Err(bad(
                "start_rate",
                format!(
                    "must be within {}..={}, got {}",
                    self.min_rate, self.max_rate, self.start_rate
                ),
            ));
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return Err(bad(
                "precision",
                format!("must be within 0..1, got {}", self.precision),
            ));
        }
        if self.max_trials == 0 {
            return Err(bad("max_trials", "must be at least 1".to_owned()));
        }
        Ok(())
    }
}

/// Halvings in a row that must leave the p99 where it was before the search calls it a floor.
pub const FLOOR_HALVINGS: usize = 2;
/// A halving that cuts the p99 by less than this share of it has not lowered it.
pub const FLOOR_FALL: f64 = 0.1;

/// What one trial showed, as the search reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Whether the trial met the criteria ([`passes`]).
    pub passed: bool,
    /// Its p99 from the scheduled send time, ms.
    pub p99_ms: f64,
}

/// Why the search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Stop {
    /// The highest pass and the lowest failure are within the precision.
    Converged,
    /// The highest rate allowed passed.
    MaxRate,
    /// The lowest rate allowed failed.
    MinRate,
    /// The trial budget ran out.
    TrialBudget,
    /// Halving the rate stopped lowering the p99, which stayed above the SLO: the rates walked
    /// down and the p99 (ms) each showed, in the order tried.
    LatencyFloor { rates: Vec<f64>, p99_ms: Vec<f64> },
}

impl Stop {
    /// Why the search stopped, in words, for the verdict line.
    pub fn describe(&self, slo_ms: f64) -> String {
        match self {
            Stop::Converged => "converged".to_owned(),
            Stop::MaxRate => "the highest rate allowed passed".to_owned(),
            Stop::MinRate => "the lowest rate allowed failed".to_owned(),
            Stop::TrialBudget => "the trial budget ran out".to_owned(),
            Stop::LatencyFloor { rates, p99_ms } => {
                let walk: Vec<String> = rates
                    .iter()
                    .zip(p99_ms)
                    .map(|(r, p)| format!("{p:.2} ms at {}/s", num(*r)))
                    .collect();
                format!(
                    "stopped: the p99 did not fall with the rate ({}), and stays above the {} ms \
                     SLO: a latency floor of the target, not this load; no lower rate would pass",
                    walk.join(", "),
                    num(slo_ms)
                )
            }
        }
    }
}

/// The search's state: verdicts so far and what to try next. Pure: no clock, no I/O.
#[derive(Debug, Clone)]
pub struct Search {
    spec: CapacitySpec,
    best_pass: Option<f64>,
    lowest_fail: Option<f64>,
    /// A rate that failed once and is due for its second run, with that run's p99.
    retry: Option<(f64, f64)>,
    /// The rates that failed before any passed, with the best p99 each showed, in the order
    /// tried: the walk down that [`latency_floor`] reads.
    walked_down: Vec<(f64, f64)>,
    floor: bool,
    trials: usize,
}

impl Search {
    pub fn new(spec: CapacitySpec) -> Search {
        Search {
            spec,
            best_pass: None,
            lowest_fail: None,
            retry: None,
            walked_down: Vec::new(),
            floor: false,
            trials: 0,
        }
    }

    /// The rate of the next trial, or `None` when the search is over ([`Search::stop`] says
    /// why).
    pub fn next_rate(&self) -> Option<f64> {
        if self.trials >= self.spec.max_trials || self.floor {
            return None;
        }
        if let Some((r, _)) = self.retry {
            return Some(r);
        }
        let s = &self.spec;
        match (self.best_pass, self.lowest_fail) {
            (None, None) => Some(s.start_rate),
            (Some(pass), None) => (pass < s.max_rate).then(|| (pass * 2.0).min(s.max_rate)),
            (None, Some(fail)) => (fail > s.min_rate).then(|| (fail / 2.0).max(s.min_rate)),
            (Some(pass), Some(fail)) => {
                if fail - pass <= pass * s.precision {
                    return None;
                }
                let mid = round_to_grain(pass + (fail - pass) / 2.0, pass * s.precision / 2.0);
                (mid > pass && mid < fail).then_some(mid)
            }
        }
    }

    /// Why the search is over; `None` while it is not.
    pub fn stop(&self) -> Option<Stop> {
        if self.next_rate().is_some() {
            return None;
        }
        if self.floor {
            return Some(Stop::LatencyFloor {
                rates: self.walked_down.iter().map(|(r, _)| *r).collect(),
                p99_ms: self.walked_down.iter().map(|(_, p)| *p).collect(),
            });
        }
        if self.trials >= self.spec.max_trials {
            return Some(Stop::TrialBudget);
        }
        Some(match (self.best_pass, self.lowest_fail) {
            (Some(_), None) => Stop::MaxRate,
            (None, _) => Stop::MinRate,
            (Some(_), Some(_)) => Stop::Converged,
        })
    }

    /// Records what a trial at `rate` showed.
    pub fn record(&mut self, rate: f64, seen: Observed) {
        self.trials += 1;
        let first = match self.retry.take() {
            Some((r, p99)) if r.total_cmp(&rate).is_eq() => Some(p99),
            _ => None,
        };
        if seen.passed {
            self.best_pass = Some(self.best_pass.map_or(rate, |p| p.max(rate)));
        } else if self.spec.retry_failures && first.is_none() {
            self.retry = Some((rate, seen.p99_ms));
        } else {
            self.lowest_fail = Some(self.lowest_fail.map_or(rate, |f| f.min(rate)));
            if self.best_pass.is_none() {
                // Noise only makes a run worse: a rate's better run is its figure.
                let p99 = first.map_or(seen.p99_ms, |p| p.min(seen.p99_ms));
                self.walked_down.push((rate, p99));
                let slo_ms = self.spec.slo_p99.as_secs_f64() * 1000.0;
                self.floor = latency_floor(&self.walked_down, slo_ms);
            }
        }
    }

    /// The highest passing rate so far.
    pub fn capacity(&self) -> Option<f64> {
        self.best_pass
    }

    /// The lowest rate that failed (twice, with retries), if any.
    pub fn lowest_failure(&self) -> Option<f64> {
        self.lowest_fail
    }
}

/// Whether a walk down (failed rates, highest first, each with its p99 in ms) has reached a
/// latency floor above `slo_ms`: the last [`FLOOR_HALVINGS`] steps down each cut the p99 by
/// less than [`FLOOR_FALL`] of it, and every p99 of those steps is above the SLO.
pub fn latency_floor(walked_down: &[(f64, f64)], slo_ms: f64) -> bool {
    let Some(start) = walked_down.len().checked_sub(FLOOR_HALVINGS + 1) else {
        return false;
    };
    let tail = walked_down.get(start..).unwrap_or_default();
    let above = tail.iter().all(|(_, p99)| *p99 > slo_ms);
    let flat = tail
        .windows(2)
        .all(|w| matches!(w, [(_, higher), (_, lower)] if *lower >= higher * (1.0 - FLOOR_FALL)));
    above && flat
}

/// Rounds `x` to a multiple of the power of ten at or below `grain` (at least 1), so that the
/// rates tried read like 3250/s rather than 3247.0703125/s.
fn round_to_grain(x: f64, grain: f64) -> f64 {
    let step = 10f64.powf(grain.max(1.0).log10().floor());
    (x / step).round() * step
}

/// One trial of the search.
#[derive(Debug, Clone)]
pub struct Trial {
    pub rate: f64,
    pub passed: bool,
    pub report: Report,
}

/// The outcome of [`find_capacity`].
#[derive(Debug, Clone)]
pub struct CapacityReport {
    pub spec: CapacitySpec,
    /// Highest passing rate; `None` when even the lowest rate tried failed.
    pub capacity: Option<f64>,
    /// Lowest rate that failed (twice), if any: the capacity lies below it.
    pub lowest_failure: Option<f64>,
    /// Every trial, in order.
    pub trials: Vec<Trial>,
    /// Why the search ended.
    pub stop: Stop,
}

/// Whether a run meets the capacity criteria.
pub fn passes(report: &Report, spec: &CapacitySpec) -> bool {
    let slo_ms = spec.slo_p99.as_secs_f64() * 1000.0;
    report.sent > 0
        && report.percentile_ms(99.0) <= slo_ms
        && report.success_share() >= spec.min_success
}

impl CapacityReport {
    /// The last passing trial at the capacity rate.
    pub fn at_capacity(&self) -> Option<&Trial> {
        let cap = self.capacity?;
        self.trials
            .iter()
            .rev()
            .find(|t| t.passed && t.rate.total_cmp(&cap).is_eq())
    }

    /// One line per trial and a verdict.
    pub fn render_text(&self) -> String {
        let mut out =
            String::from("   rate/s  achieved/s   p50 ms   p99 ms  p99.9 ms   2xx %  verdict\n");
        for t in &self.trials {
            out.push_str(&trial_line(t));
            out.push('\n');
        }
        let slo = self.spec.slo_p99.as_secs_f64() * 1000.0;
        let criteria = format!(
            "p99 <= {} ms and >= {}% answered 2xx",
            num(slo),
            num(100.0 * self.spec.min_success)
        );
        match self.capacity {
            Some(c) => out.push_str(&format!(
                "capacity: {}/s ({criteria}){}\n",
                num(c),
                self.lowest_failure
                    .map(|f| format!("; {}/s failed", num(f)))
                    .unwrap_or_default()
            )),
            None => out.push_str(&format!(
                "capacity: none found ({criteria} failed at every rate tried){}\n",
                match &self.stop {
                    floor @ Stop::LatencyFloor { .. } => format!("; {}", floor.describe(slo)),
                    _ => String::new(),
                }
            )),
        }
        out
    }

    /// `capacity`, `lowest_failure`, `slo_p99_ms`, `min_success`, `trials[{rate, passed,
    /// rate_achieved, success_share, latency_ms{...}, limits[...]}]`, `stop{reason, ...}` (why
    /// the search ended: `converged`, `max_rate`, `min_rate`, `trial_budget`, or
    /// `latency_floor` with the `rates` walked down and their `p99_ms`) and `at_capacity` (the
    /// full report of the run at capacity, or null).
    pub fn to_json(&self) -> Value {
        let trials: Vec<Value> = self
            .trials
            .iter()
            .map(|t| {
                let r = t.report.to_json();
                json!({
                    "rate": t.rate,
                    "passed": t.passed,
                    "rate_achieved": r["rate_achieved"],
                    "success_share": r["success_share"],
                    "latency_ms": r["latency_ms"],
                    // A trial the generator limited judged the generator, not the target.
                    "limits": r["limits"],
                })
            })
            .collect();
        json!({
            "capacity": self.capacity,
            "lowest_failure": self.lowest_failure,
            "slo_p99_ms": self.spec.slo_p99.as_secs_f64() * 1000.0,
            "min_success": self.spec.min_success,
            "trials": trials,
            "stop": serde_json::to_value(&self.stop).unwrap_or(Value::Null),
            "at_capacity": self.at_capacity().map(|t| t.report.to_json()),
        })
    }
}

/// A trial's line of [`CapacityReport::render_text`], also printed as the search goes.
pub fn trial_line(t: &Trial) -> String {
    let r = &t.report;
    // A trial the generator itself limited says so: its verdict is about the generator.
    let limits: Vec<&str> = r.limits().iter().map(|l| l.kind.describe()).collect();
    format!(
        "{:>9} {:>11.1} {:>8.2} {:>8.2} {:>9.2} {:>7.2}  {}{}",
        num(t.rate),
        r.rate_achieved,
        r.percentile_ms(50.0),
        r.percentile_ms(99.0),
        r.percentile_ms(99.9),
        100.0 * r.success_share(),
        if t.passed { "pass" } else { "FAIL" },
        if limits.is_empty() {
            String::new()
        } else {
            format!("  (limited by {})", limits.join(" and "))
        }
    )
}

/// Runs trials of `base` (its URL, duration, warm-up, connections, timeout and check; its
/// arrivals are replaced by each trial's constant rate) until [`Search`] is done, calling
/// `on_trial` after each.
pub async fn find_capacity(
    base: &LoadSpec,
    corpus: Arc<Corpus>,
    spec: &CapacitySpec,
    mut on_trial: impl FnMut(&Trial),
) -> Result<CapacityReport, LoadError> {
    spec.validate()?;
    let mut search = Search::new(spec.clone());
    let mut trials = Vec::new();
    while let Some(rate) = search.next_rate() {
        if !trials.is_empty() {
            tokio::time::sleep(spec.pause).await;
        }
        let mut trial_spec = base.clone();
        trial_spec.arrivals = Arrivals::Rate(rate);
        let report = crate::run(&trial_spec, Arc::clone(&corpus)).await?;
        let passed = passes(&report, spec);
        search.record(
            rate,
            Observed {
                passed,
                p99_ms: report.percentile_ms(99.0),
            },
        );
        let trial = Trial {
            rate,
            passed,
            report,
        };
        on_trial(&trial);
        trials.push(trial);
    }
    Ok(CapacityReport {
        spec: spec.clone(),
        capacity: search.capacity(),
        lowest_failure: search.lowest_failure(),
        trials,
        // The loop ends only when the search has no next rate, so it has a reason.
        stop: search.stop().unwrap_or(Stop::TrialBudget),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a search against a target whose true capacity is `cap`; `noise` lists trial
    /// numbers (0-based) that fail whatever the rate, like a stall would.
    fn simulate(spec: CapacitySpec, cap: f64, noise: &[usize]) -> (Option<f64>, Vec<f64>) {
        let mut s = Search::new(spec);
        let mut tried = Vec::new();
        while let Some(rate) = s.next_rate() {
            let passed = rate <= cap && !noise.contains(&tried.len());
            tried.push(rate);
            // Queueing: the p99 falls with the rate, 1 ms at capacity, more above it.
            let p99_ms = if passed { 1.0 } else { 1.0 + rate / cap };
            s.record(rate, Observed { passed, p99_ms });
        }
        (s.capacity(), tried)
    }

    fn spec() -> CapacitySpec {
        CapacitySpec::new(Duration::from_millis(10))
    }

    #[test]
    fn converges_within_precision() {
        for cap in [1500.0, 2600.0, 7000.0, 40_000.0, 123_456.0] {
            let (found, tried) = simulate(spec(), cap, &[]);
            let found = found.unwrap();
            assert!(found <= cap, "{cap}: {found}");
            assert!(found >= cap * 0.95 - 10.0, "{cap}: {found} after {tried:?}");
            assert!(tried.len() <= 24, "{cap}: {tried:?}");
        }
    }

    #[test]
    fn doubles_then_bisects_with_round_rates() {
        let (found, tried) = simulate(spec(), 3000.0, &[]);
        // 1000, 2000, 4000 (fails twice), then between 2000 and 4000.
        assert_eq!(&tried[..5], &[1000.0, 2000.0, 4000.0, 4000.0, 3000.0]);
        assert!(tried.iter().all(|r| r.fract() == 0.0), "{tried:?}");
        assert_eq!(found, Some(3000.0));
    }

    #[test]
    fn one_noisy_failure_does_not_lower_the_result() {
        // Trial 1 (2000/s) fails once by noise; its retry passes.
        let (found, tried) = simulate(spec(), 3000.0, &[1]);
        assert_eq!(&tried[..3], &[1000.0, 2000.0, 2000.0]);
        assert_eq!(found, Some(3000.0));
        // Without retries the same noise costs accuracy.
        let mut no_retry = spec();
        no_retry.retry_failures = false;
        let (found, _) = simulate(no_retry, 3000.0, &[1]);
        assert!(found.unwrap() < 2000.0, "{found:?}");
    }

    #[test]
    fn walks_down_when_the_start_fails() {
        let (found, tried) = simulate(spec(), 300.0, &[]);
        assert_eq!(&tried[..4], &[1000.0, 1000.0, 500.0, 500.0]);
        let found = found.unwrap();
        assert!((285.0..=300.0).contains(&found), "{found} after {tried:?}");
    }

    #[test]
    fn stops_at_the_bounds() {
        let mut s = spec();
        s.max_rate = 5000.0;
        let (found, tried) = simulate(s, 1e9, &[]);
        assert_eq!(found, Some(5000.0));
        assert_eq!(tried, vec![1000.0, 2000.0, 4000.0, 5000.0]);

        let mut s = spec();
        s.min_rate = 100.0;
        let (found, tried) = simulate(s, 10.0, &[]);
        assert_eq!(found, None);
        assert_eq!(tried.last(), Some(&100.0));
    }

    #[test]
    fn trial_budget_is_respected() {
        let mut s = spec();
        s.max_trials = 3;
        let (_, tried) = simulate(s, 1e9, &[]);
        assert_eq!(tried.len(), 3);
    }

    /// Runs a search whose trials show `p99_at(rate)` and pass when it is within the SLO
    /// (10 ms); returns the rates tried and why it stopped.
    fn walk(spec: CapacitySpec, p99_at: impl Fn(f64) -> f64) -> (Vec<f64>, Option<Stop>) {
        let mut s = Search::new(spec);
        let mut tried = Vec::new();
        while let Some(rate) = s.next_rate() {
            let p99_ms = p99_at(rate);
            tried.push(rate);
            s.record(
                rate,
                Observed {
                    passed: p99_ms <= 10.0,
                    p99_ms,
                },
            );
        }
        (tried, s.stop())
    }

    #[test]
    fn a_latency_floor_above_the_slo_stops_the_walk_down() {
        // 15 ms whatever the rate: a floor. Three rates, each run twice, then the verdict;
        // without the rule the search halved down to 1/s in 20 trials.
        let (tried, stop) = walk(spec(), |_| 15.0);
        assert_eq!(tried, [1000.0, 1000.0, 500.0, 500.0, 250.0, 250.0]);
        assert_eq!(
            stop,
            Some(Stop::LatencyFloor {
                rates: vec![1000.0, 500.0, 250.0],
                p99_ms: vec![15.0, 15.0, 15.0]
            })
        );
        assert!(
            stop.unwrap()
                .describe(10.0)
                .contains("15.00 ms at 1000/s, 15.00 ms at 500/s, 15.00 ms at 250/s")
        );
    }

    #[test]
    fn a_p99_that_falls_with_the_rate_keeps_the_search_walking() {
        // Queueing: p99 halves with the rate until it passes at 125/s (8 ms).
        let (tried, stop) = walk(spec(), |rate| rate / 1000.0 * 64.0);
        assert_eq!(
            &tried[..7],
            &[1000.0, 1000.0, 500.0, 500.0, 250.0, 250.0, 125.0]
        );
        assert_eq!(stop, Some(Stop::Converged));
        // Falling, then flat above the SLO: the floor is found where it flattens.
        let (tried, stop) = walk(spec(), |rate| 12.0 + rate / 50.0);
        // 32, 22, 17 (fell 23%), 14.5 (15%), 13.25 (9%), 12.6 (5%): two flat halvings.
        assert_eq!(tried.len(), 12, "{tried:?}");
        assert!(matches!(stop, Some(Stop::LatencyFloor { ref rates, .. }) if rates.len() == 6));
    }

    #[test]
    fn the_floor_reads_each_rates_better_run_and_never_a_pass() {
        // One noisy run (40 ms) of each pair: the better run (15 ms) is the rate's figure.
        let mut s = Search::new(spec());
        let mut noisy = true;
        while let Some(rate) = s.next_rate() {
            let p99_ms = if noisy { 40.0 } else { 15.0 };
            noisy = !noisy;
            s.record(
                rate,
                Observed {
                    passed: false,
                    p99_ms,
                },
            );
        }
        assert!(matches!(s.stop(), Some(Stop::LatencyFloor { p99_ms, .. }) if p99_ms == [15.0; 3]));

        // Once a rate has passed, failures above it are the ceiling, never a floor.
        let (_, stop) = walk(spec(), |rate| if rate <= 1000.0 { 5.0 } else { 15.0 });
        assert_eq!(stop, Some(Stop::Converged));
    }

    #[test]
    fn the_floor_rule_itself() {
        let slo = 10.0;
        assert!(!latency_floor(&[], slo));
        assert!(
            !latency_floor(&[(1000.0, 15.0), (500.0, 15.0)], slo),
            "one halving"
        );
        assert!(latency_floor(
            &[(1000.0, 15.0), (500.0, 14.0), (250.0, 13.0)],
            slo
        ));
        // A fall of 10% or more is a fall.
        assert!(!latency_floor(
            &[(1000.0, 20.0), (500.0, 17.5), (250.0, 17.0)],
            slo
        ));
        // Flat, but at or below the SLO (failing on errors, not latency): not a floor.
        assert!(!latency_floor(
            &[(1000.0, 9.0), (500.0, 9.0), (250.0, 9.0)],
            slo
        ));
        // Only the last halvings count.
        assert!(latency_floor(
            &[(2000.0, 90.0), (1000.0, 15.0), (500.0, 15.0), (250.0, 15.0)],
            slo
        ));
        // A p99 that rose as the rate fell is flat too (noise, not load).
        assert!(latency_floor(
            &[(1000.0, 15.0), (500.0, 16.0), (250.0, 15.5)],
            slo
        ));
    }

    #[test]
    fn bad_specs_name_the_field() {
        let mut s = spec();
        s.min_success = 1.5;
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("min_success")
        );
        let mut s = spec();
        s.start_rate = 0.5;
        assert!(s.validate().unwrap_err().to_string().contains("start_rate"));
        let mut s = spec();
        s.slo_p99 = Duration::ZERO;
        assert!(s.validate().unwrap_err().to_string().contains("slo_p99"));
    }
}
