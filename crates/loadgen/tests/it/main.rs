//! The integration tests of `loadgen` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p loadgen --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod corpus;
mod generate;
mod http;
mod limits;
mod modes;
mod run;
mod valid_requests;
