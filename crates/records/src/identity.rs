//! Which lines are the same record, so that a tool reading a directory twice, a file and its
//! copy, or a stream beside the files it was fed from counts each record once.
//!
//! The journal writes each record with its id as the last member, `"rid":"{writer}-{seq}"`:
//! `writer` is the node and a random number drawn at start, `seq` counts that writer's records
//! from 0, so an id is never written for two records. Seen ids are kept as ranges of `seq` per
//! writer: a writer's records are read mostly in order, so a day of them is a handful of
//! ranges, not one entry each. A line without an id (written before ids were) is known by a
//! 128-bit digest of its bytes.
//!
//! Pure: bytes in, "first time" or "again" out.

use std::collections::{BTreeMap, HashMap, HashSet};

use sha2::{Digest as _, Sha256};

/// Most digests of lines without an id kept (about 0.5 GB): past it such lines are read
/// unchecked, and counted.
pub const MAX_DIGESTS: usize = 10_000_000;

/// Longest record id accepted (a node name of 64 characters, a random number and a count).
const MAX_RID_BYTES: usize = 128;

/// The suffix the journal puts before a line's id.
const RID_MEMBER: &[u8] = b",\"rid\":\"";

/// `line` with `id` as its last member, `"rid"` (what the journal writes). `line` is one JSON
/// object; an id that is not `[A-Za-z0-9._-]` is not added.
pub fn stamp(line: &mut Vec<u8>, id: &str) {
    if line.last() != Some(&b'}') || !is_id(id.as_bytes()) {
        return;
    }
    line.pop();
    line.extend_from_slice(RID_MEMBER);
    line.extend_from_slice(id.as_bytes());
    line.extend_from_slice(b"\"}");
}

fn is_id(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_RID_BYTES
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The record id a line ends with, as `(writer, seq)`; `None` for a line the journal did not
/// stamp.
pub fn rid(line: &[u8]) -> Option<(&str, u64)> {
    let body = line.strip_suffix(b"\"}")?;
    let at = body
        .windows(RID_MEMBER.len())
        .rposition(|w| w == RID_MEMBER)?;
    let id = body.get(at + RID_MEMBER.len()..)?;
    if !is_id(id) {
        return None;
    }
    let id = std::str::from_utf8(id).ok()?;
    let (writer, seq) = id.rsplit_once('-')?;
    Some((writer, seq.parse().ok()?))
}

/// The records seen so far, and how many were seen again.
#[derive(Debug, Default)]
pub struct Distinct {
    /// Per writer, the ranges of `seq` seen: start to end, inclusive, apart and not adjacent.
    ranges: HashMap<String, BTreeMap<u64, u64>>,
    /// Digests of lines without an id.
    digests: HashSet<[u8; 16]>,
    /// Lines seen before (dropped by the reader).
    pub duplicates: u64,
    /// Lines without an id read past [`MAX_DIGESTS`]: not checked for copies.
    pub unchecked: u64,
}

impl Distinct {
    pub fn new() -> Distinct {
        Distinct::default()
    }

    /// Whether `line` is a record not seen before; counts it in `duplicates` when it is not.
    pub fn first(&mut self, line: &[u8]) -> bool {
        let first = match rid(line) {
            Some((writer, seq)) => insert(self.ranges.entry(writer.to_owned()).or_default(), seq),
            None if self.digests.len() >= MAX_DIGESTS => {
                self.unchecked += 1;
                true
            }
            None => {
                let digest = Sha256::digest(line);
                let mut key = [0u8; 16];
                key.copy_from_slice(digest.get(..16).unwrap_or(&[0; 16]));
                self.digests.insert(key)
            }
        };
        if !first {
            self.duplicates += 1;
        }
        first
    }
}

/// Adds `seq` to `ranges`; false when it was there already.
fn insert(ranges: &mut BTreeMap<u64, u64>, seq: u64) -> bool {
    let below = ranges.range(..=seq).next_back().map(|(s, e)| (*s, *e));
    if let Some((_, end)) = below
        && end >= seq
    {
        return false;
    }
    let above = seq
        .checked_add(1)
        .and_then(|next| ranges.get(&next).map(|end| (next, *end)));
    let joins_below = below.filter(|(_, end)| end.checked_add(1) == Some(seq));
    match (joins_below, above) {
        (Some((start, _)), Some((next, end))) => {
            ranges.remove(&next);
            ranges.insert(start, end);
        }
        (Some((start, _)), None) => {
            ranges.insert(start, seq);
        }
        (None, Some((next, end))) => {
            ranges.remove(&next);
            ranges.insert(seq, end);
        }
        (None, None) => {
            ranges.insert(seq, seq);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str, id: &str) -> Vec<u8> {
        let mut l = json.as_bytes().to_vec();
        stamp(&mut l, id);
        l
    }

    #[test]
    fn a_stamped_line_names_its_writer_and_count() {
        let l = line(r#"{"kind":"notice","v":1}"#, "node-1.eu_a-00ff-17");
        assert_eq!(l, br#"{"kind":"notice","v":1,"rid":"node-1.eu_a-00ff-17"}"#);
        assert_eq!(rid(&l), Some(("node-1.eu_a-00ff", 17)));
        assert_eq!(rid(br#"{"kind":"notice","v":1}"#), None);
        assert_eq!(rid(br#"{"rid":"a b-1"}"#), None);
        assert_eq!(rid(br#"{"rid":"abc"}"#), None, "no count");
        let mut odd = b"not json".to_vec();
        stamp(&mut odd, "w-1");
        assert_eq!(odd, b"not json", "only an object is stamped");
    }

    #[test]
    fn every_record_counts_once_however_often_it_is_read() {
        let mut d = Distinct::new();
        let lines: Vec<Vec<u8>> = (0..1_000)
            .map(|n| line(r#"{"kind":"ledger"}"#, &format!("w-1a-{n}")))
            .collect();
        // Read in order, then again (a directory passed twice), then backwards.
        assert!(lines.iter().all(|l| d.first(l)));
        assert!(lines.iter().all(|l| !d.first(l)));
        assert!(lines.iter().rev().all(|l| !d.first(l)));
        assert_eq!(d.duplicates, 2_000);
        assert_eq!(
            d.ranges.get("w-1a").map(BTreeMap::len),
            Some(1),
            "one range"
        );
        // Another writer's same counts are other records.
        assert!(d.first(&line(r#"{"kind":"ledger"}"#, "w-2b-5")));
        // Lines without ids: by their bytes.
        assert!(d.first(br#"{"kind":"notice","v":1}"#));
        assert!(!d.first(br#"{"kind":"notice","v":1}"#));
        assert!(d.first(br#"{"kind":"notice","v":1,"x":2}"#));
    }

    #[test]
    fn ranges_merge_from_either_side_and_in_any_order() {
        let mut r = BTreeMap::new();
        for seq in [5, 3, 4, 9, 7, 8, 6, 0, u64::MAX] {
            assert!(insert(&mut r, seq), "{seq}");
        }
        assert_eq!(
            r.into_iter().collect::<Vec<_>>(),
            [(0, 0), (3, 9), (u64::MAX, u64::MAX)]
        );
        let mut r = BTreeMap::new();
        for seq in [10, 12, 11, 11, 10, 12] {
            insert(&mut r, seq);
        }
        assert_eq!(r.into_iter().collect::<Vec<_>>(), [(10, 12)]);
    }
}
