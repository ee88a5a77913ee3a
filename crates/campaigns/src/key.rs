//! [`SmallKey`]: the string keys of the index's maps, stored inline when short.
//!
//! Why: a lookup that finds its key compares the request's string with the stored one, and a
//! `Box<str>` key is a pointer away: at 100,000 campaigns, a cache miss (and often a TLB miss)
//! per lookup, and a decision looks up a dozen or two (domains and parents, segments,
//! categories, `bcat`...). Targeting values are short (`site123.example`, `seg-42`, `IAB7-3`),
//! so most keys sit in the table's own bucket.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Longest string kept inline, in bytes (the key is then as large as a `Box<str>` and a tag).
const INLINE: usize = 22;

/// A string, inline up to [`INLINE`] bytes. Hashes and compares as the `str` it holds, so a
/// map keyed by it is looked up with a `&str`.
#[derive(Clone, Debug)]
pub(crate) enum SmallKey {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl SmallKey {
    pub(crate) fn new(s: &str) -> SmallKey {
        let mut bytes = [0; INLINE];
        match (u8::try_from(s.len()), bytes.get_mut(..s.len())) {
            (Ok(len), Some(inline)) => {
                inline.copy_from_slice(s.as_bytes());
                SmallKey::Inline { len, bytes }
            }
            _ => SmallKey::Heap(Box::from(s)),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Copied from a whole `str`, so always valid UTF-8: the fallback never happens.
            SmallKey::Inline { len, bytes } => {
                std::str::from_utf8(bytes.get(..usize::from(*len)).unwrap_or_default())
                    .unwrap_or_default()
            }
            SmallKey::Heap(s) => s,
        }
    }
}

impl PartialEq for SmallKey {
    fn eq(&self, other: &SmallKey) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SmallKey {}

impl Hash for SmallKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Borrow<str> for SmallKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fxhash::FxHashMap;

    #[test]
    fn short_and_long_keys_are_found_by_their_str() {
        let long = "a-domain-longer-than-twenty-two-bytes.example";
        let mut map = FxHashMap::default();
        for (i, s) in ["", "seg-42", "exactly-22-bytes-long!", long]
            .iter()
            .enumerate()
        {
            map.insert(SmallKey::new(s), i);
        }
        assert!(matches!(
            SmallKey::new("exactly-22-bytes-long!"),
            SmallKey::Inline { .. }
        ));
        assert!(matches!(SmallKey::new(long), SmallKey::Heap(_)));
        assert_eq!(map.get(""), Some(&0));
        assert_eq!(map.get("seg-42"), Some(&1));
        assert_eq!(map.get("exactly-22-bytes-long!"), Some(&2));
        assert_eq!(map.get(long), Some(&3));
        assert_eq!(map.get("seg-4"), None);
        assert_eq!(SmallKey::new("é-ü").as_str(), "é-ü");
        assert_eq!(std::mem::size_of::<SmallKey>(), 24);
    }
}
