//! The TCF v2 TC string (policy 2.2 and 2.3), decoded once per request into plain fields and
//! vendor bit sets, so that every later question (`vendor_consent`, `restriction`, ...) is a
//! lookup.
//!
//! Rules, as the IAB spec ("Consent string and vendor list formats v2") and IAB's own decoder
//! (`@iabtcf/core`) read a string:
//! - base64url without padding, any length (six bits per character); segments joined by `.`;
//! - the core segment first, version 2; then at most one of each optional segment, known by its
//!   3-bit type: 1 disclosed vendors, 3 publisher TC; 2 (allowed vendors, withdrawn with
//!   out-of-band consent) is skipped unread; other types are refused;
//! - bits after a segment's last field are ignored (encoders pad to whole characters);
//! - refused: a string over [`MAX_TC_STRING_BYTES`], an empty segment, a field cut short, range
//!   entries naming vendor 0, reversed or past MaxVendorId (IAB's decoder lets the last two
//!   through, Prebid's go-gdpr refuses them), counts of entries the string cannot hold, letters
//!   past `Z`, publisher restrictions of purpose 0 or type 3.
//!
//! Fields whose meaning is policy (IsServiceSpecific must be 1 since TCF 2.2, a policy version
//! under 4 is out of date) are decoded, not judged: the exchange decides.
//!
//! Cost: each segment is checked and unpacked into bytes in one pass (one allocation, three
//! bytes per four characters), then every field is a load and a shift; one allocation per
//! non-empty vendor set (8 KiB at most each) and at most two for the restrictions. Nothing is
//! sized by a count the string cannot back.

mod bits;
mod error;
mod publisher_tc;
mod restrictions;
mod vendor_set;

#[cfg(test)]
mod iab_cases;
#[cfg(test)]
pub(crate) mod test_encoder;
#[cfg(test)]
mod tests;

pub use error::{Segment, TcfError};
pub use publisher_tc::PublisherTc;
pub use restrictions::{PublisherRestriction, Restriction};
pub use vendor_set::{VendorRange, VendorSet};

use bits::{Bits, is_base64url};
use publisher_tc::read_publisher_tc;
use restrictions::{PublisherRestrictions, read_restrictions};
use vendor_set::read_vendor_section;

/// Longest TC string decoded, in bytes. Today's strings are a few hundred bytes to ~2 KB
/// (vendor ids reach ~1,500: a bitfield of every vendor is 250 characters). 16 KiB leaves
/// room for eight times that (three dense bitfields up to vendor id ~30,000, or thousands of
/// restriction ranges) and stays under common header limits (a consent cookie is at most
/// 4 KiB), while bounding the work one request can ask for: about 98,000 bits read.
pub const MAX_TC_STRING_BYTES: usize = 16 * 1024;

/// A decoded TC string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcString {
    version: u8,
    created: u64,
    last_updated: u64,
    cmp_id: u16,
    cmp_version: u16,
    consent_screen: u8,
    consent_language: [u8; 2],
    vendor_list_version: u16,
    policy_version: u8,
    is_service_specific: bool,
    use_non_standard_texts: bool,
    /// SpecialFeatureOptIns, 12 bits, feature 1 most significant.
    special_features: u16,
    /// PurposesConsent, 24 bits, purpose 1 most significant.
    purpose_consents: u32,
    /// PurposesLITransparency, likewise.
    purpose_lis: u32,
    purpose_one_treatment: bool,
    publisher_cc: [u8; 2],
    vendor_consents: VendorSet,
    vendor_lis: VendorSet,
    restrictions: PublisherRestrictions,
    disclosed_vendors: Option<VendorSet>,
    publisher_tc: Option<PublisherTc>,
}

impl TcString {
    pub fn decode(s: &str) -> Result<TcString, TcfError> {
        let bytes = s.as_bytes();
        if bytes.is_empty() {
            return Err(TcfError::Empty);
        }
        if bytes.len() > MAX_TC_STRING_BYTES {
            return Err(TcfError::TooLong {
                len: bytes.len(),
                max: MAX_TC_STRING_BYTES,
            });
        }
        let mut segments = bytes.split(|&b| b == b'.').enumerate();
        let core = match segments.next() {
            Some((_, core)) if !core.is_empty() => core,
            _ => return Err(TcfError::EmptySegment { index: 0 }),
        };
        let mut tc = read_core(&mut Bits::new(core, Segment::Core, 0)?)?;
        let mut seen_allowed = false;
        // Where the next segment starts in the string, for an error's offset.
        let mut offset = core.len() + 1;
        for (index, chars) in segments {
            let start = offset;
            offset += chars.len() + 1;
            let not_base64 = || {
                let i = chars.iter().position(|&c| !is_base64url(c));
                i.map(|i| TcfError::NotBase64 {
                    offset: start + i,
                    byte: chars.get(i).copied().unwrap_or_default(),
                })
            };
            if chars.is_empty() {
                return Err(TcfError::EmptySegment { index });
            }
            let Some(kind) = Bits::segment_type(chars) else {
                return Err(not_base64().unwrap_or(TcfError::EmptySegment { index }));
            };
            let segment = match kind {
                0 => Segment::Core,
                1 => Segment::DisclosedVendors,
                2 => Segment::AllowedVendors,
                3 => Segment::PublisherTc,
                _ => return Err(TcfError::UnknownSegment { index, kind }),
            };
            let seen = match segment {
                Segment::Core => true,
                Segment::DisclosedVendors => tc.disclosed_vendors.is_some(),
                Segment::AllowedVendors => seen_allowed,
                Segment::PublisherTc => tc.publisher_tc.is_some(),
            };
            if seen {
                return Err(TcfError::DuplicateSegment { index, segment });
            }
            // The segment's bits after its type (a non-empty segment has at least six).
            let body = || {
                let mut bits = Bits::new(chars, segment, start)?;
                bits.read(3, "SegmentType").map(|_| bits)
            };
            match segment {
                Segment::DisclosedVendors => {
                    let set = read_vendor_section(&mut body()?, "disclosed vendors")?;
                    tc.disclosed_vendors = Some(set);
                }
                Segment::PublisherTc => tc.publisher_tc = Some(read_publisher_tc(&mut body()?)?),
                // Skipped unread, once its characters are known to be base64url.
                Segment::AllowedVendors => match not_base64() {
                    Some(err) => return Err(err),
                    None => seen_allowed = true,
                },
                Segment::Core => {}
            }
        }
        Ok(tc)
    }

    /// The encoding version: always 2 (others are refused).
    pub fn version(&self) -> u8 {
        self.version
    }

    /// Created, in deciseconds since the Unix epoch (CMPs write the day: since TCF 2.2 it equals
    /// LastUpdated).
    pub fn created(&self) -> u64 {
        self.created
    }

    /// LastUpdated, in deciseconds since the Unix epoch.
    pub fn last_updated(&self) -> u64 {
        self.last_updated
    }

    pub fn cmp_id(&self) -> u16 {
        self.cmp_id
    }

    pub fn cmp_version(&self) -> u16 {
        self.cmp_version
    }

    pub fn consent_screen(&self) -> u8 {
        self.consent_screen
    }

    /// ConsentLanguage: two ASCII capitals (ISO 639-1, e.g. `*b"EN"`).
    pub fn consent_language(&self) -> [u8; 2] {
        self.consent_language
    }

    /// The GVL version the CMP used; the legal bases are to be read in that list.
    pub fn vendor_list_version(&self) -> u16 {
        self.vendor_list_version
    }

    /// TcfPolicyVersion: 4 is TCF 2.2, 5 is TCF 2.3.
    pub fn policy_version(&self) -> u8 {
        self.policy_version
    }

    pub fn is_service_specific(&self) -> bool {
        self.is_service_specific
    }

    pub fn use_non_standard_texts(&self) -> bool {
        self.use_non_standard_texts
    }

    /// PurposeOneTreatment: purpose 1 was not disclosed (the publisher's country, `publisher_cc`,
    /// decides whether it needs consent).
    pub fn purpose_one_treatment(&self) -> bool {
        self.purpose_one_treatment
    }

    /// PublisherCC: two ASCII capitals (ISO 3166-1 alpha-2, e.g. `*b"DE"`).
    pub fn publisher_cc(&self) -> [u8; 2] {
        self.publisher_cc
    }

    /// The user's consent to `purpose` (1..=24; false for any other number).
    pub fn purpose_consent(&self, purpose: u8) -> bool {
        flag(u64::from(self.purpose_consents), 24, purpose)
    }

    /// Legitimate interest established for `purpose` and not objected to (1..=24).
    pub fn purpose_li(&self, purpose: u8) -> bool {
        flag(u64::from(self.purpose_lis), 24, purpose)
    }

    /// The user's opt-in to special feature `feature` (1..=12; 1 is precise geolocation).
    pub fn special_feature(&self, feature: u8) -> bool {
        flag(u64::from(self.special_features), 12, feature)
    }

    pub fn vendor_consent(&self, vendor: u16) -> bool {
        self.vendor_consents.contains(vendor)
    }

    pub fn vendor_li(&self, vendor: u16) -> bool {
        self.vendor_lis.contains(vendor)
    }

    pub fn vendor_consents(&self) -> &VendorSet {
        &self.vendor_consents
    }

    pub fn vendor_lis(&self) -> &VendorSet {
        &self.vendor_lis
    }

    /// The publisher's restriction on `vendor` for `purpose`, if any (the lowest type when
    /// several entries name them).
    pub fn restriction(&self, purpose: u8, vendor: u16) -> Option<Restriction> {
        self.restrictions.get(purpose, vendor)
    }

    /// Every publisher restriction entry, in string order.
    pub fn publisher_restrictions(&self) -> impl Iterator<Item = PublisherRestriction<'_>> + '_ {
        self.restrictions.iter()
    }

    /// Whether the CMP disclosed `vendor`; `None` when the string has no disclosed vendors
    /// segment (optional before TCF 2.3).
    pub fn disclosed_vendor(&self, vendor: u16) -> Option<bool> {
        self.disclosed_vendors
            .as_ref()
            .map(|set| set.contains(vendor))
    }

    pub fn disclosed_vendors(&self) -> Option<&VendorSet> {
        self.disclosed_vendors.as_ref()
    }

    pub fn publisher_tc(&self) -> Option<&PublisherTc> {
        self.publisher_tc.as_ref()
    }
}

/// The core segment, field by field in the spec's order.
fn read_core(bits: &mut Bits) -> Result<TcString, TcfError> {
    let version = bits.read_u8(6, "Version")?;
    if version != 2 {
        return Err(TcfError::UnsupportedVersion { version });
    }
    Ok(TcString {
        version,
        created: bits.read(36, "Created")?,
        last_updated: bits.read(36, "LastUpdated")?,
        cmp_id: bits.read_u16(12, "CmpId")?,
        cmp_version: bits.read_u16(12, "CmpVersion")?,
        consent_screen: bits.read_u8(6, "ConsentScreen")?,
        consent_language: bits.read_letters("ConsentLanguage")?,
        vendor_list_version: bits.read_u16(12, "VendorListVersion")?,
        policy_version: bits.read_u8(6, "TcfPolicyVersion")?,
        is_service_specific: bits.read_bool("IsServiceSpecific")?,
        use_non_standard_texts: bits.read_bool("UseNonStandardTexts")?,
        special_features: bits.read_u16(12, "SpecialFeatureOptIns")?,
        purpose_consents: bits.read_u32(24, "PurposesConsent")?,
        purpose_lis: bits.read_u32(24, "PurposesLITransparency")?,
        purpose_one_treatment: bits.read_bool("PurposeOneTreatment")?,
        publisher_cc: bits.read_letters("PublisherCC")?,
        vendor_consents: read_vendor_section(bits, "vendor consents")?,
        vendor_lis: read_vendor_section(bits, "vendor legitimate interests")?,
        restrictions: read_restrictions(bits)?,
        disclosed_vendors: None,
        publisher_tc: None,
    })
}

/// Bit `id` (1-based, 1 most significant) of a `width`-bit field; false outside 1..=width.
fn flag(field: u64, width: u8, id: u8) -> bool {
    if id == 0 || id > width || width > 64 {
        return false;
    }
    (field >> (width - id)) & 1 == 1
}
