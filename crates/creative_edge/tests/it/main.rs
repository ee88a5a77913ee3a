//! The integration tests of `creative_edge` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p creative_edge --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod herd;
mod http_semantics;
mod origin_faults;
mod store;
mod tiers;
mod tls;
