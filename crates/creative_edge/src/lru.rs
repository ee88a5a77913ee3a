//! A least-recently-used map bounded by the total weight (bytes) of its values. Pure; callers
//! hold it behind their own lock.
//!
//! Entries live in a slab with a doubly linked recency list through it, so a lookup, an insert
//! and an eviction cost one hash probe and a few index writes, and nothing is allocated per
//! lookup.

use std::collections::HashMap;

const NONE: usize = usize::MAX;

#[derive(Debug)]
struct Node<V> {
    key: String,
    value: V,
    weight: u64,
    /// Towards the most recently used.
    newer: usize,
    /// Towards the least recently used.
    older: usize,
}

/// The map. Every entry's weight counts against `capacity`.
#[derive(Debug)]
pub struct Lru<V> {
    index: HashMap<String, usize>,
    slab: Vec<Option<Node<V>>>,
    free: Vec<usize>,
    newest: usize,
    oldest: usize,
    weight: u64,
    capacity: u64,
}

impl<V> Lru<V> {
    /// An empty map holding at most `capacity` in total weight.
    pub fn new(capacity: u64) -> Self {
        Lru {
            index: HashMap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            newest: NONE,
            oldest: NONE,
            weight: 0,
            capacity,
        }
    }

    /// The entry for `key`, marked as the most recently used.
    pub fn get(&mut self, key: &str) -> Option<&V> {
        let at = *self.index.get(key)?;
        self.unlink(at);
        self.push_newest(at);
        self.slab[at].as_ref().map(|n| &n.value)
    }

    /// The entry for `key`, its recency unchanged.
    pub fn peek(&self, key: &str) -> Option<&V> {
        let at = *self.index.get(key)?;
        self.slab[at].as_ref().map(|n| &n.value)
    }

    /// Stores `value` as the most recently used, replacing any entry under `key`, and returns
    /// the entries evicted to make room (oldest first). A value heavier than the whole
    /// capacity is not stored: it comes back as the only "evicted" entry.
    pub fn insert(&mut self, key: String, value: V, weight: u64) -> Vec<(String, V)> {
        let mut evicted = Vec::new();
        if weight > self.capacity {
            evicted.push((key, value));
            return evicted;
        }
        if let Some(old) = self.remove(&key) {
            drop(old);
        }
        while self.weight + weight > self.capacity && self.oldest != NONE {
            if let Some((k, v)) = self.take(self.oldest) {
                evicted.push((k, v));
            }
        }
        let node = Node {
            key: key.clone(),
            value,
            weight,
            newer: NONE,
            older: NONE,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.slab[at] = Some(node);
                at
            }
            None => {
                self.slab.push(Some(node));
                self.slab.len() - 1
            }
        };
        self.index.insert(key, at);
        self.weight += weight;
        self.push_newest(at);
        evicted
    }

    /// Removes and returns the entry for `key`.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        let at = *self.index.get(key)?;
        self.take(at).map(|(_, v)| v)
    }

    /// Total weight stored.
    pub fn weight(&self) -> u64 {
        self.weight
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn take(&mut self, at: usize) -> Option<(String, V)> {
        self.unlink(at);
        let node = self.slab[at].take()?;
        self.free.push(at);
        self.index.remove(&node.key);
        self.weight -= node.weight;
        Some((node.key, node.value))
    }

    fn unlink(&mut self, at: usize) {
        let Some(node) = self.slab[at].as_ref() else {
            return;
        };
        let (newer, older) = (node.newer, node.older);
        match self.slab.get_mut(newer).and_then(Option::as_mut) {
            Some(n) => n.older = older,
            None => self.newest = older,
        }
        match self.slab.get_mut(older).and_then(Option::as_mut) {
            Some(n) => n.newer = newer,
            None => self.oldest = newer,
        }
        if let Some(node) = self.slab[at].as_mut() {
            node.newer = NONE;
            node.older = NONE;
        }
    }

    fn push_newest(&mut self, at: usize) {
        let previous = self.newest;
        if let Some(node) = self.slab[at].as_mut() {
            node.older = previous;
            node.newer = NONE;
        }
        match self.slab.get_mut(previous).and_then(Option::as_mut) {
            Some(n) => n.newer = at,
            None => self.oldest = at,
        }
        self.newest = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys<V>(lru: &Lru<V>) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = lru.oldest;
        while at != NONE {
            let node = lru.slab[at].as_ref().expect("linked node");
            out.push(node.key.clone());
            at = node.newer;
        }
        out
    }

    #[test]
    fn the_least_recently_used_goes_first_and_a_lookup_saves_an_entry() {
        let mut lru = Lru::new(30);
        assert!(lru.insert("a".into(), 1, 10).is_empty());
        assert!(lru.insert("b".into(), 2, 10).is_empty());
        assert!(lru.insert("c".into(), 3, 10).is_empty());
        assert_eq!(lru.get("a"), Some(&1));
        let evicted = lru.insert("d".into(), 4, 10);
        assert_eq!(evicted, vec![("b".to_string(), 2)]);
        assert_eq!(keys(&lru), ["c", "a", "d"]);
        assert_eq!(lru.weight(), 30);
    }

    #[test]
    fn a_heavy_insert_evicts_as_many_as_it_needs_and_too_heavy_is_refused() {
        let mut lru = Lru::new(30);
        for k in ["a", "b", "c"] {
            lru.insert(k.into(), (), 10);
        }
        let evicted: Vec<String> = lru
            .insert("big".into(), (), 25)
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(evicted, ["a", "b", "c"]);
        let refused = lru.insert("huge".into(), (), 31);
        assert_eq!(refused.len(), 1);
        assert_eq!(keys(&lru), ["big"]);
    }

    #[test]
    fn replacing_a_key_reweighs_it() {
        let mut lru = Lru::new(100);
        lru.insert("a".into(), 1, 60);
        lru.insert("a".into(), 2, 10);
        assert_eq!(lru.weight(), 10);
        assert_eq!(lru.len(), 1);
        assert_eq!(lru.peek("a"), Some(&2));
    }

    /// A reference model: a vector ordered oldest first.
    #[derive(Default)]
    struct Model(Vec<(String, u64)>);

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(19), ..ProptestConfig::default() })]
        #[test]
        fn agrees_with_a_vector_model(ops in proptest::collection::vec((0u8..3, 0u8..8, 1u64..40), 1..200)) {
            let capacity = 100;
            let mut lru = Lru::new(capacity);
            let mut model = Model::default();
            for (op, k, w) in ops {
                let key = format!("k{k}");
                match op {
                    0 => {
                        let got: Vec<String> = lru.insert(key.clone(), w, w).into_iter().map(|e| e.0).collect();
                        model.0.retain(|(mk, _)| *mk != key);
                        let mut want = Vec::new();
                        while model.0.iter().map(|e| e.1).sum::<u64>() + w > capacity && !model.0.is_empty() {
                            want.push(model.0.remove(0).0);
                        }
                        model.0.push((key, w));
                        prop_assert_eq!(got, want);
                    }
                    1 => {
                        let got = lru.get(&key).copied();
                        let pos = model.0.iter().position(|(mk, _)| *mk == key);
                        let want = pos.map(|p| { let e = model.0.remove(p); let w = e.1; model.0.push(e); w });
                        prop_assert_eq!(got, want);
                    }
                    _ => {
                        let got = lru.remove(&key);
                        let want = model.0.iter().position(|(mk, _)| *mk == key).map(|p| model.0.remove(p).1);
                        prop_assert_eq!(got, want);
                    }
                }
                let order: Vec<String> = model.0.iter().map(|e| e.0.clone()).collect();
                prop_assert_eq!(keys(&lru), order);
                prop_assert_eq!(lru.weight(), model.0.iter().map(|e| e.1).sum::<u64>());
                prop_assert!(lru.weight() <= capacity);
            }
        }
    }
}
