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

/// Calls `on_change` each time the file at `path` is seen with a new stamp that held for one
/// more look (a file being written is not read half-way: a write in progress changes the stamp
/// again), looking every `every`, and awaits what it returns before looking again. Returns when
/// `on_change` returns `None` (its owner is gone). A missing file is not a change: the last
/// version keeps serving.
pub async fn watch_file<F, Fut>(path: PathBuf, every: Duration, mut on_change: F)
where
    F: FnMut() -> Option<Fut>,
    Fut: Future<Output = ()>,
{
    let mut last = stamp(&path);
    let mut pending = None;
    loop {
        tokio::time::sleep(every).await;
        let now = stamp(&path);
        if now.is_none() || now == last {
            pending = None;
            continue;
        }
        if now != pending {
            pending = now;
            continue;
        }
        last = now;
        pending = None;
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
