//! Membership tests against the request's lists (`bcat`, `badv`, `wseat`, `bseat`) and a deal's
//! lists (`wseat`, `wadomain`).
//!
//! Matching rules, and why:
//! - Seats are opaque ids agreed between buyer and exchange a priori: exact, case-sensitive match.
//! - Advertiser domains are DNS names, which are case-insensitive: ASCII case-insensitive match,
//!   and a listed domain also covers its subdomains (`ford.com` covers `www.ford.com`), because a
//!   publisher blocking an advertiser means the advertiser, whichever host name its creative
//!   declares. The match is on whole labels: `ford.com` does not cover `myford.com`.
//! - Categories: ASCII case-insensitive, and a listed category also covers its subcategories in
//!   the `IABn-m` notation of Content Taxonomy 1.0 (`IAB25` covers `IAB25-3`), because blocking a
//!   tier-1 category is meant to block everything filed under it. Later taxonomies use numeric ids
//!   without `-`, for which this is plain equality.
//! - Empty list entries never match a domain or a category (an empty string names nothing).
//!
//! Cost: most bids match no entry, so each list carries a 64-bit Bloom-style prefilter built
//! once per auction (see the notes at `filter_bit`) that rejects most values in a few
//! arithmetic steps without touching the list; when it cannot, the list is scanned. Publishers
//! do send long block lists (hundreds of `badv` domains): a long list that many bids will be
//! checked against is also sorted once per auction (one allocation of references, no string
//! copies) and searched by binary search instead of scanned. All paths give the same answers
//! (tested below against the plain scan).

use std::cmp::Ordering;

/// Entry lengths from this one up do not fit the prefilter's length mask.
const LONG_ENTRY: usize = 63;
/// Lists longer than this may be indexed.
const INDEX_MIN_LIST_LEN: usize = 16;
/// ... when at least this many bids will be checked against them.
const INDEX_MIN_LOOKUPS: usize = 8;

/// How entries of a list are compared with a bid's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Seat,
    Domain,
    Category,
}

#[derive(Debug)]
pub(crate) struct ListMatcher<'a> {
    kind: Kind,
    list: &'a [String],
    /// Bloom filter of the entries' [`entry_bits`]: 0 when no entry can match anything,
    /// `u64::MAX` when the prefilter is off.
    filter: u64,
    /// Bit `n` set when a non-empty entry of length `n` exists (`LONG_ENTRY` for any longer).
    lens: u64,
    /// Sorted (exact order for seats, ASCII case-insensitive order otherwise) when indexed.
    index: Option<Vec<&'a str>>,
}

impl<'a> ListMatcher<'a> {
    /// `lookups` is the number of bids that will be checked, to decide whether sorting pays off.
    pub(crate) fn new(kind: Kind, list: &'a [String], lookups: usize) -> Self {
        let index = (list.len() > INDEX_MIN_LIST_LEN && lookups >= INDEX_MIN_LOOKUPS).then(|| {
            let mut sorted: Vec<&'a str> = list
                .iter()
                .map(String::as_str)
                .filter(|entry| kind == Kind::Seat || !entry.is_empty())
                .collect();
            sorted.sort_unstable_by(|a, b| compare(kind, a, b));
            sorted
        });
        let (mut filter, mut lens) = (0_u64, 0_u64);
        for entry in list {
            filter |= entry_bits(kind, entry);
            if !entry.is_empty() {
                lens |= 1 << entry.len().min(LONG_ENTRY);
            }
        }
        if kind != Kind::Seat && lens & 1 << LONG_ENTRY != 0 {
            // An entry too long for the length mask: always scan.
            filter = u64::MAX;
        }
        ListMatcher {
            kind,
            list,
            filter,
            lens,
            index,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `value` is covered by an entry of the list.
    #[inline(always)]
    pub(crate) fn matches(&self, value: &str) -> bool {
        if self.filter == 0 || self.probe(value) & self.filter == 0 {
            return false;
        }
        match &self.index {
            None => linear_matches(self.kind, self.list, value),
            Some(index) => indexed_matches(self.kind, index, value),
        }
    }

    /// The filter bits of every part of `value` that an entry could equal (see the prefilter
    /// notes below). Only parts of a length some entry has are looked at, so the cost is a few
    /// steps per distinct entry length, not a scan of the value.
    #[inline(always)]
    fn probe(&self, value: &str) -> u64 {
        if self.filter == u64::MAX {
            return u64::MAX;
        }
        let b = value.as_bytes();
        let n = b.len();
        let mut bits = 0;
        let mut lens = self.lens;
        match self.kind {
            Kind::Seat => return filter_bit(n, b.last().copied().unwrap_or(0)),
            // Suffixes of length `l` that are the whole value or follow a '.'.
            Kind::Domain => {
                while lens != 0 {
                    let l = lens.trailing_zeros() as usize;
                    lens &= lens - 1;
                    if l > n {
                        break;
                    }
                    if l == n || b[n - l - 1] == b'.' {
                        bits |= filter_bit(l, b[n - l]);
                    }
                }
            }
            // Prefixes of length `l` that are the whole value or precede a '-'.
            Kind::Category => {
                while lens != 0 {
                    let l = lens.trailing_zeros() as usize;
                    lens &= lens - 1;
                    if l > n {
                        break;
                    }
                    if l == n || b[l] == b'-' {
                        bits |= filter_bit(l, b[l - 1]);
                    }
                }
            }
        }
        bits
    }
}

/// Binary-search form of [`linear_matches`] over a list sorted by [`compare`].
#[inline(never)]
fn indexed_matches(kind: Kind, index: &[&str], value: &str) -> bool {
    let found = |key: &str| {
        !key.is_empty()
            && index
                .binary_search_by(|entry| compare(kind, entry, key))
                .is_ok()
    };
    match kind {
        Kind::Seat => index.binary_search(&value).is_ok(),
        // The value itself, then every parent domain: www.a.b.com -> a.b.com -> b.com -> com.
        Kind::Domain => {
            found(value)
                || value
                    .match_indices('.')
                    .any(|(dot, _)| found(&value[dot + 1..]))
        }
        // The value itself, then every parent category: IAB7-39 -> IAB7.
        Kind::Category => {
            found(value)
                || value
                    .match_indices('-')
                    .any(|(dash, _)| found(&value[..dash]))
        }
    }
}

// The prefilter. Most bids match no list entry, and even a short scan of the list costs more
// than a few arithmetic steps. Each entry sets one bit of a 64-bit Bloom filter, keyed by its
// length and one ASCII-lowercased byte of the part of a value it could equal:
// - seat: the whole value (length, last byte);
// - domain: a suffix starting after a '.' or the whole value (length, first byte);
// - category: a prefix ending before a '-' or the whole value (length, last byte).
// A value's probe sets the bits of every such part whose length an entry has; if no probe bit
// is in the filter, no entry can match and the scan is skipped. Bits may collide (then the scan
// runs), but a matching entry always shares a bit with the probe, so the filter never changes
// an answer (tested below). Entries of `LONG_ENTRY` bytes or more switch the prefilter off.

fn filter_bit(len: usize, byte: u8) -> u64 {
    let key = (len as u64) ^ (u64::from(byte.to_ascii_lowercase()) << 32);
    1 << (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

fn entry_bits(kind: Kind, entry: &str) -> u64 {
    let b = entry.as_bytes();
    match (kind, b) {
        (Kind::Seat, _) => filter_bit(b.len(), b.last().copied().unwrap_or(0)),
        // Empty entries never match a domain or a category.
        (Kind::Domain | Kind::Category, []) => 0,
        (Kind::Domain, [first, ..]) => filter_bit(b.len(), *first),
        (Kind::Category, [.., last]) => filter_bit(b.len(), *last),
    }
}

/// The linear form of [`ListMatcher::matches`], also used for the (short) per-deal lists.
pub(crate) fn linear_matches(kind: Kind, list: &[String], value: &str) -> bool {
    match kind {
        Kind::Seat => list
            .iter()
            .any(|entry| eq_exact(entry.as_bytes(), value.as_bytes())),
        Kind::Domain => list.iter().any(|entry| domain_covers(entry, value)),
        Kind::Category => list.iter().any(|entry| category_covers(entry, value)),
    }
}

/// `listed` equals `domain` or is a parent domain of it, ignoring ASCII case.
#[inline]
fn domain_covers(listed: &str, domain: &str) -> bool {
    let (listed, domain) = (listed.as_bytes(), domain.as_bytes());
    if listed.is_empty() || domain.len() < listed.len() {
        return false;
    }
    let split = domain.len() - listed.len();
    (split == 0 || domain[split - 1] == b'.') && eq_ignore_case(&domain[split..], listed)
}

/// `listed` equals `category` or is a parent category of it (`IAB7` of `IAB7-39`), ignoring
/// ASCII case.
#[inline]
fn category_covers(listed: &str, category: &str) -> bool {
    let (listed, category) = (listed.as_bytes(), category.as_bytes());
    if listed.is_empty() || category.len() < listed.len() {
        return false;
    }
    let n = listed.len();
    (category.len() == n || category[n] == b'-') && eq_ignore_case(&category[..n], listed)
}

/// Byte equality. The values compared on the hot path (ids, seats, currency codes) are a few
/// bytes long; an inline loop beats a call to `memcmp` for those.
#[inline]
pub(crate) fn eq_exact(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// ASCII case-insensitive equality, eight bytes at a time: identical words (the usual case)
/// skip the case folding, and a word is folded with [`ascii_lowercase_word`] rather than byte
/// by byte.
#[inline]
pub(crate) fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a, mut b) = (a, b);
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        let (x, y) = (u64::from_le_bytes(*x), u64::from_le_bytes(*y));
        if x != y && ascii_lowercase_word(x) != ascii_lowercase_word(y) {
            return false;
        }
        (a, b) = (rest_a, rest_b);
    }
    a.iter()
        .zip(b)
        .all(|(x, y)| x == y || x.eq_ignore_ascii_case(y))
}

/// ASCII-lowercases the eight bytes of a word at once; bytes outside `A..=Z`, including
/// non-ASCII ones, are unchanged.
#[inline]
fn ascii_lowercase_word(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Every byte is at most 0x7f after masking, so the additions below never carry into the
    // next byte; each byte's top bit then answers one comparison.
    let low7 = x & (0x7f * ONES);
    let at_least_a = low7 + (0x80 - u64::from(b'A')) * ONES;
    let above_z = low7 + (0x80 - u64::from(b'Z') - 1) * ONES;
    let upper = at_least_a & !above_z & !x & (0x80 * ONES);
    // 0x80 >> 2 is 0x20, the ASCII case bit.
    x | (upper >> 2)
}

fn compare(kind: Kind, a: &str, b: &str) -> Ordering {
    match kind {
        Kind::Seat => a.cmp(b),
        Kind::Domain | Kind::Category => a
            .bytes()
            .map(|c| c.to_ascii_lowercase())
            .cmp(b.bytes().map(|c| c.to_ascii_lowercase())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn domain_rules() {
        let cases = [
            ("ford.com", "ford.com", true),
            ("ford.com", "FORD.com", true),
            ("Ford.COM", "www.ford.com", true),
            ("ford.com", "a.b.ford.com", true),
            ("ford.com", "myford.com", false),
            ("ford.com", "ford.com.evil.net", false),
            ("www.ford.com", "ford.com", false),
            ("", "ford.com", false),
            ("", "", false),
            ("ford.com", "", false),
        ];
        for (listed, domain, expected) in cases {
            assert_eq!(
                domain_covers(listed, domain),
                expected,
                "{listed:?} covers {domain:?}"
            );
        }
    }

    #[test]
    fn category_rules() {
        let cases = [
            ("IAB25", "IAB25", true),
            ("iab25", "IAB25-3", true),
            ("IAB2", "IAB25", false),
            ("IAB2", "IAB25-3", false),
            ("IAB7-39", "IAB7", false),
            ("IAB7-39", "IAB7-39", true),
            ("483", "483", true),
            ("48", "483", false),
            ("", "IAB1", false),
        ];
        for (listed, category, expected) in cases {
            assert_eq!(
                category_covers(listed, category),
                expected,
                "{listed:?} covers {category:?}"
            );
        }
    }

    #[test]
    fn word_lowercasing_matches_bytewise() {
        for byte in 0..=255_u8 {
            let word = u64::from_le_bytes([byte, b'A', byte, b'z', 0x80 | byte, byte, b'@', b'[']);
            let expected = u64::from_le_bytes(word.to_le_bytes().map(|b| b.to_ascii_lowercase()));
            assert_eq!(ascii_lowercase_word(word), expected, "byte {byte:#x}");
        }
    }

    #[test]
    fn seats_are_exact() {
        let list = strings(&["Agency1", ""]);
        assert!(linear_matches(Kind::Seat, &list, "Agency1"));
        assert!(!linear_matches(Kind::Seat, &list, "agency1"));
        assert!(linear_matches(Kind::Seat, &list, ""));
    }

    #[test]
    fn short_lists_or_few_lookups_are_not_indexed() {
        let long: Vec<String> = (0..40).map(|i| format!("d{i}.com")).collect();
        assert!(
            ListMatcher::new(Kind::Domain, &long[..16], 100)
                .index
                .is_none()
        );
        assert!(ListMatcher::new(Kind::Domain, &long, 2).index.is_none());
        assert!(ListMatcher::new(Kind::Domain, &long, 50).index.is_some());
    }

    fn entry() -> impl Strategy<Value = String> {
        // Small alphabets so that collisions, case variants and parents actually occur.
        prop_oneof![
            "[aAbB]{0,2}(\\.[aAbB]{1,2}){0,2}",
            "(IAB|iab)[12]{1,2}(-[12]{1,2})?",
            "[sS][12]?",
        ]
    }

    proptest! {
        #[test]
        fn eq_ignore_case_matches_std(
            a in prop::collection::vec(any::<u8>(), 0..40),
            flips in prop::collection::vec(any::<bool>(), 40),
            tweak in prop::option::of((0_usize..40, any::<u8>())),
        ) {
            // `b` is `a` with the case of some letters flipped and maybe one byte changed.
            let mut b: Vec<u8> = a
                .iter()
                .zip(&flips)
                .map(|(&c, &flip)| if flip && c.is_ascii_alphabetic() { c ^ 0x20 } else { c })
                .collect();
            if let Some(slot) = tweak.and_then(|(i, v)| b.get_mut(i).map(|slot| (slot, v))) {
                *slot.0 = slot.1;
            }
            prop_assert_eq!(eq_ignore_case(&a, &b), a.eq_ignore_ascii_case(&b));
            prop_assert_eq!(eq_ignore_case(&a, &a[..a.len() / 2]), a.is_empty());
        }

        #[test]
        fn filtered_and_indexed_agree_with_linear(
            list in prop::collection::vec(entry(), 0..40),
            values in prop::collection::vec(entry(), 1..20),
        ) {
            for kind in [Kind::Seat, Kind::Domain, Kind::Category] {
                let filtered = ListMatcher::new(kind, &list, 0);
                let indexed = ListMatcher::new(kind, &list, 100);
                prop_assert!(filtered.index.is_none());
                prop_assert_eq!(indexed.index.is_some(), list.len() > INDEX_MIN_LIST_LEN);
                for value in &values {
                    let expected = linear_matches(kind, &list, value);
                    prop_assert_eq!(filtered.matches(value), expected, "{:?} {:?} in {:?}", kind, value, list);
                    prop_assert_eq!(indexed.matches(value), expected, "{:?} {:?} in {:?}", kind, value, list);
                }
            }
        }
    }

    #[test]
    fn the_filter_skips_most_non_matching_values() {
        let list = strings(&["blocked1.com", "blocked2.com", "x.net", "y.org", "IAB25"]);
        let matcher = ListMatcher::new(Kind::Domain, &list, 0);
        let skipped = (0..1000)
            .filter(|i| matcher.probe(&format!("advertiser{i}.com")) & matcher.filter == 0)
            .count();
        assert!(skipped > 700, "{skipped}");
    }

    #[test]
    fn entries_too_long_for_the_length_mask_disable_the_prefilter() {
        let long = format!("{}.com", "a".repeat(70));
        for kind in [Kind::Domain, Kind::Category] {
            let list = vec![long.clone(), "b.com".to_owned()];
            let matcher = ListMatcher::new(kind, &list, 0);
            assert_eq!(matcher.filter, u64::MAX);
            assert!(matcher.matches(&long));
            assert!(matcher.matches(&long.to_uppercase()));
        }
        let list = vec![long.clone()];
        assert!(ListMatcher::new(Kind::Domain, &list, 0).matches(&format!("www.{long}")));
        assert!(ListMatcher::new(Kind::Seat, &list, 0).matches(&long));
    }
}
