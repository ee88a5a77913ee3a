//! The publisher TC segment (type 3): the publisher's own purposes and custom purposes. Vendors
//! should not rely on it without an agreement with the publisher (the spec's words); it is
//! decoded so that a string carrying it is read whole, and for the exchange to pass on.

use super::bits::Bits;
use super::error::TcfError;
use super::flag;

/// The publisher's consent and legitimate interest signals for its own use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherTc {
    purpose_consents: u32,
    purpose_lis: u32,
    num_custom_purposes: u8,
    custom_consents: u64,
    custom_lis: u64,
}

impl PublisherTc {
    /// PubPurposesConsent: purposes 1..=24.
    pub fn purpose_consent(&self, purpose: u8) -> bool {
        flag(u64::from(self.purpose_consents), 24, purpose)
    }

    /// PubPurposesLITransparency: purposes 1..=24.
    pub fn purpose_li(&self, purpose: u8) -> bool {
        flag(u64::from(self.purpose_lis), 24, purpose)
    }

    /// NumCustomPurposes: custom purposes are numbered 1..=this (at most 63).
    pub fn num_custom_purposes(&self) -> u8 {
        self.num_custom_purposes
    }

    pub fn custom_purpose_consent(&self, purpose: u8) -> bool {
        flag(self.custom_consents, self.num_custom_purposes, purpose)
    }

    pub fn custom_purpose_li(&self, purpose: u8) -> bool {
        flag(self.custom_lis, self.num_custom_purposes, purpose)
    }
}

/// The segment after its 3-bit type.
pub(super) fn read_publisher_tc(bits: &mut Bits) -> Result<PublisherTc, TcfError> {
    let purpose_consents = bits.read_u32(24, "PubPurposesConsent")?;
    let purpose_lis = bits.read_u32(24, "PubPurposesLITransparency")?;
    let num_custom_purposes = bits.read_u8(6, "NumCustomPurposes")?;
    let n = usize::from(num_custom_purposes);
    let custom_consents = bits.read(n, "CustomPurposesConsent")?;
    let custom_lis = bits.read(n, "CustomPurposesLITransparency")?;
    Ok(PublisherTc {
        purpose_consents,
        purpose_lis,
        num_custom_purposes,
        custom_consents,
        custom_lis,
    })
}
