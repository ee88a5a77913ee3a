//! The admission gate on a bid request's path: taking and freeing a place, with and without the
//! pause check (`max_busy_ms`), whose price is a read of each worker's park counter and of the
//! clock. Run on a one-thread runtime, as the bidder runs; the runtime is not driven while
//! criterion measures, so its park count stands still, and the check's limit is set above the
//! measurement's length so that it keeps admitting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use admission::Mode;
use admission::{Admission, AdmissionConfig};
use criterion::{Criterion, criterion_group, criterion_main};

fn gate(max_busy_ms: u64) -> Admission {
    Admission::new(AdmissionConfig {
        mode: Some(Mode::Fixed),
        max_in_flight: 1_024,
        max_busy_ms: Some(max_busy_ms),
        ..AdmissionConfig::default()
    })
}

fn try_enter(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _on_the_runtime = rt.enter();
    let mut group = c.benchmark_group("admission");
    // Both functions well inside the check's 10 s limit.
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let without = gate(0);
    group.bench_function("try_enter/bound-only", |b| {
        b.iter(|| drop(without.try_enter().expect("room")));
    });
    let with = gate(10_000);
    group.bench_function("try_enter/bound+pause-check", |b| {
        b.iter(|| {
            drop(
                with.try_enter()
                    .expect("no 10 s streak within the measurement"),
            )
        });
    });
    group.finish();
}

criterion_group!(benches, try_enter);
criterion_main!(benches);
