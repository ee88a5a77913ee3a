//! Whether a run measured its target or the generator itself: the findings every report (text,
//! JSON, HTML) leads with when the generator's connections or CPU, rather than the target, set
//! the figures. Pure: computed from the report's own counts.
//!
//! | finding | when | what to change |
//! | --- | --- | --- |
//! | `connections` | more than 1% of requests came due with every connection busy and got none (not counting those refused while the generator ran late: the CPU finding's), and the pool at its largest was below 1.25 × what the answers needed (Little's law: offered rate × the p90 of service time) | `--max-connections` when the pool reached its cap; `--connections` when it stopped growing below it |
//! | `target` | the same starvation, with a pool above that need: slow or missing answers held the connections | nothing on the generator's side |
//! | `cpu` | the generator issued requests more than 1 ms late at p99 | a core of its own, or a lower `--rate` |

use serde::Serialize;

use crate::Report;
use crate::report::{hist_max_ms, hist_ms, ratio};
use crate::spec::num;

/// Share of the measured requests that may find every connection busy (and get none) before
/// the run counts as short of connections: a burst now and then near a target's capacity is
/// not a limit.
const STARVED_SHARE: f64 = 0.01;
/// Schedule lag p99 above which the generator's CPU is a limit, ms.
const LAG_P99_MS: f64 = 1.0;
/// A pool within this factor of the estimated need counts as too small (the estimate is rate
/// × p90 service time; rate × mean would be the exact in-flight count, a little less).
const NEED_MARGIN: f64 = 1.25;

/// What limited a run, other than the target's own speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The generator's connection cap: requests waited for a connection (or were dropped)
    /// because the generator would not open more.
    Connections,
    /// Every connection was held by answers that were slow or never came: the target, not the
    /// cap, is the limit.
    Target,
    /// The generator's CPU: it could not issue requests on schedule.
    Cpu,
}

impl LimitKind {
    /// What limited the run, in a few words: "the generator's connections".
    pub fn describe(self) -> &'static str {
        match self {
            LimitKind::Connections => "the generator's connections",
            LimitKind::Target => "the target, holding every connection",
            LimitKind::Cpu => "the generator's CPU",
        }
    }
}

/// One finding, with the figures behind it and what to change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limit {
    pub kind: LimitKind,
    /// One sentence for people, with the numbers.
    pub message: String,
    /// The flag that changes it, if any.
    pub flag: Option<&'static str>,
}

impl Report {
    /// What limited the run other than the target's speed, most important first: the
    /// generator's connections or CPU, or connections held by a target that did not answer.
    /// Empty when the generator kept up; see the module's table for the rules.
    pub fn limits(&self) -> Vec<Limit> {
        connections(self).into_iter().chain(cpu(self)).collect()
    }
}

fn connections(r: &Report) -> Option<Limit> {
    let offered = r.rate_offered?;
    // Requests the pool refused because the generator was late are the CPU finding's.
    let starved = r.starved.saturating_sub(r.starved_late);
    let starved_share = ratio(starved as f64, r.sent as f64);
    if starved_share <= STARVED_SHARE {
        return None;
    }
    let peak_rate = r.arrivals.peak_rate().unwrap_or(offered);
    // The same notion of service time the pool grows by: its 90th percentile.
    let service_ms = if r.service_time.is_empty() {
        None
    } else {
        Some(hist_ms(&r.service_time, 90.0))
    };
    let need = service_ms.map(|ms| (peak_rate * ms / 1000.0).round());
    let facts = format!(
        "every connection was busy ({peak} open, {max} allowed) when {starved} requests \
         ({pct:.1}%) came due{dropped}",
        peak = r.peak_connections,
        max = r.max_connections,
        pct = 100.0 * starved_share,
        dropped = if r.status.dropped > 0 {
            format!(
                ", and {} were dropped unsent, their deadline past while they waited",
                r.status.dropped
            )
        } else {
            String::new()
        },
    );
    let short = match (need, service_ms) {
        // What was open, not what was allowed: a pool that stopped growing short of the
        // need is the generator's doing too.
        (Some(need), Some(ms)) if need * NEED_MARGIN >= r.peak_connections as f64 => {
            Some((need, ms))
        }
        _ => None,
    };
    let Some((need, ms)) = short else {
        return Some(Limit {
            kind: LimitKind::Target,
            message: format!(
                "{facts}, and {timeouts} requests timed out: slow or missing answers held the \
                 connections, so the target, not the generator's connections, is the limit \
                 (answered requests needed about {need}).",
                timeouts = r.status.timeout,
                need = need.map_or_else(|| "an unknown number".to_owned(), num),
            ),
            flag: None,
        });
    };
    let (what, flag) = if r.peak_connections >= r.max_connections {
        (
            format!(
                "raise --max-connections (now {}; unset, the cap is a --timeout's worth of \
                 requests at the peak rate, within the open-file limit)",
                r.max_connections
            ),
            "--max-connections",
        )
    } else {
        (
            format!(
                "the pool stopped growing at {}, below its cap, because more connections did not \
                 raise the share answered or the generator ran late: start with \
                 --connections {}",
                r.peak_connections,
                num((need * 2.0).min(r.max_connections as f64))
            ),
            "--connections",
        )
    };
    Some(Limit {
        kind: LimitKind::Connections,
        message: format!(
            "the generator's connections limited this run: {facts}. At {rate}/s and {ms:.1} ms \
             per answer (p90) it needs about {need} (rate × service time): {what}. The latency \
             figures include that wait, which is the generator's, not the target's.",
            rate = num(peak_rate),
            need = num(need),
        ),
        flag: Some(flag),
    })
}

fn cpu(r: &Report) -> Option<Limit> {
    let p99 = hist_ms(&r.schedule_lag, 99.0);
    if p99 <= LAG_P99_MS {
        return None;
    }
    Some(Limit {
        kind: LimitKind::Cpu,
        message: format!(
            "the generator's CPU limited this run: it issued requests {p99:.2} ms late at p99 \
             (max {max:.2} ms) behind its own schedule, and that lag is in the latency figures. \
             Give it a core of its own (taskset -c N gavel --threads 1 load ...) or a lower rate.",
            max = hist_max_ms(&r.schedule_lag),
        ),
        flag: Some("--rate"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;
    use crate::{Arrivals, StatusCounts, new_histogram};

    /// 1,000/s for 1 s on a cap of `max`, each answer taking `service_ms`, with `starved`
    /// requests at the cap, `dropped` of them never sent and `timeouts` unanswered.
    fn run(max: usize, service_ms: u64, starved: u64, dropped: u64, timeouts: u64) -> Report {
        let mut service_time = new_histogram();
        let mut latency = new_histogram();
        for _ in 0..(1000 - dropped - timeouts) {
            service_time.record(service_ms * 1000).unwrap();
            latency.record(service_ms * 1000).unwrap();
        }
        let status = StatusCounts {
            ok_200: 1000 - dropped - timeouts,
            dropped,
            timeout: timeouts,
            ..StatusCounts::default()
        };
        Report {
            arrivals: Arrivals::Rate(1000.0),
            connections: max.min(16),
            max_connections: max,
            peak_connections: max,
            connections_opened: max as u64,
            starved,
            starved_late: 0,
            sent: 1000,
            completed: status.answered(),
            status,
            elapsed: Duration::from_secs(1),
            rate_achieved: 0.0,
            rate_offered: Some(1000.0),
            duration: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            latency,
            service_time,
            timeline: Vec::new(),
            phases: Vec::new(),
            schedule_lag: new_histogram(),
            check: None,
        }
    }

    fn kinds(r: &Report) -> Vec<LimitKind> {
        r.limits().iter().map(|l| l.kind).collect()
    }

    #[test]
    fn a_run_that_kept_up_has_no_finding() {
        assert!(kinds(&run(200, 100, 0, 0, 0)).is_empty());
        // A burst now and then (1% or less) is not a limit.
        assert!(kinds(&run(200, 100, 10, 0, 0)).is_empty());
    }

    #[test]
    fn a_cap_below_rate_times_service_time_is_the_generators_connections() {
        // 1,000/s × 100 ms needs 100; 16 is short.
        let r = run(16, 100, 900, 700, 0);
        let found = r.limits();
        assert_eq!(kinds(&r), [LimitKind::Connections]);
        let m = &found[0].message;
        for figure in [
            "(16 open, 16 allowed)",
            "900 requests (90.0%)",
            "700 were dropped",
            "about 100",
            "--max-connections (now 16;",
        ] {
            assert!(m.contains(figure), "{figure}: {m}");
        }
        assert_eq!(found[0].flag, Some("--max-connections"));
        // A few dropped at the cap (under 1% starved) are counted in the status, not a finding.
        assert!(kinds(&run(16, 100, 5, 5, 0)).is_empty());
    }

    #[test]
    fn a_pool_that_stopped_growing_below_its_cap_short_of_the_need_is_the_generators() {
        let mut r = run(2000, 100, 500, 0, 0);
        r.peak_connections = 40;
        let found = r.limits();
        assert_eq!(kinds(&r), [LimitKind::Connections]);
        assert_eq!(found[0].flag, Some("--connections"));
        assert!(
            found[0].message.contains("--connections 200"),
            "{}",
            found[0].message
        );
        // Above the need, the same starvation is the target's.
        r.peak_connections = 400;
        assert_eq!(kinds(&r), [LimitKind::Target]);
    }

    #[test]
    fn a_cap_well_above_the_need_means_the_target_held_the_connections() {
        // Answered requests needed 1,000/s × 10 ms = 10 connections; 200 were all held by
        // requests that never answered.
        let r = run(200, 10, 500, 300, 200);
        assert_eq!(kinds(&r), [LimitKind::Target]);
        let m = &r.limits()[0].message;
        assert!(m.contains("200 requests timed out"), "{m}");
        assert_eq!(r.limits()[0].flag, None);
    }

    #[test]
    fn a_generator_behind_its_schedule_is_its_cpu() {
        let mut r = run(200, 10, 0, 0, 0);
        for _ in 0..100 {
            r.schedule_lag.record(3_000).unwrap();
        }
        assert_eq!(kinds(&r), [LimitKind::Cpu]);
        assert!(r.limits()[0].message.contains("3.00 ms late at p99"));
        r.schedule_lag = new_histogram();
        r.schedule_lag.record(900).unwrap();
        assert!(kinds(&r).is_empty(), "under a millisecond is on schedule");
    }

    #[test]
    fn requests_refused_while_the_generator_ran_late_are_not_the_connections_fault() {
        let mut r = run(2000, 100, 500, 0, 0);
        r.peak_connections = 40;
        r.starved_late = 495;
        assert!(kinds(&r).is_empty(), "{:?}", r.limits());
        r.starved_late = 480;
        assert_eq!(kinds(&r), [LimitKind::Connections], "20 of 1,000 are not");
    }

    #[test]
    fn a_closed_loop_has_no_connection_finding() {
        let mut r = run(16, 100, 900, 0, 0);
        r.rate_offered = None;
        assert!(kinds(&r).is_empty());
    }
}
