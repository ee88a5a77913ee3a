//! A precise one-shot timer for the scheduler, inside the tokio runtime.
//!
//! tokio's own timer rounds to its 1 ms tick, which would add up to a millisecond to every
//! latency measured from a scheduled instant. On Linux a `timerfd` registered with the
//! runtime's reactor wakes the scheduler task within tens of microseconds, on the runtime's
//! own thread: no helper thread, so no context switch per request. Elsewhere the tokio timer
//! is used, and its millisecond granularity shows in the generator's schedule lag.

use std::io;
use std::time::Instant;

#[cfg(target_os = "linux")]
pub(crate) use linux::Timer;

#[cfg(not(target_os = "linux"))]
pub(crate) use portable::Timer;

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use rustix::fd::OwnedFd;
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
        timerfd_settime,
    };
    use tokio::io::unix::AsyncFd;

    pub(crate) struct Timer {
        fd: AsyncFd<OwnedFd>,
    }

    impl Timer {
        /// Needs a running tokio runtime with I/O enabled.
        pub(crate) fn new() -> io::Result<Timer> {
            let fd = timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )?;
            #[allow(
                deprecated,
                reason = "AsyncFd::new is deprecated because it accepts any raw fd; here it gets \
                          an OwnedFd that it alone owns and closes, which is what I/O safety \
                          asks. Its replacement, AsyncFd::register, is unsafe, and this \
                          workspace forbids unsafe code."
            )]
            let fd = AsyncFd::new(fd)?;
            Ok(Timer { fd })
        }

        /// Completes at `due` (at once if it has passed).
        pub(crate) async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
            let now = Instant::now();
            if due <= now {
                return Ok(());
            }
            let wait = due - now;
            let spec = Itimerspec {
                it_interval: Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: Timespec {
                    tv_sec: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
                    // At least 1 ns: an all-zero value would disarm the timer.
                    tv_nsec: i64::from(wait.subsec_nanos().max(1)),
                },
            };
            timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
            let mut expirations = [0u8; 8];
            loop {
                let mut ready = self.fd.readable().await?;
                match rustix::io::read(ready.get_inner(), &mut expirations) {
                    Ok(_) => return Ok(()),
                    Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod portable {
    use super::*;

    pub(crate) struct Timer;

    impl Timer {
        pub(crate) fn new() -> io::Result<Timer> {
            Ok(Timer)
        }

        pub(crate) async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    /// The timer never fires early, and a deadline in the past completes at once.
    #[tokio::test]
    async fn fires_at_or_after_the_deadline() {
        let mut t = Timer::new().unwrap();
        for micros in [1u64, 50, 300, 2000] {
            let due = Instant::now() + Duration::from_micros(micros);
            t.sleep_until(due).await.unwrap();
            assert!(Instant::now() >= due);
        }
        t.sleep_until(Instant::now() - Duration::from_millis(5))
            .await
            .unwrap();
    }
}
