//! The bit layouts of the US national and state sections, as a table: for each section id and
//! version, the core sub-section's fields in order after the 6-bit version, and what the
//! optional second sub-section holds. Taken from the IAB's GPP section specifications, checked
//! against `@iabgpp/cmpapi` 3.2.0 (which also defines the newer Maryland, Indiana, Kentucky and
//! Rhode Island layouts: `MspaVersion` first, one `MspaMode`, and for the last three the
//! sensitive-data list moved to a sub-section of its own, with no type bits).
//!
//! Every field is a 2-bit integer or a list of them; `KnownChild(1)` is the single integer that
//! many states use where others have a per-age list.

/// One field of a core sub-section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    SharingNotice,
    ProcessingNotice,
    SaleOptOutNotice,
    SharingOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    /// `SensitiveDataProcessingOptOutNotice`; Iowa's `SensitiveDataOptOutNotice`.
    SensitiveDataProcessingOptOutNotice,
    SensitiveDataLimitUseNotice,
    SaleOptOut,
    SharingOptOut,
    TargetedAdvertisingOptOut,
    /// A list of this many 2-bit entries.
    SensitiveDataProcessing(u8),
    /// `KnownChildSensitiveDataConsents`: this many 2-bit entries (1: a single integer).
    KnownChild(u8),
    PersonalDataConsents,
    AdditionalDataProcessingConsent,
    /// 1 = yes, 2 = no; 0 is not a value.
    MspaCoveredTransaction,
    MspaOptOutOptionMode,
    MspaServiceProviderMode,
    /// The newer layouts' single mode: 1 = opt-out option mode, 2 = service provider mode.
    MspaMode,
}

impl Field {
    /// The field's name in the specification, for error messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::SharingNotice => "SharingNotice",
            Self::ProcessingNotice => "ProcessingNotice",
            Self::SaleOptOutNotice => "SaleOptOutNotice",
            Self::SharingOptOutNotice => "SharingOptOutNotice",
            Self::TargetedAdvertisingOptOutNotice => "TargetedAdvertisingOptOutNotice",
            Self::SensitiveDataProcessingOptOutNotice => "SensitiveDataProcessingOptOutNotice",
            Self::SensitiveDataLimitUseNotice => "SensitiveDataLimitUseNotice",
            Self::SaleOptOut => "SaleOptOut",
            Self::SharingOptOut => "SharingOptOut",
            Self::TargetedAdvertisingOptOut => "TargetedAdvertisingOptOut",
            Self::SensitiveDataProcessing(_) => "SensitiveDataProcessing",
            Self::KnownChild(_) => "KnownChildSensitiveDataConsents",
            Self::PersonalDataConsents => "PersonalDataConsents",
            Self::AdditionalDataProcessingConsent => "AdditionalDataProcessingConsent",
            Self::MspaCoveredTransaction => "MspaCoveredTransaction",
            Self::MspaOptOutOptionMode => "MspaOptOutOptionMode",
            Self::MspaServiceProviderMode => "MspaServiceProviderMode",
            Self::MspaMode => "MspaMode",
        }
    }
}

/// What the sub-section after the core holds, when present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extra {
    /// Nothing defined: further sub-sections are ignored.
    None,
    /// `SubsectionType` (2 bits, 1 = GPC) then the `Gpc` bit.
    Gpc,
    /// `SensitiveDataProcessing`, this many 2-bit entries, with no type bits.
    SensitiveData(u8),
}

/// One section's layout at one version.
#[derive(Debug)]
pub(crate) struct Layout {
    pub(crate) id: u16,
    pub(crate) name: &'static str,
    pub(crate) version: u32,
    pub(crate) core: &'static [Field],
    pub(crate) extra: Extra,
}

use Field::*;

const USNAT_V1: &[Field] = &[
    SharingNotice,
    SaleOptOutNotice,
    SharingOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    SensitiveDataProcessingOptOutNotice,
    SensitiveDataLimitUseNotice,
    SaleOptOut,
    SharingOptOut,
    TargetedAdvertisingOptOut,
    SensitiveDataProcessing(12),
    KnownChild(2),
    PersonalDataConsents,
    MspaCoveredTransaction,
    MspaOptOutOptionMode,
    MspaServiceProviderMode,
];

/// Version 2 grew the sensitive-data list to 16 and the per-age list to 3.
const USNAT_V2: &[Field] = &[
    SharingNotice,
    SaleOptOutNotice,
    SharingOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    SensitiveDataProcessingOptOutNotice,
    SensitiveDataLimitUseNotice,
    SaleOptOut,
    SharingOptOut,
    TargetedAdvertisingOptOut,
    SensitiveDataProcessing(16),
    KnownChild(3),
    PersonalDataConsents,
    MspaCoveredTransaction,
    MspaOptOutOptionMode,
    MspaServiceProviderMode,
];

const USCA: &[Field] = &[
    SaleOptOutNotice,
    SharingOptOutNotice,
    SensitiveDataLimitUseNotice,
    SaleOptOut,
    SharingOptOut,
    SensitiveDataProcessing(9),
    KnownChild(2),
    PersonalDataConsents,
    MspaCoveredTransaction,
    MspaOptOutOptionMode,
    MspaServiceProviderMode,
];

/// Virginia, Colorado and Connecticut: sharing notice, sale and targeting opt-outs.
const fn sharing_states(sensitive: u8, child: u8) -> [Field; 10] {
    [
        SharingNotice,
        SaleOptOutNotice,
        TargetedAdvertisingOptOutNotice,
        SaleOptOut,
        TargetedAdvertisingOptOut,
        SensitiveDataProcessing(sensitive),
        KnownChild(child),
        MspaCoveredTransaction,
        MspaOptOutOptionMode,
        MspaServiceProviderMode,
    ]
}
const USVA: &[Field] = &sharing_states(8, 1);
const USCO: &[Field] = &sharing_states(7, 1);
const USCT: &[Field] = &sharing_states(8, 3);

const USUT: &[Field] = &[
    SharingNotice,
    SaleOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    SensitiveDataProcessingOptOutNotice,
    SaleOptOut,
    TargetedAdvertisingOptOut,
    SensitiveDataProcessing(8),
    KnownChild(1),
    MspaCoveredTransaction,
    MspaOptOutOptionMode,
    MspaServiceProviderMode,
];

/// The 2024-2025 states: a first notice (processing, or Montana's sharing), sale and
/// targeting opt-outs, the sensitive-data and per-age lists, additional-processing consent.
const fn consent_states(first_notice: Field, sensitive: u8, child: u8) -> [Field; 11] {
    [
        first_notice,
        SaleOptOutNotice,
        TargetedAdvertisingOptOutNotice,
        SaleOptOut,
        TargetedAdvertisingOptOut,
        SensitiveDataProcessing(sensitive),
        KnownChild(child),
        AdditionalDataProcessingConsent,
        MspaCoveredTransaction,
        MspaOptOutOptionMode,
        MspaServiceProviderMode,
    ]
}
const USFL: &[Field] = &consent_states(ProcessingNotice, 8, 3);
const USMT: &[Field] = &consent_states(SharingNotice, 8, 3);
const USOR: &[Field] = &consent_states(ProcessingNotice, 11, 3);
const USTX: &[Field] = &consent_states(ProcessingNotice, 8, 1);
const USDE: &[Field] = &consent_states(ProcessingNotice, 9, 5);
const USNE: &[Field] = &consent_states(ProcessingNotice, 8, 1);
const USNH: &[Field] = &consent_states(ProcessingNotice, 8, 3);
const USNJ: &[Field] = &consent_states(ProcessingNotice, 10, 5);
const USTN: &[Field] = &consent_states(ProcessingNotice, 8, 1);
const USMN: &[Field] = &consent_states(ProcessingNotice, 8, 1);

const USIA: &[Field] = &[
    ProcessingNotice,
    SaleOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    SensitiveDataProcessingOptOutNotice,
    SaleOptOut,
    TargetedAdvertisingOptOut,
    SensitiveDataProcessing(8),
    KnownChild(1),
    MspaCoveredTransaction,
    MspaOptOutOptionMode,
    MspaServiceProviderMode,
];

/// Maryland: the MSPA fields first, no sensitive-data or per-age list.
const USMD: &[Field] = &[
    MspaCoveredTransaction,
    MspaMode,
    ProcessingNotice,
    SaleOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    SaleOptOut,
    TargetedAdvertisingOptOut,
    AdditionalDataProcessingConsent,
];

/// Indiana, Kentucky, Rhode Island: as Maryland plus the single per-age integer; their
/// sensitive-data list is the optional sub-section.
const USIN_KY_RI: &[Field] = &[
    MspaCoveredTransaction,
    MspaMode,
    ProcessingNotice,
    SaleOptOutNotice,
    TargetedAdvertisingOptOutNotice,
    SaleOptOut,
    TargetedAdvertisingOptOut,
    KnownChild(1),
    AdditionalDataProcessingConsent,
];

const fn layout(
    id: u16,
    name: &'static str,
    version: u32,
    core: &'static [Field],
    extra: Extra,
) -> Layout {
    Layout {
        id,
        name,
        version,
        core,
        extra,
    }
}

/// Every US section layout, by id then version.
pub(crate) const LAYOUTS: &[Layout] = &[
    layout(7, "usnat", 1, USNAT_V1, Extra::Gpc),
    layout(7, "usnat", 2, USNAT_V2, Extra::Gpc),
    layout(8, "usca", 1, USCA, Extra::Gpc),
    layout(9, "usva", 1, USVA, Extra::None),
    layout(10, "usco", 1, USCO, Extra::Gpc),
    layout(11, "usut", 1, USUT, Extra::None),
    layout(12, "usct", 1, USCT, Extra::Gpc),
    layout(13, "usfl", 1, USFL, Extra::None),
    layout(14, "usmt", 1, USMT, Extra::Gpc),
    layout(15, "usor", 1, USOR, Extra::Gpc),
    layout(16, "ustx", 1, USTX, Extra::Gpc),
    layout(17, "usde", 1, USDE, Extra::Gpc),
    layout(18, "usia", 1, USIA, Extra::Gpc),
    layout(19, "usne", 1, USNE, Extra::Gpc),
    layout(20, "usnh", 1, USNH, Extra::Gpc),
    layout(21, "usnj", 1, USNJ, Extra::Gpc),
    layout(22, "ustn", 1, USTN, Extra::Gpc),
    layout(23, "usmn", 1, USMN, Extra::Gpc),
    layout(24, "usmd", 1, USMD, Extra::Gpc),
    layout(25, "usin", 1, USIN_KY_RI, Extra::SensitiveData(8)),
    layout(26, "usky", 1, USIN_KY_RI, Extra::SensitiveData(8)),
    layout(27, "usri", 1, USIN_KY_RI, Extra::SensitiveData(8)),
];

/// The layout of section `id` at `version`; `Err(true)` when the id is a US section but the
/// version is not one this table knows, `Err(false)` when the id is not a US section.
pub(crate) fn find(id: u16, version: u32) -> Result<&'static Layout, bool> {
    let mut known_id = false;
    for layout in LAYOUTS {
        if layout.id == id {
            if layout.version == version {
                return Ok(layout);
            }
            known_id = true;
        }
    }
    Err(known_id)
}

/// Whether `id` is a US section this table decodes.
pub(crate) fn is_us_section(id: u16) -> bool {
    LAYOUTS.iter().any(|l| l.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bits of a layout's core after the version: 2 per integer, 2 per list entry.
    fn core_bits(layout: &Layout) -> usize {
        layout
            .core
            .iter()
            .map(|f| match f {
                SensitiveDataProcessing(n) | KnownChild(n) => 2 * usize::from(*n),
                _ => 2,
            })
            .sum()
    }

    #[test]
    fn core_sizes_match_the_specifications() {
        // Total core bits including the 6-bit version, added up by hand from the field tables of
        // the section specifications (and @iabgpp/cmpapi 3.2.0's segment definitions).
        let table = [
            ("usnat", 1, 60),
            ("usnat", 2, 70),
            ("usca", 1, 46),
            ("usva", 1, 40),
            ("usco", 1, 38),
            ("usut", 1, 42),
            ("usct", 1, 44),
            ("usfl", 1, 46),
            ("usmt", 1, 46),
            ("usor", 1, 52),
            ("ustx", 1, 42),
            ("usde", 1, 52),
            ("usia", 1, 42),
            ("usne", 1, 42),
            ("usnh", 1, 46),
            ("usnj", 1, 54),
            ("ustn", 1, 42),
            ("usmn", 1, 42),
            ("usmd", 1, 22),
            ("usin", 1, 24),
            ("usky", 1, 24),
            ("usri", 1, 24),
        ];
        assert_eq!(table.len(), LAYOUTS.len());
        for (layout, (name, version, bits)) in LAYOUTS.iter().zip(table) {
            assert_eq!((layout.name, layout.version), (name, version));
            assert_eq!(6 + core_bits(layout), bits, "{name} v{version}");
        }
    }

    #[test]
    fn every_layout_has_the_fields_a_policy_always_reads() {
        for layout in LAYOUTS {
            let has = |f: Field| layout.core.contains(&f);
            assert!(has(MspaCoveredTransaction), "{}", layout.name);
            assert!(has(SaleOptOut), "{}", layout.name);
            // Each field at most once: a second would overwrite the first.
            for (i, f) in layout.core.iter().enumerate() {
                let later = layout.core.iter().skip(i + 1);
                assert!(
                    later.map(|g| g.name()).all(|n| n != f.name()),
                    "{} {}",
                    layout.name,
                    f.name()
                );
            }
        }
    }

    #[test]
    fn ids_run_from_7_to_27_and_lookups_tell_unknown_versions_apart() {
        let ids: Vec<u16> = (7..=27).collect();
        let mut seen: Vec<u16> = LAYOUTS.iter().map(|l| l.id).collect();
        seen.dedup();
        assert_eq!(seen, ids);
        assert!(find(7, 2).is_ok());
        assert_eq!(find(7, 3).err(), Some(true));
        assert_eq!(find(9, 2).err(), Some(true));
        assert_eq!(find(6, 1).err(), Some(false));
        assert_eq!(find(28, 1).err(), Some(false));
        assert!(is_us_section(27) && !is_us_section(2) && !is_us_section(28));
    }
}
