//! The one connection pool under every outbound client: the bidder pools, the notice client
//! (its idle lists, one per host), the ledger's Redis client and the creative edge's origins.
//! It knows nothing of the protocol on the connections:
//!
//! - **permits**: at most `max` connections open, busy or idle. A caller either refuses at once
//!   when none is free ([`ConnPool::try_permit`], the bidder pools: never queue behind a slow
//!   bidder) or waits for one within its own deadline ([`ConnPool::permit`]).
//! - **idle list** ([`IdleList`]): the most recently returned connection is reused first (the
//!   fewest stay warm), at most `max_idle` wait, one idle longer than `max_age` is closed rather
//!   than reused, and each is checked alive by the caller's rule on the way out.
//! - **one rule for a poisoned lock**: recovered and counted (`telemetry::locks`), never a
//!   skipped return or a new dial for nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// Idle connections, newest last; no lock of its own (the notice client keeps one per host
/// under one lock; [`ConnPool`] keeps one under its own).
#[derive(Debug)]
pub struct IdleList<C> {
    parked: Vec<Parked<C>>,
    max_idle: usize,
    max_age: Option<Duration>,
}

#[derive(Debug)]
struct Parked<C> {
    conn: C,
    since: Instant,
}

impl<C> IdleList<C> {
    /// At most `max_idle` wait; with `max_age`, one idle longer is closed, not reused.
    pub fn new(max_idle: usize, max_age: Option<Duration>) -> IdleList<C> {
        IdleList {
            parked: Vec::new(),
            max_idle,
            max_age,
        }
    }

    /// The most recently returned connection that is fresh at `now` and `alive`; the stale or
    /// dead ones met before it are closed (dropped).
    pub fn take(&mut self, now: Instant, alive: impl Fn(&C) -> bool) -> Option<C> {
        while let Some(p) = self.parked.pop() {
            if self.fresh(&p, now) && alive(&p.conn) {
                return Some(p.conn);
            }
        }
        None
    }

    /// Parks `conn`, idle from `now`; when `max_idle` already wait it is closed instead.
    /// Returns whether it was kept.
    pub fn put(&mut self, conn: C, now: Instant) -> bool {
        if self.parked.len() >= self.max_idle {
            return false;
        }
        self.parked.push(Parked { conn, since: now });
        true
    }

    /// Closes every connection idle longer than `max_age` at `now`.
    pub fn close_stale(&mut self, now: Instant) {
        if self.max_age.is_some() {
            let kept: Vec<Parked<C>> = std::mem::take(&mut self.parked)
                .into_iter()
                .filter(|p| self.fresh(p, now))
                .collect();
            self.parked = kept;
        }
    }

    /// Closes them all.
    pub fn clear(&mut self) {
        self.parked.clear();
    }

    pub fn len(&self) -> usize {
        self.parked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    fn fresh(&self, p: &Parked<C>, now: Instant) -> bool {
        self.max_age
            .is_none_or(|age| now.saturating_duration_since(p.since) < age)
    }
}

/// Permits and an idle list: the pool of one upstream.
#[derive(Debug)]
pub struct ConnPool<C> {
    permits: Arc<Semaphore>,
    max: usize,
    idle: Mutex<IdleList<C>>,
}

impl<C> ConnPool<C> {
    /// At most `max` connections open, busy or idle; all of them may wait idle, each for at
    /// most `max_age` when given.
    pub fn new(max: usize, max_age: Option<Duration>) -> ConnPool<C> {
        ConnPool {
            permits: Arc::new(Semaphore::new(max)),
            max,
            idle: Mutex::new(IdleList::new(max, max_age)),
        }
    }

    /// The most connections open at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A permit to hold a connection, if one is free now (never waits).
    pub fn try_permit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// A permit to hold a connection, waiting for one to be free (bound the wait with the
    /// caller's deadline).
    ///
    /// # Errors
    /// Only if the pool's permits were closed, which nothing here does.
    pub async fn permit(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        self.permits.clone().acquire_owned().await
    }

    /// The most recently returned connection still fresh and `alive` (see [`IdleList::take`]).
    pub fn take(&self, alive: impl Fn(&C) -> bool) -> Option<C> {
        telemetry::locks::lock(&self.idle).take(Instant::now(), alive)
    }

    /// Parks `conn` for reuse (see [`IdleList::put`]). Returns whether it was kept.
    pub fn put(&self, conn: C) -> bool {
        telemetry::locks::lock(&self.idle).put(conn, Instant::now())
    }

    /// Closes every idle connection (the upstream moved, say).
    pub fn clear(&self) {
        telemetry::locks::lock(&self.idle).clear();
    }

    /// Idle connections now.
    pub fn idle(&self) -> usize {
        telemetry::locks::lock(&self.idle).len()
    }

    /// Poisons the idle list's lock, as a panic while holding it would (tests only).
    #[cfg(test)]
    pub(crate) fn poison_for_test(&self)
    where
        C: Send,
    {
        std::thread::scope(|s| {
            let panicked = s
                .spawn(|| {
                    let _held = self.idle.lock();
                    panic!("a panic while the idle list is held");
                })
                .join();
            assert!(panicked.is_err() && self.idle.is_poisoned());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_fresh_live_connection_is_reused_and_the_rest_closed_on_the_way() {
        let t0 = Instant::now();
        let mut idle = IdleList::new(3, Some(Duration::from_secs(10)));
        assert!(idle.put("old", t0));
        assert!(idle.put("dead", t0 + Duration::from_secs(8)));
        assert!(idle.put("new", t0 + Duration::from_secs(9)));
        assert!(!idle.put("fourth", t0), "at most max_idle wait");
        let now = t0 + Duration::from_secs(11);
        assert_eq!(idle.take(now, |c| *c != "dead"), Some("new"));
        assert_eq!(idle.take(now, |c| *c != "dead"), None, "dead, then too old");
        assert!(idle.is_empty(), "both closed on the way");
    }

    #[test]
    fn stale_connections_are_closed_and_without_an_age_none_is() {
        let t0 = Instant::now();
        let mut aged = IdleList::new(4, Some(Duration::from_secs(5)));
        let mut ageless = IdleList::new(4, None);
        for (i, at) in [0, 3, 6].into_iter().enumerate() {
            aged.put(i, t0 + Duration::from_secs(at));
            ageless.put(i, t0 + Duration::from_secs(at));
        }
        aged.close_stale(t0 + Duration::from_secs(9));
        ageless.close_stale(t0 + Duration::from_secs(900));
        assert_eq!(aged.len(), 1);
        assert_eq!(ageless.len(), 3);
    }

    #[tokio::test]
    async fn permits_bound_open_connections_and_a_poisoned_list_still_serves() {
        let pool = Arc::new(ConnPool::<u32>::new(2, None));
        let a = pool.try_permit().unwrap();
        let _b = pool.permit().await.unwrap();
        assert!(pool.try_permit().is_none(), "both held");
        drop(a);
        assert!(pool.try_permit().is_some());

        assert!(pool.put(7));
        pool.poison_for_test();
        let before = telemetry::locks::poisoned_total();
        assert_eq!(
            pool.take(|_| true),
            Some(7),
            "the parked connection survives"
        );
        assert!(pool.put(8));
        assert_eq!(pool.idle(), 1);
        assert!(telemetry::locks::poisoned_total() >= before + 3);
    }
}
