//! The integration tests of `gavel` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p gavel --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bidder_fleet;
mod cli;
mod cli_conventions;
mod common;
mod config_push;
mod drain;
mod env_config;
mod fleet_faults;
mod graceful;
mod ledger_loss;
mod load_gate;
mod logs;
mod money_loop;
mod price_tokens;
mod prom;
mod prometheus;
mod readiness;
mod reconcile;
mod records_bounded;
mod records_nats;
mod replay;
mod sighup;
