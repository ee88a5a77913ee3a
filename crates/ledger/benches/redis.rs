//! Reserve+commit pairs per second: per-bid mode against a local redis-server (one client
//! serially, i.e. latency-bound, and 16 concurrent tasks), and lease mode's local path. Then
//! the cost of one call, `reserve` and `take_lease`, on one Redis against a three-primary
//! Redis Cluster (the crate's cluster client), serially. Starts its own servers (the tests'
//! harness); needs `redis-server` and `redis-cli` on PATH.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;

use common::LedgerOn;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ledger::{LeaseConfig, LeasedLedger, MAX_AMOUNT, RedisLedger};
use units::{Limits, Nanos, Timestamp};

const NOW: Timestamp = Timestamp(20_000 * Timestamp::MS_PER_DAY);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn pairs(l: &RedisLedger, tag: &str, from: u64, count: u64) {
    let expires = Timestamp(NOW.0 + 60_000);
    for i in from..from + count {
        let id = format!("{tag}{i}");
        l.reserve(&id, "c", Nanos(5_000), expires, NOW)
            .await
            .unwrap()
            .unwrap();
        l.commit(&id, Some("c"), Nanos(4_000), NOW)
            .await
            .unwrap()
            .unwrap();
    }
}

fn per_bid(c: &mut Criterion) {
    let rt = runtime();
    let server = rt.block_on(common::RedisServer::start());
    let mut config = server.config("bench:");
    config.tombstone_ttl = Duration::from_secs(30);
    let l = RedisLedger::new(config);
    let limits = Limits {
        total: Nanos(MAX_AMOUNT),
        daily: None,
    };
    rt.block_on(l.set_limits("c", limits, NOW)).unwrap();
    let mut g = c.benchmark_group("per_bid");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    let mut next = 0u64;
    g.bench_function("reserve_commit_serial", |b| {
        b.iter_custom(|iters| {
            let from = next;
            next += iters;
            rt.block_on(async {
                let started = Instant::now();
                pairs(&l, "s", from, iters).await;
                started.elapsed()
            })
        });
    });
    g.bench_function("reserve_commit_16_tasks", |b| {
        b.iter_custom(|iters| {
            let from = next;
            next += iters;
            rt.block_on(async {
                let started = Instant::now();
                let per_task = iters.div_ceil(16);
                let tasks: Vec<_> = (0..16)
                    .map(|t| {
                        let l = l.clone();
                        tokio::spawn(
                            async move { pairs(&l, &format!("p{t}-"), from, per_task).await },
                        )
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                started.elapsed()
            })
        });
    });
    g.finish();
    drop(server);
}

fn leased(c: &mut Criterion) {
    let rt = runtime();
    let server = rt.block_on(common::RedisServer::start());
    let redis = server.ledger("bench:");
    let config = LeaseConfig {
        instance_id: "bench".into(),
        // Enough that the bench never waits for a top-up.
        lease_chunk: Nanos(1 << 50),
        tombstone_ttl: Duration::from_secs(1),
        ..LeaseConfig::default()
    };
    let campaigns = vec![(
        "c".to_owned(),
        Limits {
            total: Nanos(MAX_AMOUNT),
            daily: None,
        },
    )];
    let ledger = rt.block_on(LeasedLedger::start(redis, config, campaigns));
    // Leases are taken on demand: the first reservation asks for one and is refused.
    rt.block_on(async {
        for i in 0.. {
            let now = Timestamp::now();
            let id = format!("prime{i}");
            let expires = now.saturating_add(Duration::from_secs(10));
            if ledger.reserve(&id, "c", Nanos(1), expires, now).is_ok() {
                ledger.release(&id, now).unwrap();
                break;
            }
            assert!(i < 5_000, "no lease");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let mut g = c.benchmark_group("leased");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    let mut i = 0u64;
    g.bench_function("local_reserve_commit", |b| {
        b.iter(|| {
            i += 1;
            let id = format!("l{i}");
            let now = Timestamp::now();
            ledger
                .reserve(
                    &id,
                    "c",
                    Nanos(5_000),
                    now.saturating_add(Duration::from_secs(10)),
                    now,
                )
                .unwrap();
            ledger.commit(&id, Nanos(4_000), now).unwrap();
        });
    });
    g.finish();
    rt.block_on(ledger.shutdown()).unwrap();
    drop(server);
}

/// One serial call at a time on `l`: reservations (distinct ids) and lease grants (distinct
/// ids), on a campaign whose budget never runs out.
fn per_call_on(c: &mut Criterion, rt: &tokio::runtime::Runtime, l: &RedisLedger, name: &str) {
    let limits = Limits {
        total: Nanos(MAX_AMOUNT),
        daily: None,
    };
    rt.block_on(l.set_limits("c", limits, NOW)).unwrap();
    let mut g = c.benchmark_group("per_call");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    let expires = Timestamp(NOW.0 + 60_000);
    let mut next = 0u64;
    g.bench_function(format!("reserve_{name}"), |b| {
        b.iter(|| {
            next += 1;
            let id = format!("r{next}");
            rt.block_on(l.reserve(&id, "c", Nanos(1), expires, NOW))
                .unwrap()
                .unwrap();
        });
    });
    g.bench_function(format!("take_lease_{name}"), |b| {
        b.iter(|| {
            next += 1;
            let id = format!("l{next}");
            rt.block_on(l.take_lease(&id, "c", Nanos(1), expires, NOW))
                .unwrap()
                .unwrap();
        });
    });
    g.finish();
}

fn single_vs_cluster(c: &mut Criterion) {
    let rt = runtime();
    let server = rt.block_on(common::RedisServer::start());
    let mut config = server.config("bench:");
    config.tombstone_ttl = Duration::from_secs(30);
    per_call_on(c, &rt, &RedisLedger::new(config), "single");
    drop(server);
    let cluster = rt.block_on(testkit::RedisCluster::start(3, 0));
    let l = RedisLedger::try_new(ledger::RedisConfig {
        cluster_nodes: cluster.seed_addrs(),
        prefix: "bench:".into(),
        timeout: Duration::from_secs(2),
        tombstone_ttl: Duration::from_secs(30),
        ..ledger::RedisConfig::default()
    })
    .unwrap();
    per_call_on(c, &rt, &l, "cluster");
    drop(cluster);
}

criterion_group!(benches, per_bid, leased, single_vs_cluster);
criterion_main!(benches);
