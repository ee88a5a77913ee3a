//! Watching a configuration file for changes, shared by both servers' reloads.
//!
//! It polls the file's modification time and length: portable, no extra dependency, and a
//! change seen within two poll intervals is soon enough for configuration edits. A change is
//! acted on once the file has kept its new stamp for one interval, so that a file caught
//! half-written (an editor that truncates, then writes) is not read in between.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

/// How often a server looks at the file it follows: a change is applied within two of these.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What both servers' `watch()` starts: a task that follows the file at `path`
/// ([`watch_file`], every [`POLL_INTERVAL`]) and calls `reload` with the owner on each settled
/// change, until the owner is dropped (the task holds only a weak reference).
pub fn follow<T, F, Fut>(owner: Weak<T>, path: PathBuf, reload: F) -> tokio::task::JoinHandle<()>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(watch_file(path, POLL_INTERVAL, move || {
        owner.upgrade().map(&reload)
    }))
}

/// What identifies a version of the file: its modification time and length.
pub fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// [`follow`] for several files at once, whose list the owner gives at each look
/// (`paths`): a change to any of them is one reload, once all of them have held still for one
/// interval. Here a file that goes missing is a change too (a reload that needs it fails and
/// keeps the last good version): otherwise one deleted key file would hide every later edit of
/// the others. Ends when the owner is dropped.
pub fn follow_files<T, P, F, Fut>(
    owner: Weak<T>,
    paths: P,
    reload: F,
) -> tokio::task::JoinHandle<()>
where
    T: Send + Sync + 'static,
    P: Fn(&T) -> Vec<PathBuf> + Send + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let looked_at = owner.clone();
    let look = move || {
        let Some(owner) = looked_at.upgrade() else {
            return Look::Gone;
        };
        let stamps: Vec<_> = paths(&owner)
            .into_iter()
            .map(|p| {
                let s = stamp(&p);
                (p, s)
            })
            .collect();
        Look::Stamp(stamps)
    };
    tokio::spawn(watch_looks(POLL_INTERVAL, look, move || {
        owner.upgrade().map(&reload)
    }))
}

/// Calls `on_change` each time the file at `path` is seen with a new stamp that held for one
/// more look (a file being written is not read half-way: a write in progress changes the stamp
/// again), looking every `every`, and awaits what it returns before looking again. Returns when
/// `on_change` returns `None` (its owner is gone). A missing file is not a change: the last
/// version keeps serving.
pub async fn watch_file<F, Fut>(path: PathBuf, every: Duration, on_change: F)
where
    F: FnMut() -> Option<Fut>,
    Fut: Future<Output = ()>,
{
    let look = || stamp(&path).map_or(Look::Missing, Look::Stamp);
    watch_looks(every, look, on_change).await;
}

/// What one look at the watched files saw.
enum Look<S> {
    /// The owner is gone: stop.
    Gone,
    /// A file is missing: not a change.
    Missing,
    Stamp(S),
}

/// The rule of [`watch_file`], for whatever `look` stamps.
async fn watch_looks<S, L, F, Fut>(every: Duration, mut look: L, mut on_change: F)
where
    S: PartialEq,
    L: FnMut() -> Look<S>,
    F: FnMut() -> Option<Fut>,
    Fut: Future<Output = ()>,
{
    let first = match look() {
        Look::Gone => return,
        Look::Missing => None,
        Look::Stamp(s) => Some(s),
    };
    let mut last = first;
    let mut pending = None;
    loop {
        tokio::time::sleep(every).await;
        let now = match look() {
            Look::Gone => return,
            Look::Missing => None,
            Look::Stamp(s) => Some(s),
        };
        if now.is_none() || now == last {
            pending = None;
            continue;
        }
        if now != pending {
            pending = now;
            continue;
        }
        last = pending.take();
        match on_change() {
            Some(reload) => reload.await,
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    #[tokio::test(start_paused = true)]
    async fn each_new_version_is_seen_once_and_a_missing_file_is_not_a_change() {
        let dir = testkit::TempDir::new("watch");
        let path = dir.join("f.toml");
        std::fs::write(&path, "a").unwrap();
        let seen = Arc::new(AtomicU32::new(0));
        let counter = seen.clone();
        let task = tokio::spawn(watch_file(
            path.clone(),
            Duration::from_millis(10),
            move || {
                let counter = counter.clone();
                Some(async move {
                    counter.fetch_add(1, Relaxed);
                })
            },
        ));
        let settle = || tokio::time::sleep(Duration::from_millis(35));
        settle().await;
        assert_eq!(seen.load(Relaxed), 0, "no change yet");
        std::fs::write(&path, "bb").unwrap();
        settle().await;
        assert_eq!(seen.load(Relaxed), 1);
        std::fs::remove_file(&path).unwrap();
        settle().await;
        assert_eq!(seen.load(Relaxed), 1, "a missing file is not a change");
        std::fs::write(&path, "ccc").unwrap();
        settle().await;
        assert_eq!(seen.load(Relaxed), 2);
        // A file that changes at every look (a write in progress) is not read until it holds.
        for n in 4..10 {
            std::fs::write(&path, "d".repeat(n)).unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(seen.load(Relaxed), 2, "read while still changing");
        settle().await;
        assert_eq!(seen.load(Relaxed), 3);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn several_files_are_one_watch_whose_list_the_owner_gives() {
        let dir = testkit::TempDir::new("watch-files");
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        struct Owner {
            files: std::sync::Mutex<Vec<PathBuf>>,
            reloads: AtomicU32,
        }
        let owner = Arc::new(Owner {
            files: std::sync::Mutex::new(vec![a.clone()]),
            reloads: AtomicU32::new(0),
        });
        let task = follow_files(
            Arc::downgrade(&owner),
            |o: &Owner| o.files.lock().map(|f| f.clone()).unwrap_or_default(),
            |o: Arc<Owner>| async move {
                o.reloads.fetch_add(1, Relaxed);
            },
        );
        let settle = || tokio::time::sleep(POLL_INTERVAL * 3);
        settle().await;
        std::fs::write(&b, "bb").unwrap();
        settle().await;
        assert_eq!(owner.reloads.load(Relaxed), 0, "b is not watched yet");
        std::fs::write(&a, "aa").unwrap();
        settle().await;
        assert_eq!(owner.reloads.load(Relaxed), 1);
        owner.files.lock().unwrap().push(b.clone());
        settle().await;
        assert_eq!(owner.reloads.load(Relaxed), 2, "a new list is a change");
        std::fs::write(&b, "bbb").unwrap();
        settle().await;
        assert_eq!(owner.reloads.load(Relaxed), 3);
        // A file that goes missing is a change, and edits to the others are still seen.
        std::fs::remove_file(&b).unwrap();
        settle().await;
        assert_eq!(owner.reloads.load(Relaxed), 4);
        std::fs::write(&a, "aaaa").unwrap();
        settle().await;
        assert_eq!(owner.reloads.load(Relaxed), 5, "b's absence hides nothing");
        drop(owner);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the watch ended with its owner")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_watch_ends_when_its_owner_is_gone() {
        let dir = testkit::TempDir::new("watch-end");
        let path = dir.join("f.toml");
        std::fs::write(&path, "a").unwrap();
        let task = tokio::spawn(watch_file(path.clone(), Duration::from_millis(10), || {
            None::<std::future::Ready<()>>
        }));
        tokio::time::sleep(Duration::from_millis(15)).await;
        std::fs::write(&path, "bb").unwrap();
        // Seen at the next look, acted on (and ended) at the one after.
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the watch returned")
            .unwrap();
    }
}
