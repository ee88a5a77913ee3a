//! Pass or fail: what makes a run fail as a CI gate, judged from its [`Report`] alone. Pure: no
//! clock, no I/O.
//!
//! A run fails when
//!
//! | failure | when |
//! | --- | --- |
//! | [`FailureKind::NothingAnswered`] | no request got an HTTP answer (any status) |
//! | [`FailureKind::Limited`] | the generator's own connections or CPU limited the run ([`crate::LimitKind::Connections`], [`crate::LimitKind::Cpu`]): its figures are the generator's, not the target's. A target holding every connection ([`crate::LimitKind::Target`]) is a finding about the target, left to the thresholds |
//! | [`FailureKind::Threshold`] | the [`Slo`] or a [`Threshold`] is missed |
//!
//! # Thresholds
//!
//! A threshold names a failure: `METRIC OP VALUE`, e.g. `p99>50ms` fails the run when the p99
//! is above 50 ms. Spaces around the parts are allowed; nothing else is.
//!
//! | metric | value | what is compared |
//! | --- | --- | --- |
//! | `p50`, `p90`, `p99`, `p99.9`, `p99.99`, `max` | a duration: `800us`, `50ms`, `1.5s` | latency from the scheduled send time ([`Report::latency`]: answered and timed-out requests) |
//! | `errors` | a count (`10`) or a percentage of the requests due (`1%`) | requests not answered 2xx (or refused by the response check), dropped ones included |
//! | `dropped` | a count or a percentage | requests never sent ([`crate::StatusCounts::dropped`]) |
//! | `timeouts` | a count or a percentage | requests sent and not answered within the timeout |
//! | `rps` | requests per second (`900`, or `900/s`) | answered requests per second of the measured window |
//!
//! `OP` is one of `>`, `>=`, `<`, `<=`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::report::hist_ms;
use crate::spec::num;
use crate::{LimitKind, Report};

/// Longest threshold expression accepted.
pub const MAX_EXPR_LEN: usize = 64;
/// Most thresholds one run takes.
pub const MAX_THRESHOLDS: usize = 32;
/// Share of requests an [`Slo`] asks to be answered within its latency when none is given.
pub const DEFAULT_SLO_SHARE: f64 = 0.99;

/// Why a threshold or an SLO cannot be parsed; the message names the text and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`: {problem}")]
pub struct GateParseError {
    /// The expression as given.
    pub text: String,
    /// What is wrong with it, and what would be right.
    pub problem: String,
}

/// What a threshold compares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Latency at this percentile, in percent (`100.0` is the max).
    Latency(f64),
    Errors,
    Dropped,
    Timeouts,
    Rps,
}

/// How a threshold compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    #[serde(rename = ">")]
    Above,
    #[serde(rename = ">=")]
    AtLeast,
    #[serde(rename = "<")]
    Below,
    #[serde(rename = "<=")]
    AtMost,
}

impl Op {
    fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Op::Above => measured > limit,
            Op::AtLeast => measured >= limit,
            Op::Below => measured < limit,
            Op::AtMost => measured <= limit,
        }
    }
}

/// The bound a threshold compares with, in the metric's own unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Milliseconds, for latencies.
    Ms(f64),
    /// A number of requests.
    Count(u64),
    /// A share of the requests due, 0..=1.
    Share(f64),
    /// Answered requests per second.
    PerSecond(f64),
}

/// One `--fail-if` expression, parsed: the run fails when `metric op bound` holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    pub op: Op,
    pub bound: Bound,
    /// The expression as given, for messages.
    pub text: String,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Threshold {
    /// Parses `METRIC OP VALUE` (see the module's table).
    ///
    /// # Errors
    /// [`GateParseError`] naming the expression and what is wrong with it.
    pub fn parse(text: &str) -> Result<Threshold, GateParseError> {
        let fail = |problem: String| GateParseError {
            text: text.to_owned(),
            problem,
        };
        if text.len() > MAX_EXPR_LEN {
            return Err(fail(format!("longer than {MAX_EXPR_LEN} characters")));
        }
        let Some(at) = text.find(['<', '>']) else {
            return Err(fail(
                "expected METRIC OP VALUE with OP one of > >= < <=, e.g. p99>50ms".to_owned(),
            ));
        };
        let (name, rest) = text.split_at(at);
        let (op, value) = match rest.as_bytes() {
            [b'>', b'=', ..] => (Op::AtLeast, &rest[2..]),
            [b'<', b'=', ..] => (Op::AtMost, &rest[2..]),
            [b'>', ..] => (Op::Above, &rest[1..]),
            _ => (Op::Below, &rest[1..]),
        };
        let (name, value) = (name.trim(), value.trim());
        let metric = match name {
            "p50" => Metric::Latency(50.0),
            "p90" => Metric::Latency(90.0),
            "p99" => Metric::Latency(99.0),
            "p99.9" => Metric::Latency(99.9),
            "p99.99" => Metric::Latency(99.99),
            "max" => Metric::Latency(100.0),
            "errors" => Metric::Errors,
            "dropped" => Metric::Dropped,
            "timeouts" => Metric::Timeouts,
            "rps" => Metric::Rps,
            "" => return Err(fail("no metric before the comparison".to_owned())),
            other => {
                return Err(fail(format!(
                    "unknown metric `{other}`; one of p50 p90 p99 p99.9 p99.99 max errors \
                     dropped timeouts rps"
                )));
            }
        };
        let bound = match metric {
            Metric::Latency(_) => Bound::Ms(parse_duration_ms(value).map_err(fail)?),
            Metric::Errors | Metric::Dropped | Metric::Timeouts => {
                parse_count_or_share(value).map_err(fail)?
            }
            Metric::Rps => {
                let n = value.strip_suffix("/s").unwrap_or(value);
                Bound::PerSecond(parse_number(n, "a rate").map_err(fail)?)
            }
        };
        Ok(Threshold {
            metric,
            op,
            bound,
            text: text.trim().to_owned(),
        })
    }

    /// The measured value, in the unit of `self.bound`.
    fn measure(&self, r: &Report) -> f64 {
        let count = |n: u64| match self.bound {
            Bound::Share(_) => ratio(n, r.sent),
            _ => n as f64,
        };
        match self.metric {
            Metric::Latency(q) => hist_ms(&r.latency, q),
            Metric::Errors => count(errors(r)),
            Metric::Dropped => count(r.status.dropped),
            Metric::Timeouts => count(r.status.timeout),
            Metric::Rps => r.rate_achieved,
        }
    }

    /// Why the run misses this threshold, or `None` when it holds. A run that sent nothing
    /// has no latency to compare: latency and rate thresholds then hold (the nothing-answered
    /// failure says it).
    pub fn missed(&self, r: &Report) -> Option<String> {
        let measured = self.measure(r);
        let limit = match self.bound {
            Bound::Ms(v) | Bound::Share(v) | Bound::PerSecond(v) => v,
            Bound::Count(n) => n as f64,
        };
        if !self.op.holds(measured, limit) {
            return None;
        }
        let shown = match self.bound {
            Bound::Ms(_) => format!("{measured:.2} ms"),
            Bound::Count(_) => num(measured),
            Bound::Share(_) => format!("{:.3}%", 100.0 * measured),
            Bound::PerSecond(_) => format!("{measured:.1}/s"),
        };
        let what = match self.metric {
            Metric::Latency(100.0) => "max latency".to_owned(),
            Metric::Latency(q) => format!("p{} latency", num(q)),
            Metric::Errors => "errors".to_owned(),
            Metric::Dropped => "dropped".to_owned(),
            Metric::Timeouts => "timeouts".to_owned(),
            Metric::Rps => "answered rate".to_owned(),
        };
        Some(format!("--fail-if {}: {what} was {shown}", self.text))
    }
}

/// Requests due that did not end in a usable answer: not 2xx, refused by the check, or never
/// answered.
fn errors(r: &Report) -> u64 {
    let invalid = r.check.as_ref().map_or(0, |c| c.invalid);
    r.sent
        .saturating_sub(r.status.successes().saturating_sub(invalid))
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// A finite, non-negative decimal number.
fn parse_number(text: &str, what: &str) -> Result<f64, String> {
    let ok = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|&b| b == b'.').count() <= 1;
    let n: Option<f64> = ok.then(|| text.parse().ok()).flatten();
    match n {
        Some(n) if n.is_finite() => Ok(n),
        _ => Err(format!("`{text}` is not {what} (a plain decimal number)")),
    }
}

/// `800us`, `50ms`, `1.5s` in milliseconds; a unit is required.
fn parse_duration_ms(text: &str) -> Result<f64, String> {
    let (n, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return Err(format!(
            "`{text}` needs a unit: a latency is compared with a duration such as 800us, 50ms \
             or 1.5s"
        ));
    };
    let ms = parse_number(n, "a duration")? * scale;
    if ms > crate::MAX_TIMEOUT.as_secs_f64() * 1000.0 {
        return Err(format!(
            "`{text}` is above the longest latency measured ({} s)",
            crate::MAX_TIMEOUT.as_secs()
        ));
    }
    Ok(ms)
}

/// `10` (requests) or `1%` / `0.5%` (of the requests due).
fn parse_count_or_share(text: &str) -> Result<Bound, String> {
    if let Some(p) = text.strip_suffix('%') {
        let p = parse_number(p, "a percentage")?;
        if p > 100.0 {
            return Err(format!("`{text}` is above 100%"));
        }
        return Ok(Bound::Share(p / 100.0));
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Bound::Count)
            .map_err(|_| format!("`{text}` is too large a count"));
    }
    Err(format!(
        "`{text}` is neither a count of requests (10) nor a percentage of them (1%)"
    ))
}

/// `--slo`: at least `share` of the requests due answered within `within` of their scheduled
/// time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    pub within: Duration,
    /// 0..=1.
    pub share: f64,
}

impl Slo {
    /// Parses `100ms` (99% within 100 ms) or `100ms:99.9%`.
    ///
    /// # Errors
    /// [`GateParseError`] naming the text and the problem.
    pub fn parse(text: &str) -> Result<Slo, GateParseError> {
        let fail = |problem: String| GateParseError {
            text: text.to_owned(),
            problem,
        };
        if text.len() > MAX_EXPR_LEN {
            return Err(fail(format!("longer than {MAX_EXPR_LEN} characters")));
        }
        let (latency, share) = match text.split_once(':') {
            Some((l, s)) => (l.trim(), Some(s.trim())),
            None => (text.trim(), None),
        };
        let ms = parse_duration_ms(latency).map_err(fail)?;
        if ms <= 0.0 {
            return Err(fail("the latency must be more than 0".to_owned()));
        }
        let share = match share {
            None => DEFAULT_SLO_SHARE,
            Some(s) => {
                let Some(p) = s.strip_suffix('%') else {
                    return Err(fail(format!(
                        "`{s}`: the share is a percentage, e.g. 100ms:99.9%"
                    )));
                };
                let p = parse_number(p, "a percentage").map_err(fail)?;
                if !(p > 0.0 && p <= 100.0) {
                    return Err(fail(format!("`{s}` is not within 0% (excluded) and 100%")));
                }
                p / 100.0
            }
        };
        Ok(Slo {
            within: Duration::from_secs_f64(ms / 1000.0),
            share,
        })
    }

    /// Why the run misses the SLO, or `None` when it meets it.
    pub fn missed(&self, r: &Report) -> Option<String> {
        let got = r.share_within(self.within);
        (got < self.share).then(|| {
            format!(
                "--slo: {:.3}% of requests due were answered within {} ms, below {}%",
                100.0 * got,
                num(self.within.as_secs_f64() * 1000.0),
                num(100.0 * self.share)
            )
        })
    }
}

/// Which rule a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// No request got an HTTP answer.
    NothingAnswered,
    /// The generator's connections or CPU limited the run.
    Limited,
    /// The SLO or a threshold was missed.
    Threshold,
}

/// One reason a run fails, in one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub reason: String,
}

/// Everything a run is judged by beyond "nothing answered" and "limited", which always apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gates {
    pub slo: Option<Slo>,
    pub fail_if: Vec<Threshold>,
    /// A run the generator limited passes if the rest does (its findings still lead every
    /// report): for a shared CI runner whose scheduler stalls now and then.
    pub allow_limited: bool,
}

impl Gates {
    /// Every reason `r` fails, most fundamental first (nothing answered, limited, then the SLO
    /// and thresholds in the order given); empty when it passes.
    pub fn judge(&self, r: &Report) -> Vec<Failure> {
        let mut out = Vec::new();
        if r.completed == 0 {
            let reason = if r.sent == 0 {
                "nothing answered: no request came due in the measured window".to_owned()
            } else {
                let s = &r.status;
                format!(
                    "nothing answered: none of {} requests got an HTTP answer (connect error \
                     {}, timeout {}, dropped {}, other error {})",
                    r.sent, s.connect_error, s.timeout, s.dropped, s.other_error
                )
            };
            out.push(Failure {
                kind: FailureKind::NothingAnswered,
                reason,
            });
        }
        for limit in r.limits() {
            if !self.allow_limited && matches!(limit.kind, LimitKind::Connections | LimitKind::Cpu)
            {
                out.push(Failure {
                    kind: FailureKind::Limited,
                    reason: format!("limited by {}: {}", limit.kind.describe(), limit.message),
                });
            }
        }
        let missed = self
            .slo
            .iter()
            .filter_map(|s| s.missed(r))
            .chain(self.fail_if.iter().filter_map(|t| t.missed(r)));
        out.extend(missed.map(|reason| Failure {
            kind: FailureKind::Threshold,
            reason,
        }));
        out
    }

    /// The verdict as JSON: `{passed, failures[{kind, reason}], slo{ms, share}|null,
    /// fail_if[...], allow_limited}`.
    pub fn verdict_json(&self, failures: &[Failure]) -> Value {
        json!({
            "passed": failures.is_empty(),
            "failures": serde_json::to_value(failures).unwrap_or(Value::Null),
            "slo": self.slo.map(|s| json!({
                "ms": s.within.as_secs_f64() * 1000.0,
                "share": s.share,
            })),
            "fail_if": self.fail_if.iter().map(|t| t.text.clone()).collect::<Vec<_>>(),
            "allow_limited": self.allow_limited,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Arrivals, StatusCounts, new_histogram};

    /// 1,000 requests due at 1,000/s: `ok` answered 200 at 1..=ok ms, then `timeouts` timed
    /// out (at the 2 s timeout) and `dropped` never sent.
    fn report(ok: u64, timeouts: u64, dropped: u64) -> Report {
        let mut latency = new_histogram();
        for ms in 1..=ok {
            latency.record(ms * 1000).unwrap();
        }
        for _ in 0..timeouts {
            latency.record(2_000_000).unwrap();
        }
        let status = StatusCounts {
            ok_200: ok,
            timeout: timeouts,
            dropped,
            ..StatusCounts::default()
        };
        let sent = ok + timeouts + dropped;
        Report {
            arrivals: Arrivals::Rate(1000.0),
            connections: 8,
            max_connections: 2000,
            peak_connections: 8,
            connections_opened: 8,
            starved: 0,
            starved_late: 0,
            sent,
            completed: ok,
            status,
            elapsed: Duration::from_secs(1),
            rate_achieved: ok as f64,
            rate_offered: Some(sent as f64),
            duration: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            latency,
            service_time: new_histogram(),
            timeline: Vec::new(),
            phases: Vec::new(),
            schedule_lag: new_histogram(),
            check: None,
        }
    }

    fn t(text: &str) -> Threshold {
        Threshold::parse(text).unwrap()
    }

    #[test]
    fn the_grammar() {
        assert_eq!(
            t("p99>50ms"),
            Threshold {
                metric: Metric::Latency(99.0),
                op: Op::Above,
                bound: Bound::Ms(50.0),
                text: "p99>50ms".to_owned()
            }
        );
        assert_eq!(t(" p99.9 >= 1.5s ").bound, Bound::Ms(1500.0));
        assert_eq!(t("p99.9 >= 1.5s").op, Op::AtLeast);
        assert_eq!(t("max<=800us").bound, Bound::Ms(0.8));
        assert_eq!(t("max<=800us").op, Op::AtMost);
        assert_eq!(t("errors>1%").bound, Bound::Share(0.01));
        assert_eq!(t("dropped>0").bound, Bound::Count(0));
        assert_eq!(t("timeouts>=0.5%").bound, Bound::Share(0.005));
        assert_eq!(t("rps<900").bound, Bound::PerSecond(900.0));
        assert_eq!(t("rps<900/s").bound, Bound::PerSecond(900.0));
        assert_eq!(t("rps<900").op, Op::Below);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (text, why) in [
            ("p99", "METRIC OP VALUE"),
            ("p99=50ms", "METRIC OP VALUE"),
            (">50ms", "no metric"),
            ("p98>50ms", "unknown metric `p98`"),
            ("p99>50", "needs a unit"),
            ("p99>50 ms", "not a duration"),
            ("p99>-5ms", "not a duration"),
            ("p99>5%", "needs a unit"),
            ("p99>1e3ms", "not a duration"),
            ("p99>99s", "longest latency"),
            ("errors>1.5", "neither a count"),
            ("errors>101%", "above 100%"),
            ("errors>1%%", "not a percentage"),
            ("errors>>1%", "not a percentage"),
            ("errors>ten", "neither a count"),
            ("rps<fast", "not a rate"),
            ("rps<NaN", "not a rate"),
            ("dropped>99999999999999999999999", "too large"),
        ] {
            let e = Threshold::parse(text).unwrap_err();
            assert_eq!(e.text, text);
            let msg = e.to_string();
            assert!(msg.contains(why), "{text}: {msg}");
            assert!(msg.contains(text), "{text}: {msg}");
        }
        let long = format!("p99>{}ms", "1".repeat(70));
        assert!(
            Threshold::parse(&long)
                .unwrap_err()
                .problem
                .contains("longer")
        );
    }

    #[test]
    fn thresholds_compare_what_they_name() {
        // p99 of 1..=990 ms answered and 10 timeouts at 2 s: 980-ish ms.
        let r = report(990, 10, 0);
        let p99 = hist_ms(&r.latency, 99.0);
        assert!((985.0..=995.0).contains(&p99), "{p99}");
        assert!(
            t("p99>900ms")
                .missed(&r)
                .unwrap()
                .contains("p99 latency was")
        );
        assert!(t("p99>1s").missed(&r).is_none());
        assert!(t("max>1.9s").missed(&r).unwrap().contains("max latency"));
        // 10 of 1,000 timed out: 1%.
        assert!(t("errors>1%").missed(&r).is_none());
        assert!(t("errors>=1%").missed(&r).unwrap().contains("1.000%"));
        assert!(t("timeouts>9").missed(&r).unwrap().contains("was 10"));
        assert!(t("dropped>0").missed(&r).is_none());
        assert!(t("rps<900").missed(&r).is_none());
        assert!(t("rps<1000").missed(&r).unwrap().contains("990.0/s"));
    }

    #[test]
    fn dropped_requests_count_as_errors_but_not_as_latency() {
        let r = report(900, 0, 100);
        assert!(t("dropped>0").missed(&r).unwrap().contains("was 100"));
        assert!(t("dropped>10%").missed(&r).is_none());
        assert!(t("errors>9.9%").missed(&r).is_some());
        // The answered 900 are at 1..=900 ms; the 100 unsent are in no percentile.
        assert!(t("max>901ms").missed(&r).is_none());
    }

    #[test]
    fn a_failed_check_is_an_error() {
        let mut r = report(1000, 0, 0);
        assert!(t("errors>0").missed(&r).is_none());
        r.check = Some(crate::CheckCounts {
            checked: 1000,
            valid: 997,
            invalid: 3,
            first_error: None,
        });
        assert!(t("errors>0").missed(&r).unwrap().contains("was 3"));
    }

    #[test]
    fn slo_forms() {
        let s = Slo::parse("100ms").unwrap();
        assert_eq!(s.within, Duration::from_millis(100));
        assert!((s.share - 0.99).abs() < 1e-12);
        let s = Slo::parse("1s:99.9%").unwrap();
        assert_eq!(s.within, Duration::from_secs(1));
        assert!((s.share - 0.999).abs() < 1e-12);
        for (bad, why) in [
            ("100", "needs a unit"),
            ("0ms", "more than 0"),
            ("100ms:99", "percentage"),
            ("100ms:0%", "not within"),
            ("100ms:101%", "not within"),
            ("100ms:x%", "not a percentage"),
        ] {
            let msg = Slo::parse(bad).unwrap_err().to_string();
            assert!(msg.contains(why) && msg.contains(bad), "{bad}: {msg}");
        }
    }

    #[test]
    fn the_slo_counts_over_the_requests_due() {
        // 1..=1000 ms: 50.0% within 500 ms.
        let r = report(1000, 0, 0);
        let at = |text: &str| Slo::parse(text).unwrap().missed(&r);
        assert!(at("500ms:50%").is_none());
        assert!(at("500ms:51%").unwrap().contains("50.000% of requests due"));
        assert!(at("2s").is_none());
        // Unsent requests are not within anything.
        let r = report(900, 0, 100);
        assert!(Slo::parse("2s:91%").unwrap().missed(&r).is_some());
    }

    #[test]
    fn judged_most_fundamental_first() {
        let gates = Gates {
            slo: Some(Slo::parse("10ms").unwrap()),
            fail_if: vec![t("p99>50ms"), t("rps<900")],
            allow_limited: false,
        };
        let kinds = |r: &Report| gates.judge(r).iter().map(|f| f.kind).collect::<Vec<_>>();
        // Nothing answered: every request timed out, so every threshold fails too.
        let r = report(0, 1000, 0);
        assert_eq!(
            kinds(&r),
            [
                FailureKind::NothingAnswered,
                FailureKind::Threshold,
                FailureKind::Threshold,
                FailureKind::Threshold
            ]
        );
        assert!(gates.judge(&r)[0].reason.contains("timeout 1000"));

        // Fast answers pass everything.
        let mut fast = report(1000, 0, 0);
        fast.latency = new_histogram();
        for _ in 0..1000 {
            fast.latency.record(2000).unwrap();
        }
        assert!(gates.judge(&fast).is_empty(), "{:?}", gates.judge(&fast));
        let v = gates.verdict_json(&[]);
        assert_eq!(v["passed"], true);
        assert_eq!(v["fail_if"][1], "rps<900");

        // The generator behind its schedule: limited, whatever the thresholds say.
        for _ in 0..100 {
            fast.schedule_lag.record(5_000).unwrap();
        }
        let failures = gates.judge(&fast);
        assert_eq!(kinds(&fast), [FailureKind::Limited]);
        assert!(
            failures[0]
                .reason
                .starts_with("limited by the generator's CPU")
        );
        let v = gates.verdict_json(&failures);
        assert_eq!(v["passed"], false);
        assert_eq!(v["failures"][0]["kind"], "limited");
        // Allowed, the same run passes (its report still leads with the finding).
        let allowing = Gates {
            allow_limited: true,
            ..gates.clone()
        };
        assert!(allowing.judge(&fast).is_empty());
        assert_eq!(fast.limits().len(), 1);
    }

    #[test]
    fn a_target_holding_every_connection_is_left_to_the_thresholds() {
        // Starved with a pool far above the need: the target's finding, not the generator's.
        let mut r = report(500, 300, 200);
        r.starved = 500;
        r.max_connections = 200;
        r.peak_connections = 200;
        for _ in 0..500 {
            r.service_time.record(10_000).unwrap();
        }
        assert_eq!(r.limits()[0].kind, LimitKind::Target);
        assert!(Gates::default().judge(&r).is_empty());
    }
}
