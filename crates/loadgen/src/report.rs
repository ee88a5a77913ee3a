//! The outcome of a run: counts, latency histograms and a per-second timeline.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Value, json};

use crate::spec::{Arrivals, num};

/// Lowest value of the latency histograms, microseconds.
pub const HIST_LOW_US: u64 = 1;
/// Highest value of the latency histograms, microseconds (60 s).
pub const HIST_HIGH_US: u64 = 60_000_000;
/// Significant figures of the run-wide histograms.
pub const HIST_SIGFIG: u8 = 3;

/// An empty run-wide latency histogram: microseconds, 1 µs .. 60 s, 3 significant figures.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOW_US, HIST_HIGH_US, HIST_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// How every request of the measured window ended. Exactly one counter per request:
/// `sent == answered() + timeout + dropped + connect_error + other_error`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    /// Answered 200.
    pub ok_200: u64,
    /// Answered 204 (the OpenRTB no-bid).
    pub no_content_204: u64,
    /// Answered another 2xx.
    pub other_2xx: u64,
    /// Answered 4xx.
    pub client_4xx: u64,
    /// Answered 5xx.
    pub server_5xx: u64,
    /// Answered 1xx or 3xx.
    pub other_status: u64,
    /// Sent, but the whole answer had not arrived by `scheduled + timeout`.
    pub timeout: u64,
    /// Never sent: no connection became free before the request's deadline (its body's
    /// `tmax`, or the timeout, after its scheduled time), or the queue of waiting requests
    /// was full. Under open-loop load this means the target (or the generator, which
    /// [`Report::limits`] tells apart) cannot keep up with the offered rate on these
    /// connections.
    pub dropped: u64,
    /// No connection could be opened (refused, unreachable, connect timed out).
    pub connect_error: u64,
    /// Anything else: connection reset or closed mid-answer, malformed answer.
    pub other_error: u64,
    /// Answered requests by exact status code.
    pub by_code: BTreeMap<u16, u64>,
}

impl StatusCounts {
    /// Requests that got an HTTP answer, whatever its status.
    pub fn answered(&self) -> u64 {
        self.ok_200
            + self.no_content_204
            + self.other_2xx
            + self.client_4xx
            + self.server_5xx
            + self.other_status
    }

    /// Requests answered with a 2xx status (204 included): the answers a bidding client can
    /// use.
    pub fn successes(&self) -> u64 {
        self.ok_200 + self.no_content_204 + self.other_2xx
    }

    /// Requests that got no answer.
    pub fn failed(&self) -> u64 {
        self.timeout + self.dropped + self.connect_error + self.other_error
    }

    pub(crate) fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Answered(code) => {
                *self.by_code.entry(code).or_default() += 1;
                match code {
                    200 => self.ok_200 += 1,
                    204 => self.no_content_204 += 1,
                    201..=203 | 205..=299 => self.other_2xx += 1,
                    400..=499 => self.client_4xx += 1,
                    500..=599 => self.server_5xx += 1,
                    _ => self.other_status += 1,
                }
            }
            Outcome::Timeout => self.timeout += 1,
            Outcome::Dropped => self.dropped += 1,
            Outcome::ConnectError => self.connect_error += 1,
            Outcome::OtherError => self.other_error += 1,
        }
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Answered(u16),
    Timeout,
    Dropped,
    ConnectError,
    OtherError,
}

/// One second of the measured window. Requests are attributed to the second they were
/// *scheduled* in, whenever they ended, so a slow second shows its own latency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Second {
    /// Index from the start of the measured window (0-based).
    pub second: u32,
    /// Requests scheduled in this second.
    pub sent: u64,
    /// Of those, answered (any status).
    pub completed: u64,
    /// Of those, not answered (timeout, dropped, connection errors).
    pub errors: u64,
    /// Median latency of this second's requests, ms (answered, and timeouts/drops at the
    /// timeout; 0 when none). Two significant figures.
    pub p50_ms: f64,
    /// 99th percentile, ms, as `p50_ms`.
    pub p99_ms: f64,
    /// Maximum, ms, as `p50_ms`.
    pub max_ms: f64,
}

/// One rate step of a stepped run, with its own figures.
#[derive(Clone)]
pub struct Phase {
    /// Offered rate of the step, requests per second.
    pub rate_offered: f64,
    /// Start of the step, from the start of the measured window.
    pub start: Duration,
    pub length: Duration,
    /// Requests scheduled in the step (each accounted for once in `status`).
    pub sent: u64,
    pub status: StatusCounts,
    /// As [`Report::latency`], for this step's requests.
    pub latency: Histogram<u64>,
}

impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phase")
            .field("rate_offered", &self.rate_offered)
            .field("start", &self.start)
            .field("sent", &self.sent)
            .field("status", &self.status)
            .field("p99_ms", &self.percentile_ms(99.0))
            .finish()
    }
}

impl Phase {
    /// Answered requests per second of the step.
    pub fn rate_achieved(&self) -> f64 {
        ratio(self.status.answered() as f64, self.length.as_secs_f64())
    }

    /// As [`Report::percentile_ms`], for this step.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        hist_ms(&self.latency, q)
    }

    /// Share of the step's requests answered 2xx, 0..=1.
    pub fn success_share(&self) -> f64 {
        ratio(self.status.successes() as f64, self.sent as f64)
    }

    /// Share of the step's requests answered within `d` of their scheduled time, 0..=1, as
    /// [`Report::share_within`].
    pub fn share_within(&self, d: Duration) -> f64 {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        // Unanswered requests sit in the histogram at the timeout: cap by those answered.
        let within = self
            .latency
            .count_between(0, us)
            .min(self.status.answered());
        ratio(within as f64, self.sent as f64)
    }
}

/// Counts of the optional response check ([`crate::ResponseCheck`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckCounts {
    /// Answers checked (200s with the BidResponse check).
    pub checked: u64,
    pub valid: u64,
    pub invalid: u64,
    /// Why the first invalid answer was refused, to start debugging from.
    pub first_error: Option<String>,
}

/// `a / b`, 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The result of [`crate::run`]. Covers the measured window only (warm-up excluded).
#[derive(Clone)]
pub struct Report {
    /// How requests arrived.
    pub arrivals: Arrivals,
    /// Connections opened before the clock started.
    pub connections: usize,
    /// The most the run could open (open loop grows on demand up to this; closed loop has
    /// exactly `connections`).
    pub max_connections: usize,
    /// The most it held at once (each worker holds one).
    pub peak_connections: usize,
    /// Connections opened over the whole run, reconnections included (warm-up too).
    pub connections_opened: u64,
    /// Measured requests that came due with every connection busy and got no new one (the
    /// cap was reached, the generator was behind its schedule, or the pool already had twice
    /// what rate × service time needs): they waited for one, or were dropped. See
    /// [`Report::limits`].
    pub starved: u64,
    /// Of `starved`, those refused a connection because the generator was late on its own
    /// schedule: its CPU's doing, which the CPU finding reports, not the connections'.
    pub starved_late: u64,
    /// Requests the schedule issued in the measured window: `ceil(rate * duration)`. Each one
    /// is accounted for exactly once in `status`.
    pub sent: u64,
    /// Requests answered with any HTTP status.
    pub completed: u64,
    /// How the `sent` requests ended.
    pub status: StatusCounts,
    /// Wall time from the start of the measured window until its last request ended
    /// (at least about `duration`; at most `duration + timeout` and a little).
    pub elapsed: Duration,
    /// `completed / duration`: answered requests per second of the measured window.
    pub rate_achieved: f64,
    /// Offered rate, requests per second: `sent / duration` (the mean for steps and ramps).
    /// `None` in closed loop, where nothing is offered independently of the answers.
    pub rate_offered: Option<f64>,
    /// Length of the measured window (the spec's `duration`).
    pub duration: Duration,
    /// Per-request timeout (the spec's `timeout`).
    pub timeout: Duration,
    /// Latency in microseconds, from each request's *scheduled* send time to the end of its
    /// answer, for every answered request; requests that were sent and timed out are
    /// recorded at `timeout` (a lower bound of their true latency), so that overload cannot
    /// hide from the percentiles. Requests never sent (`status.dropped`) have no latency and
    /// are not in it: every report gives their count and share apart ([`Report::dropped_share`]),
    /// and a gate can fail on them. Connection errors are not recorded.
    /// 1 µs .. 60 s, 3 significant figures.
    pub latency: Histogram<u64>,
    /// Service time in microseconds of answered requests: from handing the request to an open
    /// connection to the end of its answer. This is what a closed-loop tool would report; it
    /// hides queueing behind a stalled server and is here for comparison only.
    pub service_time: Histogram<u64>,
    /// One entry per second of the measured window, in order.
    pub timeline: Vec<Second>,
    /// One entry per rate step ([`Arrivals::Steps`]); empty otherwise.
    pub phases: Vec<Phase>,
    /// How late the generator itself issued each measured request, in µs from its scheduled
    /// instant (open loop; empty in closed loop). This lag is part of `latency`: a p99 here
    /// that is not small next to the target's means the generator, not the target, is the
    /// bottleneck.
    pub schedule_lag: Histogram<u64>,
    /// Response check counts, when a check was asked for.
    pub check: Option<CheckCounts>,
}

impl std::fmt::Debug for Report {
    /// Histograms are summarized (their derived `Debug` prints every bucket).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let summary = |h: &Histogram<u64>| {
            format!(
                "Histogram {{ len: {}, p50_us: {}, p99_us: {}, max_us: {} }}",
                h.len(),
                h.value_at_percentile(50.0),
                h.value_at_percentile(99.0),
                h.max()
            )
        };
        f.debug_struct("Report")
            .field("arrivals", &self.arrivals)
            .field("connections", &self.connections)
            .field("max_connections", &self.max_connections)
            .field("peak_connections", &self.peak_connections)
            .field("starved", &self.starved)
            .field("starved_late", &self.starved_late)
            .field("sent", &self.sent)
            .field("completed", &self.completed)
            .field("status", &self.status)
            .field("elapsed", &self.elapsed)
            .field("rate_achieved", &self.rate_achieved)
            .field("rate_offered", &self.rate_offered)
            .field("duration", &self.duration)
            .field("timeout", &self.timeout)
            .field("latency", &format_args!("{}", summary(&self.latency)))
            .field(
                "service_time",
                &format_args!("{}", summary(&self.service_time)),
            )
            .field("timeline", &self.timeline)
            .field("phases", &self.phases.len())
            .field("check", &self.check)
            .finish()
    }
}

pub(crate) fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

pub(crate) fn hist_ms(h: &Histogram<u64>, percentile: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        us_to_ms(h.value_at_percentile(percentile))
    }
}

pub(crate) fn hist_max_ms(h: &Histogram<u64>) -> f64 {
    if h.is_empty() { 0.0 } else { us_to_ms(h.max()) }
}

impl Report {
    /// Latency at percentile `q`, **in percent** (`50.0`, `99.0`, `99.9`; `100.0` is the max),
    /// in milliseconds; 0 when nothing was recorded. See [`Report::latency`] for what is in
    /// the histogram.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        hist_ms(&self.latency, q)
    }

    /// Share of `sent` requests never sent (`status.dropped`), 0..=1: they are in no latency
    /// figure.
    pub fn dropped_share(&self) -> f64 {
        ratio(self.status.dropped as f64, self.sent as f64)
    }

    /// The `dropped` line of the text report: never-sent requests, apart from the latencies.
    fn dropped_line(&self) -> String {
        format!(
            "{} never sent ({:.2}% of requests due): their deadline passed while they waited \
             for a connection; in no latency figure",
            self.status.dropped,
            100.0 * self.dropped_share()
        )
    }

    /// Share of `sent` requests answered 2xx (204 included) and, when a response check ran,
    /// not refused by it; 0..=1.
    pub fn success_share(&self) -> f64 {
        let invalid = self.check.as_ref().map_or(0, |c| c.invalid);
        ratio(
            self.status.successes().saturating_sub(invalid) as f64,
            self.sent as f64,
        )
    }

    /// Share of `sent` requests answered within `d` of their scheduled time, 0.0..=1.0
    /// (0 when nothing was sent). Precision: the histogram's, 0.1 %.
    pub fn share_within(&self, d: Duration) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        let within = if d >= self.timeout {
            self.completed
        } else {
            // Unanswered requests sit at `timeout` > d: only answered ones are counted.
            let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
            self.latency.count_between(0, us).min(self.completed)
        };
        within as f64 / self.sent as f64
    }

    /// `64 connections` (closed loop), or `connections 64 at start, peak 112 of 2000
    /// allowed, 112 opened`.
    pub(crate) fn connections_line(&self) -> String {
        if self.rate_offered.is_none() {
            return format!("{} connections", self.connections);
        }
        format!(
            "connections {} at start, peak {} of {} allowed, {} opened",
            self.connections, self.peak_connections, self.max_connections, self.connections_opened
        )
    }

    /// A few aligned lines for a terminal; what limited the run, if anything, first.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for limit in self.limits() {
            let _ = writeln!(out, "LIMITED     {}", limit.message);
        }
        let s = &self.status;
        let offered = match self.rate_offered {
            Some(r) if matches!(self.arrivals, Arrivals::Rate(_)) => {
                format!("offered {}/s", num(r))
            }
            _ => self.arrivals.describe(),
        };
        let _ = writeln!(
            out,
            "sent {}  completed {}  rate {:.1}/s  ({offered} for {:.1} s)",
            self.sent,
            self.completed,
            self.rate_achieved,
            self.duration.as_secs_f64(),
        );
        let _ = writeln!(out, "pool        {}", self.connections_line());
        let mut parts: Vec<String> = s
            .by_code
            .iter()
            .map(|(code, n)| format!("{code}: {n}"))
            .collect();
        for (name, n) in [
            ("timeout", s.timeout),
            ("connect error", s.connect_error),
            ("other error", s.other_error),
        ] {
            if n > 0 {
                parts.push(format!("{name}: {n}"));
            }
        }
        if parts.is_empty() {
            parts.push("none".to_owned());
        }
        let _ = writeln!(out, "status      {}", parts.join("  "));
        // Open loop only: the closed loop sends each request when a connection frees up.
        if self.rate_offered.is_some() {
            let _ = writeln!(out, "dropped     {}", self.dropped_line());
        }
        let line = |h: &Histogram<u64>| {
            format!(
                "p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
                hist_ms(h, 50.0),
                hist_ms(h, 90.0),
                hist_ms(h, 99.0),
                hist_ms(h, 99.9),
                hist_max_ms(h)
            )
        };
        let _ = writeln!(
            out,
            "latency ms  {}  (answered and timed out, from schedule)",
            line(&self.latency)
        );
        let _ = writeln!(
            out,
            "service ms  {}  (from send, not from schedule: hides queueing)",
            line(&self.service_time)
        );
        if !self.schedule_lag.is_empty() {
            let lag = |q| hist_ms(&self.schedule_lag, q);
            let _ = writeln!(
                out,
                "sched lag   p50 {:.2}  p99 {:.2}  max {:.2}  (generator behind its own schedule)",
                lag(50.0),
                lag(99.0),
                hist_max_ms(&self.schedule_lag),
            );
        }
        if let Some(c) = &self.check {
            let _ = writeln!(
                out,
                "check       {} answers checked: {} valid, {} invalid{}",
                c.checked,
                c.valid,
                c.invalid,
                c.first_error
                    .as_deref()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            );
        }
        if !self.phases.is_empty() {
            let _ = writeln!(
                out,
                "at s   offered/s  achieved/s   p50 ms   p99 ms  p99.9 ms    max ms  2xx %"
            );
            for p in &self.phases {
                let _ = writeln!(
                    out,
                    "{:>4} {:>11} {:>11.1} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>6.2}",
                    num(p.start.as_secs_f64()),
                    num(p.rate_offered),
                    p.rate_achieved(),
                    p.percentile_ms(50.0),
                    p.percentile_ms(99.0),
                    p.percentile_ms(99.9),
                    p.percentile_ms(100.0),
                    100.0 * p.success_share()
                );
            }
        }
        out
    }

    /// The report as JSON: `limits[{kind,message,flag}]` (empty when the generator kept up),
    /// `mode`, `connections`, `max_connections`, `peak_connections`, `connections_opened`,
    /// `starved`, `starved_late`, `sent`, `completed`, `dropped` and `dropped_share` (never
    /// sent, in no latency figure), `rate_achieved`,
    /// `rate_offered` (null in closed loop), `success_share`, `duration_s`, `elapsed_s`,
    /// `timeout_ms`, `status{..., by_code{"200": n}}`, `latency_ms{p50,p90,p99,p999,p9999,max}`,
    /// `service_ms{...}`, `timeline[{second,sent,completed,errors,p50_ms,p99_ms,max_ms}]`,
    /// `steps[{rate_offered,start_s,duration_s,sent,rate_achieved,success_share,status,
    /// latency_ms}]` and `check{checked,valid,invalid,first_error}` (null without a check).
    pub fn to_json(&self) -> Value {
        let pct = |h: &Histogram<u64>| {
            json!({
                "p50": hist_ms(h, 50.0),
                "p90": hist_ms(h, 90.0),
                "p99": hist_ms(h, 99.0),
                "p999": hist_ms(h, 99.9),
                "p9999": hist_ms(h, 99.99),
                "max": hist_max_ms(h),
            })
        };
        let steps: Vec<Value> = self
            .phases
            .iter()
            .map(|p| {
                json!({
                    "rate_offered": p.rate_offered,
                    "start_s": p.start.as_secs_f64(),
                    "duration_s": p.length.as_secs_f64(),
                    "sent": p.sent,
                    "rate_achieved": p.rate_achieved(),
                    "success_share": p.success_share(),
                    "status": serde_json::to_value(&p.status).unwrap_or(Value::Null),
                    "latency_ms": pct(&p.latency),
                })
            })
            .collect();
        json!({
            "limits": serde_json::to_value(self.limits()).unwrap_or(Value::Null),
            "mode": self.arrivals.describe(),
            "connections": self.connections,
            "max_connections": self.max_connections,
            "peak_connections": self.peak_connections,
            "connections_opened": self.connections_opened,
            "starved": self.starved,
            "starved_late": self.starved_late,
            "sent": self.sent,
            "completed": self.completed,
            "dropped": self.status.dropped,
            "dropped_share": self.dropped_share(),
            "rate_achieved": self.rate_achieved,
            "rate_offered": self.rate_offered,
            "success_share": self.success_share(),
            "duration_s": self.duration.as_secs_f64(),
            "elapsed_s": self.elapsed.as_secs_f64(),
            "timeout_ms": self.timeout.as_secs_f64() * 1000.0,
            "status": serde_json::to_value(&self.status).unwrap_or(Value::Null),
            "latency_ms": pct(&self.latency),
            "service_ms": pct(&self.service_time),
            "schedule_lag_ms": pct(&self.schedule_lag),
            "timeline": serde_json::to_value(&self.timeline).unwrap_or(Value::Null),
            "steps": steps,
            "check": serde_json::to_value(&self.check).unwrap_or(Value::Null),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn report() -> Report {
        let mut latency = new_histogram();
        let mut status = StatusCounts::default();
        for ms in 1..=98u64 {
            latency.record(ms * 1000).unwrap();
            status.record(Outcome::Answered(if ms % 2 == 0 { 200 } else { 204 }));
        }
        status.record(Outcome::Timeout);
        latency.record(100_000).unwrap();
        status.record(Outcome::ConnectError);
        Report {
            arrivals: Arrivals::Rate(100.0),
            connections: 8,
            max_connections: 200,
            peak_connections: 8,
            connections_opened: 8,
            starved: 0,
            starved_late: 0,
            sent: 100,
            completed: 98,
            status,
            elapsed: Duration::from_secs(1),
            rate_achieved: 98.0,
            rate_offered: Some(100.0),
            duration: Duration::from_secs(1),
            timeout: Duration::from_millis(100),
            latency,
            service_time: new_histogram(),
            timeline: vec![],
            phases: vec![],
            schedule_lag: new_histogram(),
            check: None,
        }
    }

    #[test]
    fn status_classes() {
        let mut s = StatusCounts::default();
        for code in [200, 204, 201, 302, 404, 400, 503, 500, 101] {
            s.record(Outcome::Answered(code));
        }
        s.record(Outcome::Dropped);
        assert_eq!(
            (
                s.ok_200,
                s.no_content_204,
                s.other_2xx,
                s.client_4xx,
                s.server_5xx
            ),
            (1, 1, 1, 2, 2)
        );
        assert_eq!(s.other_status, 2);
        assert_eq!(s.answered(), 9);
        assert_eq!(s.failed(), 1);
        assert_eq!(s.by_code.get(&404), Some(&1));
    }

    #[test]
    fn share_within_counts_answered_over_sent() {
        let r = report();
        assert!((r.share_within(Duration::from_millis(49)) - 0.49).abs() < 1e-9);
        assert!((r.share_within(Duration::from_millis(99)) - 0.98).abs() < 1e-9);
        // At or past the timeout, only answered ones count, never the timeouts.
        assert!((r.share_within(Duration::from_secs(5)) - 0.98).abs() < 1e-9);
        // A step's share is counted the same way over its own requests.
        let step = Phase {
            rate_offered: 100.0,
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            sent: r.sent,
            status: r.status.clone(),
            latency: r.latency.clone(),
        };
        assert!((step.share_within(Duration::from_millis(49)) - 0.49).abs() < 1e-9);
        assert!((step.share_within(Duration::from_secs(5)) - 0.98).abs() < 1e-9);
    }

    #[test]
    fn percentiles_in_percent() {
        let r = report();
        let p50 = r.percentile_ms(50.0);
        assert!((49.9..=50.1).contains(&p50), "{p50}");
        let max = r.percentile_ms(100.0);
        assert!((99.9..=100.1).contains(&max), "{max}");
    }

    #[test]
    fn debug_is_short() {
        let text = format!("{:?}", report());
        assert!(text.len() < 1500, "{text}");
        assert!(text.contains("latency: Histogram { len: 99"), "{text}");
    }

    #[test]
    fn text_lines() {
        let text = report().render_text();
        assert!(
            text.starts_with("sent 100  completed 98  rate 98.0/s"),
            "{text}"
        );
        assert!(
            text.contains("200: 49  204: 49  timeout: 1  connect error: 1"),
            "{text}"
        );
        assert!(text.contains("latency ms  p50 "), "{text}");
    }
}
