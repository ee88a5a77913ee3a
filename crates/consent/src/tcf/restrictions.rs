//! The core segment's publisher restrictions: entries of a purpose id, a restriction type and
//! the vendors (range entries) it applies to. Kept as read, in two flat vectors (the entries,
//! and every entry's ranges one after another), so decoding allocates twice at most whatever the
//! number of entries.
//!
//! These ranges have no MaxVendorId: any id 1..=65535 is accepted (the spec lets a range cover
//! ids missing from the GVL). Purpose id 0 and restriction type 3 (undefined) are refused.

use super::bits::Bits;
use super::error::TcfError;
use super::vendor_set::{MIN_RANGE_ENTRY_BITS, VendorRange, read_entry_count, read_range_entry};

const FIELD: &str = "publisher restrictions";
/// Bits of the smallest restriction entry: PurposeId, RestrictionType and NumEntries.
const MIN_ENTRY_BITS: usize = 6 + 2 + 12;

/// What a publisher restriction asks of the vendors it names for one purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Restriction {
    /// Type 0: the purpose is not allowed, whatever the vendor declared.
    NotAllowed,
    /// Type 1: consent is the legal basis (matters to vendors flexible on the purpose).
    RequireConsent,
    /// Type 2: legitimate interest is the legal basis (likewise).
    RequireLegitimateInterest,
}

/// One entry, borrowed from a decoded string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherRestriction<'a> {
    pub purpose: u8,
    pub restriction: Restriction,
    pub vendors: &'a [VendorRange],
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PublisherRestrictions {
    entries: Vec<Entry>,
    ranges: Vec<VendorRange>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    purpose: u8,
    restriction: Restriction,
    /// This entry's ranges: `ranges[first..first + count]`.
    first: usize,
    count: usize,
}

impl PublisherRestrictions {
    /// The restriction on `vendor` for `purpose`. When several entries name the pair, the one of
    /// the lowest type wins (not allowed, then require consent, then require legitimate
    /// interest), as IAB's `getRestrictionType` decides.
    pub(super) fn get(&self, purpose: u8, vendor: u16) -> Option<Restriction> {
        self.entries
            .iter()
            .filter(|e| e.purpose == purpose)
            .filter(|e| self.ranges_of(e).iter().any(|r| r.contains(vendor)))
            .map(|e| e.restriction)
            .min()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = PublisherRestriction<'_>> + '_ {
        self.entries.iter().map(|e| PublisherRestriction {
            purpose: e.purpose,
            restriction: e.restriction,
            vendors: self.ranges_of(e),
        })
    }

    fn ranges_of(&self, entry: &Entry) -> &[VendorRange] {
        self.ranges
            .get(entry.first..entry.first.saturating_add(entry.count))
            .unwrap_or_default()
    }
}

/// NumPubRestrictions, then each entry.
pub(super) fn read_restrictions(bits: &mut Bits) -> Result<PublisherRestrictions, TcfError> {
    let at = bits.position();
    let count = bits.read_u32(12, FIELD)?;
    if (count as usize).saturating_mul(MIN_ENTRY_BITS) > bits.remaining() {
        return Err(TcfError::TooManyEntries {
            segment: bits.segment(),
            field: FIELD,
            count,
            left: bits.remaining(),
            bit: at,
        });
    }
    let mut out = PublisherRestrictions::default();
    if count == 0 {
        return Ok(out);
    }
    out.entries.reserve_exact(count as usize);
    for _ in 0..count {
        let at = bits.position();
        let purpose = bits.read_u8(6, FIELD)?;
        let restriction = match bits.read_u8(2, FIELD)? {
            0 => Restriction::NotAllowed,
            1 => Restriction::RequireConsent,
            2 => Restriction::RequireLegitimateInterest,
            _ => return Err(TcfError::UndefinedRestrictionType { bit: at }),
        };
        if purpose == 0 {
            return Err(TcfError::RestrictionPurposeZero { bit: at });
        }
        let ranges = read_entry_count(bits, FIELD)? as usize;
        // Bounded by the check in read_entry_count: the string holds that many entries.
        out.ranges
            .reserve(ranges.min(bits.remaining() / MIN_RANGE_ENTRY_BITS));
        let first = out.ranges.len();
        for _ in 0..ranges {
            out.ranges.push(read_range_entry(bits, FIELD, u16::MAX)?);
        }
        out.entries.push(Entry {
            purpose,
            restriction,
            first,
            count: ranges,
        });
    }
    Ok(out)
}
