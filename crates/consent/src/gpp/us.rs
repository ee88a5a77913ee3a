//! The US national (`usnat`, id 7) and state sections (ids 8 to 27), decoded into one shape,
//! [`UsSection`], with the fields a policy reads; a field a section does not have reads as
//! "not applicable" (Utah has no sharing opt-out, Maryland no sensitive-data list).
//!
//! Rules:
//! - The core sub-section's layout comes from the section id and its 6-bit version
//!   (`us_layouts`); an unknown version is refused, not guessed at.
//! - Every 2-bit field is 0, 1 or 2 (`MspaCoveredTransaction` 1 or 2); anything else is
//!   refused ([`GppError::InvalidValue`]), because a policy must not read a value it cannot
//!   name.
//! - Sub-sections follow the core after `.`: a GPC sub-section (type 1) sets [`UsSection::gpc`];
//!   a sub-section of another type, or any past what the layout defines, is ignored; an empty
//!   one is refused. Bits after a sub-section's last field are padding.

use super::GppError;
use super::bits::Bits;
use super::us_layouts::{self, Extra, Field, Layout};

/// An opt-out field: GPP's 0 / 1 / 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptOut {
    /// 0: the section has no such opt-out, or its notice was not applicable or not given.
    #[default]
    NotApplicable,
    /// 1.
    OptedOut,
    /// 2.
    DidNotOptOut,
}

/// A notice field: 0 / 1 / 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Notice {
    /// 0: not applicable (the field does not exist in the section, or the processing it
    /// announces does not happen).
    #[default]
    NotApplicable,
    /// 1: the notice was provided.
    Provided,
    /// 2: the notice was not provided.
    NotProvided,
}

/// A consent field: 0 / 1 / 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consent {
    /// 0.
    #[default]
    NotApplicable,
    /// 1.
    NoConsent,
    /// 2.
    Consent,
}

/// The summary of `KnownChildSensitiveDataConsents` ([`UsSection::known_child`]).
pub type ChildConsent = Consent;

/// A yes/no field that may not apply (the MSPA modes): 0 / 1 / 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum YesNo {
    /// 0.
    #[default]
    NotApplicable,
    /// 1.
    Yes,
    /// 2.
    No,
}

/// The fields of a US national or state section, one shape for all of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsSection {
    /// The section's version (`Version`, or `MspaVersion` in the newer layouts).
    pub version: u8,
    pub sharing_notice: Notice,
    pub processing_notice: Notice,
    pub sale_opt_out_notice: Notice,
    pub sharing_opt_out_notice: Notice,
    pub targeted_advertising_opt_out_notice: Notice,
    /// Also Iowa's `SensitiveDataOptOutNotice`.
    pub sensitive_data_processing_opt_out_notice: Notice,
    pub sensitive_data_limit_use_notice: Notice,
    pub sale_opt_out: OptOut,
    pub sharing_opt_out: OptOut,
    pub targeted_advertising_opt_out: OptOut,
    /// `SensitiveDataProcessing` as sent, one 0/1/2 entry per category in the section's own
    /// order (empty where the section has none, or its sub-section is absent). 1 is the
    /// restrictive answer everywhere: opted out (usnat, usca, usut, usia) or no consent (the
    /// other states); 2 the permissive one.
    pub sensitive_data_processing: Vec<u8>,
    /// `KnownChildSensitiveDataConsents` as sent: one 0/1/2 entry per age band in the
    /// section's own order (one entry where the section has a single integer; empty where it
    /// has none). 1 = no consent, 2 = consent.
    pub known_child_sensitive_data_consents: Vec<u8>,
    /// Those entries summarised, most restrictive first: any "no consent" (1) gives
    /// `NoConsent`; otherwise any "consent" (2) gives `Consent`; otherwise `NotApplicable`.
    /// A refusal for one age band must not be hidden by consent for another, and only when
    /// no band applies is there nothing to respect. Consent for the youngest band is still
    /// consent under a state law, not the verifiable parental consent COPPA asks for: a
    /// policy about children under 13 reads the per-age list, not this summary.
    pub known_child: ChildConsent,
    pub personal_data_consents: Consent,
    pub additional_data_processing_consent: Consent,
    pub mspa_covered_transaction: bool,
    /// `MspaOptOutOptionMode`; in the layouts with a single `MspaMode`, `Yes` when it is 1
    /// (opt-out option mode), `No` when it is 2, not applicable when 0.
    pub mspa_opt_out_option_mode: YesNo,
    /// `MspaServiceProviderMode`; from `MspaMode`, `Yes` when it is 2, `No` when it is 1.
    pub mspa_service_provider_mode: YesNo,
    /// The GPC sub-section's bit; `None` when the section has no GPC sub-section.
    pub gpc: Option<bool>,
}

/// The name GPP's client API gives US section `id` (`usnat`, `usca`, ...).
pub(crate) fn us_section_name(id: u16) -> Option<&'static str> {
    us_layouts::LAYOUTS
        .iter()
        .find(|l| l.id == id)
        .map(|l| l.name)
}

impl UsSection {
    /// Decodes the text of section `id` (7 to 27), sub-sections included.
    pub fn decode(id: u16, text: &str) -> Result<UsSection, GppError> {
        if !us_layouts::is_us_section(id) {
            return Err(GppError::NotUsSection { id });
        }
        let mut parts = text.split('.');
        let core = parts.next().unwrap_or_default();
        let (layout, mut section) = decode_core(id, core)?;
        let mut gpc_seen = false;
        for (i, part) in parts.enumerate() {
            if part.is_empty() {
                return Err(GppError::EmptySubsection { id });
            }
            let mut bits = Bits::new(part).ok_or(GppError::SectionNotBase64Url { id })?;
            match layout.extra {
                Extra::Gpc if !gpc_seen => {
                    let kind = bits
                        .int(2)
                        .map_err(GppError::in_section(id, "SubsectionType"))?;
                    if kind == GPC_SUBSECTION {
                        let gpc = bits.bit().map_err(GppError::in_section(id, "Gpc"))?;
                        section.gpc = Some(gpc);
                        gpc_seen = true;
                    }
                }
                Extra::SensitiveData(n) if i == 0 => {
                    section.sensitive_data_processing =
                        read_list(&mut bits, id, Field::SensitiveDataProcessing(n), n)?;
                }
                Extra::Gpc | Extra::SensitiveData(_) | Extra::None => {}
            }
        }
        Ok(section)
    }
}

/// `SubsectionType` of a GPC sub-section.
const GPC_SUBSECTION: u32 = 1;

fn decode_core(id: u16, core: &str) -> Result<(&'static Layout, UsSection), GppError> {
    if core.is_empty() {
        return Err(GppError::EmptySection { id });
    }
    let mut bits = Bits::new(core).ok_or(GppError::SectionNotBase64Url { id })?;
    let version = bits.int(6).map_err(GppError::in_section(id, "Version"))?;
    let layout = us_layouts::find(id, version)
        .map_err(|_| GppError::UnsupportedSectionVersion { id, version })?;
    let mut section = UsSection {
        // Six bits always fit.
        version: u8::try_from(version).unwrap_or(u8::MAX),
        ..UsSection::default()
    };
    for &field in layout.core {
        read_field(&mut bits, id, field, &mut section)?;
    }
    section.known_child = summarise_children(&section.known_child_sensitive_data_consents);
    Ok((layout, section))
}

fn read_field(
    bits: &mut Bits<'_>,
    id: u16,
    field: Field,
    section: &mut UsSection,
) -> Result<(), GppError> {
    let s = section;
    match field {
        Field::SensitiveDataProcessing(n) => {
            s.sensitive_data_processing = read_list(bits, id, field, n)?;
            return Ok(());
        }
        Field::KnownChild(n) => {
            s.known_child_sensitive_data_consents = read_list(bits, id, field, n)?;
            return Ok(());
        }
        _ => {}
    }
    let value = read_value(bits, id, field)?;
    match field {
        Field::SharingNotice => s.sharing_notice = notice(value),
        Field::ProcessingNotice => s.processing_notice = notice(value),
        Field::SaleOptOutNotice => s.sale_opt_out_notice = notice(value),
        Field::SharingOptOutNotice => s.sharing_opt_out_notice = notice(value),
        Field::TargetedAdvertisingOptOutNotice => {
            s.targeted_advertising_opt_out_notice = notice(value);
        }
        Field::SensitiveDataProcessingOptOutNotice => {
            s.sensitive_data_processing_opt_out_notice = notice(value);
        }
        Field::SensitiveDataLimitUseNotice => s.sensitive_data_limit_use_notice = notice(value),
        Field::SaleOptOut => s.sale_opt_out = opt_out(value),
        Field::SharingOptOut => s.sharing_opt_out = opt_out(value),
        Field::TargetedAdvertisingOptOut => s.targeted_advertising_opt_out = opt_out(value),
        Field::PersonalDataConsents => s.personal_data_consents = consent(value),
        Field::AdditionalDataProcessingConsent => {
            s.additional_data_processing_consent = consent(value);
        }
        Field::MspaCoveredTransaction => {
            if value == 0 {
                return Err(GppError::InvalidValue {
                    id,
                    field: field.name(),
                    value,
                });
            }
            s.mspa_covered_transaction = value == 1;
        }
        Field::MspaOptOutOptionMode => s.mspa_opt_out_option_mode = yes_no(value),
        Field::MspaServiceProviderMode => s.mspa_service_provider_mode = yes_no(value),
        Field::MspaMode => {
            (s.mspa_opt_out_option_mode, s.mspa_service_provider_mode) = match value {
                1 => (YesNo::Yes, YesNo::No),
                2 => (YesNo::No, YesNo::Yes),
                _ => (YesNo::NotApplicable, YesNo::NotApplicable),
            };
        }
        Field::SensitiveDataProcessing(_) | Field::KnownChild(_) => {}
    }
    Ok(())
}

/// One 2-bit value, refused when it is 3.
fn read_value(bits: &mut Bits<'_>, id: u16, field: Field) -> Result<u32, GppError> {
    let value = bits
        .int(2)
        .map_err(GppError::in_section(id, field.name()))?;
    if value > 2 {
        return Err(GppError::InvalidValue {
            id,
            field: field.name(),
            value,
        });
    }
    Ok(value)
}

fn read_list(bits: &mut Bits<'_>, id: u16, field: Field, n: u8) -> Result<Vec<u8>, GppError> {
    (0..n)
        .map(|_| read_value(bits, id, field).map(|v| v as u8))
        .collect()
}

fn summarise_children(entries: &[u8]) -> ChildConsent {
    if entries.contains(&1) {
        Consent::NoConsent
    } else if entries.contains(&2) {
        Consent::Consent
    } else {
        Consent::NotApplicable
    }
}

fn notice(value: u32) -> Notice {
    match value {
        1 => Notice::Provided,
        2 => Notice::NotProvided,
        _ => Notice::NotApplicable,
    }
}

fn opt_out(value: u32) -> OptOut {
    match value {
        1 => OptOut::OptedOut,
        2 => OptOut::DidNotOptOut,
        _ => OptOut::NotApplicable,
    }
}

fn consent(value: u32) -> Consent {
    match value {
        1 => Consent::NoConsent,
        2 => Consent::Consent,
        _ => Consent::NotApplicable,
    }
}

fn yes_no(value: u32) -> YesNo {
    match value {
        1 => YesNo::Yes,
        2 => YesNo::No,
        _ => YesNo::NotApplicable,
    }
}

#[cfg(test)]
mod tests;
