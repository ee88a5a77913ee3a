//! Whether a request can still be answered by its deadline, pure: the arithmetic of the
//! `deadline` admission mode ([`crate::starter`] feeds it the readings and acts on the answer).
//!
//! A request is started when the work ahead of it and its own fit before its deadline; it waits
//! while they do not but a later start still could, behind the requests already waiting; it is
//! refused when not even a start now, with nothing ahead, would be in time, or when those
//! waiting would take every start in time. Nothing here reads a clock.
//!
//! The terms, all measured by the starter:
//!
//! | term | what it is |
//! | --- | --- |
//! | `age` | how long the request waited to be read: the runtime's queueing delay when it was read |
//! | `floor` | the least time its own work needs off the CPU (the fastest bidder's typical answer) |
//! | `cpu` | the runtime's busy time per finished request, lately: one request's own CPU |
//! | `running` | requests started and not finished: at most `running * cpu` of CPU work ahead |
//! | `waiting` | requests waiting for a start: each place that frees goes to one of them first |
//!
//! `running * cpu` counts all of a running request's CPU as still to do, though part of it is
//! done: the estimate errs towards refusing a request that would have made it, never towards
//! starting one that will be late.

use std::time::{Duration, Instant};

/// What the starter knows of the runtime when it judges a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// How long the request waited before it was read.
    pub age: Duration,
    /// Requests started and not finished.
    pub running: u32,
    /// Requests waiting for a start.
    pub waiting: u32,
    /// The runtime's busy time per finished request; zero until measured.
    pub cpu: Duration,
    /// The runtime's worker threads (at least 1).
    pub workers: u32,
}

/// The verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Start now: it and the work ahead of it fit before the deadline.
    Now,
    /// Not now; it can still start up to this instant and be in time.
    WaitUntil(Instant),
    /// Not now, and the requests already waiting would take every place that frees before its
    /// latest start: waiting would end in a refusal anyway, so refuse now. Under open-loop
    /// overload this keeps the queue to what can start in time, and the rest is answered at
    /// once instead of holding its connection to the end.
    Full,
    /// Not even alone would it be answered in time.
    Never,
}

impl Load {
    /// CPU time of `requests` requests spread over the workers.
    fn cpu_of(&self, requests: u32) -> Duration {
        self.cpu.saturating_mul(requests) / self.workers.max(1)
    }
}

/// Judges a request at `now` that must be answered by `answer_by` and needs `floor` off the CPU.
pub fn judge(now: Instant, answer_by: Instant, floor: Duration, load: &Load) -> Fit {
    let alone = load
        .age
        .saturating_add(floor)
        .saturating_add(load.cpu_of(1));
    let Some(latest_start) = answer_by.checked_sub(alone) else {
        return Fit::Never;
    };
    if now > latest_start {
        return Fit::Never;
    }
    if fits_from(now, load).is_some_and(|from| from <= latest_start) {
        return Fit::Now;
    }
    // A place frees about once per `cpu` (per worker); the waiting requests take the first
    // ones. Counting them all as ahead errs towards refusing: some have later latest starts.
    let ahead = Load {
        running: load.waiting,
        ..*load
    };
    if fits_from(now, &ahead).is_some_and(|drained| drained <= latest_start) {
        Fit::WaitUntil(latest_start)
    } else {
        Fit::Full
    }
}

/// The earliest latest start that can start at `now`: the instant the work ahead is done. A
/// waiting request starts now exactly when its latest start is at or after it, so the starter
/// finds the ones that can with one lookup in its queue ordered by latest start. `None`: the
/// work ahead overflows the clock, nothing fits.
pub fn fits_from(now: Instant, load: &Load) -> Option<Instant> {
    now.checked_add(load.cpu_of(load.running))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn load(age_ms: u32, running: u32, cpu_us: u64) -> Load {
        Load {
            age: age_ms * MS,
            running,
            waiting: 0,
            cpu: Duration::from_micros(cpu_us),
            workers: 1,
        }
    }

    #[test]
    fn a_request_behind_more_waiters_than_can_start_in_time_is_refused_at_once() {
        let t = Instant::now();
        // 300 running at 300 µs: it must wait (latest start 88.7 ms). With 200 waiting, their
        // 60 ms of starts fit before it: wait. With 300 waiting (90 ms): refuse now.
        let mut l = load(0, 300, 300);
        l.waiting = 200;
        assert!(matches!(judge(t, t + 90 * MS, MS, &l), Fit::WaitUntil(_)));
        l.waiting = 300;
        assert_eq!(judge(t, t + 90 * MS, MS, &l), Fit::Full);
        // Waiters do not matter to a request that fits now.
        let mut room = load(0, 3, 300);
        room.waiting = 10_000;
        assert_eq!(judge(t, t + 90 * MS, MS, &room), Fit::Now);
    }

    #[test]
    fn a_request_with_room_starts_now() {
        let t = Instant::now();
        // 90 ms left; 3 running at 300 µs: 0.9 ms of work ahead, plus 1 ms of bidders.
        assert_eq!(judge(t, t + 90 * MS, MS, &load(0, 3, 300)), Fit::Now);
        // Nothing measured yet: only the floor counts.
        assert_eq!(judge(t, t + 2 * MS, MS, &Load::default()), Fit::Now);
    }

    #[test]
    fn work_ahead_that_would_make_it_late_means_waiting_until_the_latest_start() {
        let t = Instant::now();
        // 300 running at 300 µs is 90 ms ahead of a request with 90 ms left.
        let fit = judge(t, t + 90 * MS, MS, &load(0, 300, 300));
        let latest = t + 90 * MS - MS - Duration::from_micros(300);
        assert_eq!(fit, Fit::WaitUntil(latest));
        // The same on two workers: half the time ahead.
        let two = Load {
            workers: 2,
            ..load(0, 300, 300)
        };
        assert_eq!(judge(t, t + 90 * MS, MS, &two), Fit::Now);
    }

    #[test]
    fn the_time_a_request_waited_before_it_was_read_counts_against_it() {
        let t = Instant::now();
        assert_eq!(judge(t, t + 90 * MS, MS, &load(50, 3, 300)), Fit::Now);
        assert_eq!(judge(t, t + 90 * MS, MS, &load(89, 0, 300)), Fit::Never);
        assert!(matches!(
            judge(t, t + 90 * MS, MS, &load(80, 40, 300)),
            Fit::WaitUntil(_)
        ));
    }

    #[test]
    fn a_request_that_cannot_make_it_even_alone_is_never_started() {
        let t = Instant::now();
        assert_eq!(judge(t, t + MS / 2, MS, &Load::default()), Fit::Never);
        assert_eq!(judge(t + 10 * MS, t, MS, &Load::default()), Fit::Never);
        // Exactly in time is in time.
        assert_eq!(judge(t, t + MS, MS, &Load::default()), Fit::Now);
    }

    #[test]
    fn huge_readings_saturate_instead_of_overflowing() {
        let t = Instant::now();
        let l = Load {
            age: Duration::MAX,
            running: u32::MAX,
            waiting: u32::MAX,
            cpu: Duration::MAX,
            workers: 0,
        };
        assert_eq!(judge(t, t + MS, MS, &l), Fit::Never);
        let l = Load {
            running: u32::MAX,
            cpu: Duration::from_micros(1),
            ..Load::default()
        };
        assert!(matches!(judge(t, t + 10 * MS, MS, &l), Fit::WaitUntil(_)));
        let l = Load {
            waiting: u32::MAX,
            ..l
        };
        assert_eq!(judge(t, t + 10 * MS, MS, &l), Fit::Full);
    }
}
