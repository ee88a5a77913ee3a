//! The integration tests of `exchange` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p exchange --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod auction_e2e;
mod bidder_hosts;
mod browser;
mod fleet;
mod markup_cache;
mod notice_answers;
mod notice_isolation;
mod open_internet;
mod overload_faults;
mod pools;
mod privacy;
mod records;
mod reload;
mod support;
mod tls;
mod traffic;
