//! The live progress line of `gavel load`: elapsed time, rate, requests in flight and p99 so
//! far, redrawn in place on stderr twice a second. Shown only when stderr is a terminal, so
//! that logs and pipes get the final report alone.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen::{Progress, ProgressSnapshot};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const EVERY: Duration = Duration::from_millis(500);

/// The running line; [`Line::stop`] erases it.
pub struct Line {
    task: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

/// Starts redrawing if `wanted` and stderr is a terminal.
pub fn start(progress: Arc<Progress>, wanted: bool) -> Line {
    if !(wanted && std::io::stderr().is_terminal()) {
        return Line { task: None };
    }
    let (stop_tx, mut stop_rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let mut last = (started, 0u64);
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            let snap = progress.snapshot();
            let secs = now.duration_since(last.0).as_secs_f64();
            let rate = if secs > 0.0 {
                (snap.ended - last.1) as f64 / secs
            } else {
                0.0
            };
            last = (now, snap.ended);
            let text = render(now.duration_since(started), rate, &snap);
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{text}");
            let _ = err.flush();
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    });
    Line {
        task: Some((stop_tx, task)),
    }
}

impl Line {
    pub async fn stop(self) {
        if let Some((stop, task)) = self.task {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

/// One line of progress, e.g. `12.5 s  4998 req/s  in flight 12  p99 3.41 ms  errors 0`.
pub fn render(elapsed: Duration, rate: f64, s: &ProgressSnapshot) -> String {
    let p99 = s
        .p99_ms
        .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2} ms"));
    let phase = if s.measuring { "" } else { "  (warm-up)" };
    format!(
        "{:6.1} s  {:>8.0} req/s  in flight {:>5}  p99 {p99}  errors {}{phase}",
        elapsed.as_secs_f64(),
        rate,
        s.in_flight,
        s.errors
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_reads_well() {
        let s = ProgressSnapshot {
            issued: 100,
            ended: 90,
            in_flight: 10,
            errors: 1,
            p99_ms: Some(3.456),
            measuring: true,
        };
        let text = render(Duration::from_millis(12_500), 4998.4, &s);
        assert_eq!(
            text,
            "  12.5 s      4998 req/s  in flight    10  p99 3.46 ms  errors 1"
        );
        let warm = ProgressSnapshot {
            p99_ms: None,
            measuring: false,
            ..s
        };
        assert!(render(Duration::ZERO, 0.0, &warm).ends_with("p99 -  errors 1  (warm-up)"));
    }
}
