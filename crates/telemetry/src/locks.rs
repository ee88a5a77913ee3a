//! The one rule for a poisoned lock: a panic while some thread held it does not stop the
//! others from using what it guards. The data is recovered, the event is counted
//! (`gavel_lock_poisoned_total`, every server's `/metrics`), and the caller does its work as
//! usual: never skipped silently. Everything these locks guard (idle connections, breakers,
//! caches, queues) stays valid between any two of its own statements, so the state a panic
//! left is one a live thread could have seen.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{LockResult, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

static POISONED: AtomicU64 = AtomicU64::new(0);

/// How many times this process took over a lock that a panic had poisoned.
pub fn poisoned_total() -> u64 {
    POISONED.load(Relaxed)
}

fn recover<G>(result: LockResult<G>) -> G {
    result.unwrap_or_else(|poisoned| {
        POISONED.fetch_add(1, Relaxed);
        poisoned.into_inner()
    })
}

/// Locks `m`, recovering it (and counting that) if a panic poisoned it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    recover(m.lock())
}

/// Read-locks `l`, recovering it (and counting that) if a panic poisoned it.
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    recover(l.read())
}

/// Write-locks `l`, recovering it (and counting that) if a panic poisoned it.
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    recover(l.write())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_keeps_its_data_and_is_counted() {
        let m = std::sync::Arc::new(Mutex::new(vec![1]));
        let held = m.clone();
        let panicked = std::thread::spawn(move || {
            let mut v = lock(&held);
            v.push(2);
            panic!("poisons the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(m.is_poisoned());
        let before = poisoned_total();
        lock(&m).push(3);
        assert_eq!(
            *lock(&m),
            vec![1, 2, 3],
            "the data survives, the work is done"
        );
        assert!(poisoned_total() >= before + 2, "each recovery is counted");
    }

    #[test]
    fn a_poisoned_rwlock_serves_readers_and_writers() {
        let l = std::sync::Arc::new(RwLock::new(0_u32));
        let held = l.clone();
        let _ = std::thread::spawn(move || {
            let _w = write(&held);
            panic!("poisons the lock");
        })
        .join();
        let before = poisoned_total();
        *write(&l) += 1;
        assert_eq!(*read(&l), 1);
        assert!(poisoned_total() >= before + 2);
    }
}
