//! gzip on the exchange's calls to bidders: compressing a typical bid request (2.8 KB of
//! OpenRTB 2.6 JSON, compact as the exchange writes it: two banner slots, a deal, device,
//! consent string, eids, schain) at levels 1, 2 and 6, with a fresh deflate state per body (as
//! flate2's `GzEncoder` makes) and with one state reset per body (as `upstream::gzip::compress`
//! does); and inflating a typical bid response (2.8 KB, two banner bids with their markup)
//! as a bidder's default level 6 sends it. The compressed sizes are printed first. Times are
//! the bench thread's CPU time (see [`ThreadCpu`]), under mimalloc as in the `gavel` binary.
//!
//! The backend is flate2's: miniz_oxide by default, zlib-rs with `--features zlib-rs`; run
//! both to compare (the benchmark names carry the backend):
//!
//! ```text
//! cargo bench -p upstream --bench gzip -- --warm-up-time 1 --measurement-time 3
//! cargo bench -p upstream --bench gzip --features zlib-rs -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::io::Write;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, criterion_group, criterion_main};
use flate2::write::GzEncoder;
use flate2::{Compress, Compression, Crc, FlushCompress, Status};

const REQUEST: &[u8] = include_bytes!("fixtures/bid_request.json");
const RESPONSE: &[u8] = include_bytes!("fixtures/bid_response.json");

const BACKEND: &str = if cfg!(feature = "zlib-rs") {
    "zlib-rs"
} else {
    "miniz_oxide"
};

fn gzip_at(level: u32, body: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(
        Vec::with_capacity(body.len() / 2 + 64),
        Compression::new(level),
    );
    e.write_all(body).unwrap();
    e.finish().unwrap()
}

/// The bench thread's CPU time (user and system), in nanoseconds: what compressing costs the
/// exchange, unmoved by other processes sharing the machine (wall time on a busy 2-core
/// machine came out up to five times higher, and varied run to run).
struct ThreadCpu(WallTime);

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, started: u64) -> u64 {
        thread_cpu_ns().saturating_sub(started)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a.saturating_add(*b)
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, ns: &u64) -> f64 {
        *ns as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Nanoseconds, shown as wall time is.
        self.0.formatter()
    }
}

/// `body` deflated at `level` by a reset `deflate` and framed as gzip, as
/// `upstream::gzip::compress` does at its one level.
fn gzip_reusing(deflate: &mut Compress, body: &[u8]) -> Vec<u8> {
    deflate.reset();
    let mut out = Vec::with_capacity(body.len() + 64);
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
    let status = deflate
        .compress_vec(body, &mut out, FlushCompress::Finish)
        .unwrap();
    assert_eq!(status, Status::StreamEnd);
    let mut crc = Crc::new();
    crc.update(body);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    out
}

fn gzip(c: &mut Criterion<ThreadCpu>) {
    let sizes: Vec<String> = [1, 2, 6, 9]
        .iter()
        .map(|&level| format!("level {level} {} B", gzip_at(level, REQUEST).len()))
        .collect();
    println!(
        "{BACKEND}: request {} B -> {}; upstream::gzip::compress {} B; \
         response {} B -> level 6 {} B",
        REQUEST.len(),
        sizes.join(", "),
        upstream::gzip::compress(REQUEST).unwrap().len(),
        RESPONSE.len(),
        gzip_at(6, RESPONSE).len(),
    );
    let mut group = c.benchmark_group(format!("gzip/{BACKEND}"));
    for level in [1, 2, 6] {
        group.bench_function(format!("compress request level {level} fresh state"), |b| {
            b.iter(|| gzip_at(level, black_box(REQUEST)))
        });
        let mut deflate = Compress::new(Compression::new(level), false);
        group.bench_function(
            format!("compress request level {level} reused state"),
            |b| b.iter(|| gzip_reusing(&mut deflate, black_box(REQUEST))),
        );
    }
    group.bench_function("upstream::gzip::compress request", |b| {
        b.iter(|| upstream::gzip::compress(black_box(REQUEST)).unwrap())
    });
    let answer = gzip_at(6, RESPONSE);
    group.bench_function("upstream::gzip::inflate response", |b| {
        b.iter(|| upstream::gzip::inflate(black_box(&answer), 256 * 1024).unwrap())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu(WallTime));
    targets = gzip
}
criterion_main!(benches);
