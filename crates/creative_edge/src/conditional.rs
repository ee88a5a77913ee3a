//! Conditional and partial requests against a stored object: `If-None-Match` (304), `Range`
//! and `If-Range` (206, 416). Pure; RFC 9110 sections 13 and 14.
//!
//! Only single ranges are served. A request for several ranges gets the whole object, which
//! the RFC allows, and which every player that asks for creatives copes with.

/// Whether `If-None-Match` names the object's entity tag (weak comparison, as the RFC asks for
/// this header), so the answer is 304.
pub fn none_match(if_none_match: &str, etag: &str) -> bool {
    let ours = opaque(etag);
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || (!tag.is_empty() && opaque(tag) == ours))
}

/// The part of an entity tag compared weakly: without its `W/` prefix.
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// What to send for a `Range` header over an object of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// The whole object, 200 (no usable range, several ranges, or a unit other than bytes).
    Full,
    /// 206 with bytes `first..=last`.
    Partial { first: u64, last: u64 },
    /// 416: the range starts beyond the object.
    Unsatisfiable,
}

/// Reads a `Range` header against an object of `len` bytes.
pub fn range(header: &str, len: u64) -> RangeAnswer {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return RangeAnswer::Full;
    };
    if spec.contains(',') {
        return RangeAnswer::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeAnswer::Full;
    };
    let (first, last) = (first.trim(), last.trim());
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if first.is_empty() {
        // A suffix: the last N bytes.
        let Some(n) = digits(last).then(|| last.parse::<u64>().ok()).flatten() else {
            return RangeAnswer::Full;
        };
        if n == 0 || len == 0 {
            return RangeAnswer::Unsatisfiable;
        }
        return RangeAnswer::Partial {
            first: len.saturating_sub(n),
            last: len - 1,
        };
    }
    let Some(start) = digits(first).then(|| first.parse::<u64>().ok()).flatten() else {
        return RangeAnswer::Full;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match digits(last).then(|| last.parse::<u64>().ok()).flatten() {
            Some(end) if end >= start => end,
            _ => return RangeAnswer::Full,
        }
    };
    if start >= len {
        return RangeAnswer::Unsatisfiable;
    }
    RangeAnswer::Partial {
        first: start,
        last: end.min(len - 1),
    }
}

/// Whether an `If-Range` lets the range through: it must name the object's entity tag
/// exactly (strong comparison; a weak tag never matches) or its `Last-Modified` date.
pub fn if_range_holds(if_range: &str, etag: &str, last_modified: Option<&str>) -> bool {
    let if_range = if_range.trim();
    if if_range.starts_with('"') || if_range.starts_with("W/") {
        return !if_range.starts_with("W/") && !etag.starts_with("W/") && if_range == etag;
    }
    last_modified.is_some_and(|lm| lm.trim() == if_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_match_compares_weakly_and_reads_lists_and_star() {
        assert!(none_match("\"a\"", "\"a\""));
        assert!(none_match("W/\"a\"", "\"a\""));
        assert!(none_match("\"x\", W/\"a\"", "W/\"a\""));
        assert!(none_match("*", "\"a\""));
        assert!(!none_match("\"b\"", "\"a\""));
        assert!(!none_match("", "\"a\""));
    }

    #[test]
    fn ranges_of_every_form() {
        use RangeAnswer::*;
        assert_eq!(range("bytes=0-99", 1000), Partial { first: 0, last: 99 });
        assert_eq!(
            range("bytes=900-", 1000),
            Partial {
                first: 900,
                last: 999
            }
        );
        assert_eq!(
            range("bytes=-100", 1000),
            Partial {
                first: 900,
                last: 999
            }
        );
        assert_eq!(
            range("bytes=-5000", 1000),
            Partial {
                first: 0,
                last: 999
            }
        );
        assert_eq!(
            range("bytes=990-5000", 1000),
            Partial {
                first: 990,
                last: 999
            }
        );
        assert_eq!(range("bytes=1000-", 1000), Unsatisfiable);
        assert_eq!(range("bytes=-0", 1000), Unsatisfiable);
        assert_eq!(range("bytes=0-", 0), Unsatisfiable);
    }

    #[test]
    fn ranges_that_cannot_be_honoured_get_the_whole_object() {
        for header in [
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=5-1",
            "bytes=x-1",
            "bytes=-",
            "bytes=1",
            "bytes=+1-2",
            "bytes=99999999999999999999-",
        ] {
            assert_eq!(range(header, 1000), RangeAnswer::Full, "{header}");
        }
    }

    #[test]
    fn if_range_needs_a_strong_exact_tag_or_the_date() {
        let lm = Some("Wed, 25 Nov 2026 10:00:00 GMT");
        assert!(if_range_holds("\"a\"", "\"a\"", lm));
        assert!(!if_range_holds("\"b\"", "\"a\"", lm));
        assert!(!if_range_holds("W/\"a\"", "W/\"a\"", lm));
        assert!(!if_range_holds("\"a\"", "W/\"a\"", lm));
        assert!(if_range_holds("Wed, 25 Nov 2026 10:00:00 GMT", "\"a\"", lm));
        assert!(!if_range_holds(
            "Wed, 25 Nov 2026 10:00:01 GMT",
            "\"a\"",
            lm
        ));
        assert!(!if_range_holds(
            "Wed, 25 Nov 2026 10:00:00 GMT",
            "\"a\"",
            None
        ));
    }
}
