//! Why a TC string was refused. Every message names the segment, the field and the bit (counted
//! from the start of the segment) where decoding stopped, so a refused string from a CMP can be
//! looked at by hand.

use std::fmt;

/// A segment of a TC string, by its 3-bit segment type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Segment {
    /// Type 0: the core string (comes first; its first six bits are the version).
    Core,
    /// Type 1: the vendors the CMP disclosed to the user.
    DisclosedVendors,
    /// Type 2: allowed vendors, from the withdrawn out-of-band scheme; skipped.
    AllowedVendors,
    /// Type 3: the publisher's own purposes.
    PublisherTc,
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Segment::Core => "core segment",
            Segment::DisclosedVendors => "disclosed vendors segment",
            Segment::AllowedVendors => "allowed vendors segment",
            Segment::PublisherTc => "publisher TC segment",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TcfError {
    #[error("empty TC string")]
    Empty,
    #[error("TC string of {len} bytes is over the {max}-byte limit")]
    TooLong { len: usize, max: usize },
    #[error("byte {offset} of the TC string ({byte:#04x}) is not base64url or '.'")]
    NotBase64 { offset: usize, byte: u8 },
    #[error("segment {index} of the TC string is empty")]
    EmptySegment { index: usize },
    #[error("core segment: version {version}; only version 2 is decoded")]
    UnsupportedVersion { version: u8 },
    #[error("segment {index}: segment type {kind} is not defined")]
    UnknownSegment { index: usize, kind: u8 },
    #[error("segment {index}: a second {segment}")]
    DuplicateSegment { index: usize, segment: Segment },
    #[error("{segment}: ended at bit {bit} reading {field}")]
    Truncated {
        segment: Segment,
        field: &'static str,
        bit: usize,
    },
    #[error("{segment}: {field} at bit {bit}: {value} is not a letter (0-25)")]
    NotALetter {
        segment: Segment,
        field: &'static str,
        value: u8,
        bit: usize,
    },
    #[error("{segment}: {field} at bit {bit}: {count} entries cannot fit in the {left} bits left")]
    TooManyEntries {
        segment: Segment,
        field: &'static str,
        count: u32,
        left: usize,
        bit: usize,
    },
    #[error("{segment}: {field} at bit {bit}: vendor id 0 (ids start at 1)")]
    VendorZero {
        segment: Segment,
        field: &'static str,
        bit: usize,
    },
    #[error("{segment}: {field} at bit {bit}: range {start}-{end} ends before it starts")]
    ReversedRange {
        segment: Segment,
        field: &'static str,
        start: u16,
        end: u16,
        bit: usize,
    },
    #[error("{segment}: {field} at bit {bit}: vendor id {id} is past MaxVendorId {max}")]
    PastMaxVendorId {
        segment: Segment,
        field: &'static str,
        id: u16,
        max: u16,
        bit: usize,
    },
    #[error("core segment: publisher restriction at bit {bit}: purpose id 0")]
    RestrictionPurposeZero { bit: usize },
    #[error("core segment: publisher restriction at bit {bit}: restriction type 3 is undefined")]
    UndefinedRestrictionType { bit: usize },
}

impl TcfError {
    /// A short fixed name of the kind of refusal, for a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            TcfError::Empty => "empty",
            TcfError::TooLong { .. } => "too_long",
            TcfError::NotBase64 { .. } => "not_base64",
            TcfError::EmptySegment { .. } => "empty_segment",
            TcfError::UnsupportedVersion { .. } => "version",
            TcfError::UnknownSegment { .. } => "unknown_segment",
            TcfError::DuplicateSegment { .. } => "duplicate_segment",
            TcfError::Truncated { .. } => "truncated",
            TcfError::NotALetter { .. } => "not_a_letter",
            TcfError::TooManyEntries { .. } => "too_many_entries",
            TcfError::VendorZero { .. } => "vendor_zero",
            TcfError::ReversedRange { .. } => "reversed_range",
            TcfError::PastMaxVendorId { .. } => "past_max_vendor_id",
            TcfError::RestrictionPurposeZero { .. } => "restriction_purpose_zero",
            TcfError::UndefinedRestrictionType { .. } => "restriction_type",
        }
    }
}
