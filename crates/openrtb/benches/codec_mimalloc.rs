//! The decode groups of `codec.rs` under mimalloc, the global allocator of the `gavel` binary
//! (so of the exchange and the bidder); the criterion binaries otherwise run on the system
//! allocator. mimalloc is a dev-dependency of this crate for this bench only, default features
//! off as in `gavel`. Groups are named `decode-mimalloc/...` and
//! `decode-baseline-mimalloc/...`.
//!
//! `cargo bench -p openrtb --bench codec_mimalloc -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Only the decode groups run here; encode and macros do not depend on the allocator enough.
#[allow(dead_code)]
#[path = "shared/codec.rs"]
mod shared;

use criterion::{Criterion, criterion_group, criterion_main};

fn decode(c: &mut Criterion) {
    shared::decode(c, "-mimalloc");
}

criterion_group!(benches, decode);
criterion_main!(benches);
