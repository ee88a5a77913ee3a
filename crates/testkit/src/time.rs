//! Waiting for something to become true without betting on a fixed sleep: poll a condition
//! until it holds, for at most a bound wide enough for a loaded two-core machine running the
//! whole suite. A condition that never holds fails the test with what was awaited.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often the waits below look again.
const ASYNC_POLL: Duration = Duration::from_millis(10);
const BLOCKING_POLL: Duration = Duration::from_millis(50);

/// Polls `done` until it holds.
///
/// # Panics
/// After `within`, naming `what`.
pub async fn wait_until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    eventually(within, what, || std::future::ready(done())).await;
}

/// Polls the asynchronous `done` until it holds.
///
/// # Panics
/// After `within`, naming `what`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(ASYNC_POLL).await;
    }
}

/// Polls `probe` from a plain thread (a test driving child processes) for at most `within`;
/// whether it held.
pub fn eventually_blocking(within: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if probe() {
            return true;
        }
        // A plain thread, never a runtime's: this is the blocking wait for such callers.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(BLOCKING_POLL);
    }
    probe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wait_returns_once_its_condition_holds_and_fails_when_it_never_does() {
        let mut polls = 0;
        wait_until(Duration::from_secs(1), "the third poll", || {
            polls += 1;
            polls == 3
        })
        .await;
        assert_eq!(polls, 3);
        let never = tokio::spawn(wait_until(Duration::from_millis(50), "never", || false));
        let e = never.await.expect_err("a condition that never holds fails");
        assert!(e.is_panic());
    }

    #[test]
    fn a_blocking_wait_says_whether_its_probe_held() {
        let mut n = 0;
        assert!(eventually_blocking(Duration::from_secs(1), || {
            n += 1;
            n == 2
        }));
        assert!(!eventually_blocking(Duration::from_millis(1), || false));
    }
}
