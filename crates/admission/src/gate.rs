//! [`Admission`]: the gate on the request path (one atomic add to enter, a fractional bound,
//! the pause check) and the task that adapts its bound every [`WINDOW`] with [`Aimd`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::aimd::{Aimd, WINDOW, Window, is_late};
use crate::busy_streak::BusyStreak;
use crate::config::{AdmissionConfig, Mode};
use crate::fit::{Fit, Load, judge};
use crate::starter::{CpuReadings, Missed, PROBE, Started, Starter};

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
    /// later than [`crate::aimd::LAGGING`].
    lag_micros: AtomicU64,
    lagging_windows: AtomicU64,
    /// Tickets dropped, and their summed hold time in nanoseconds, since the controller last
    /// looked.
    released: AtomicU64,
    held_nanos: AtomicU64,
    /// Refuses while the runtime has gone `max_busy_ms` without a pause.
    streak: BusyStreak,
    /// The `deadline` mode's starts and readings.
    starter: Starter,
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
        let limit_x256 = match config.mode() {
            Mode::Off => u32::MAX,
            // max_in_flight is at most 10^6 (validated), so this does not saturate.
            Mode::Fixed | Mode::Deadline => config.max_in_flight.saturating_mul(256),
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
            starter: Starter::new(),
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

    /// Starts the work of an admitted request that must be answered by `answer_by` and needs
    /// `floor` off the CPU (the bidders' typical answer). Refused, and counted, when too little
    /// time is left even to start now (as `too_little_time`); in `deadline` mode it may also wait
    /// for the work ahead of it, and is refused (counted as shed) when no start in time comes.
    /// Hold the [`Started`] until the answer is built.
    pub async fn start(&self, answer_by: Instant, floor: Duration) -> Result<Started<'_>, Missed> {
        let result = if self.config.mode() == Mode::Deadline {
            self.starter.start(answer_by, floor).await
        } else {
            let now = tokio::time::Instant::now().into_std();
            let alone = Load {
                workers: 1,
                ..Load::default()
            };
            match judge(now, answer_by, floor, &alone) {
                Fit::Never => Err(Missed::TooLittleTime),
                Fit::Now | Fit::WaitUntil(_) | Fit::Full => Ok(Started::uncounted()),
            }
        };
        match result {
            Err(Missed::TooLittleTime) => self.count_late(),
            Err(Missed::WouldMiss) => {
                self.shed.fetch_add(1, Relaxed);
            }
            Ok(_) => {}
        }
        result
    }

    /// The `deadline` mode's state, for reports and tests.
    pub fn starter(&self) -> &Starter {
        &self.starter
    }

    /// Adapts the limit every [`WINDOW`] from the busy time of the current tokio runtime's
    /// workers, until the gate is dropped elsewhere (the task holds a weak reference). Does
    /// nothing unless the mode is `adaptive`.
    pub async fn run_controller(gate: std::sync::Weak<Admission>) {
        let Some(mode) = gate.upgrade().map(|g| g.config.mode()) else {
            return;
        };
        if mode == Mode::Deadline {
            return Self::measure_for_starts(gate).await;
        }
        if mode != Mode::Adaptive {
            return;
        }
        let (workers, busy_total) = runtime_busy();
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

    /// The `deadline` mode's readings: the probe every [`PROBE`], the CPU per finished request
    /// every [`WINDOW`], until the gate is dropped elsewhere.
    async fn measure_for_starts(gate: std::sync::Weak<Admission>) {
        let (workers, busy_total) = runtime_busy();
        let mut readings = CpuReadings::default();
        let mut probe = tokio::time::interval(PROBE);
        probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let per_window = u32::try_from(WINDOW.as_nanos() / PROBE.as_nanos()).unwrap_or(1);
        let mut last_busy = busy_total();
        let mut ticks = 0u32;
        loop {
            let due = probe.tick().await;
            let Some(g) = gate.upgrade() else { return };
            g.starter.probed(due.into_std(), workers);
            ticks += 1;
            if ticks >= per_window {
                ticks = 0;
                let busy = busy_total();
                g.starter
                    .window(&mut readings, busy.saturating_sub(last_busy));
                last_busy = busy;
            }
        }
    }

    /// Appends the gate's metrics as `{prefix}_admission_*` and `{prefix}_runtime_*`.
    pub fn render(&self, prefix: &str, out: &mut String) {
        #[allow(clippy::cast_precision_loss)] // thousandths
        let busy = self.busy_milli.load(Relaxed) as f64 / 1000.0;
        #[allow(clippy::cast_precision_loss)] // microseconds
        let lag = self.lag_micros.load(Relaxed) as f64 / 1e6;
        let name = |suffix: &str| format!("{prefix}_{suffix}");
        telemetry::single(
            out,
            &name("admission_limit"),
            "gauge",
            "The admission bound now, in places (fractional when adaptive; -1 when off).",
            self.limit().unwrap_or(-1.0),
        );
        telemetry::single(
            out,
            &name("admission_in_flight"),
            "gauge",
            "Requests holding a place at the admission gate now.",
            self.in_flight.load(Relaxed),
        );
        telemetry::single(
            out,
            &name("runtime_busy_share"),
            "gauge",
            "Share of the runtime's worker time spent busy in the last window.",
            busy,
        );
        telemetry::single(
            out,
            &name("runtime_lag_seconds"),
            "gauge",
            "How late the admission controller's last tick ran.",
            lag,
        );
        telemetry::single(
            out,
            &name("admission_lagging_windows_total"),
            "counter",
            "Windows whose controller tick ran late: work was waiting for the runtime.",
            self.lagging_windows.load(Relaxed),
        );
        telemetry::single(
            out,
            &name("admission_busy_streak_sheds_total"),
            "counter",
            "Requests refused because the runtime had run max_busy_ms without a pause.",
            self.streak.refused(),
        );
        let s = &self.starter;
        telemetry::single(
            out,
            &name("admission_running"),
            "gauge",
            "Requests started by the deadline gate and not finished.",
            s.running(),
        );
        telemetry::single(
            out,
            &name("admission_waiting"),
            "gauge",
            "Requests waiting at the deadline gate for the work ahead of them.",
            s.waiting(),
        );
        telemetry::single(
            out,
            &name("admission_queue_delay_seconds"),
            "gauge",
            "The runtime's queueing delay now (deadline mode's probe): how long a request read now waited.",
            s.queue_delay(Instant::now()).as_secs_f64(),
        );
        telemetry::single(
            out,
            &name("admission_cpu_per_request_seconds"),
            "gauge",
            "The runtime's busy time per finished request lately (deadline mode).",
            s.cpu_per_request().as_secs_f64(),
        );
        telemetry::single(
            out,
            &name("admission_started_after_wait_total"),
            "counter",
            "Requests the deadline gate started after they waited for the work ahead.",
            s.started_after_wait(),
        );
        telemetry::single(
            out,
            &name("admission_would_miss_total"),
            "counter",
            "Requests shed because no start in time came (counted in shed too).",
            s.would_miss(),
        );
        let total = name("admission_total");
        telemetry::family(
            out,
            &total,
            "counter",
            "Requests at the admission gate: admitted, shed, or answered at once for too little time left.",
        );
        for (outcome, value) in [
            ("admitted", &self.admitted),
            ("shed", &self.shed),
            ("too_little_time", &self.late),
        ] {
            telemetry::sample(out, &total, &[("outcome", outcome)], value.load(Relaxed));
        }
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

/// The current runtime's worker count, and a reading of its workers' summed busy time.
fn runtime_busy() -> (usize, impl Fn() -> Duration) {
    let metrics = tokio::runtime::Handle::current().metrics();
    let workers = metrics.num_workers().max(1);
    let busy_total = move || -> Duration {
        (0..workers)
            .map(|w| metrics.worker_total_busy_duration(w))
            .sum()
    };
    (workers, busy_total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mode: Mode, max: u32) -> AdmissionConfig {
        AdmissionConfig {
            mode: Some(mode),
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
            mode: Some(Mode::Fixed),
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
                mode: Some(Mode::Fixed),
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
}
