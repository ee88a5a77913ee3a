//! What a record costs: `Journal::record` on the request path, the writer's encoding of an
//! auction record at fan-out 10 (10 calls, 8 bids, 1 win), and the whole way to a file; and
//! the record's size, printed.
//!
//! `cargo bench -p journal --bench journal`

#![allow(clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flate2::Compression;
use flate2::write::GzEncoder;
use journal::layout::Limits;
use journal::metrics::Metrics;
use journal::{Line, Server, Sink, SinkError};

/// Throws lines away: the writer's own cost, without a sink's.
struct Discard;

impl Sink for Discard {
    async fn write(&mut self, _: &[Line]) -> Result<(), SinkError> {
        Ok(())
    }
    async fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

const CHUNK: u64 = 10_000;

fn sizes() {
    let record = common::auction("x7f3a9c2e-000000042", 10, 8);
    let mut line = Vec::new();
    records::to_line(&record, &mut line).unwrap();
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    for i in 0..1000 {
        let mut l = Vec::new();
        records::to_line(
            &common::auction(&format!("x7f3a9c2e-{i:09}"), 10, 8),
            &mut l,
        )
        .unwrap();
        gz.write_all(&l).unwrap();
        gz.write_all(b"\n").unwrap();
    }
    let gz = gz.finish().unwrap();
    println!(
        "auction record at fan-out 10 (10 calls, 8 bids, 1 win): {} bytes encoded, {} bytes per record gzipped (fast) over 1000",
        line.len(),
        gz.len() / 1000
    );
}

fn benches(c: &mut Criterion) {
    sizes();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let record = common::auction("x7f3a9c2e-000000042", 10, 8);
    let mut group = c.benchmark_group("journal");
    group.throughput(Throughput::Elements(1));

    // The request path's cost: queueing a record the caller built (the clone is not timed).
    // The writer never runs while the chunk is timed (one-thread runtime, nothing awaited).
    group.bench_function("record", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(CHUNK);
                left -= n;
                let batch: Vec<_> = (0..n).map(|_| record.clone()).collect();
                let metrics = Arc::new(Metrics::new(Server::Exchange));
                let _guard = rt.enter();
                let (journal, writer) = journal::start_with(Discard, n as usize, metrics, "n1");
                let start = Instant::now();
                for r in batch {
                    journal.record(r);
                }
                total += start.elapsed();
                rt.block_on(writer.shutdown(tokio::time::Instant::now() + Duration::from_secs(60)));
            }
            total
        });
    });

    // The writer's encoding: one auction record to its line.
    let mut line = Vec::new();
    group.bench_function("encode", |b| {
        b.iter(|| {
            line.clear();
            records::to_line(&record, &mut line).unwrap();
            line.len()
        });
    });

    // The writer's whole cost without a sink's: queued, taken, encoded, dropped.
    group.bench_function("to_discard", |b| {
        b.iter_custom(|iters| {
            let metrics = Arc::new(Metrics::new(Server::Exchange));
            let _guard = rt.enter();
            let (journal, writer) = journal::start_with(Discard, CHUNK as usize, metrics, "n1");
            let total = feed(&rt, &journal, &record, iters);
            rt.block_on(writer.shutdown(tokio::time::Instant::now() + Duration::from_secs(60)));
            total
        });
    });

    // The whole way: queued, encoded, written to a file (64 MB files, compressed beside the
    // writer). Timed from the first record queued to the last written.
    let dir = testkit::TempDir::new("journal-bench");
    group.bench_function("to_file", |b| {
        b.iter_custom(|iters| {
            let (journal, writer) = rt.block_on(common::file_journal(
                &dir,
                Limits {
                    max_bytes: 64 << 20,
                    max_age: Duration::from_secs(3600),
                },
                CHUNK as usize,
            ));
            let total = feed(&rt, &journal, &record, iters);
            rt.block_on(writer.shutdown(tokio::time::Instant::now() + Duration::from_secs(60)));
            total
        });
    });
    group.finish();
}

/// Queues `iters` copies of `record` in chunks and waits for each chunk to be written; the
/// time from each chunk's first record queued to its last written (the copies not timed).
fn feed(
    rt: &tokio::runtime::Runtime,
    journal: &journal::Journal,
    record: &records::Record,
    iters: u64,
) -> Duration {
    let metrics = journal.metrics().unwrap();
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        left -= n;
        let batch: Vec<_> = (0..n).map(|_| record.clone()).collect();
        let target = metrics.written.get() + n;
        let start = Instant::now();
        for r in batch {
            journal.record(r);
        }
        rt.block_on(async {
            while metrics.written.get() < target {
                tokio::time::sleep(Duration::from_micros(50)).await;
            }
        });
        total += start.elapsed();
    }
    total
}

criterion_group! {
    name = journal;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = benches
}
criterion_main!(journal);
