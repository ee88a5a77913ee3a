//! Codec throughput: decode of every spec request fixture and of the realistic 2.5 kB request,
//! encode of a request and a response, and macro substitution on a typical win-notice URL.
//! System allocator; `codec_mimalloc` runs the decode groups under the `gavel` binary's
//! allocator.
//!
//! `cargo bench -p openrtb --bench codec -- --warm-up-time 1 --measurement-time 2`
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "shared/codec.rs"]
mod shared;

use criterion::{Criterion, criterion_group, criterion_main};

fn decode(c: &mut Criterion) {
    shared::decode(c, "");
}

criterion_group!(benches, decode, shared::encode, shared::macros);
criterion_main!(benches);
