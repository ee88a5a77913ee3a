//! The integration tests of `journal` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p journal --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod files;
mod nats;
mod queue;
