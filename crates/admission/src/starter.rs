//! [`Starter`]: the runtime side of the `deadline` admission mode. It measures what
//! [`crate::fit::judge`] needs (the runtime's queueing delay, from a probe task; its CPU time per
//! finished request, every [`crate::aimd::WINDOW`]), counts the requests started, and makes a request that
//! does not fit yet wait, without using the CPU, for a running one to finish or for its latest
//! start.
//!
//! Why wait rather than refuse: a refusal is answered at once, and a client that keeps its
//! connections busy (a closed loop, or a seller with a fixed pool) sends the next request at
//! once, so refusals can eat the core that auctions need. A waiting request costs a timer and a
//! place in memory (bounded by `max_in_flight`), and is refused only at the instant a start would
//! no longer be in time.
//!
//! Who starts when a request finishes: the waiting request with the earliest latest start among
//! those that fit now. The ones that fit are those whose latest start is far enough off
//! ([`crate::fit::fits_from`]), so the waiting requests are kept ordered by latest start and
//! the pick is one range lookup. Waking the longest-waiting one instead (a plain FIFO of
//! wakers) wakes the one least likely to fit: it goes back to sleep, the freed place goes
//! unused, and under a closed loop of 1,024 connections the core idled while requests that
//! would have fitted were refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::fit::{Fit, Load, fits_from, judge};

/// How often the probe task measures the runtime's queueing delay. Its lateness is how long a
/// task made ready now waits to run: a request read now waited about that long to be read.
pub const PROBE: Duration = Duration::from_millis(2);

/// Windows of CPU-per-request readings kept; the estimate is their smallest, so that a window
/// stretched by a stall (a busy worker the VM did not run still counts as busy) does not raise
/// it, while a lasting rise shows within this many windows.
const CPU_WINDOWS: usize = 4;

/// A window's reading counts only with at least this many requests finished in it.
const MIN_FINISHED: u64 = 4;

/// Why a request was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Not even a start at once, with nothing ahead, would be answered in time.
    TooLittleTime,
    /// The work ahead of it would have made it late: it waited and no start in time came, or
    /// the requests already waiting would have taken every start in time.
    WouldMiss,
}

/// The `deadline` mode's state; see the module documentation.
#[derive(Debug)]
pub struct Starter {
    epoch: Instant,
    running: AtomicU32,
    /// The waiting requests' count, read without the lock (by every finish, and for metrics).
    waiting: AtomicU32,
    queue: Mutex<Queue>,
    /// Requests finished since the controller last looked.
    finished: AtomicU64,
    cpu_nanos: AtomicU64,
    workers: AtomicU32,
    /// When the probe last ran (nanoseconds since `epoch`; 0: no probe runs), and how late.
    probe_at_nanos: AtomicU64,
    probe_lag_nanos: AtomicU64,
    started_after_wait: AtomicU64,
    would_miss: AtomicU64,
}

/// The waiting requests by latest start (ties by arrival); each is sent its start.
#[derive(Debug, Default)]
struct Queue {
    next: u64,
    by_latest: BTreeMap<(Instant, u64), oneshot::Sender<()>>,
}

/// A started request; dropping it frees its share of the work ahead.
#[derive(Debug)]
pub struct Started<'a> {
    starter: Option<&'a Starter>,
}

impl Started<'_> {
    /// A start that is not counted (the gate is in another mode).
    pub(crate) fn uncounted() -> Started<'static> {
        Started { starter: None }
    }
}

impl Drop for Started<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.starter {
            s.running.fetch_sub(1, SeqCst);
            s.finished.fetch_add(1, Relaxed);
            s.start_a_waiter();
        }
    }
}

impl Default for Starter {
    fn default() -> Self {
        Starter::new()
    }
}

/// The time now, from tokio's clock: the same as `Instant::now()` unless a test paused it.
fn clock() -> Instant {
    tokio::time::Instant::now().into_std()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Starter {
    pub fn new() -> Starter {
        Starter {
            epoch: clock(),
            running: AtomicU32::new(0),
            waiting: AtomicU32::new(0),
            queue: Mutex::new(Queue::default()),
            finished: AtomicU64::new(0),
            cpu_nanos: AtomicU64::new(0),
            workers: AtomicU32::new(1),
            probe_at_nanos: AtomicU64::new(0),
            probe_lag_nanos: AtomicU64::new(0),
            started_after_wait: AtomicU64::new(0),
            would_miss: AtomicU64::new(0),
        }
    }

    /// How long a request read at `now` waited to be read: the probe's last lateness, or how
    /// overdue the probe is now if more (a stall or a backlog that has kept it from running).
    pub fn queue_delay(&self, now: Instant) -> Duration {
        let at = self.probe_at_nanos.load(Relaxed);
        if at == 0 {
            return Duration::ZERO;
        }
        let since = nanos(now.saturating_duration_since(self.epoch)).saturating_sub(at);
        let overdue = since.saturating_sub(nanos(PROBE));
        Duration::from_nanos(self.probe_lag_nanos.load(Relaxed).max(overdue))
    }

    /// The readings for a request read at `now`.
    pub fn load(&self, now: Instant) -> Load {
        Load {
            age: self.queue_delay(now),
            running: self.running.load(SeqCst),
            waiting: self.waiting.load(SeqCst),
            cpu: Duration::from_nanos(self.cpu_nanos.load(Relaxed)),
            workers: self.workers.load(Relaxed),
        }
    }

    /// Starts a request that must be answered by `answer_by` and needs `floor` off the CPU: now
    /// if it fits, else when a finishing request picks it (see the module documentation), up to
    /// its latest start.
    pub async fn start(&self, answer_by: Instant, floor: Duration) -> Result<Started<'_>, Missed> {
        let now = clock();
        // The request's age is fixed when it is read; while it waits, `now` moves instead.
        let age = self.queue_delay(now);
        let load = Load {
            age,
            ..self.load(now)
        };
        let latest = match judge(now, answer_by, floor, &load) {
            Fit::Now => return Ok(self.started()),
            Fit::Never => return Err(Missed::TooLittleTime),
            Fit::Full => {
                self.would_miss.fetch_add(1, Relaxed);
                return Err(Missed::WouldMiss);
            }
            Fit::WaitUntil(latest) => latest,
        };
        let mut waiter = self.enqueue(latest);
        // A request may have finished between the judgement and the enqueueing, and picked no
        // one: judge again now that this one can be picked.
        let now = clock();
        if fits_from(now, &self.load(now)).is_some_and(|from| from <= latest) {
            let picked = waiter.leave();
            waiter.done = true;
            return Ok(if picked {
                self.place_taken()
            } else {
                self.started()
            });
        }
        let deadline = tokio::time::sleep_until(tokio::time::Instant::from_std(latest));
        let outcome = tokio::select! {
            picked = &mut waiter.start => picked.is_ok(),
            () = deadline => waiter.leave(),
        };
        waiter.done = true;
        if outcome {
            self.started_after_wait.fetch_add(1, Relaxed);
            Ok(self.place_taken())
        } else {
            self.would_miss.fetch_add(1, Relaxed);
            Err(Missed::WouldMiss)
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing under this lock can panic; a poisoned lock still holds a consistent queue.
        telemetry::locks::lock(&self.queue)
    }

    fn enqueue(&self, latest: Instant) -> Waiter<'_> {
        let (tx, rx) = oneshot::channel();
        let mut q = self.queue();
        let key = (latest, q.next);
        q.next = q.next.wrapping_add(1);
        q.by_latest.insert(key, tx);
        self.waiting.fetch_add(1, SeqCst);
        Waiter {
            starter: self,
            key,
            start: rx,
            done: false,
        }
    }

    /// A place freed: starts the waiting request with the earliest latest start among those
    /// that fit now, if any. Its place is taken here, on its behalf, before it is told.
    fn start_a_waiter(&self) {
        if self.waiting.load(SeqCst) == 0 {
            return;
        }
        let now = clock();
        let mut q = self.queue();
        loop {
            let Some(from) = fits_from(now, &self.load(now)) else {
                return;
            };
            let Some(key) = q.by_latest.range((from, 0)..).next().map(|(k, _)| *k) else {
                return;
            };
            let Some(tx) = q.by_latest.remove(&key) else {
                return;
            };
            self.running.fetch_add(1, SeqCst);
            if tx.send(()).is_ok() {
                return;
            }
            // Its waiter is gone (cancelled with its connection): the place is free again.
            self.running.fetch_sub(1, SeqCst);
        }
    }

    fn started(&self) -> Started<'_> {
        self.running.fetch_add(1, SeqCst);
        self.place_taken()
    }

    /// The guard of a start whose place is already counted in `running`.
    fn place_taken(&self) -> Started<'_> {
        Started {
            starter: Some(self),
        }
    }

    /// The probe ran; its tick was due at `due`. `workers`: the runtime's worker threads.
    pub(crate) fn probed(&self, due: Instant, workers: usize) {
        let now = clock();
        let lag = now.saturating_duration_since(due);
        self.probe_lag_nanos.store(nanos(lag), Relaxed);
        self.probe_at_nanos
            .store(nanos(now.duration_since(self.epoch)).max(1), Relaxed);
        self.workers
            .store(u32::try_from(workers).unwrap_or(u32::MAX), Relaxed);
    }

    /// A window ended with the workers `busy` that long: a CPU-per-request reading.
    pub(crate) fn window(&self, readings: &mut CpuReadings, busy: Duration) {
        readings.push(busy, self.finished.swap(0, Relaxed));
        self.cpu_nanos.store(nanos(readings.estimate()), Relaxed);
    }

    pub fn running(&self) -> u32 {
        self.running.load(Relaxed)
    }

    pub fn waiting(&self) -> u32 {
        self.waiting.load(Relaxed)
    }

    pub fn cpu_per_request(&self) -> Duration {
        Duration::from_nanos(self.cpu_nanos.load(Relaxed))
    }

    pub fn started_after_wait(&self) -> u64 {
        self.started_after_wait.load(Relaxed)
    }

    pub fn would_miss(&self) -> u64 {
        self.would_miss.load(Relaxed)
    }
}

/// A request in the queue. It leaves by being picked (its `start` receives), by its latest
/// start passing ([`Waiter::leave`]), or by being dropped with its connection; a start handed to
/// it as it left is given back.
struct Waiter<'a> {
    starter: &'a Starter,
    key: (Instant, u64),
    start: oneshot::Receiver<()>,
    /// Whether the request has left and its start, if any, is accounted for.
    done: bool,
}

impl Waiter<'_> {
    /// Leaves the queue; true when a start was handed over first (the place is then its own).
    fn leave(&mut self) -> bool {
        let removed = self.starter.queue().by_latest.remove(&self.key).is_some();
        // Not in the queue any more means picked: the start has been sent already.
        !removed && self.start.try_recv().is_ok()
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.starter.waiting.fetch_sub(1, SeqCst);
        if !self.done && self.leave() {
            // Picked, then cancelled before it ran: pass the place on.
            self.starter.running.fetch_sub(1, SeqCst);
            self.starter.start_a_waiter();
        }
    }
}

/// The last [`CPU_WINDOWS`] readings of busy time per finished request; pure.
#[derive(Debug, Default, Clone)]
pub struct CpuReadings {
    recent: [Option<Duration>; CPU_WINDOWS],
    next: usize,
}

impl CpuReadings {
    /// One window: `busy` time of the workers, `finished` requests.
    pub fn push(&mut self, busy: Duration, finished: u64) {
        if finished < MIN_FINISHED {
            return;
        }
        let per = busy / u32::try_from(finished).unwrap_or(u32::MAX);
        self.recent[self.next] = Some(per);
        self.next = (self.next + 1) % CPU_WINDOWS;
    }

    /// The smallest recent reading; zero before any.
    pub fn estimate(&self) -> Duration {
        self.recent
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_cpu_estimate_ignores_one_stretched_window_and_follows_a_lasting_rise() {
        let mut r = CpuReadings::default();
        assert_eq!(r.estimate(), Duration::ZERO);
        r.push(30 * MS, 100); // 300 µs each
        r.push(80 * MS, 100); // a stall in this window
        assert_eq!(r.estimate(), Duration::from_micros(300));
        r.push(MS, 2); // too few to say anything
        assert_eq!(r.estimate(), Duration::from_micros(300));
        for _ in 0..CPU_WINDOWS {
            r.push(50 * MS, 100);
        }
        assert_eq!(r.estimate(), Duration::from_micros(500));
    }

    /// Paused clock: a request that does not fit waits, starts when the work ahead finishes,
    /// and one that can no longer make it is refused at its latest start, not before.
    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_the_work_ahead_and_is_refused_only_at_its_latest_start() {
        let s = Starter::new();
        s.cpu_nanos.store(nanos(10 * MS), Relaxed);
        let now = clock();
        // 90 ms left, 10 ms each: 8 running leave room for a ninth (8*10 + 10 = 90).
        let held: Vec<_> = (0..9)
            .map(|_| s.start(now + 90 * MS, Duration::ZERO))
            .collect::<Vec<_>>();
        let mut started = Vec::new();
        for h in held {
            started.push(h.await.expect("fits"));
        }
        assert_eq!(s.running(), 9);
        // A tenth with 95 ms does not fit (latest start 85 ms, 90 ms ahead); it waits.
        // Finishing one running request at 5 ms leaves 80 ms ahead: it starts then.
        let waiter = s.start(now + 95 * MS, Duration::ZERO);
        let finish_one = async {
            tokio::time::sleep(5 * MS).await;
            started.pop();
        };
        let (woken, ()) = tokio::join!(waiter, finish_one);
        let tenth = woken.expect("started once a place freed");
        assert_eq!(s.started_after_wait(), 1);
        assert_eq!(clock(), now + 5 * MS, "started when the place freed");
        // Another waits with nothing finishing: refused at its latest start (90 - 10 = 80 ms).
        let refused = s.start(now + 90 * MS, Duration::ZERO).await;
        assert_eq!(refused.unwrap_err(), Missed::WouldMiss);
        assert_eq!(clock(), now + 80 * MS);
        assert_eq!(s.would_miss(), 1);
        assert_eq!(s.waiting(), 0);
        // Past its latest start, a request is refused at once.
        let late = s.start(now + 85 * MS, Duration::ZERO).await;
        assert_eq!(late.unwrap_err(), Missed::TooLittleTime);
        drop((tenth, started));
        assert_eq!(s.running(), 0);
    }

    /// Paused clock: when a place frees, the waiting request with the earliest latest start
    /// among those that fit starts, not the one that has waited longest (which fits least).
    #[tokio::test(start_paused = true)]
    async fn a_freed_place_goes_to_the_most_urgent_waiter_that_fits() {
        let s = Starter::new();
        let now = clock();
        let mut running = nine_running(&s, now).await;
        // 90 ms of work ahead. Latest starts: a 40 ms, b 85 ms, d 82 ms; none fits yet.
        let mut a = std::pin::pin!(s.start(now + 50 * MS, Duration::ZERO));
        let mut b = std::pin::pin!(s.start(now + 95 * MS, Duration::ZERO));
        let mut d = std::pin::pin!(s.start(now + 92 * MS, Duration::ZERO));
        for w in [a.as_mut(), b.as_mut(), d.as_mut()] {
            assert!(poll_once(w).await.is_none(), "waits");
        }
        assert_eq!(s.waiting(), 3);
        // One finishes: 80 ms ahead. b and d fit; d's latest start is earlier.
        running.pop();
        let started_d = poll_once(d.as_mut())
            .await
            .expect("d picked")
            .expect("started");
        assert!(poll_once(b.as_mut()).await.is_none(), "b still waits");
        assert_eq!((s.running(), s.waiting()), (9, 2));
        // Another finishes: b fits and starts; a, waiting longest, never fitted.
        running.pop();
        let started_b = poll_once(b.as_mut())
            .await
            .expect("b picked")
            .expect("started");
        assert_eq!(s.started_after_wait(), 2);
        assert_eq!(a.await.unwrap_err(), Missed::WouldMiss);
        assert_eq!(clock(), now + 40 * MS, "refused at its latest start");
        drop((started_b, started_d, running));
        assert_eq!((s.running(), s.waiting()), (0, 0));
    }

    /// A request picked to start but dropped before it ran (its connection closed) passes its
    /// place to the next one that fits; nothing leaks.
    #[tokio::test(start_paused = true)]
    async fn a_picked_request_dropped_before_it_runs_passes_its_place_on() {
        let s = Starter::new();
        let now = clock();
        let mut running = nine_running(&s, now).await;
        let mut first = Box::pin(s.start(now + 92 * MS, Duration::ZERO));
        let mut second = std::pin::pin!(s.start(now + 95 * MS, Duration::ZERO));
        assert!(poll_once(first.as_mut()).await.is_none());
        assert!(poll_once(second.as_mut()).await.is_none());
        running.pop(); // `first` (latest start 82 ms) is picked...
        assert_eq!(s.running(), 9);
        drop(first); // ...and cancelled before it ran: `second` gets the place.
        let started = poll_once(second.as_mut())
            .await
            .expect("picked")
            .expect("started");
        assert_eq!((s.running(), s.waiting()), (9, 0));
        drop((started, running));
        assert_eq!(s.running(), 0);
    }

    /// Nine requests started at `now` at 10 ms of CPU each: 90 ms of work ahead.
    async fn nine_running(s: &Starter, now: Instant) -> Vec<Started<'_>> {
        s.cpu_nanos.store(nanos(10 * MS), Relaxed);
        let mut running = Vec::new();
        for _ in 0..9 {
            running.push(s.start(now + 200 * MS, Duration::ZERO).await.expect("fits"));
        }
        running
    }

    /// Polls `f` once: its output if ready.
    async fn poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        tokio::time::timeout(Duration::ZERO, f).await.ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_probe_measures_queueing_delay_and_a_stalled_probe_shows_as_overdue() {
        let s = Starter::new();
        assert_eq!(s.queue_delay(clock()), Duration::ZERO, "no probe yet");
        tokio::time::advance(MS).await;
        s.probe_at_nanos
            .store(nanos(clock().duration_since(s.epoch)), Relaxed);
        s.probe_lag_nanos.store(nanos(MS), Relaxed);
        assert_eq!(s.queue_delay(clock()), MS);
        // The probe has not run for 30 ms: requests read now may have waited 28 ms.
        tokio::time::advance(30 * MS).await;
        assert_eq!(s.queue_delay(clock()), 28 * MS);
    }
}
