//! Origin failures remembered for a short while (negative caching), so a missing creative or
//! a failing origin is not asked again by every client. Bounded: when full, expired entries
//! are swept, and if none are, a new failure is simply not remembered.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::flight::Failure;

/// Most failures remembered at once.
const MAX_ENTRIES: usize = 100_000;

/// The remembered failures, by object key.
#[derive(Debug, Default)]
pub struct Negative {
    entries: Mutex<HashMap<String, (Failure, u64)>>,
}

impl Negative {
    /// The failure remembered for `key` at `now_ms`, if still remembered.
    pub fn get(&self, key: &str, now_ms: u64) -> Option<Failure> {
        let entries = telemetry::locks::lock(&self.entries);
        entries
            .get(key)
            .filter(|(_, until)| *until > now_ms)
            .map(|(f, _)| *f)
    }

    /// Remembers `failure` for `key` until `until_ms`.
    pub fn insert(&self, key: &str, failure: Failure, until_ms: u64, now_ms: u64) {
        let mut entries = telemetry::locks::lock(&self.entries);
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(key) {
            entries.retain(|_, (_, until)| *until > now_ms);
            if entries.len() >= MAX_ENTRIES {
                return;
            }
        }
        entries.insert(key.to_owned(), (failure, until_ms));
    }

    /// Forgets `key` (its object was fetched).
    pub fn clear(&self, key: &str) {
        telemetry::locks::lock(&self.entries).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn a_failure_is_remembered_until_its_time_and_then_forgotten() {
        let n = Negative::default();
        let gone = Failure::Missing(StatusCode::NOT_FOUND);
        n.insert("k", gone, 1_000, 0);
        assert_eq!(n.get("k", 999), Some(gone));
        assert_eq!(n.get("k", 1_000), None);
        assert_eq!(n.get("other", 0), None);
        n.clear("k");
        assert_eq!(n.get("k", 0), None);
    }
}
