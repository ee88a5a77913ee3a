//! The US-section rules on sections written bit by bit here (the library-written cases are in
//! `gpp/tests.rs`): refused values, versions and shapes, sub-section handling, the per-age
//! summary and the MSPA mode mapping.

use super::super::bits::tests::text_of;
use super::*;

/// A core sub-section: the 6-bit version, then 2-bit values.
fn core(version: u32, values: &[u32]) -> String {
    let mut bits = format!("{version:06b}");
    for v in values {
        bits.push_str(&format!("{v:02b}"));
    }
    text_of(&bits)
}

/// usnat v2's 32 values after the version, all "not applicable", covered = yes.
fn usnat_v2_values() -> Vec<u32> {
    let mut values = vec![0; 32];
    values[29] = 1; // MspaCoveredTransaction
    values
}

const USNAT_SALE_OPT_OUT: usize = 6;
const USNAT_CHILDREN: usize = 25;
const USNAT_COVERED: usize = 29;

#[test]
fn a_section_written_bit_by_bit_decodes_field_by_field() {
    let mut values = usnat_v2_values();
    values[0] = 1; // SharingNotice
    values[5] = 2; // SensitiveDataLimitUseNotice
    values[USNAT_SALE_OPT_OUT] = 1;
    values[7] = 2; // SharingOptOut
    values[9] = 2; // first SensitiveDataProcessing entry
    values[24] = 1; // last one
    values[USNAT_CHILDREN + 2] = 2;
    values[28] = 1; // PersonalDataConsents
    values[31] = 1; // MspaServiceProviderMode
    let text = format!("{}.{}", core(2, &values), text_of("011"));
    let section = UsSection::decode(7, &text).expect("decodes");
    let mut sensitive = vec![0; 16];
    sensitive[0] = 2;
    sensitive[15] = 1;
    let expected = UsSection {
        version: 2,
        sharing_notice: Notice::Provided,
        sensitive_data_limit_use_notice: Notice::NotProvided,
        sale_opt_out: OptOut::OptedOut,
        sharing_opt_out: OptOut::DidNotOptOut,
        sensitive_data_processing: sensitive,
        known_child_sensitive_data_consents: vec![0, 0, 2],
        known_child: Consent::Consent,
        personal_data_consents: Consent::NoConsent,
        mspa_covered_transaction: true,
        mspa_service_provider_mode: YesNo::Yes,
        gpc: Some(true),
        ..UsSection::default()
    };
    assert_eq!(section, expected);
}

#[test]
fn the_per_age_list_is_summarised_most_restrictive_first() {
    let table: [(&[u32], Consent); 8] = [
        (&[0, 0, 0], Consent::NotApplicable),
        (&[2, 0, 0], Consent::Consent),
        (&[0, 0, 2], Consent::Consent),
        (&[1, 0, 0], Consent::NoConsent),
        (&[0, 0, 1], Consent::NoConsent),
        (&[2, 1, 2], Consent::NoConsent),
        (&[2, 2, 2], Consent::Consent),
        (&[1, 1, 1], Consent::NoConsent),
    ];
    for (children, summary) in table {
        let mut values = usnat_v2_values();
        values[USNAT_CHILDREN..USNAT_CHILDREN + 3].copy_from_slice(children);
        let section = UsSection::decode(7, &core(2, &values)).expect("decodes");
        assert_eq!(section.known_child, summary, "{children:?}");
        let raw: Vec<u32> = section
            .known_child_sensitive_data_consents
            .iter()
            .map(|&v| u32::from(v))
            .collect();
        assert_eq!(raw, children);
    }
}

#[test]
fn values_outside_a_fields_range_are_refused() {
    let mut values = usnat_v2_values();
    values[USNAT_SALE_OPT_OUT] = 3;
    assert_eq!(
        UsSection::decode(7, &core(2, &values)),
        Err(GppError::InvalidValue {
            id: 7,
            field: "SaleOptOut",
            value: 3
        })
    );
    let mut values = usnat_v2_values();
    values[USNAT_CHILDREN + 1] = 3;
    assert_eq!(
        UsSection::decode(7, &core(2, &values)),
        Err(GppError::InvalidValue {
            id: 7,
            field: "KnownChildSensitiveDataConsents",
            value: 3
        })
    );
    for covered in [0, 3] {
        let mut values = usnat_v2_values();
        values[USNAT_COVERED] = covered;
        assert_eq!(
            UsSection::decode(7, &core(2, &values)),
            Err(GppError::InvalidValue {
                id: 7,
                field: "MspaCoveredTransaction",
                value: covered
            })
        );
    }
}

#[test]
fn unknown_ids_versions_and_shapes_are_refused() {
    let values = usnat_v2_values();
    for id in [0, 2, 5, 6, 28, u16::MAX] {
        assert_eq!(
            UsSection::decode(id, &core(2, &values)),
            Err(GppError::NotUsSection { id })
        );
    }
    for (id, version) in [(7, 0), (7, 3), (9, 2), (27, 63)] {
        assert_eq!(
            UsSection::decode(id, &core(version, &values)),
            Err(GppError::UnsupportedSectionVersion { id, version })
        );
    }
    assert_eq!(
        UsSection::decode(7, ""),
        Err(GppError::EmptySection { id: 7 })
    );
    assert_eq!(
        UsSection::decode(7, ".QA"),
        Err(GppError::EmptySection { id: 7 })
    );
    let text = format!("{}..QA", core(2, &values));
    assert_eq!(
        UsSection::decode(7, &text),
        Err(GppError::EmptySubsection { id: 7 })
    );
    assert_eq!(
        UsSection::decode(7, "CA=A"),
        Err(GppError::SectionNotBase64Url { id: 7 })
    );
    // Version 1 is 60 bits: 9 characters hold 54.
    let v1 = core(1, &[0; 27]);
    assert_eq!(
        UsSection::decode(7, &v1[..9]),
        Err(GppError::SectionTruncated {
            id: 7,
            field: "MspaCoveredTransaction"
        })
    );
}

#[test]
fn gpc_is_read_from_the_first_subsection_of_type_1() {
    let base = core(2, &usnat_v2_values());
    let table: [(&str, Option<bool>); 6] = [
        ("", None),
        (".QA", Some(false)),
        (".YA", Some(true)),
        // Type 2 is not GPC: ignored, and so is everything after the first GPC.
        (".gA", None),
        (".gA.YA", Some(true)),
        (".QA.YA", Some(false)),
    ];
    for (subsections, gpc) in table {
        let section = UsSection::decode(7, &format!("{base}{subsections}")).expect(subsections);
        assert_eq!(section.gpc, gpc, "{subsections}");
    }
    // Virginia defines no sub-section: one after its core is ignored.
    let usva = core(1, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]);
    let section = UsSection::decode(9, &format!("{usva}.YA")).expect("usva");
    assert_eq!(section.gpc, None);
    assert!(section.mspa_covered_transaction);
}

#[test]
fn the_single_mspa_mode_maps_onto_the_two_mode_fields() {
    let table = [
        (0, YesNo::NotApplicable, YesNo::NotApplicable),
        (1, YesNo::Yes, YesNo::No),
        (2, YesNo::No, YesNo::Yes),
    ];
    for (mode, opt_out_option, service_provider) in table {
        // Maryland: covered, mode, three notices, two opt-outs, additional consent.
        let usmd = core(1, &[1, mode, 1, 1, 1, 2, 1, 0]);
        let section = UsSection::decode(24, &usmd).expect("usmd");
        assert_eq!(section.mspa_opt_out_option_mode, opt_out_option, "{mode}");
        assert_eq!(
            section.mspa_service_provider_mode, service_provider,
            "{mode}"
        );
        assert_eq!(section.sale_opt_out, OptOut::DidNotOptOut);
        assert_eq!(section.targeted_advertising_opt_out, OptOut::OptedOut);
        assert_eq!(section.sharing_opt_out, OptOut::NotApplicable);
        assert!(section.sensitive_data_processing.is_empty());
        assert!(section.known_child_sensitive_data_consents.is_empty());
        assert_eq!(section.known_child, Consent::NotApplicable);
    }
}

#[test]
fn the_newest_states_take_sensitive_data_from_their_subsection() {
    // Indiana: covered, mode, three notices, two opt-outs, one child value, consent.
    let usin = core(1, &[1, 0, 1, 1, 1, 2, 2, 1, 2]);
    let section = UsSection::decode(25, &usin).expect("usin");
    assert!(section.sensitive_data_processing.is_empty());
    assert_eq!(section.known_child, Consent::NoConsent);
    assert_eq!(section.gpc, None);
    let list = text_of("0110000000000010");
    let section = UsSection::decode(25, &format!("{usin}.{list}")).expect("usin");
    assert_eq!(section.sensitive_data_processing, [1, 2, 0, 0, 0, 0, 0, 2]);
    // Two characters hold 12 of the list's 16 bits.
    assert_eq!(
        UsSection::decode(25, &format!("{usin}.{}", &list[..2])),
        Err(GppError::SectionTruncated {
            id: 25,
            field: "SensitiveDataProcessing"
        })
    );
}
