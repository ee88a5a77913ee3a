//! The crate's own Redis harness ([`ledger_redis::test_server`]), shared by every test file.
#![allow(unused_imports)]

pub use ledger_redis::test_server::{RedisServer, free_port};
