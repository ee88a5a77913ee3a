//! The integration tests of `sim` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p sim --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fleet;
mod lean;
