//! Whether an open-loop run opens one more connection: a pure decision, fed the clock and the
//! run's figures, so that it is tested with plain numbers (the pool in `pool.rs` acts on it).
//!
//! A request that comes due with every connection busy may open one more when all of these hold:
//!
//! | rule | why |
//! | --- | --- |
//! | the pool is below `max_connections` | the cap the user (or the open-file limit) sets |
//! | the scheduler is on time for this request (less than 1 ms late) | a late scheduler means the generator's CPU is short: its requests come in bursts that find every connection busy for a moment, and opening connections costs the CPU it lacks |
//! | the pool is below twice what the answers need: the offered rate (as last measured) × the p90 of service time (Little's law) | a target that answers fast needs few connections; one that answers slowly needs many. Before the first answer, every request sent is still in flight, and that is the need |
//! | the pool is within its stage, or the last stage paid off | see below |
//!
//! **Stages.** The pool may double freely: from `connections` up to twice that. To double
//! again it needs evidence that connections are what the run lacks: the target answers less
//! than 90% of what it is offered, and the share it answers (measured over at least 100 ms)
//! once the pool had doubled beats the share before by a fifth (the first time, with nothing
//! measured before, one more doubling is tried). Shares, not rates: during a ramp or rising
//! steps the answer rate rises by itself. A target
//! that answers slowly but keeps up (a bidder near its deadline) answers twice as often on
//! twice the connections; a target that is saturated answers as often on more connections and
//! only gets slower, so the pool stops there. Without this rule, a run at 60,000/s against a
//! server near its capacity went from 256 to 9,872 connections within a second and collapsed
//! (the connections were the server's extra work), where a fixed pool of 256 kept up. While
//! nothing has been answered (a slow or dead target), Little's law alone bounds the pool: every
//! request sent so far is still in flight.

use std::time::{Duration, Instant};

/// A scheduler this late for a request is short of CPU: no connection is opened for it.
const LATE: Duration = Duration::from_millis(1);
/// The pool may grow to this many times what rate × service time says the answers need.
const HEADROOM: f64 = 2.0;
/// A new stage needs the answer rate to have grown by this factor over the last stage.
const GAIN: f64 = 1.2;
/// Shortest window rates are measured over (longer: the p90 of service time). Long enough
/// that a start-up backlog draining, or a moment of the generator's own lag, does not pass for
/// the gain of a stage.
const MIN_WINDOW: Duration = Duration::from_millis(100);
/// Answering this share of what was sent, a target keeps up: more connections cannot help.
const KEEPS_UP: f64 = 0.9;

/// What the pool does for a request that found no idle connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Opens one more connection.
    Grow,
    /// Opens none: the scheduler was late, so the generator's CPU is what the run lacks (the
    /// report's CPU finding says so; these are not the connections' fault).
    Late,
    /// Opens none: the cap, or the rules found no use for more.
    Hold,
}

/// What the decision is fed at each request that found no idle connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts {
    pub now: Instant,
    /// Connections the pool has now.
    pub size: usize,
    /// How late the scheduler handed this request over.
    pub late: Duration,
    /// The p90 of answered requests' service time; `None` before the first answer.
    pub service: Option<Duration>,
    /// Requests handed over so far, this one included (a running count).
    pub issued: u64,
    /// Requests answered so far (a running count).
    pub answered: u64,
}

/// Rates over one measurement window.
#[derive(Debug, Clone, Copy)]
struct Rates {
    began: Instant,
    /// Requests handed over per second: the rate offered then (a ramp's or a step's, not the
    /// plan's peak).
    issued: f64,
    /// Requests answered per second.
    answered: f64,
}

impl Rates {
    /// Share of what was offered that was answered; 1 when nothing was offered.
    fn yield_share(&self) -> f64 {
        if self.issued > 0.0 {
            self.answered / self.issued
        } else {
            1.0
        }
    }
}

/// The state of the decision over one run.
#[derive(Debug)]
pub(crate) struct Growth {
    max: usize,
    /// The plan's peak rate: the offered rate until a window has measured it.
    peak_rate: f64,
    /// The pool may grow to this without more evidence.
    limit: usize,
    /// When the current stage began.
    stage_started: Instant,
    /// The answered share of the offered rate before the current stage began.
    base_yield: Option<f64>,
    /// The window under way: when it began, and the issued and answered counts then.
    window: (Instant, u64, u64),
    /// The last complete window.
    last: Option<Rates>,
}

impl Growth {
    /// For a pool of `size` connections that may grow to `max`, at up to `peak_rate` requests
    /// per second, whose clock started at `start`.
    pub fn new(size: usize, max: usize, peak_rate: f64, start: Instant) -> Growth {
        Growth {
            max,
            peak_rate,
            limit: size.saturating_mul(2).max(1),
            stage_started: start,
            base_yield: None,
            window: (start, 0, 0),
            last: None,
        }
    }

    /// A request found every connection busy: does the pool open one more?
    pub fn decide(&mut self, f: Facts) -> Decision {
        self.roll(f);
        if f.size >= self.max {
            return Decision::Hold;
        }
        if f.late >= LATE {
            return Decision::Late;
        }
        if self.may_grow(f) {
            Decision::Grow
        } else {
            Decision::Hold
        }
    }

    /// The rules past the cap and the scheduler's lateness.
    fn may_grow(&mut self, f: Facts) -> bool {
        let Some(service) = f.service else {
            // Nothing answered yet: every request sent so far is still in flight, and that is
            // the whole need; the first stage starts from where the pool is when answers come.
            let outstanding = f.issued.saturating_sub(f.answered);
            if f.size as f64 >= HEADROOM * outstanding as f64 {
                return false;
            }
            self.limit = self.limit.max(f.size.saturating_mul(2));
            self.stage_started = f.now;
            return true;
        };
        let offered = self.last.map_or(self.peak_rate, |r| r.issued);
        if f.size as f64 >= HEADROOM * offered * service.as_secs_f64() {
            return false;
        }
        if f.size < self.limit {
            return true;
        }
        if self.next_stage() {
            self.limit = f.size.saturating_mul(2);
            self.stage_started = f.now;
            self.base_yield = self.last.map(|r| r.yield_share());
            return true;
        }
        false
    }

    /// Closes the measurement window once it is as long as the p90 of service time (at least
    /// [`MIN_WINDOW`]).
    fn roll(&mut self, f: Facts) {
        let (began, issued_then, answered_then) = self.window;
        let elapsed = f.now.saturating_duration_since(began);
        if elapsed >= f.service.unwrap_or_default().max(MIN_WINDOW) {
            let per_second =
                |now: u64, then: u64| now.saturating_sub(then) as f64 / elapsed.as_secs_f64();
            self.last = Some(Rates {
                began,
                issued: per_second(f.issued, issued_then),
                answered: per_second(f.answered, answered_then),
            });
            self.window = (f.now, f.issued, f.answered);
        }
    }

    /// Whether the full stage has shown that connections are what the run lacks: the target
    /// answers less than it is offered, and a larger share of it than before the stage. A
    /// share, not a rate: a ramp or a rising step raises the answer rate by itself.
    fn next_stage(&self) -> bool {
        // Only a window measured wholly within this stage speaks for it.
        let Some(rates) = self.last.filter(|r| r.began >= self.stage_started) else {
            return false;
        };
        let share = rates.yield_share();
        if share >= KEEPS_UP {
            return false;
        }
        // The first stage began before anything was measured: with nothing to compare, a
        // target that does not keep up gets one more doubling, measured from here.
        self.base_yield.is_none_or(|base| share > GAIN * base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grows(g: &mut Growth, f: Facts) -> bool {
        g.decide(f) == Decision::Grow
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A run at `rate`/s whose pool started at `size`, its clock at `t0`.
    fn growth(size: usize, rate: f64, t0: Instant) -> Growth {
        Growth::new(size, 10_000, rate, t0)
    }

    /// One request a millisecond since `now`'s ms `n`: `issued` is `n × rate / 1000`.
    fn facts(
        now: Instant,
        size: usize,
        service_ms: Option<u64>,
        issued: u64,
        answered: u64,
    ) -> Facts {
        Facts {
            now,
            size,
            late: Duration::ZERO,
            service: service_ms.map(ms),
            issued,
            answered,
        }
    }

    /// Feeds `g` the millisecond ticks of `span` (ms after `t0`): `issued(ms)` requests sent
    /// so far, `answered(ms, size)` answered so far, and at each tick one request that found
    /// every connection busy; opens what it allows. Returns the pool's size at the end.
    fn drive(
        g: &mut Growth,
        t0: Instant,
        mut size: usize,
        span: std::ops::Range<u64>,
        service_ms: Option<u64>,
        issued: impl Fn(u64) -> u64,
        mut answered: impl FnMut(u64, usize) -> u64,
    ) -> usize {
        for n in span {
            let count = answered(n, size);
            if grows(g, facts(t0 + ms(n), size, service_ms, issued(n), count)) {
                size += 1;
            }
        }
        size
    }

    /// Answers of a 100 ms target: each connection answers ten a second, up to 1,000/s.
    fn hundred_ms_answers() -> impl FnMut(u64, usize) -> u64 {
        let mut answered = 0.0;
        move |_, size| {
            answered += (size as f64 / 100.0).min(1.0);
            answered as u64
        }
    }

    #[test]
    fn a_slow_target_gets_the_connections_it_needs() {
        // 1,000/s at 100 ms needs about 100 connections; the pool starts at 16.
        let t0 = Instant::now();
        let mut g = growth(16, 1000.0, t0);
        // Before any answer, every request sent is in flight: each one may open a connection.
        let size = drive(&mut g, t0, 16, 1..100, None, |n| n, |_, _| 0);
        assert!(size >= 64, "{size}");
        // Then twice the connections answer twice as often, up to the rate.
        let size = drive(
            &mut g,
            t0,
            size,
            100..2_000,
            Some(100),
            |n| n,
            hundred_ms_answers(),
        );
        assert!((100..=200).contains(&size), "{size}");
    }

    #[test]
    fn a_fast_target_near_its_capacity_gets_at_most_two_doublings() {
        // A fast server near its capacity, offered 60,000/s: 0.7 ms answers would need ~42
        // connections, but a burst makes every one of 256 busy now and then, and a moment of
        // queueing raises the service time to 10 ms (need 600).
        for (answered_per_ms, expected, why) in [
            (
                60,
                512,
                "it keeps up: one free doubling, and no need for more",
            ),
            (
                50,
                1024,
                "50,000/s whatever the pool: the free doubling, one tried with nothing to \
                 compare, then the share answered did not move",
            ),
        ] {
            let t0 = Instant::now();
            let mut g = growth(256, 60_000.0, t0);
            let answered = |n: u64, _| n * answered_per_ms;
            let size = drive(&mut g, t0, 256, 1..4_000, Some(10), |n| n * 60, answered);
            assert_eq!(size, expected, "{why}");
        }
    }

    #[test]
    fn a_slow_target_known_from_the_start_is_grown_stage_by_stage() {
        // Answers of 100 ms from the first moment (a warm target), 1,000/s, 16 connections:
        // each doubling doubles the answers until the target keeps up.
        let t0 = Instant::now();
        let mut g = growth(16, 1000.0, t0);
        let size = drive(
            &mut g,
            t0,
            16,
            1..3_000,
            Some(100),
            |n| n,
            hundred_ms_answers(),
        );
        assert!((100..=200).contains(&size), "{size}");
    }

    #[test]
    fn a_ramp_is_not_taken_for_the_gain_of_more_connections() {
        // Offered 10/ms rising to 70/ms over 4 s, to a target that never answers a fifth of
        // its requests (they hold their connections until the timeout) and answers the rest
        // at a p90 of 100 ms, so Little's law allows thousands. The answer rate rises with the
        // ramp whatever the pool; the share answered stays at 80%: more connections do not
        // help, and the pool stops early.
        let t0 = Instant::now();
        let offered = |n: u64| n * 10 + n * n * 60 / 8_000;
        let mut g = growth(256, 70_000.0, t0);
        let size = drive(&mut g, t0, 256, 1..4_000, Some(100), offered, |n, _| {
            offered(n) * 4 / 5
        });
        assert!(size <= 1024, "{size}");
    }

    #[test]
    fn a_late_scheduler_or_a_full_cap_opens_nothing() {
        let t0 = Instant::now();
        let mut g = Growth::new(16, 20, 1000.0, t0);
        let mut f = facts(t0 + ms(5), 16, Some(100), 5, 0);
        f.late = ms(2);
        assert_eq!(g.decide(f), Decision::Late);
        f.late = Duration::ZERO;
        assert_eq!(g.decide(f), Decision::Grow);
        f.size = 20;
        assert_eq!(g.decide(f), Decision::Hold, "the cap");
    }

    #[test]
    fn a_fast_target_that_keeps_up_gets_none() {
        // 1 ms answers at 1,000/s need one connection: 16 are plenty.
        let t0 = Instant::now();
        let mut g = growth(16, 1000.0, t0);
        assert!(!grows(&mut g, facts(t0 + ms(50), 16, Some(1), 50, 50)));
    }
}
