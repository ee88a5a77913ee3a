//! The file sink end to end: a journal writing real files in a temp directory, read back with
//! `read::read_paths`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Read;
use std::time::Duration;

use common::{auction, file_journal, file_journal_keeping, files, ids_in, notice, wait_until};
use flate2::read::GzDecoder;
use journal::layout::{Limits, Retention};
use journal::metrics::{DropReason, RemovalReason};
use journal::{Config, Server, SinkKind};
use testkit::TempDir;
use tokio::time::Instant;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[tokio::test]
async fn every_record_is_written_once_in_order_across_size_rotations() {
    let dir = TempDir::new("journal-size");
    // About 2 KB a record: a file completes every few records.
    let limits = Limits {
        max_bytes: 8 * 1024,
        max_age: Duration::from_secs(3600),
    };
    let (journal, writer) = file_journal(&dir, limits, 10_000).await;
    let mut sent = Vec::new();
    for i in 0..300 {
        let id = format!("a-{i}");
        journal.record(if i % 3 == 0 {
            notice(&id)
        } else {
            auction(&id, 10, 8)
        });
        sent.push(id);
        if i % 40 == 0 {
            // Let the writer take a batch, so rotation happens between and within batches.
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(writer.shutdown(far()).await, 0);
    let metrics = journal.metrics().unwrap();
    assert_eq!(metrics.written.get(), 300);
    assert_eq!(metrics.dropped.total(), 0);

    assert_eq!(ids_in(&dir), sent, "every record once, in the order sent");
    let completed = files(&dir, ".ndjson.gz");
    assert!(completed.len() >= 10, "{} files", completed.len());
    assert!(
        files(&dir, ".ndjson").is_empty(),
        "shutdown completes the last file"
    );
    assert!(files(&dir, ".tmp").is_empty());
    assert_eq!(metrics.files_completed.get(), completed.len() as u64);
    let mut bytes = 0;
    for (seq, path) in completed.iter().enumerate() {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("exchange-n1-"), "{name}");
        assert!(name.ends_with(&format!("-{seq:06}.ndjson.gz")), "{name}");
        // Each is one whole gzip member that decodes to whole lines.
        let mut text = Vec::new();
        GzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_end(&mut text)
            .unwrap();
        assert_eq!(text.last(), Some(&b'\n'), "{name} ends with a whole record");
        bytes += text.len() - text.iter().filter(|b| **b == b'\n').count();
    }
    assert_eq!(metrics.bytes.get(), bytes as u64);
}

#[tokio::test(start_paused = true)]
async fn a_file_completes_with_age_while_idle_and_on_write() {
    let dir = TempDir::new("journal-age");
    let limits = Limits {
        max_bytes: 1 << 30,
        max_age: Duration::from_secs(10),
    };
    let (journal, writer) = file_journal(&dir, limits, 1000).await;
    let metrics = journal.metrics().unwrap();
    let mut sent = Vec::new();
    for round in 0..3 {
        for i in 0..5 {
            let id = format!("r{round}-{i}");
            journal.record(notice(&id));
            sent.push(id);
        }
        let written = sent.len() as u64;
        wait_until("written", || metrics.written.get() == written).await;
        assert_eq!(
            files(&dir, ".ndjson").len(),
            1,
            "round {round}: one file open"
        );
        // Idle past the age: the writer's tick completes the file.
        tokio::time::sleep(Duration::from_secs(11)).await;
        wait_until("completed", || {
            metrics.files_completed.get() == round + 1 && files(&dir, ".ndjson").is_empty()
        })
        .await;
    }
    // A file past its age when a batch comes is completed before the batch is written: the
    // second batch below goes to a new file.
    journal.record(notice("late-0"));
    sent.push("late-0".to_owned());
    wait_until("written", || metrics.written.get() == 16).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    journal.record(notice("late-1"));
    sent.push("late-1".to_owned());
    wait_until("written", || metrics.written.get() == 17).await;
    assert_eq!(
        writer
            .shutdown(Instant::now() + Duration::from_secs(5))
            .await,
        0
    );
    assert_eq!(files(&dir, ".ndjson.gz").len(), 5);
    assert_eq!(metrics.files_completed.get(), 5);
    assert_eq!(ids_in(&dir), sent);
}

#[tokio::test]
async fn a_completed_file_never_changes() {
    let dir = TempDir::new("journal-frozen");
    let limits = Limits {
        max_bytes: 4 * 1024,
        max_age: Duration::from_secs(3600),
    };
    let (journal, writer) = file_journal(&dir, limits, 10_000).await;
    let metrics = journal.metrics().unwrap();
    for i in 0..20 {
        journal.record(auction(&format!("a-{i}"), 10, 8));
    }
    wait_until("three files completed", || {
        metrics.files_completed.get() >= 3
    })
    .await;
    let before: Vec<_> = files(&dir, ".ndjson.gz")
        .into_iter()
        .map(|p| {
            let meta = std::fs::metadata(&p).unwrap();
            (
                p.clone(),
                std::fs::read(&p).unwrap(),
                meta.modified().unwrap(),
            )
        })
        .collect();
    for i in 20..60 {
        journal.record(auction(&format!("a-{i}"), 10, 8));
    }
    writer.shutdown(far()).await;
    assert!(metrics.files_completed.get() > before.len() as u64);
    for (path, bytes, modified) in before {
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{}", path.display());
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified
        );
    }
    assert_eq!(ids_in(&dir).len(), 60);
}

#[tokio::test]
async fn a_plain_file_left_by_a_crash_is_completed_at_start_never_appended_to() {
    let dir = TempDir::new("journal-leftover");
    let line = |id: &str| {
        let mut out = Vec::new();
        records::to_line(&notice(id), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    // The crash cut the last record short.
    let torn = line("lost");
    let leftover = format!(
        "{}\n{}\n{}",
        line("old-0"),
        line("old-1"),
        &torn[..torn.len() / 2]
    );
    let plain = dir.file("exchange-n1-20240101T000000-000007.ndjson", &leftover);
    // A compression the crash cut short: removed, its plain file completed instead.
    dir.file(
        "exchange-n1-20240101T000000-000007.ndjson.gz.tmp",
        "torn gzip",
    );
    // Another node's current file, and another server's: never touched.
    let other = dir.file(
        "exchange-n1_b-20240101T000000-000000.ndjson",
        &line("other"),
    );
    let bidder = dir.file("bidder-n1-20240101T000000-000000.ndjson", &line("bidder"));

    let config = Config {
        sink: SinkKind::File,
        dir: dir.path().to_str().unwrap().to_owned(),
        ..Config::default()
    };
    let (journal, writer) = journal::start(&config, Server::Exchange, "n1")
        .await
        .unwrap();
    assert!(!plain.exists());
    assert!(
        !dir.join("exchange-n1-20240101T000000-000007.ndjson.gz.tmp")
            .exists()
    );
    let completed = dir.join("exchange-n1-20240101T000000-000007.ndjson.gz");
    let mut text = String::new();
    GzDecoder::new(std::fs::File::open(&completed).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, leftover, "completed as it was");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), line("other"));
    assert_eq!(std::fs::read_to_string(&bidder).unwrap(), line("bidder"));
    assert_eq!(journal.metrics().unwrap().files_completed.get(), 1);

    journal.record(notice("new-0"));
    assert_eq!(writer.shutdown(far()).await, 0);
    std::fs::remove_file(&other).unwrap();
    std::fs::remove_file(&bidder).unwrap();
    // The leftover's run sorts first; its cut-short last record is not read.
    assert_eq!(ids_in(&dir), ["old-0", "old-1", "new-0"]);
    assert_eq!(files(&dir, ".ndjson.gz").len(), 2);
}

#[tokio::test]
async fn a_write_error_is_counted_and_the_next_batch_is_written() {
    let dir = TempDir::new("journal-error");
    let records = dir.join("records");
    // Every batch completes its file, so each batch opens a new one.
    let limits = Limits {
        max_bytes: 1,
        max_age: Duration::from_secs(3600),
    };
    let (journal, writer) = file_journal(&records, limits, 1000).await;
    let metrics = journal.metrics().unwrap();
    journal.record(notice("a"));
    wait_until("completed", || metrics.files_completed.get() == 1).await;
    // The directory is gone: the next file cannot be created.
    std::fs::remove_dir_all(&records).unwrap();
    journal.record(notice("b"));
    journal.record(notice("c"));
    wait_until("dropped", || {
        metrics.dropped.get(DropReason::SinkError) == 2
    })
    .await;
    std::fs::create_dir(&records).unwrap();
    journal.record(notice("d"));
    assert_eq!(writer.shutdown(far()).await, 0);
    assert_eq!(metrics.written.get(), 2);
    assert_eq!(metrics.dropped.get(DropReason::SinkError), 2);
    assert_eq!(ids_in(&records), ["d"]);
}

#[tokio::test]
async fn an_off_journal_keeps_nothing_but_shows_its_metrics() {
    let (journal, writer) = journal::start(&Config::default(), Server::Bidder, "n1")
        .await
        .unwrap();
    assert!(!journal.is_on());
    journal.record(notice("x"));
    assert_eq!(writer.shutdown(far()).await, 0);
    let mut out = String::new();
    journal.render(&mut out);
    assert!(
        out.contains("gavel_bidder_records_written_total 0\n"),
        "{out}"
    );
    assert!(out.contains("gavel_bidder_records_dropped_total{reason=\"queue_full\"} 0\n"));
    let mut off = String::new();
    journal::Journal::off().render(&mut off);
    assert!(off.is_empty());
}

#[tokio::test]
async fn the_oldest_files_go_once_the_directory_is_past_its_size_and_others_are_left_alone() {
    let dir = TempDir::new("journal-retention");
    // Another node's file in the same directory: never this writer's to remove.
    let other = dir.file("exchange-n2-20250309T070504-000000.ndjson.gz", "not ours");
    let limits = Limits {
        max_bytes: 16 * 1024,
        max_age: Duration::from_secs(3600),
    };
    let retention = Retention {
        max_total_bytes: 48 * 1024,
        max_age: Duration::from_secs(3600),
    };
    let (journal, writer) = file_journal_keeping(&dir, limits, retention, 10_000).await;
    for i in 0..2_000 {
        journal.record(auction(&format!("a-{i}"), 10, 8));
        if i % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(writer.shutdown(far()).await, 0);
    let metrics = journal.metrics().unwrap();
    assert_eq!(metrics.written.get(), 2_000);
    let ours: Vec<_> = files(&dir, ".ndjson.gz")
        .into_iter()
        .filter(|p| p != &other)
        .collect();
    let total: u64 = ours
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let completed = metrics.files_completed.get();
    let removed = metrics.files_removed.get(RemovalReason::Size);
    assert!(completed > 20, "{completed} files completed");
    assert_eq!(
        ours.len() as u64,
        completed - removed,
        "every removal counted"
    );
    // The last completion's retention runs on the blocking pool after shutdown returns: the
    // directory may hold one file more than the cap for a moment, never more.
    wait_until("retention after the last file", || {
        let now: u64 = files(&dir, ".ndjson.gz")
            .iter()
            .filter(|p| *p != &other)
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        now <= retention.max_total_bytes
    })
    .await;
    assert!(
        total <= retention.max_total_bytes + limits.max_bytes * 2,
        "{total} bytes"
    );
    // What is left is the newest: the last record written is there, the first is not.
    let left: Vec<_> = files(&dir, ".ndjson.gz")
        .into_iter()
        .filter(|p| p != &other)
        .collect();
    let mut ids = Vec::new();
    journal::read::read_paths(&left, |r| ids.push(common::id_of(&r))).unwrap();
    assert_eq!(ids.last().map(String::as_str), Some("a-1999"));
    assert!(!ids.iter().any(|id| id == "a-0"));
    assert!(other.exists(), "another node's file is left alone");
    assert_eq!(metrics.files_removed.get(RemovalReason::Age), 0);
}

#[tokio::test]
async fn files_past_their_age_go_at_start() {
    let dir = TempDir::new("journal-age");
    let limits = Limits {
        max_bytes: 1024,
        max_age: Duration::from_secs(3600),
    };
    let (journal, writer) = file_journal(&dir, limits, 1_000).await;
    for i in 0..20 {
        journal.record(auction(&format!("a-{i}"), 10, 8));
    }
    assert_eq!(writer.shutdown(far()).await, 0);
    let before = files(&dir, ".ndjson.gz").len();
    assert!(before > 2);
    // Made ten days old; a run keeping seven days removes them all at its start.
    let old = std::time::SystemTime::now() - Duration::from_secs(10 * 86_400);
    for path in files(&dir, ".ndjson.gz") {
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let week = Retention {
        max_total_bytes: u64::MAX,
        max_age: Duration::from_secs(7 * 86_400),
    };
    let (journal, writer) = file_journal_keeping(&dir, limits, week, 1_000).await;
    assert_eq!(writer.shutdown(far()).await, 0);
    let metrics = journal.metrics().unwrap();
    assert_eq!(metrics.files_removed.get(RemovalReason::Age), before as u64);
    assert!(files(&dir, ".ndjson.gz").is_empty());
}

#[tokio::test]
async fn every_line_carries_its_own_record_id_and_a_copy_is_read_once() {
    let dir = TempDir::new("journal-rid");
    let limits = Limits {
        max_bytes: 1024 * 1024,
        max_age: Duration::from_secs(3600),
    };
    let (journal, writer) = file_journal(&dir, limits, 1_000).await;
    for i in 0..50 {
        journal.record(notice(&format!("a-{i}")));
    }
    assert_eq!(writer.shutdown(far()).await, 0);
    let completed = files(&dir, ".ndjson.gz");
    let mut text = String::new();
    GzDecoder::new(std::fs::File::open(&completed[0]).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let ids: std::collections::HashSet<_> = text
        .lines()
        .map(|l| {
            let (writer, seq) =
                records::identity::rid(l.as_bytes()).unwrap_or_else(|| panic!("no rid: {l}"));
            assert!(writer.starts_with("n1-"), "{writer}");
            (writer.to_owned(), seq)
        })
        .collect();
    assert_eq!(ids.len(), 50, "fifty records, fifty ids");
    // A copy of the file beside it: each record read once, the copy's counted as duplicates.
    std::fs::copy(&completed[0], dir.join("copy-exchange-n1.ndjson.gz")).unwrap();
    let stats = journal::read::read_paths(&[dir.to_path_buf()], |_| {}).unwrap();
    assert_eq!((stats.records, stats.duplicates), (50, 50));
}
