//! Admission control at a server's door: a bound on requests in flight, fixed or adapted to the
//! machine. A request over the bound is answered at once with a no-bid and costs only its read;
//! nothing waits in a queue.
//!
//! The adaptive bound follows the AIMD scheme of Netflix's concurrency-limits, driven by how busy
//! the server's runtime is rather than by request latency. In an exchange, latency is mostly the
//! bidders' (a slow bidder is not our overload, and an auction's latency is capped by its
//! deadline anyway), and a latency gradient needs a no-load baseline that a server started under
//! overload never sees. What the server actually runs out of is CPU, as Google's "Handling
//! Overload" notes; when its runtime's workers are busy nearly all the time, every request waits
//! for them, admitted or shed. So every 50 ms the controller reads the workers' busy time:
//! above the target share, while at least half the bound is in use, it cuts the bound by a
//! tenth; well below it, and when traffic presses on the bound, it adds about the bound's square
//! root. A bound traffic does not lean on is left alone, so a busy moment of unrelated work
//! never sheds a handful of requests. The limit of this design: a handler that finishes in one
//! poll (the bidder's decision) keeps only a few requests in flight however overloaded the
//! process is, because the excess waits in socket buffers, not in the server; such a server is
//! protected by its deadline check and the connection cap more than by this bound. The shed requests' own cost counts in
//! the busy time, so at 5x load the bound falls until admitted work plus shedding fit.
//!
//! A fixed bound is there for operators who know their capacity; `off` turns the gate off.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::Deserialize;

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
    /// The adaptive limit's floor (at most `max_in_flight` in adaptive mode). Default 4.
    pub min_in_flight: u32,
    /// Requests with less time than this left before their deadline get an immediate no-bid:
    /// a bidder asked with less time cannot answer usefully. In milliseconds. Default 5.
    pub min_time_left_ms: u64,
    /// `"204"` (default) or `"nbr"`: how shed requests are answered.
    pub no_bid: NoBidStyle,
    /// Share of the runtime's worker time, 0.5 to 0.99, that the adaptive limit aims to keep
    /// busy at most. Default 0.9.
    pub busy_target: f64,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            mode: Mode::Adaptive,
            max_in_flight: 1_024,
            min_in_flight: 4,
            min_time_left_ms: 5,
            no_bid: NoBidStyle::NoContent,
            busy_target: 0.9,
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
        Ok(())
    }

    pub fn min_time_left(&self) -> Duration {
        Duration::from_millis(self.min_time_left_ms)
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
}

/// Below `target - SLACK` busy, the limit may grow; between the two it holds.
const SLACK: f64 = 0.1;
/// Share the limit keeps per window while the runtime is too busy: the gentlest cut.
const DECREASE: f64 = 0.9;
/// The strongest cut in one window.
const STRONGEST_DECREASE: f64 = 0.5;
/// Holds stretched by more than this (against the base) mean admitted work is slowed.
const SLOWED: f64 = 1.25;
/// Holds within this of the base mean admitted work runs at full speed.
const UNSLOWED: f64 = 1.1;
/// How fast the base hold creeps up per window: quickly while the runtime has room (the true
/// cost of a request is seen then), slowly while it is busy (holds are inflated then).
const BASE_CREEP_IDLE: f64 = 1.01;
const BASE_CREEP_BUSY: f64 = 1.0001;

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
        }
    }

    pub fn limit(&self) -> u32 {
        // In range by construction; the cast saturates anyway.
        self.limit.round() as u32
    }

    /// One window without hold times: the share of worker time spent busy (0..=1) and the most
    /// requests that were in flight at once. Returns the new limit.
    pub fn update(&mut self, busy: f64, peak_in_flight: u32) -> u32 {
        self.observe(busy, peak_in_flight, None)
    }

    /// One window: busy share, peak in flight, and the mean time (seconds) the requests that
    /// ended in the window held their place (`None` when none ended). Returns the new limit.
    pub fn observe(&mut self, busy: f64, peak_in_flight: u32, mean_hold: Option<f64>) -> u32 {
        if !busy.is_finite() || busy < 0.0 {
            return self.limit();
        }
        let stretch = mean_hold
            .filter(|h| h.is_finite() && *h > 0.0)
            .and_then(|h| self.stretch(h, busy));
        let peak = f64::from(peak_in_flight);
        let pressed = peak >= self.limit * 0.9;
        // Only cut a bound that traffic actually leans on: a runtime busy with something else
        // (a burst of connections, the process's other work) is no reason to shed a handful.
        let leaned_on = peak >= self.limit * 0.5;
        let slowed = stretch.is_none_or(|s| s > SLOWED);
        if busy > self.target && leaned_on && slowed {
            let keep = stretch.map_or(DECREASE, |s| (1.0 / s).clamp(STRONGEST_DECREASE, DECREASE));
            self.limit = (self.limit * keep).max(self.min);
        } else if pressed && (busy < self.target - SLACK || stretch.is_some_and(|s| s < UNSLOWED)) {
            self.limit = (self.limit + self.limit.sqrt().max(1.0)).min(self.max);
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

/// Length of one window of the adaptive limit.
pub const WINDOW: Duration = Duration::from_millis(50);

/// The gate: admits a request when fewer than the limit are in flight.
#[derive(Debug)]
pub struct Admission {
    config: AdmissionConfig,
    in_flight: AtomicU32,
    limit: AtomicU32,
    /// Most in flight at once since the controller last looked.
    peak: AtomicU32,
    admitted: AtomicU64,
    shed: AtomicU64,
    late: AtomicU64,
    /// Last busy share the controller saw, in thousandths.
    busy_milli: AtomicU64,
    /// Tickets dropped, and their summed hold time in nanoseconds, since the controller last
    /// looked.
    released: AtomicU64,
    held_nanos: AtomicU64,
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
        let limit = match config.mode {
            Mode::Off => u32::MAX,
            Mode::Fixed => config.max_in_flight,
            Mode::Adaptive => Aimd::new(
                config.min_in_flight,
                config.max_in_flight,
                config.busy_target,
            )
            .limit(),
        };
        Admission {
            config,
            in_flight: AtomicU32::new(0),
            limit: AtomicU32::new(limit),
            peak: AtomicU32::new(0),
            admitted: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            late: AtomicU64::new(0),
            busy_milli: AtomicU64::new(0),
            released: AtomicU64::new(0),
            held_nanos: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    /// A place for one request, or `None` (shed; counted) when the limit is reached.
    pub fn try_enter(&self) -> Option<Ticket<'_>> {
        let before = self.in_flight.fetch_add(1, Relaxed);
        if before >= self.limit.load(Relaxed) {
            self.in_flight.fetch_sub(1, Relaxed);
            self.shed.fetch_add(1, Relaxed);
            return None;
        }
        self.admitted.fetch_add(1, Relaxed);
        Some(self.ticket(before + 1))
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
            ticker.tick().await;
            let Some(g) = gate.upgrade() else { return };
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
            let limit = aimd.observe(share, peak, mean_hold);
            g.limit.store(limit, Relaxed);
            g.busy_milli
                .store((share.clamp(0.0, 1.0) * 1000.0).round() as u64, Relaxed);
        }
    }

    /// Appends Prometheus text as `{prefix}_admission_*`.
    pub fn render(&self, prefix: &str, out: &mut String) {
        use std::fmt::Write;
        let limit = self.limit.load(Relaxed);
        let shown_limit = if limit == u32::MAX {
            -1
        } else {
            i64::from(limit)
        };
        #[allow(clippy::cast_precision_loss)] // thousandths
        let busy = self.busy_milli.load(Relaxed) as f64 / 1000.0;
        let _ = writeln!(
            out,
            "# TYPE {prefix}_admission_limit gauge\n{prefix}_admission_limit {shown_limit}\n\
             # TYPE {prefix}_admission_in_flight gauge\n{prefix}_admission_in_flight {}\n\
             # TYPE {prefix}_runtime_busy_share gauge\n{prefix}_runtime_busy_share {busy}\n\
             # TYPE {prefix}_admission_total counter\n\
             {prefix}_admission_total{{outcome=\"admitted\"}} {}\n\
             {prefix}_admission_total{{outcome=\"shed\"}} {}\n\
             {prefix}_admission_total{{outcome=\"too_little_time\"}} {}",
            self.in_flight.load(Relaxed),
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

    pub fn limit(&self) -> u32 {
        self.limit.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            a.observe(0.3, 10, Some(0.002));
        }
        let mut seen = Vec::new();
        for _ in 0..400 {
            let l = a.limit();
            let (busy, hold) = overloaded(l, 0.01, 0.5, 0.002);
            seen.push(a.observe(busy, l, Some(hold)));
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
    fn a_server_overloaded_from_its_start_cuts_on_busy_share_alone() {
        // No quiet window yet: its holds may be stretched already, so they teach nothing.
        let mut a = Aimd::new(4, 1_024, 0.9);
        for _ in 0..10 {
            let l = a.limit();
            let (busy, hold) = overloaded(l, 0.01, 0.5, 0.002);
            a.observe(busy, l, Some(hold));
        }
        assert_eq!(a.limit(), (256.0 * 0.9_f64.powi(10)).round() as u32);
    }

    #[test]
    fn holds_as_short_as_ever_let_a_busy_runtime_admit_more() {
        let mut a = Aimd::new(4, 1_024, 0.9);
        a.observe(0.3, 10, Some(0.002));
        let start = a.limit();
        for _ in 0..5 {
            let l = a.limit();
            a.observe(1.0, l, Some(0.002));
        }
        assert!(a.limit() > start, "limit {} did not grow", a.limit());
    }

    #[test]
    fn a_quiet_server_keeps_its_limit() {
        let mut a = Aimd::new(4, 1_024, 0.9);
        let start = a.limit();
        for _ in 0..100 {
            a.update(0.1, 3);
        }
        assert_eq!(a.limit(), start);
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
    fn a_busy_runtime_with_little_in_flight_keeps_its_limit() {
        let mut a = Aimd::new(4, 1_024, 0.9);
        let start = a.limit();
        for _ in 0..100 {
            assert_eq!(a.update(1.0, 20), start);
        }
    }

    #[test]
    fn garbage_samples_change_nothing() {
        let mut a = Aimd::new(4, 100, 0.9);
        let before = a.limit();
        assert_eq!(a.update(f64::NAN, 100), before);
        assert_eq!(a.update(-1.0, 100), before);
    }
}
