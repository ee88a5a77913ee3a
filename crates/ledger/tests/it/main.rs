//! The integration tests of `ledger` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p ledger --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod batching;
mod book_props;
mod client;
mod cluster;
mod common;
mod concurrency;
mod leased_ledger;
mod leases;
mod limits_cas;
mod lost_data;
mod model;
mod notices_anywhere;
mod per_bid;
