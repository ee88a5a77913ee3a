//! [`Aimd`]: the adaptive bound's arithmetic, pure. Fed one [`Window`] of readings every
//! [`WINDOW`] by the gate's controller task (`gate.rs`), it answers the new bound; it reads no
//! clock and touches no runtime, so every rule below is tested with plain numbers.

use std::time::Duration;

/// The adaptive limit's arithmetic, pure: fed one reading per window.
///
/// Two signals, because neither is enough alone. The runtime's busy share says the CPU is full,
/// but on an overloaded server shedding alone keeps it full, so cutting on it alone drives the
/// limit to its floor. How long admitted requests hold their place, against the shortest hold
/// seen, says whether admitted work is being slowed: the limit is cut only when both say so,
/// by as much as the hold time has stretched (between a tenth and a half), and it may grow
/// while holds are as short as ever even on a busy runtime.
#[derive(Debug, Clone)]
pub struct Aimd {
    limit: f64,
    min: f64,
    max: f64,
    target: f64,
    /// Shortest mean hold seen (seconds), creeping up slowly so that it follows a lasting change.
    base_hold: Option<f64>,
    /// Whether the previous window's tick was late too.
    lagged_before: bool,
}

/// Below `target - SLACK` busy, the limit may grow; between the two it holds.
const SLACK: f64 = 0.1;
/// Share the limit keeps per window while the runtime is too busy: the gentlest cut.
const DECREASE: f64 = 0.9;
/// The strongest cut in one window.
const STRONGEST_DECREASE: f64 = 0.5;
/// Holds stretched by more than this (against the base) mean admitted work is slowed.
const SLOWED: f64 = 1.25;
/// A controller tick this late (seconds) means work is waiting for the runtime: a backlog. A
/// tick on a busy but keeping-up runtime waits a millisecond or two (the timer's resolution and
/// the batch in hand).
pub(crate) const LAGGING: f64 = 0.005;
/// Whether a tick `lag` seconds late counts as late.
pub(crate) fn is_late(lag: f64) -> bool {
    lag.is_finite() && lag > LAGGING
}

/// Share the limit grows by per window while traffic presses on it and there is room, and the
/// least it grows by. Proportional rather than Netflix's square root: with instant bidders an
/// exchange core is full at three or four auctions in flight, where a step of √limit (+1.8 at 3)
/// overshoots by half and refills the runtime every other window.
const GROWTH: f64 = 0.1;
const MIN_GROWTH: f64 = 0.25;
/// Holds within this of the base mean admitted work runs at full speed.
const UNSLOWED: f64 = 1.1;
/// How fast the base hold creeps up per window: quickly while the runtime has room (the true
/// cost of a request is seen then), slowly while it is busy (holds are inflated then).
const BASE_CREEP_IDLE: f64 = 1.01;
const BASE_CREEP_BUSY: f64 = 1.0001;
/// A bound traffic does not lean on follows it down, by this share per window, to this many
/// times the most in flight: a bound far above the traffic is no bound, and a rise in traffic
/// or a stall would fill the runtime with admitted work before the bound came down. Four times
/// lets traffic quadruple between two windows without a request shed for it.
const UNLEANED_DECAY: f64 = 0.9;
const HEADROOM: f64 = 4.0;
/// Below this busy share a pressed bound doubles per window (slow start), since it protects
/// nothing: after a quiet spell has brought it down to a few times a trickle, traffic that
/// returns at full rate is then shed for a few windows, not for seconds of tenths.
const SLOW_START_BELOW: f64 = 0.5;
/// The lowest bound a backlog can bring: a sixteenth of the requests that find nothing in
/// flight are admitted.
const BACKLOG_FLOOR: f64 = 1.0 / 16.0;
/// How much a bound under one place grows per window once the backlog has cleared and the
/// runtime has room: from the floor back to one place in a dozen windows.
const UNDER_ONE_GROWTH: f64 = 1.25;

impl Aimd {
    pub fn new(min: u32, max: u32, target: f64) -> Aimd {
        // Start high enough not to shed a healthy server's first burst.
        let start = f64::from(max).min(f64::from(min).max(256.0));
        Aimd {
            limit: start,
            min: f64::from(min),
            max: f64::from(max),
            target,
            base_hold: None,
            lagged_before: false,
        }
    }

    pub fn limit(&self) -> u32 {
        // In range by construction; the cast saturates anyway.
        self.limit.round() as u32
    }

    /// The limit in 256ths of a place, as the gate uses it: a limit of 3.4 admits a request
    /// while fewer than 3 are in flight, and 4 in 10 of those that find exactly 3.
    pub fn limit_x256(&self) -> u32 {
        (self.limit * 256.0).round() as u32
    }

    /// One window with only the busy share (0..=1) and the most requests that were in flight
    /// at once. Returns the new limit. A shorthand for the tests.
    #[cfg(test)]
    pub fn update(&mut self, busy: f64, peak_in_flight: u32) -> u32 {
        self.observe(Window {
            busy,
            peak_in_flight,
            ..Window::default()
        })
    }

    /// One window's readings. Returns the new limit.
    pub fn observe(&mut self, w: Window) -> u32 {
        let Window {
            busy,
            peak_in_flight,
            mean_hold,
            lag,
        } = w;
        if !busy.is_finite() || busy < 0.0 {
            return self.limit();
        }
        let stretch = mean_hold
            .filter(|h| h.is_finite() && *h > 0.0)
            .and_then(|h| self.stretch(h, busy));
        // Work waiting this long for the runtime, two windows running, is a backlog whatever the
        // other signals say: requests queued before they are read show up here and nowhere
        // else. One late tick alone is a stall (other work on a shared runtime, the VM), not a
        // backlog, and shedding for it would cost answers for nothing.
        let late_now = is_late(lag);
        let lagging = late_now && self.lagged_before;
        self.lagged_before = late_now;
        let peak = f64::from(peak_in_flight);
        let pressed = peak >= self.limit * 0.9;
        // Only cut a bound that traffic actually leans on: a runtime busy with something else
        // (a burst of connections, the process's other work) is no reason to shed a handful.
        let leaned_on = peak >= self.limit * 0.5;
        let slowed = stretch.is_none_or(|s| s > SLOWED);
        if leaned_on && ((busy > self.target && slowed) || lagging) {
            let mut keep =
                stretch.map_or(DECREASE, |s| (1.0 / s).clamp(STRONGEST_DECREASE, DECREASE));
            if lagging {
                // As deep as the backlog: a tick a few milliseconds late trims a tenth, one a
                // whole window late halves the bound. Holds do not stretch while the excess
                // waits unread, so they alone would cut a tenth a window and let the backlog
                // build for seconds (measured on the bidder at twice its capacity).
                let window = WINDOW.as_secs_f64();
                keep = keep.min((window / (window + lag)).clamp(STRONGEST_DECREASE, DECREASE));
            }
            // A backlog may take the bound below one place: a share of the requests that find
            // nothing in flight. A handler that finishes in one poll (the bidder's decision)
            // never has two in flight, so only a share sheds its excess; otherwise a cut
            // stops at the floor and never raises a bound already under it.
            let floor = if lagging {
                BACKLOG_FLOOR
            } else {
                self.min.min(self.limit)
            };
            self.limit = (self.limit * keep).max(floor);
        } else if lagging {
            // A backlog under a bound far above what is in flight (the start's 256, where a
            // few places fill the runtime): bring the bound down to twice the traffic, shedding
            // nothing in flight, so that it binds once holds stretch, long before they would
            // have leaned on 256.
            self.limit = (peak * 2.0).max(self.min).min(self.limit);
        } else if pressed && !late_now && busy < self.target * SLOW_START_BELOW {
            self.limit = (self.limit * 2.0).min(self.max);
        } else if !late_now && self.limit < 1.0 {
            // Only a backlog sets a bound under one place. Once it has cleared, the share grows
            // back whether or not a window's few admitted requests pressed on it, but only
            // while the runtime is under its busy target: the requests it refuses keep it
            // busy too, and a share grown into a full runtime rebuilds the backlog within a
            // few windows (measured: the bidder at twice its capacity cycled so, and answered
            // most requests late).
            if busy < self.target {
                self.limit = (self.limit * UNDER_ONE_GROWTH).min(self.max);
            }
        } else if !late_now
            && pressed
            && (busy < self.target - SLACK || stretch.is_some_and(|s| s < UNSLOWED))
        {
            self.limit = (self.limit + (self.limit * GROWTH).max(MIN_GROWTH)).min(self.max);
        } else if !leaned_on && peak_in_flight > 0 {
            // An idle window (nothing in flight) says nothing about the traffic: left alone.
            let follow = (self.limit * UNLEANED_DECAY)
                .max(peak * HEADROOM)
                .max(self.min);
            self.limit = follow.min(self.limit);
        }
        self.limit()
    }

    /// How stretched `hold` is against the base, which it also updates; `None` until a
    /// window with room has shown what a request costs (a hold seen on a busy runtime may
    /// already be stretched, and would make a false base).
    fn stretch(&mut self, hold: f64, busy: f64) -> Option<f64> {
        let busy = busy > self.target;
        let base = match self.base_hold {
            None if busy => return None,
            None => hold,
            Some(b) => {
                let creep = if busy {
                    BASE_CREEP_BUSY
                } else {
                    BASE_CREEP_IDLE
                };
                (b * creep).min(hold)
            }
        };
        self.base_hold = Some(base);
        Some(hold / base)
    }
}

/// What the controller saw in one window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// Share of the runtime's worker time spent busy, 0..=1.
    pub busy: f64,
    /// Most requests in flight at once.
    pub peak_in_flight: u32,
    /// Mean time (seconds) the requests that ended in the window held their place; `None`
    /// when none ended.
    pub mean_hold: Option<f64>,
    /// How late (seconds) the controller's own tick ran: how long ready work waits for the
    /// runtime, including requests not yet read.
    pub lag: f64,
}

/// Length of one window of the adaptive limit.
pub const WINDOW: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    fn win(busy: f64, peak_in_flight: u32, mean_hold: Option<f64>) -> Window {
        Window {
            busy,
            peak_in_flight,
            mean_hold,
            lag: 0.0,
        }
    }

    /// A server whose runtime is busy in proportion to what it runs: `cost` of a worker per
    /// admitted request in flight, plus a fixed `shedding` share for answering the excess.
    fn busy(in_flight: u32, cost: f64, shedding: f64) -> f64 {
        (f64::from(in_flight) * cost + shedding).min(1.0)
    }

    #[test]
    fn under_overload_the_limit_settles_where_the_runtime_is_just_below_its_target() {
        // 100 in flight would fill the runtime; shedding the excess takes 20% of it.
        let mut a = Aimd::new(4, 1_024, 0.9);
        let mut seen = Vec::new();
        for _ in 0..400 {
            let l = a.limit();
            seen.push(a.update(busy(l, 0.01, 0.2), l));
        }
        let tail = &seen[300..];
        let (lo, hi) = (*tail.iter().min().unwrap(), *tail.iter().max().unwrap());
        // Busy at most 0.9 means 70 in flight; it should hover below that, not collapse.
        assert!(lo >= 45 && hi <= 72, "limit wandered over {lo}..{hi}");
    }

    /// The model server of `busy`, also giving the mean hold: work stretches in proportion
    /// to how far demand exceeds the runtime.
    fn overloaded(in_flight: u32, cost: f64, shedding: f64, base_hold: f64) -> (f64, f64) {
        let demand = f64::from(in_flight) * cost + shedding;
        (demand.min(1.0), base_hold * demand.max(1.0))
    }

    #[test]
    fn shedding_that_keeps_the_runtime_busy_does_not_drive_the_limit_to_its_floor() {
        // Shedding the excess takes half the runtime; 50 admitted requests fill the rest. On
        // busy share alone the limit would fall to its floor (4), and goodput with it.
        let mut a = Aimd::new(4, 1_024, 0.9);
        // A quiet start shows what a request costs.
        for _ in 0..5 {
            a.observe(win(0.3, 10, Some(0.002)));
        }
        let mut seen = Vec::new();
        for _ in 0..400 {
            let l = a.limit();
            let (busy, hold) = overloaded(l, 0.01, 0.5, 0.002);
            seen.push(a.observe(win(busy, l, Some(hold))));
        }
        // From 256, the stretched holds cut by up to a half per window: fast.
        let first_below = seen.iter().position(|&l| l <= 80).unwrap();
        assert!(
            first_below <= 4,
            "took {first_below} windows: {:?}",
            &seen[..8]
        );
        let tail = &seen[300..];
        let (lo, hi) = (*tail.iter().min().unwrap(), *tail.iter().max().unwrap());
        // 50 in flight fill the runtime; holds stretched up to SLOWED are tolerated (70 here),
        // and the floor (4) would be a collapse.
        let stretched = overloaded(hi, 0.01, 0.5, 0.002).1 / 0.002;
        assert!(
            lo >= 40 && stretched <= SLOWED,
            "limit wandered over {lo}..{hi}"
        );
    }

    #[test]
    fn a_backlog_cuts_a_limit_that_the_other_signals_would_keep() {
        // Requests waiting unread slow nothing that was admitted, and a runtime catching up
        // may report itself less busy than its target: only the late tick shows the backlog.
        let mut a = Aimd::new(1, 1_024, 0.9);
        a.observe(win(0.3, 2, Some(0.002)));
        let start = a.limit();
        let late = |peak| Window {
            lag: 0.02,
            ..win(0.85, peak, Some(0.002))
        };
        assert_eq!(a.observe(late(start)), start, "one late tick is a stall");
        assert!(a.observe(late(start)) < start, "two running are a backlog");
        // Not leaned on, the bound comes down to twice the traffic in flight, so that it binds
        // as soon as holds stretch.
        a.observe(late(6));
        assert_eq!(a.limit(), 12);
        // A stall between on-time ticks changes nothing.
        let kept = a.limit();
        for _ in 0..10 {
            a.observe(win(0.85, 6, Some(0.002)));
            a.observe(late(6));
        }
        assert_eq!(a.limit(), kept);
    }

    #[test]
    fn a_backlog_cuts_as_deep_as_the_tick_is_late() {
        for (lag, keep) in [(0.006, 0.9), (0.02, 0.05 / 0.07), (0.05, 0.5), (0.5, 0.5)] {
            let mut a = Aimd::new(1, 1_024, 0.9);
            let w = Window {
                lag,
                // Holds as short as ever: only the lag says the server is behind.
                ..win(0.95, 256, Some(0.0001))
            };
            a.observe(win(0.3, 1, Some(0.0001)));
            a.observe(w);
            let before = f64::from(a.limit_x256());
            a.observe(w);
            let kept = f64::from(a.limit_x256()) / before;
            assert!(
                (kept - keep).abs() < 0.01,
                "lag {lag}: kept {kept:.3}, not {keep:.3}"
            );
        }
    }

    #[test]
    fn a_backlog_on_a_one_poll_server_sheds_a_share_and_the_share_comes_back() {
        // A server whose handler finishes in one poll: never more than one in flight, and a
        // backlog of unread requests shows only in the late ticks.
        let mut a = Aimd::new(1, 1_024, 0.9);
        let backlog = Window {
            lag: 0.05,
            ..win(1.0, 1, Some(0.0001))
        };
        for _ in 0..200 {
            a.observe(backlog);
        }
        assert_eq!(a.limit_x256(), 16, "down to its sixteenth of a place");
        // The backlog gone but the runtime at its busy target (the refusals keep it busy):
        // the share holds, since growing it would refill the runtime.
        for _ in 0..20 {
            a.observe(win(0.95, 1, Some(0.0001)));
        }
        assert_eq!(a.limit_x256(), 16, "held while the runtime is full");
        // With room: back over one place within a dozen windows, with or without requests
        // admitted in them.
        let mut windows = 0;
        while a.limit_x256() < 256 {
            let w = if windows % 2 == 0 {
                win(0.6, 0, None)
            } else {
                win(0.6, 1, Some(0.0001))
            };
            a.observe(w);
            windows += 1;
        }
        assert!(windows <= 13, "{windows} windows");
        // Without a backlog, a cut never goes below the configured floor.
        let mut b = Aimd::new(1, 1_024, 0.9);
        for _ in 0..200 {
            let l = b.limit();
            b.observe(win(1.0, l, Some(0.01)));
        }
        assert_eq!(b.limit_x256(), 256);
    }

    #[test]
    fn a_backlog_stops_growth_that_room_would_allow() {
        let mut a = Aimd::new(1, 1_024, 0.9);
        a.observe(win(0.3, 2, Some(0.002)));
        let start = a.limit_x256();
        for _ in 0..10 {
            let w = Window {
                // Pressed on but unbusy with short holds: it would grow, if not for the lag.
                lag: 0.006,
                ..win(0.5, start.div_ceil(256), Some(0.002))
            };
            a.observe(w);
        }
        assert!(a.limit_x256() <= start);
    }

    #[test]
    fn small_limits_grow_in_fractions_of_a_place() {
        let mut a = Aimd::new(1, 1_024, 0.9);
        // Down to about 3 places on a saturated runtime with stretched holds.
        a.observe(win(0.3, 2, Some(0.001)));
        while a.limit() > 3 {
            let l = a.limit();
            a.observe(win(1.0, l, Some(0.0015)));
        }
        let from = f64::from(a.limit_x256()) / 256.0;
        a.observe(win(0.5, from.ceil() as u32, Some(0.001)));
        let to = f64::from(a.limit_x256()) / 256.0;
        // A tenth, not a square root (+1.7 at 3 would overshoot what fills the runtime).
        assert!(to > from && to <= from * 1.11, "{from:.2} -> {to:.2}");
    }

    #[test]
    fn a_server_overloaded_from_its_start_cuts_on_busy_share_alone() {
        // No quiet window yet: its holds may be stretched already, so they teach nothing.
        let mut a = Aimd::new(4, 1_024, 0.9);
        for _ in 0..10 {
            let l = a.limit();
            let (busy, hold) = overloaded(l, 0.01, 0.5, 0.002);
            a.observe(win(busy, l, Some(hold)));
        }
        assert_eq!(a.limit(), (256.0 * 0.9_f64.powi(10)).round() as u32);
    }

    #[test]
    fn holds_as_short_as_ever_let_a_busy_runtime_admit_more() {
        let mut a = Aimd::new(4, 1_024, 0.9);
        a.observe(win(0.3, 10, Some(0.002)));
        let start = a.limit();
        for _ in 0..5 {
            let l = a.limit();
            a.observe(win(1.0, l, Some(0.002)));
        }
        assert!(a.limit() > start, "limit {} did not grow", a.limit());
    }

    #[test]
    fn a_bound_traffic_does_not_lean_on_follows_it_down_to_four_times_the_traffic() {
        let mut a = Aimd::new(1, 1_024, 0.9);
        let mut seen = Vec::new();
        for _ in 0..100 {
            seen.push(a.limit_x256());
            a.update(0.1, 3);
        }
        // A tenth per window from 256, never under four times the three in flight.
        assert!(seen.windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
        assert_eq!(a.limit(), 12);
        assert_eq!(seen[1], (256.0 * 0.9 * 256.0_f64).round() as u32);
        // Idle windows say nothing about the traffic.
        for _ in 0..100 {
            a.update(0.0, 0);
        }
        assert_eq!(a.limit(), 12);
        // Traffic that quadruples finds room, and the pressed bound doubles on an idle runtime.
        assert_eq!(a.update(0.2, 12), 24);
        assert_eq!(a.update(0.2, 24), 48);
        // A busy runtime grows it by a tenth only.
        assert_eq!(a.update(0.75, 48), 53);
    }

    #[test]
    fn when_the_overload_ends_the_limit_grows_back() {
        let mut a = Aimd::new(4, 1_024, 0.9);
        for _ in 0..60 {
            let l = a.limit();
            a.update(1.0, l);
        }
        let low = a.limit();
        assert_eq!(
            low, 4,
            "a saturated runtime should push the limit to its floor"
        );
        for _ in 0..100 {
            let l = a.limit();
            a.update(0.3, l);
        }
        assert!(
            a.limit() > 200,
            "limit {} did not recover from {low}",
            a.limit()
        );
    }

    #[test]
    fn a_busy_runtime_with_little_in_flight_is_not_cut_below_four_times_its_traffic() {
        // Busy with something else (twenty in flight could not fill it): the bound follows
        // the traffic, as on a quiet server, and is never cut for the busy share.
        let mut a = Aimd::new(4, 1_024, 0.9);
        for _ in 0..100 {
            assert!(a.update(1.0, 20) >= 80);
        }
        assert_eq!(a.limit(), 80);
    }

    #[test]
    fn garbage_samples_change_nothing() {
        let mut a = Aimd::new(4, 100, 0.9);
        let before = a.limit();
        assert_eq!(a.update(f64::NAN, 100), before);
        assert_eq!(a.update(-1.0, 100), before);
    }
}
