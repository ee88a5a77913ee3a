//! The integration tests of `openrtb` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p openrtb --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod convert;
mod errors;
mod roundtrip;
mod valid_never_refused;
