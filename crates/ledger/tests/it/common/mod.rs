//! The Redis harness of the ledger's tests and benches: `testkit`'s real `redis-server`, plus
//! a ledger on it.
#![allow(unused_imports, dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ledger::{LeaseConfig, LeasedLedger, RedisConfig, RedisLedger, Refusal};
pub use testkit::{RedisServer, free_port};
use units::{Nanos, Timestamp};

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

/// Waits until `campaign` has leased budget on `ledger` (a probe reservation, released). Leases
/// are taken on demand: the first reservation asks, and is refused until the lease arrives.
pub async fn until_leased(ledger: &LeasedLedger, campaign: &str) -> Duration {
    static PROBES: AtomicU64 = AtomicU64::new(0);
    let started = Instant::now();
    loop {
        let id = format!("probe-{}", PROBES.fetch_add(1, Ordering::Relaxed));
        let now = Timestamp::now();
        let expires = now.saturating_add(Duration::from_secs(5));
        match ledger.reserve(&id, campaign, Nanos(1), expires, now) {
            Ok(()) => {
                ledger
                    .release(&id, now)
                    .unwrap_or_else(|e| panic!("probe not released: {e}"));
                return started.elapsed();
            }
            Err(Refusal::InsufficientBudget) => {}
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{campaign}: no lease"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Lease settings for a test instance: quick reports (50 ms), a 1 s lease, chunks of 1,000,000
/// nanos, no idle close within a test.
pub fn lease_config(instance: &str) -> LeaseConfig {
    LeaseConfig {
        instance_id: instance.to_owned(),
        lease_chunk: Nanos(1_000_000),
        lease_ttl: Duration::from_millis(1_000),
        safety_margin: Duration::from_millis(300),
        report_interval: Duration::from_millis(50),
        idle_close: Duration::from_secs(30),
        tombstone_ttl: Duration::from_secs(60),
        // One writer for every test instance, as before limits had versions.
        limits: ledger::LimitsRole::Writer("test".to_owned()),
    }
}
