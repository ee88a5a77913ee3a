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

use std::sync::Arc;
use std::time::Duration;

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

/// The search's state: verdicts so far and what to try next. Pure: no clock, no I/O.
#[derive(Debug, Clone)]
pub struct Search {
    spec: CapacitySpec,
    best_pass: Option<f64>,
    lowest_fail: Option<f64>,
    /// A rate that failed once and is due for its second run.
    retry: Option<f64>,
    trials: usize,
}

impl Search {
    pub fn new(spec: CapacitySpec) -> Search {
        Search {
            spec,
            best_pass: None,
            lowest_fail: None,
            retry: None,
            trials: 0,
        }
    }

    /// The rate of the next trial, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        if self.trials >= self.spec.max_trials {
            return None;
        }
        if let Some(r) = self.retry {
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

    /// Records the verdict of a trial at `rate`.
    pub fn record(&mut self, rate: f64, passed: bool) {
        self.trials += 1;
        let retrying = self.retry.take() == Some(rate);
        if passed {
            self.best_pass = Some(self.best_pass.map_or(rate, |p| p.max(rate)));
        } else if self.spec.retry_failures && !retrying {
            self.retry = Some(rate);
        } else {
            self.lowest_fail = Some(self.lowest_fail.map_or(rate, |f| f.min(rate)));
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
                "capacity: none found ({criteria} failed at every rate tried)\n"
            )),
        }
        out
    }

    /// `capacity`, `lowest_failure`, `slo_p99_ms`, `min_success`, `trials[{rate, passed,
    /// rate_achieved, success_share, latency_ms{...}, limits[...]}]` and `at_capacity` (the full report of
    /// the run at capacity, or null).
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
        search.record(rate, passed);
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
            s.record(rate, passed);
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
