//! Admission control at a server's door: a bound on requests in flight, fixed or adapted to the
//! machine. A request over the bound is answered at once with a no-bid and costs only its read;
//! nothing waits in a queue.
//!
//! The adaptive bound follows the AIMD scheme of Netflix's concurrency-limits, driven by what the
//! server runs out of, CPU (Google's "Handling Overload"), rather than by end-to-end latency: an
//! exchange's latency is mostly its bidders' and is capped by the deadline, and a latency
//! gradient needs a no-load baseline that a server started under overload never sees. Every
//! 50 ms the controller reads three signals: how busy the runtime's workers were, how long
//! admitted requests held their place against the shortest hold seen while there was room
//! ([`Aimd`] says why both), and how late its own tick ran (a backlog, unread requests
//! included). It cuts the bound when the first two say the server is full and the bound is
//! leaned on, or when two ticks running were late (as deep as the tick is late: a tenth for a
//! few milliseconds, half for a whole window), and grows it by a tenth while traffic
//! presses on it and there is room (doubling while the runtime is half idle). A bound traffic
//! does not lean on is never cut for the busy share, so a busy moment of unrelated work sheds
//! nothing; it follows the traffic down to four times the most in flight, so that a rise in
//! traffic or a stall meets a bound that binds. The bound is fractional (3.4 admits 4 in 10 of
//! the requests that find 3 in flight), because a server whose auctions finish in a
//! millisecond or two is full at a handful in flight. The shed requests' own cost counts in the busy time, so under heavy
//! overload the bound falls until admitted work plus shedding fit.
//!
//! The limit of this design: a handler that finishes in one poll (the bidder's decision) never
//! has two requests in flight however overloaded the process is, because the excess waits in
//! socket buffers, not in the server. For it a backlog takes the bound below one place, a share
//! of the requests that find nothing in flight, which grows back only while the runtime is under
//! its busy target (its refusals keep it busy too); but the bound learns of the backlog two
//! windows late. So the gate also refuses on the request path while the runtime has run
//! `max_busy_ms` without a pause ([`crate::busy_streak`]), which sees that backlog on the next
//! request. Past what refusals alone can keep up with (a refusal still costs the HTTP read and
//! answer, a fifth to a third of a bidder's decision) no gate helps: measured in BENCHMARKS.md,
//! "Overload". Upstream throttling (the exchange's per-bidder qps cap) is what protects it there.
//!
//! A fixed bound is there for operators who know their capacity; `off` turns the gate off.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::busy_streak::BusyStreak;

/// How the bound on requests in flight is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No bound beyond the connection cap.
    Off,
    /// `max_in_flight`, always.
    Fixed,
    /// Between `min_in_flight` and `max_in_flight`, adapted from measured latency.
    #[default]
    Adaptive,
}

/// How a shed request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum NoBidStyle {
    /// 204 No Content.
    #[default]
    #[serde(rename = "204")]
    NoContent,
    /// 200 with `{"id": <request id>, "nbr": <reason>}` (OpenRTB no-bid reasons).
    #[serde(rename = "nbr")]
    Nbr,
}

/// The `[admission]` section of a server's configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// `adaptive` (default), `fixed` or `off`.
    pub mode: Mode,
    /// Requests in flight at most (the fixed limit, or the adaptive one's ceiling). Default 1024.
    pub max_in_flight: u32,
    /// The adaptive limit's floor (at most `max_in_flight` in adaptive mode). Default 1.
    pub min_in_flight: u32,
    /// Requests with less time than this left before their deadline get an immediate no-bid:
    /// a bidder asked with less time cannot answer usefully. In milliseconds. Default 5.
    pub min_time_left_ms: u64,
    /// `"204"` (default) or `"nbr"`: how shed requests are answered.
    pub no_bid: NoBidStyle,
    /// Share of the runtime's worker time, 0.5 to 0.99, that the adaptive limit aims to keep
    /// busy at most. Default 0.9.
    pub busy_target: f64,
    /// Requests are refused while the runtime has run this long without a pause (no worker
    /// parked): a backlog, seen on the next request rather than the next windows
    /// ([`crate::busy_streak`]). In milliseconds; 0 turns the check off. Unset, each server
    /// picks its own ([`AdmissionConfig::or_max_busy_ms`]): a server whose handlers finish in
    /// one poll needs it, one whose requests wait on the network shows its backlog in flight.
    pub max_busy_ms: Option<u64>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            mode: Mode::Adaptive,
            max_in_flight: 1_024,
            min_in_flight: 1,
            min_time_left_ms: 5,
            no_bid: NoBidStyle::NoContent,
            busy_target: 0.9,
            max_busy_ms: None,
        }
    }
}

impl AdmissionConfig {
    /// Checks the values; the error names the key (under `[admission]`) and the rule.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if self.max_in_flight == 0 || self.max_in_flight > 1_000_000 {
            return Err(("admission.max_in_flight", "must be 1..=1000000"));
        }
        if self.min_in_flight == 0
            || (self.mode == Mode::Adaptive && self.min_in_flight > self.max_in_flight)
        {
            return Err((
                "admission.min_in_flight",
                "must be at least 1, and in adaptive mode at most admission.max_in_flight",
            ));
        }
        if self.min_time_left_ms > 10_000 {
            return Err(("admission.min_time_left_ms", "must be at most 10000"));
        }
        if !(self.busy_target >= 0.5 && self.busy_target <= 0.99) {
            return Err(("admission.busy_target", "must be 0.5..=0.99"));
        }
        if self.max_busy_ms.is_some_and(|ms| ms > 10_000) {
            return Err((
                "admission.max_busy_ms",
                "must be at most 10000 (0 turns it off)",
            ));
        }
        Ok(())
    }

    pub fn min_time_left(&self) -> Duration {
        Duration::from_millis(self.min_time_left_ms)
    }

    /// This configuration with `max_busy_ms` set to `ms` unless the file set it.
    #[must_use]
    pub fn or_max_busy_ms(mut self, ms: u64) -> AdmissionConfig {
        self.max_busy_ms.get_or_insert(ms);
        self
    }

    /// The pause check's limit; zero (off) when unset or in `off` mode.
    pub fn max_busy(&self) -> Duration {
        match self.mode {
            Mode::Off => Duration::ZERO,
            Mode::Fixed | Mode::Adaptive => Duration::from_millis(self.max_busy_ms.unwrap_or(0)),
        }
    }
}

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
const LAGGING: f64 = 0.005;
/// Whether a tick `lag` seconds late counts as late.
fn is_late(lag: f64) -> bool {
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

/// The gate: admits a request when fewer than the limit are in flight.
#[derive(Debug)]
pub struct Admission {
    config: AdmissionConfig,
    in_flight: AtomicU32,
    /// The limit in 256ths of a place ([`Aimd::limit_x256`]); `u32::MAX` when off.
    limit_x256: AtomicU32,
    /// Requests that found the limit's whole part in flight, for spreading its fraction.
    at_boundary: AtomicU32,
    /// Most in flight at once since the controller last looked.
    peak: AtomicU32,
    admitted: AtomicU64,
    shed: AtomicU64,
    late: AtomicU64,
    /// Last busy share the controller saw, in thousandths.
    busy_milli: AtomicU64,
    /// How late the controller's last tick ran, in microseconds, and how many windows ran
    /// later than [`LAGGING`].
    lag_micros: AtomicU64,
    lagging_windows: AtomicU64,
    /// Tickets dropped, and their summed hold time in nanoseconds, since the controller last
    /// looked.
    released: AtomicU64,
    held_nanos: AtomicU64,
    /// Refuses while the runtime has gone `max_busy_ms` without a pause.
    streak: BusyStreak,
}

/// An admitted request's place; dropping it frees the place.
#[derive(Debug)]
pub struct Ticket<'a> {
    gate: &'a Admission,
    since: Instant,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let held = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.gate.held_nanos.fetch_add(held, Relaxed);
        self.gate.released.fetch_add(1, Relaxed);
        self.gate.in_flight.fetch_sub(1, Relaxed);
    }
}

impl Admission {
    /// A gate; in `adaptive` mode, call [`Admission::run_controller`] on a task to adapt it.
    pub fn new(config: AdmissionConfig) -> Admission {
        let limit_x256 = match config.mode {
            Mode::Off => u32::MAX,
            // max_in_flight is at most 10^6 (validated), so this does not saturate.
            Mode::Fixed => config.max_in_flight.saturating_mul(256),
            Mode::Adaptive => Aimd::new(
                config.min_in_flight,
                config.max_in_flight,
                config.busy_target,
            )
            .limit_x256(),
        };
        let streak = BusyStreak::new(config.max_busy());
        Admission {
            config,
            in_flight: AtomicU32::new(0),
            limit_x256: AtomicU32::new(limit_x256),
            at_boundary: AtomicU32::new(0),
            peak: AtomicU32::new(0),
            admitted: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            late: AtomicU64::new(0),
            busy_milli: AtomicU64::new(0),
            lag_micros: AtomicU64::new(0),
            lagging_windows: AtomicU64::new(0),
            released: AtomicU64::new(0),
            held_nanos: AtomicU64::new(0),
            streak,
        }
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    /// A place for one request, or `None` (shed; counted) when the limit is reached or the
    /// runtime has been busy without a pause for longer than `max_busy_ms`.
    ///
    /// Build the gate on the runtime that serves it: the pause check reads that runtime's
    /// counters, and is off for a gate built outside one.
    pub fn try_enter(&self) -> Option<Ticket<'_>> {
        if self.streak.refuse() {
            self.shed.fetch_add(1, Relaxed);
            return None;
        }
        let before = self.in_flight.fetch_add(1, Relaxed);
        if !self.has_room(before) {
            self.in_flight.fetch_sub(1, Relaxed);
            self.shed.fetch_add(1, Relaxed);
            return None;
        }
        self.admitted.fetch_add(1, Relaxed);
        Some(self.ticket(before + 1))
    }

    /// Whether a request finding `in_flight` others may enter. A fractional limit admits that
    /// fraction of the requests that find exactly its whole part in flight, spread evenly by a
    /// Weyl sequence (no randomness on the request path): at three or four auctions in flight
    /// one whole place is a quarter of the throughput, too coarse a step to settle on.
    fn has_room(&self, in_flight: u32) -> bool {
        let limit = self.limit_x256.load(Relaxed);
        let (whole, part) = (limit >> 8, limit & 0xFF);
        if in_flight < whole || limit == u32::MAX {
            return true;
        }
        if in_flight > whole || part == 0 {
            return false;
        }
        let draw = self
            .at_boundary
            .fetch_add(1, Relaxed)
            .wrapping_mul(0x9E37_79B9)
            >> 24;
        draw < part
    }

    /// The ticket of a place just taken, `now_in_flight` counting it.
    fn ticket(&self, now_in_flight: u32) -> Ticket<'_> {
        self.peak.fetch_max(now_in_flight, Relaxed);
        Ticket {
            gate: self,
            since: Instant::now(),
        }
    }

    /// A place that is never refused, for work that must not be shed (a bidder's win and
    /// billing notices settle money already promised). It counts against the limit like any
    /// other, so while it is held, requests asking with [`Admission::try_enter`] are the ones
    /// shed: such work is served first when both compete.
    pub fn enter_first(&self) -> Ticket<'_> {
        let before = self.in_flight.fetch_add(1, Relaxed);
        self.ticket(before + 1)
    }

    /// Counts a request answered at once because too little of its time was left.
    pub fn count_late(&self) {
        self.late.fetch_add(1, Relaxed);
    }

    /// The answer to a request refused by [`Admission::try_enter`], in the configured style
    /// (`nbr` 1, "Technical Error", in OpenRTB 2.6 list 5.24).
    pub fn shed_answer(&self, body: &[u8]) -> http::Response<crate::Body> {
        crate::no_bid(self.config.no_bid, body, 1)
    }

    /// Counts and answers a request with too little time left (`nbr` 15, "Insufficient
    /// Auction Time").
    pub fn too_late_answer(&self, body: &[u8]) -> http::Response<crate::Body> {
        self.count_late();
        crate::no_bid(self.config.no_bid, body, 15)
    }

    /// Adapts the limit every [`WINDOW`] from the busy time of the current tokio runtime's
    /// workers, until the gate is dropped elsewhere (the task holds a weak reference). Does
    /// nothing unless the mode is `adaptive`.
    pub async fn run_controller(gate: std::sync::Weak<Admission>) {
        let Some(mode) = gate.upgrade().map(|g| g.config.mode) else {
            return;
        };
        if mode != Mode::Adaptive {
            return;
        }
        let metrics = tokio::runtime::Handle::current().metrics();
        let workers = metrics.num_workers().max(1);
        let busy_total = || -> Duration {
            (0..workers)
                .map(|w| metrics.worker_total_busy_duration(w))
                .sum()
        };
        let mut aimd = {
            let Some(g) = gate.upgrade() else { return };
            Aimd::new(
                g.config.min_in_flight,
                g.config.max_in_flight,
                g.config.busy_target,
            )
        };
        let mut ticker = tokio::time::interval(WINDOW);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_at = Instant::now();
        let mut last_busy = busy_total();
        loop {
            let due = ticker.tick().await;
            let Some(g) = gate.upgrade() else { return };
            let lag = due.elapsed();
            let now = Instant::now();
            let busy = busy_total();
            let wall = now.duration_since(last_at).as_secs_f64();
            if wall <= 0.0 {
                continue;
            }
            #[allow(clippy::cast_precision_loss)] // a handful of workers
            let share = busy.saturating_sub(last_busy).as_secs_f64() / (wall * workers as f64);
            (last_at, last_busy) = (now, busy);
            let peak = g.peak.swap(g.in_flight.load(Relaxed), Relaxed);
            let released = g.released.swap(0, Relaxed);
            let held = g.held_nanos.swap(0, Relaxed);
            #[allow(clippy::cast_precision_loss)] // nanoseconds of one window
            let mean_hold = (released > 0).then(|| held as f64 / released as f64 / 1e9);
            aimd.observe(Window {
                busy: share,
                peak_in_flight: peak,
                mean_hold,
                lag: lag.as_secs_f64(),
            });
            g.limit_x256.store(aimd.limit_x256(), Relaxed);
            g.busy_milli
                .store((share.clamp(0.0, 1.0) * 1000.0).round() as u64, Relaxed);
            g.lag_micros
                .store(u64::try_from(lag.as_micros()).unwrap_or(u64::MAX), Relaxed);
            if is_late(lag.as_secs_f64()) {
                g.lagging_windows.fetch_add(1, Relaxed);
            }
        }
    }

    /// Appends Prometheus text as `{prefix}_admission_*`.
    pub fn render(&self, prefix: &str, out: &mut String) {
        use std::fmt::Write;
        let shown_limit = self.limit().unwrap_or(-1.0);
        #[allow(clippy::cast_precision_loss)] // thousandths
        let busy = self.busy_milli.load(Relaxed) as f64 / 1000.0;
        #[allow(clippy::cast_precision_loss)] // microseconds
        let lag = self.lag_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(
            out,
            "# TYPE {prefix}_admission_limit gauge\n{prefix}_admission_limit {shown_limit}\n\
             # TYPE {prefix}_admission_in_flight gauge\n{prefix}_admission_in_flight {}\n\
             # TYPE {prefix}_runtime_busy_share gauge\n{prefix}_runtime_busy_share {busy}\n\
             # TYPE {prefix}_runtime_lag_seconds gauge\n{prefix}_runtime_lag_seconds {lag}\n\
             # TYPE {prefix}_admission_lagging_windows_total counter\n\
             {prefix}_admission_lagging_windows_total {}\n\
             # TYPE {prefix}_admission_busy_streak_sheds_total counter\n\
             {prefix}_admission_busy_streak_sheds_total {}\n\
             # TYPE {prefix}_admission_total counter\n\
             {prefix}_admission_total{{outcome=\"admitted\"}} {}\n\
             {prefix}_admission_total{{outcome=\"shed\"}} {}\n\
             {prefix}_admission_total{{outcome=\"too_little_time\"}} {}",
            self.in_flight.load(Relaxed),
            self.lagging_windows.load(Relaxed),
            self.streak.refused(),
            self.admitted.load(Relaxed),
            self.shed.load(Relaxed),
            self.late.load(Relaxed),
        );
    }

    pub fn shed_count(&self) -> u64 {
        self.shed.load(Relaxed)
    }

    pub fn late_count(&self) -> u64 {
        self.late.load(Relaxed)
    }

    /// The limit now, in places (fractional when adaptive); `None` when the gate is off.
    pub fn limit(&self) -> Option<f64> {
        let limit = self.limit_x256.load(Relaxed);
        (limit != u32::MAX).then(|| f64::from(limit) / 256.0)
    }
}

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

    fn config(mode: Mode, max: u32) -> AdmissionConfig {
        AdmissionConfig {
            mode,
            max_in_flight: max,
            min_in_flight: 1,
            ..AdmissionConfig::default()
        }
    }

    #[test]
    fn a_fixed_gate_admits_up_to_its_limit_and_frees_places() {
        let gate = Admission::new(config(Mode::Fixed, 2));
        let a = gate.try_enter().unwrap();
        let b = gate.try_enter().unwrap();
        assert!(gate.try_enter().is_none());
        drop(a);
        let c = gate.try_enter().unwrap();
        drop((b, c));
        assert_eq!(gate.shed_count(), 1);
        assert_eq!(gate.in_flight.load(Relaxed), 0);
    }

    #[test]
    fn work_entered_first_takes_places_from_requests_that_may_be_shed() {
        let gate = Admission::new(AdmissionConfig {
            mode: Mode::Fixed,
            max_in_flight: 2,
            ..AdmissionConfig::default()
        });
        let first = gate.enter_first();
        let second = gate.enter_first();
        let third = gate.enter_first();
        assert!(
            gate.try_enter().is_none(),
            "the limit is taken by work entered first"
        );
        drop(first);
        assert!(gate.try_enter().is_none(), "two places are still held");
        drop(second);
        let admitted = gate.try_enter();
        assert!(admitted.is_some(), "one place is free");
        drop((third, admitted));
    }

    #[test]
    fn a_fractional_limit_admits_its_fraction_of_the_requests_at_the_boundary() {
        let gate = Admission::new(config(Mode::Fixed, 8));
        gate.limit_x256.store(2 * 256 + 64, Relaxed); // 2.25 places
        let held = (gate.try_enter().unwrap(), gate.try_enter().unwrap());
        let mut admitted = 0;
        for _ in 0..1_000 {
            if let Some(t) = gate.try_enter() {
                admitted += 1;
                assert!(
                    gate.try_enter().is_none(),
                    "a third in flight leaves no room"
                );
                drop(t);
            }
        }
        // A quarter of the requests that found 2 in flight, spread evenly (Weyl sequence).
        assert!(
            (240..=260).contains(&admitted),
            "admitted {admitted} of 1000"
        );
        drop(held);
        assert_eq!(gate.limit(), Some(2.25));
        assert_eq!(Admission::new(config(Mode::Off, 1)).limit(), None);
    }

    #[test]
    fn off_admits_everything() {
        let gate = Admission::new(config(Mode::Off, 1));
        let tickets: Vec<_> = (0..10_000).map(|_| gate.try_enter().unwrap()).collect();
        assert_eq!(tickets.len(), 10_000);
    }

    #[test]
    fn configs_outside_their_ranges_name_the_key() {
        let mut c = AdmissionConfig::default();
        assert!(c.validate().is_ok());
        c.min_in_flight = 5_000;
        assert_eq!(c.validate().unwrap_err().0, "admission.min_in_flight");
        let c = AdmissionConfig {
            busy_target: f64::NAN,
            ..AdmissionConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "admission.busy_target");
        let c = AdmissionConfig {
            max_busy_ms: Some(10_001),
            ..AdmissionConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "admission.max_busy_ms");
    }

    #[test]
    fn the_pause_check_takes_the_servers_default_unless_set_and_is_off_with_the_gate() {
        let unset = AdmissionConfig::default();
        assert_eq!(
            unset.max_busy(),
            Duration::ZERO,
            "unset and no server default"
        );
        assert_eq!(
            unset.clone().or_max_busy_ms(10).max_busy(),
            Duration::from_millis(10)
        );
        let set = AdmissionConfig {
            max_busy_ms: Some(0),
            ..AdmissionConfig::default()
        };
        assert_eq!(
            set.or_max_busy_ms(10).max_busy(),
            Duration::ZERO,
            "the file wins"
        );
        let off = AdmissionConfig {
            mode: Mode::Off,
            max_busy_ms: Some(10),
            ..AdmissionConfig::default()
        };
        assert_eq!(
            off.max_busy(),
            Duration::ZERO,
            "mode off turns every check off"
        );
    }

    /// The gate on a real runtime: held busy past `max_busy_ms`, it refuses (counted as shed)
    /// with its bound far from full; after a pause it admits again.
    #[test]
    fn a_gate_refuses_while_its_runtime_runs_past_max_busy_without_a_pause() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let gate = Admission::new(AdmissionConfig {
                mode: Mode::Fixed,
                max_in_flight: 100,
                max_busy_ms: Some(5),
                ..AdmissionConfig::default()
            });
            assert!(gate.try_enter().is_some());
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            assert!(gate.try_enter().is_none(), "20 ms without a pause");
            assert_eq!(gate.shed_count(), 1);
            let mut text = String::new();
            gate.render("t", &mut text);
            assert!(
                text.contains("t_admission_busy_streak_sheds_total 1\n"),
                "{text}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(gate.try_enter().is_some(), "a pause ends the streak");
        });
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
