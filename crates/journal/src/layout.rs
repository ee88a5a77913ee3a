//! The file sink's rules, pure: what a record file is called, when it is complete, and which
//! completed files go when the directory is past its size or a file past its age.
//!
//! A file is `{server}-{node}-{start}-{seq}.ndjson`: `start` the UTC second its run began
//! (`yyyymmddThhmmss`), `seq` six digits counting the run's files from 0. Names sort in the
//! order the files were written (per server and node), which is the order `read` reads a
//! directory in. A completed file gains `.gz`; `.gz.tmp` is one being compressed.

use std::time::Duration;

use units::Timestamp;

/// Longest node name kept in a file name; the rest is cut.
pub const MAX_NODE_CHARS: usize = 64;

/// `{server}-{node}` ([`node_name`]).
pub fn prefix(server: &str, node: &str) -> String {
    format!("{server}-{}", node_name(node))
}

/// `node` as it may appear in a file name and a record id: characters outside
/// `[A-Za-z0-9._]` replaced by `_` (so it can neither leave the directory nor be mistaken for
/// the start stamp), at most [`MAX_NODE_CHARS`], `node` when nothing is left.
pub fn node_name(node: &str) -> String {
    let node: String = node
        .chars()
        .take(MAX_NODE_CHARS)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if node.is_empty() || node.chars().all(|c| c == '.') {
        "node".to_owned()
    } else {
        node
    }
}

/// `at` as `yyyymmddThhmmss` (UTC).
pub fn stamp(at: Timestamp) -> String {
    // `YYYY-MM-DDTHH:MM:SSZ` without its separators.
    at.to_rfc3339()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect()
}

/// The name of the run's `seq`th file.
pub fn file_name(prefix: &str, stamp: &str, seq: u32) -> String {
    format!("{prefix}-{stamp}-{seq:06}.ndjson")
}

/// Whether `name` is a plain (not completed) record file of `prefix`'s: one a crash left
/// behind when it is not the current run's. Another node's file never matches, even when its
/// name starts with this prefix (`exchange-a` and `exchange-a_b`): the stamp must follow.
pub fn is_plain_file_of(prefix: &str, name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_suffix(".ndjson"))
    else {
        return false;
    };
    let Some((stamp, seq)) = rest.split_once('-') else {
        return false;
    };
    is_stamp(stamp) && seq.len() >= 6 && seq.bytes().all(|b| b.is_ascii_digit())
}

fn is_stamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 15
        && b.iter().enumerate().all(|(i, c)| {
            if i == 8 {
                *c == b'T'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// The completed name of a plain file name.
pub fn completed_name(plain: &str) -> String {
    format!("{plain}.gz")
}

/// The name a completed file is written under until it is whole.
pub fn temp_name(plain: &str) -> String {
    format!("{plain}.gz.tmp")
}

/// When a file is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_age: Duration,
}

/// Why a file is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Complete {
    Size,
    Age,
}

impl Limits {
    /// Whether a file of `len` bytes opened `age` ago is complete: past either limit.
    pub fn complete(&self, len: u64, age: Duration) -> Option<Complete> {
        if len >= self.max_bytes {
            Some(Complete::Size)
        } else if age >= self.max_age {
            Some(Complete::Age)
        } else {
            None
        }
    }
}

/// Whether `name` is a completed record file of `prefix`'s (`{plain}.gz`).
pub fn is_completed_file_of(prefix: &str, name: &str) -> bool {
    name.strip_suffix(".gz")
        .is_some_and(|plain| is_plain_file_of(prefix, plain))
}

/// What a server keeps of its own completed files (`records.max_total_mb`,
/// `records.max_age_days`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// The most its files may hold together, the file being written included.
    pub max_total_bytes: u64,
    /// A completed file last written longer ago than this goes.
    pub max_age: Duration,
}

/// A completed file, as the directory shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub name: String,
    pub bytes: u64,
    /// Since it was last written.
    pub age: Duration,
}

/// Why a completed file was removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    Size,
    Age,
}

impl Retention {
    /// The completed files to remove, each with why: every file past the age, then the oldest
    /// (by name, which is write order) until the rest and `current` (the file being written,
    /// never removed) are within the size.
    pub fn to_remove(&self, kept: &[Kept], current: u64) -> Vec<(String, Removal)> {
        let mut files: Vec<&Kept> = kept.iter().collect();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        let mut total = current.saturating_add(files.iter().map(|f| f.bytes).sum());
        let mut out = Vec::new();
        for f in files {
            let why = if f.age > self.max_age {
                Removal::Age
            } else if total > self.max_total_bytes {
                Removal::Size
            } else {
                continue;
            };
            total = total.saturating_sub(f.bytes);
            out.push((f.name.clone(), why));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_past_the_size_and_any_past_the_age() {
        let r = Retention {
            max_total_bytes: 250,
            max_age: Duration::from_secs(100),
        };
        let kept = |name: &str, bytes: u64, age: u64| Kept {
            name: name.to_owned(),
            bytes,
            age: Duration::from_secs(age),
        };
        let files = [
            kept("x-20250309T070504-000002.ndjson.gz", 100, 10),
            kept("x-20250309T070504-000000.ndjson.gz", 100, 50),
            kept("x-20250309T070504-000001.ndjson.gz", 100, 20),
        ];
        // 300 completed and 20 being written, 320 > 250: the oldest goes, 220 remain; with 60
        // being written, 360: the two oldest go.
        assert_eq!(
            r.to_remove(&files, 20),
            [(
                "x-20250309T070504-000000.ndjson.gz".to_owned(),
                Removal::Size
            )]
        );
        assert_eq!(
            r.to_remove(&files, 60),
            [
                (
                    "x-20250309T070504-000000.ndjson.gz".to_owned(),
                    Removal::Size
                ),
                (
                    "x-20250309T070504-000001.ndjson.gz".to_owned(),
                    Removal::Size
                )
            ]
        );
        let roomy = Retention {
            max_total_bytes: 300,
            ..r
        };
        assert!(roomy.to_remove(&files, 0).is_empty(), "within both limits");
        let old = [
            kept("x-20250309T070504-000000.ndjson.gz", 1, 101),
            kept("x-20250309T070504-000001.ndjson.gz", 1, 5),
        ];
        assert_eq!(
            r.to_remove(&old, 0),
            [(
                "x-20250309T070504-000000.ndjson.gz".to_owned(),
                Removal::Age
            )]
        );
        assert!(is_completed_file_of(
            "x",
            "x-20250309T070504-000000.ndjson.gz"
        ));
        assert!(!is_completed_file_of(
            "x",
            "x-20250309T070504-000000.ndjson"
        ));
        assert!(!is_completed_file_of(
            "x",
            "y-20250309T070504-000000.ndjson.gz"
        ));
    }

    #[test]
    fn names_sort_in_write_order_and_name_their_run() {
        let at = Timestamp::parse_rfc3339("2025-03-09T07:05:04Z").unwrap();
        let stamp = stamp(at);
        assert_eq!(stamp, "20250309T070504");
        let p = prefix("exchange", "eu-1/../x");
        assert_eq!(p, "exchange-eu_1_.._x");
        let names: Vec<String> = [0, 9, 10, 123_456]
            .iter()
            .map(|s| file_name(&p, &stamp, *s))
            .collect();
        assert_eq!(names[0], "exchange-eu_1_.._x-20250309T070504-000000.ndjson");
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names);
        assert_eq!(prefix("bidder", ""), "bidder-node");
        assert_eq!(prefix("bidder", ".."), "bidder-node");
    }

    #[test]
    fn a_leftover_is_this_prefix_and_a_plain_file_only() {
        let p = "exchange-a";
        assert!(is_plain_file_of(
            p,
            "exchange-a-20250309T070504-000003.ndjson"
        ));
        assert!(!is_plain_file_of(
            p,
            "exchange-a-20250309T070504-000003.ndjson.gz"
        ));
        assert!(!is_plain_file_of(
            p,
            "exchange-a-20250309T070504-000003.ndjson.gz.tmp"
        ));
        // Node `a_b`'s file starts with `exchange-a` too.
        assert!(!is_plain_file_of(
            p,
            "exchange-a_b-20250309T070504-000003.ndjson"
        ));
        assert!(!is_plain_file_of(
            p,
            "exchange-a-b-20250309T070504-000003.ndjson"
        ));
        assert!(!is_plain_file_of(
            p,
            "exchange-a-2025030XT070504-000003.ndjson"
        ));
        assert!(!is_plain_file_of(p, "exchange-a-20250309T070504-12.ndjson"));
    }

    #[test]
    fn a_file_is_complete_past_either_limit() {
        let l = Limits {
            max_bytes: 100,
            max_age: Duration::from_secs(60),
        };
        assert_eq!(l.complete(99, Duration::from_secs(59)), None);
        assert_eq!(l.complete(100, Duration::ZERO), Some(Complete::Size));
        assert_eq!(l.complete(0, Duration::from_secs(60)), Some(Complete::Age));
    }
}
