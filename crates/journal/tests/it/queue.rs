//! The queue and the writer over test sinks: what the request path sees when the writer is
//! behind, what shutdown does, and the ids the writer gives.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::notice;
use journal::metrics::{DropReason, Metrics};
use journal::{Line, Server, Sink, SinkError};
use tokio::time::Instant;

/// A test double for a disk so slow it never finishes: every write waits forever.
struct Stalled;

impl Sink for Stalled {
    async fn write(&mut self, _: &[Line]) -> Result<(), SinkError> {
        std::future::pending().await
    }
    async fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Keeps every line in memory; fails the writes it is told to.
#[derive(Clone, Default)]
struct Kept {
    lines: Arc<Mutex<Vec<Line>>>,
    fail_next: Arc<Mutex<u32>>,
    closed: Arc<Mutex<bool>>,
}

impl Sink for Kept {
    async fn write(&mut self, lines: &[Line]) -> Result<(), SinkError> {
        let mut fail = self.fail_next.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return Err(SinkError::Other("disk full".to_owned()));
        }
        self.lines.lock().unwrap().extend_from_slice(lines);
        Ok(())
    }
    async fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    async fn close(&mut self) -> Result<(), SinkError> {
        *self.closed.lock().unwrap() = true;
        Ok(())
    }
}

fn metrics() -> Arc<Metrics> {
    Arc::new(Metrics::new(Server::Exchange))
}

// The test runtime has one thread: the writer runs only when the test awaits, so what the
// queue holds at each step is known exactly.

#[tokio::test(start_paused = true)]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let (journal, writer) = journal::start_with(Stalled, 4, metrics(), "n1");
    for i in 0..100 {
        journal.record(notice(&format!("a-{i}")));
    }
    let m = journal.metrics().unwrap();
    assert_eq!(m.dropped.get(DropReason::QueueFull), 96);
    assert_eq!(journal.queue_depth(), 4);
    let mut out = String::new();
    journal.render(&mut out);
    assert!(
        out.contains("gavel_exchange_records_queue_depth 4\n"),
        "{out}"
    );
    assert!(out.contains("gavel_exchange_records_dropped_total{reason=\"queue_full\"} 96\n"));

    // The writer takes the four and stalls on them; the queue has room again.
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(journal.queue_depth(), 0);
    for i in 0..6 {
        journal.record(notice(&format!("b-{i}")));
    }
    assert_eq!(m.dropped.get(DropReason::QueueFull), 98);

    // Shutdown gives up at its deadline: the stalled four and the queued four are lost.
    let deadline = Instant::now() + Duration::from_secs(2);
    assert_eq!(writer.shutdown(deadline).await, 8);
    assert!(Instant::now() >= deadline);
    assert_eq!(m.dropped.get(DropReason::Shutdown), 8);
    assert_eq!(m.written.get(), 0);
    // After shutdown a record is dropped and counted, never queued.
    journal.record(notice("late"));
    assert_eq!(m.dropped.get(DropReason::Shutdown), 9);
}

#[tokio::test]
async fn shutdown_drains_the_queue_and_closes_the_sink() {
    let sink = Kept::default();
    let (journal, writer) = journal::start_with(sink.clone(), 10_000, metrics(), "n1");
    // The writer has not run yet: all of these are still queued at shutdown.
    for i in 0..1000 {
        journal.record(notice(&format!("a-{i}")));
    }
    assert_eq!(journal.queue_depth(), 1000);
    assert_eq!(
        writer
            .shutdown(Instant::now() + Duration::from_secs(60))
            .await,
        0
    );
    assert!(*sink.closed.lock().unwrap());
    let lines = sink.lines.lock().unwrap();
    assert_eq!(lines.len(), 1000);
    for (i, line) in lines.iter().enumerate() {
        let record = records::from_line(&line.bytes).unwrap();
        assert_eq!(common::id_of(&record), format!("a-{i}"));
    }
    assert_eq!(journal.metrics().unwrap().written.get(), 1000);
}

#[tokio::test]
async fn ids_count_up_within_a_run_and_never_repeat_across_runs() {
    let mut instances = Vec::new();
    for _ in 0..2 {
        let sink = Kept::default();
        let (journal, writer) = journal::start_with(sink.clone(), 100, metrics(), "eu/1");
        for i in 0..3 {
            journal.record(notice(&format!("a-{i}")));
        }
        writer
            .shutdown(Instant::now() + Duration::from_secs(60))
            .await;
        let lines = sink.lines.lock().unwrap();
        let ids: Vec<&str> = lines.iter().map(|l| l.id.as_str()).collect();
        let (instance, seq) = ids[0].rsplit_once('-').unwrap();
        assert_eq!(seq, "0");
        assert!(instance.starts_with("eu_1-"), "{instance}");
        let random = instance.strip_prefix("eu_1-").unwrap();
        assert_eq!(random.len(), 16);
        assert!(random.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(ids, [0, 1, 2].map(|n| format!("{instance}-{n}")));
        instances.push(instance.to_owned());
    }
    assert_ne!(instances[0], instances[1]);
}

#[tokio::test]
async fn a_failing_sink_is_counted_and_the_writer_keeps_going() {
    let sink = Kept::default();
    *sink.fail_next.lock().unwrap() = 2;
    let (journal, writer) = journal::start_with(sink.clone(), 100, metrics(), "n1");
    let m = journal.metrics().unwrap();
    for batch in 0..3 {
        for i in 0..5 {
            journal.record(notice(&format!("{batch}-{i}")));
        }
        // One batch per round: the writer takes all five.
        common::wait_until("taken", || {
            m.written.get() + m.dropped.get(DropReason::SinkError) == 5 * (batch + 1)
        })
        .await;
    }
    assert_eq!(
        writer
            .shutdown(Instant::now() + Duration::from_secs(60))
            .await,
        0
    );
    assert_eq!(m.dropped.get(DropReason::SinkError), 10);
    assert_eq!(m.written.get(), 5);
    let lines = sink.lines.lock().unwrap();
    let ids: Vec<String> = lines
        .iter()
        .map(|l| common::id_of(&records::from_line(&l.bytes).unwrap()))
        .collect();
    assert_eq!(ids, ["2-0", "2-1", "2-2", "2-3", "2-4"]);
}
