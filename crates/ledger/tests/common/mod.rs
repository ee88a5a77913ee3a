//! The Redis harness of the ledger's tests and benches: `testkit`'s real `redis-server`, plus
//! a ledger on it.
#![allow(unused_imports, dead_code)]

use std::time::Duration;

use ledger::{RedisConfig, RedisLedger};
pub use testkit::{RedisServer, free_port};

/// A ledger on `server`, and the configuration it uses.
pub trait LedgerOn {
    /// A ledger with a 2 s timeout and `prefix`.
    fn ledger(&self, prefix: &str) -> RedisLedger;
    /// The configuration [`LedgerOn::ledger`] uses, to adjust before building a ledger.
    fn config(&self, prefix: &str) -> RedisConfig;
}

impl LedgerOn for RedisServer {
    fn ledger(&self, prefix: &str) -> RedisLedger {
        RedisLedger::new(self.config(prefix))
    }

    fn config(&self, prefix: &str) -> RedisConfig {
        RedisConfig {
            addr: self.addr(),
            prefix: prefix.to_owned(),
            timeout: Duration::from_secs(2),
            ..RedisConfig::default()
        }
    }
}
