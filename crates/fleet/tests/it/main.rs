//! The integration tests of `fleet` as one binary, one module per file: one link
//! instead of one per file. Run one file's tests with
//! `cargo test -p fleet --test it <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod follow;
mod openssl_keys;
