//! The memory tier: objects behind one lock in a byte-bounded LRU. Lookups are a hash probe
//! and a pointer move under the lock; bodies are shared (`Arc`), never copied per hit.

use std::sync::{Arc, Mutex};

use crate::lru::Lru;
use crate::metrics::TierStats;
use crate::object::Object;

/// The tier.
#[derive(Debug)]
pub struct MemoryTier {
    lru: Mutex<Lru<Arc<Object>>>,
}

impl MemoryTier {
    /// An empty tier of `max_bytes`.
    pub fn new(max_bytes: u64) -> MemoryTier {
        MemoryTier {
            lru: Mutex::new(Lru::new(max_bytes)),
        }
    }

    /// The object under `key`, fresh or stale, marked as recently used.
    pub fn get(&self, key: &str) -> Option<Arc<Object>> {
        telemetry::locks::lock(&self.lru).get(key).cloned()
    }

    /// Stores `object` under `key`, evicting the least recently used to make room.
    pub fn insert(&self, key: &str, object: Arc<Object>, stats: &TierStats) {
        let weight = object.weight(key);
        let mut lru = telemetry::locks::lock(&self.lru);
        let evicted = lru.insert(key.to_owned(), object, weight);
        // A refused object (heavier than the tier) comes back under its own key.
        let refused = evicted.iter().any(|(k, _)| k == key);
        let evictions = evicted.len() - usize::from(refused);
        stats.evictions.add(evictions as u64);
        if !refused {
            stats.inserts.inc();
        }
        stats.bytes.set(lru.weight());
        stats.objects.set(lru.len() as u64);
        drop(lru);
        // The evicted objects are freed here, outside the lock.
        drop(evicted);
    }

    /// Drops the object under `key`.
    pub fn remove(&self, key: &str, stats: &TierStats) {
        let mut lru = telemetry::locks::lock(&self.lru);
        let removed = lru.remove(key);
        stats.bytes.set(lru.weight());
        stats.objects.set(lru.len() as u64);
        drop(lru);
        drop(removed);
    }
}
