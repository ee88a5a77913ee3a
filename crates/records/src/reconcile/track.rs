//! The small bookkeeping a reconcile keeps per record: ids reduced to fingerprints, names
//! interned to indices, and the few mismatches kept for listing.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use super::report::{Mismatch, MismatchKind};

/// A 128-bit fingerprint of one or two ids: 16 bytes where the ids would take 50 or more. Two
/// different ids share one with a chance of about n²/2¹²⁹ (n ids: 10⁻²² for ten million).
pub type Fingerprint = u128;

/// The fingerprint of `(a, b)`. Deterministic within a process, which is all a reconcile
/// needs (nothing is stored).
pub fn fingerprint(a: &str, b: &str) -> Fingerprint {
    let half = |salt: u8| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        a.hash(&mut h);
        b.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// Most distinct names of one sort (bidders, campaigns, bidder nodes) kept apart; past it,
/// names share one row, so labels read from a file cannot grow memory without bound.
pub const MAX_NAMES: usize = 100_000;
/// The row names past [`MAX_NAMES`] share.
pub const TOO_MANY_NAMES: &str = "(names past the limit)";

/// Names interned to small indices.
#[derive(Debug, Default)]
pub struct Names {
    list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    pub fn ix(&mut self, name: &str) -> u32 {
        if let Some(&ix) = self.index.get(name) {
            return ix;
        }
        let name = if self.list.len() >= MAX_NAMES {
            TOO_MANY_NAMES
        } else {
            name
        };
        if let Some(&ix) = self.index.get(name) {
            return ix;
        }
        let ix = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(name.to_owned());
        self.index.insert(name.to_owned(), ix);
        ix
    }

    pub fn name(&self, ix: u32) -> &str {
        usize::try_from(ix)
            .ok()
            .and_then(|i| self.list.get(i))
            .map_or("", String::as_str)
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }
}

/// The first `keep` mismatches of each kind in (auction, bid) order: the same whatever order
/// the records came in.
#[derive(Debug)]
pub struct Samples {
    keep: usize,
    kinds: BTreeMap<MismatchKind, Vec<Mismatch>>,
}

impl Samples {
    pub fn new(keep: usize) -> Samples {
        Samples {
            keep,
            kinds: BTreeMap::new(),
        }
    }

    /// Whether a mismatch of `kind` for `(auction, bid)` would be kept: callers build the
    /// [`Mismatch`] (cloning names) only then.
    pub fn wants(&self, kind: MismatchKind, auction: &str, bid: &str) -> bool {
        match self.kinds.get(&kind) {
            None => self.keep > 0,
            Some(kept) if kept.len() < self.keep => true,
            Some(kept) => kept
                .iter()
                .any(|m| (auction, bid) < (m.auction.as_str(), m.bid.as_str())),
        }
    }

    pub fn offer(&mut self, m: Mismatch) {
        if !self.wants(m.kind, &m.auction, &m.bid) {
            return;
        }
        let kept = self.kinds.entry(m.kind).or_default();
        kept.push(m);
        kept.sort_by(|a, b| (&a.auction, &a.bid).cmp(&(&b.auction, &b.bid)));
        kept.truncate(self.keep);
    }

    pub fn into_list(self) -> Vec<Mismatch> {
        self.kinds.into_values().flatten().collect()
    }
}
