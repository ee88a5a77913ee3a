//! The ledger's hot path: a reservation per bid, then its commit (won) or release (lost), on a
//! book of 10,000 campaigns. Throughput counts reserve+settle pairs.
//!
//! `cargo bench -p ledger --bench book`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ledger::Book;
use units::{Limits, Nanos, Timestamp};

const CAMPAIGNS: usize = 10_000;
/// Pairs per measured iteration.
const BATCH: u64 = 1_000;

fn book(names: &[String], now: Timestamp) -> Book {
    // Simulated time advances a millisecond per batch of 1,000 pairs, so a 100 ms TTL keeps
    // ~100,000 tombstones: a busy server's steady state, without growing for the whole run.
    let mut book = Book::new(Duration::from_millis(100));
    let limits = Limits {
        total: Nanos(i64::MAX / 4),
        daily: Some(Nanos(i64::MAX / 8)),
    };
    for name in names {
        book.set_limits(name, limits, now);
    }
    book
}

fn pairs(c: &mut Criterion) {
    let names: Vec<String> = (0..CAMPAIGNS).map(|i| format!("campaign-{i}")).collect();
    let mut group = c.benchmark_group("ledger");
    group.throughput(Throughput::Elements(BATCH));

    for settle in ["commit", "release"] {
        let mut now = Timestamp(20_000 * Timestamp::MS_PER_DAY);
        let mut b = book(&names, now);
        let mut seq: u64 = 0;
        // Formatting the id stays in the timed loop: the bidder formats one per bid too.
        group.bench_function(format!("reserve+{settle}"), |bench| {
            bench.iter(|| {
                for _ in 0..BATCH {
                    seq += 1;
                    let id = format!("bid-{seq}");
                    let campaign = &names[(seq as usize * 7_919) % CAMPAIGNS];
                    let expires = Timestamp(now.0 + 5_000);
                    let reserved = b.reserve(&id, campaign, Nanos(2_500_000), expires, now);
                    black_box(reserved).ok();
                    if settle == "commit" {
                        black_box(b.commit(&id, Nanos(1_700_000), now)).ok();
                    } else {
                        black_box(b.release(&id, now)).ok();
                    }
                }
                // The server's timer: tombstones age out, the book keeps its steady-state size.
                now = Timestamp(now.0 + 1);
                b.expire(now);
            });
        });
        black_box(b.open_reservations());
    }
    group.finish();
}

criterion_group!(benches, pairs);
criterion_main!(benches);
