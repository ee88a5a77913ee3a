//! A set of vendor ids from one vendor section of a TC string (consents, legitimate interests,
//! disclosed vendors), decoded from either encoding into one bit per id up to MaxVendorId: at
//! most 65,535 bits (8 KiB), so a lookup is one load and a shift whatever the encoding was.
//!
//! Range entries are refused when they name vendor 0, end before they start, or go past the
//! section's MaxVendorId; a count of entries that cannot fit in the bits left is refused before
//! anything is read or allocated.

use super::bits::Bits;
use super::error::TcfError;

/// Bits of the smallest range entry: IsARange and one vendor id.
pub(super) const MIN_RANGE_ENTRY_BITS: usize = 17;

/// Vendor ids 1..=`max_vendor_id`, one bit each.
#[derive(Debug, Clone, Default)]
pub struct VendorSet {
    max_vendor_id: u16,
    /// Vendor id `i + 1` is bit `63 - i % 64` of word `i / 64` (first vendor most significant,
    /// as in the string). Empty when no id is set, else `ceil(max_vendor_id / 64)` words.
    words: Vec<u64>,
}

/// An inclusive run of vendor ids, as a range entry encodes it (`start == end` for one id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorRange {
    pub start: u16,
    pub end: u16,
}

impl VendorRange {
    pub fn contains(&self, vendor: u16) -> bool {
        self.start <= vendor && vendor <= self.end
    }
}

impl VendorSet {
    /// The section's MaxVendorId: no id above it is in the set.
    pub fn max_vendor_id(&self) -> u16 {
        self.max_vendor_id
    }

    pub fn contains(&self, vendor: u16) -> bool {
        let Some(index) = usize::from(vendor).checked_sub(1) else {
            return false;
        };
        self.words
            .get(index / 64)
            .is_some_and(|word| (word >> (63 - index % 64)) & 1 == 1)
    }

    /// How many vendors are in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The vendor ids in the set, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let base = w * 64;
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let offset = rest.leading_zeros() as usize;
                rest &= !(1u64 << (63 - offset));
                // At most 65,535: words cover MaxVendorId bits and no more.
                u16::try_from(base + offset + 1).ok()
            })
        })
    }

    fn with_max(max_vendor_id: u16) -> Self {
        VendorSet {
            max_vendor_id,
            words: vec![0; usize::from(max_vendor_id).div_ceil(64)],
        }
    }

    /// Adds `start..=end`, which the caller checked to lie in 1..=MaxVendorId.
    fn insert_range(&mut self, start: u16, end: u16) {
        let first = usize::from(start).saturating_sub(1);
        let last = usize::from(end).saturating_sub(1);
        for w in first / 64..=last / 64 {
            let low = if w == first / 64 { first % 64 } else { 0 };
            let high = if w == last / 64 { last % 64 } else { 63 };
            let mask = (u64::MAX >> low) & (u64::MAX << (63 - high));
            if let Some(word) = self.words.get_mut(w) {
                *word |= mask;
            }
        }
    }
}

/// Equal when they hold the same ids under the same MaxVendorId, whichever encoding they came
/// from.
impl PartialEq for VendorSet {
    fn eq(&self, other: &Self) -> bool {
        fn trimmed(words: &[u64]) -> &[u64] {
            let used = words.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
            words.get(..used).unwrap_or_default()
        }
        self.max_vendor_id == other.max_vendor_id && trimmed(&self.words) == trimmed(&other.words)
    }
}

impl Eq for VendorSet {}

/// Reads MaxVendorId, IsRangeEncoding and then a bitfield or a range section.
pub(super) fn read_vendor_section(
    bits: &mut Bits,
    field: &'static str,
) -> Result<VendorSet, TcfError> {
    let max = bits.read_u16(16, field)?;
    let is_range = bits.read_bool(field)?;
    if is_range {
        read_range_section(bits, field, max)
    } else {
        read_bitfield(bits, field, max)
    }
}

fn read_bitfield(bits: &mut Bits, field: &'static str, max: u16) -> Result<VendorSet, TcfError> {
    let count = usize::from(max);
    // Refused before allocating: the whole bitfield must be in the string.
    bits.ensure(count, field)?;
    let mut set = VendorSet::with_max(max);
    let mut index = 0;
    while index < count {
        // Chunks of 32 start at offset 0 or 32 of a word, so each fits in one word.
        let n = (count - index).min(32);
        let chunk = bits.read(n, field)?;
        if let Some(word) = set.words.get_mut(index / 64) {
            *word |= chunk << (64 - index % 64 - n);
        }
        index += n;
    }
    Ok(set)
}

fn read_range_section(
    bits: &mut Bits,
    field: &'static str,
    max: u16,
) -> Result<VendorSet, TcfError> {
    let count = read_entry_count(bits, field)?;
    let mut set = VendorSet {
        max_vendor_id: max,
        words: Vec::new(),
    };
    for _ in 0..count {
        let range = read_range_entry(bits, field, max)?;
        if set.words.is_empty() {
            set = VendorSet::with_max(max);
        }
        set.insert_range(range.start, range.end);
    }
    Ok(set)
}

/// NumEntries (12 bits), refused when that many of the smallest entries cannot fit in the bits
/// left: no loop or allocation is ever sized by a count the string cannot back.
pub(super) fn read_entry_count(bits: &mut Bits, field: &'static str) -> Result<u32, TcfError> {
    let at = bits.position();
    let count = bits.read_u32(12, field)?;
    let needed = (count as usize).saturating_mul(MIN_RANGE_ENTRY_BITS);
    if needed > bits.remaining() {
        return Err(TcfError::TooManyEntries {
            segment: bits.segment(),
            field,
            count,
            left: bits.remaining(),
            bit: at,
        });
    }
    Ok(count)
}

/// One range entry: IsARange, StartOrOnlyVendorId and, for a range, EndVendorId; in
/// 1..=`max`, not reversed.
pub(super) fn read_range_entry(
    bits: &mut Bits,
    field: &'static str,
    max: u16,
) -> Result<VendorRange, TcfError> {
    let at = bits.position();
    let is_range = bits.read_bool(field)?;
    let start = bits.read_u16(16, field)?;
    let end = if is_range {
        bits.read_u16(16, field)?
    } else {
        start
    };
    let segment = bits.segment();
    if start == 0 {
        return Err(TcfError::VendorZero {
            segment,
            field,
            bit: at,
        });
    }
    if end < start {
        return Err(TcfError::ReversedRange {
            segment,
            field,
            start,
            end,
            bit: at,
        });
    }
    if end > max {
        return Err(TcfError::PastMaxVendorId {
            segment,
            field,
            id: end,
            max,
            bit: at,
        });
    }
    Ok(VendorRange { start, end })
}
