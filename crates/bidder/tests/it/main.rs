//! The integration tests of `bidder` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p bidder --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod budget_writers;
mod common;
mod fleet;
mod money_paths;
mod redis_cluster;
mod redis_down;
mod redis_ops;
mod reload_under_load;
mod security;
mod server;
