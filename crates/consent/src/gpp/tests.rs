//! `consent::gpp` against IAB's own encoder: `fixtures/gpp/gpp_cases.json` holds GPP strings
//! written by `@iabgpp/cmpapi` 3.2.0 and what that library decodes from each (see the
//! fixture's README); every case is checked here field by field. Then strings broken by hand,
//! each refused with its reason.

use serde_json::Value;

use super::*;

const CASES: &str = include_str!("../../fixtures/gpp/gpp_cases.json");

fn cases() -> Vec<Value> {
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("gpp_cases.json is JSON");
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    cases
}

fn int(fields: &Value, name: &str) -> Option<u8> {
    fields
        .get(name)
        .map(|v| v.as_u64().and_then(|n| u8::try_from(n).ok()).expect(name))
}

/// A 0/1/2 list, or a single integer as a list of one.
fn list(fields: &Value, name: &str) -> Vec<u8> {
    match fields.get(name) {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_u64().and_then(|n| u8::try_from(n).ok()).expect(name))
            .collect(),
        Some(v) => vec![v.as_u64().and_then(|n| u8::try_from(n).ok()).expect(name)],
    }
}

fn flag(fields: &Value, name: &str) -> Option<bool> {
    fields.get(name).map(|v| v.as_bool().expect(name))
}

fn notice(fields: &Value, name: &str) -> Notice {
    match int(fields, name) {
        None | Some(0) => Notice::NotApplicable,
        Some(1) => Notice::Provided,
        Some(2) => Notice::NotProvided,
        Some(n) => panic!("{name} = {n} in the fixture"),
    }
}

fn opt_out(fields: &Value, name: &str) -> OptOut {
    match int(fields, name) {
        None | Some(0) => OptOut::NotApplicable,
        Some(1) => OptOut::OptedOut,
        Some(2) => OptOut::DidNotOptOut,
        Some(n) => panic!("{name} = {n} in the fixture"),
    }
}

fn consent(fields: &Value, name: &str) -> Consent {
    match int(fields, name) {
        None | Some(0) => Consent::NotApplicable,
        Some(1) => Consent::NoConsent,
        Some(2) => Consent::Consent,
        Some(n) => panic!("{name} = {n} in the fixture"),
    }
}

fn yes_no(value: Option<u8>) -> YesNo {
    match value {
        None | Some(0) => YesNo::NotApplicable,
        Some(1) => YesNo::Yes,
        Some(2) => YesNo::No,
        Some(n) => panic!("MSPA mode {n} in the fixture"),
    }
}

/// The library's decoded field names this test maps; a name outside the list would be a
/// field consent::gpp silently ignores.
const KNOWN_FIELDS: &[&str] = &[
    "Version",
    "MspaVersion",
    "SharingNotice",
    "ProcessingNotice",
    "SaleOptOutNotice",
    "SharingOptOutNotice",
    "TargetedAdvertisingOptOutNotice",
    "SensitiveDataProcessingOptOutNotice",
    "SensitiveDataOptOutNotice",
    "SensitiveDataLimitUseNotice",
    "SaleOptOut",
    "SharingOptOut",
    "TargetedAdvertisingOptOut",
    "SensitiveDataProcessing",
    "KnownChildSensitiveDataConsents",
    "PersonalDataConsents",
    "AdditionalDataProcessingConsent",
    "MspaCoveredTransaction",
    "MspaOptOutOptionMode",
    "MspaServiceProviderMode",
    "MspaMode",
    "GpcSegmentType",
    "Gpc",
    "GpcSegmentIncluded",
    "SensitiveDataConsentSegmentIncluded",
];

/// What the library's decoded fields say a `UsSection` must hold.
fn us_section_from_library(fields: &Value) -> UsSection {
    let object = fields.as_object().expect("fields object");
    for name in object.keys() {
        assert!(
            KNOWN_FIELDS.contains(&name.as_str()),
            "unmapped field {name}"
        );
    }
    // The library keeps the default list when the sensitive-data sub-section is absent.
    let sensitive = match flag(fields, "SensitiveDataConsentSegmentIncluded") {
        Some(false) => Vec::new(),
        _ => list(fields, "SensitiveDataProcessing"),
    };
    let children = list(fields, "KnownChildSensitiveDataConsents");
    let known_child = if children.contains(&1) {
        Consent::NoConsent
    } else if children.contains(&2) {
        Consent::Consent
    } else {
        Consent::NotApplicable
    };
    let (opt_out_option, service_provider) = match int(fields, "MspaMode") {
        Some(1) => (YesNo::Yes, YesNo::No),
        Some(2) => (YesNo::No, YesNo::Yes),
        Some(_) => (YesNo::NotApplicable, YesNo::NotApplicable),
        None => (
            yes_no(int(fields, "MspaOptOutOptionMode")),
            yes_no(int(fields, "MspaServiceProviderMode")),
        ),
    };
    let gpc = match flag(fields, "GpcSegmentIncluded") {
        Some(true) => Some(flag(fields, "Gpc").expect("Gpc")),
        _ => None,
    };
    let covered = int(fields, "MspaCoveredTransaction").expect("MspaCoveredTransaction");
    UsSection {
        version: int(fields, "Version")
            .or(int(fields, "MspaVersion"))
            .expect("version"),
        sharing_notice: notice(fields, "SharingNotice"),
        processing_notice: notice(fields, "ProcessingNotice"),
        sale_opt_out_notice: notice(fields, "SaleOptOutNotice"),
        sharing_opt_out_notice: notice(fields, "SharingOptOutNotice"),
        targeted_advertising_opt_out_notice: notice(fields, "TargetedAdvertisingOptOutNotice"),
        sensitive_data_processing_opt_out_notice: match fields.get("SensitiveDataOptOutNotice") {
            Some(_) => notice(fields, "SensitiveDataOptOutNotice"),
            None => notice(fields, "SensitiveDataProcessingOptOutNotice"),
        },
        sensitive_data_limit_use_notice: notice(fields, "SensitiveDataLimitUseNotice"),
        sale_opt_out: opt_out(fields, "SaleOptOut"),
        sharing_opt_out: opt_out(fields, "SharingOptOut"),
        targeted_advertising_opt_out: opt_out(fields, "TargetedAdvertisingOptOut"),
        sensitive_data_processing: sensitive,
        known_child_sensitive_data_consents: children,
        known_child,
        personal_data_consents: consent(fields, "PersonalDataConsents"),
        additional_data_processing_consent: consent(fields, "AdditionalDataProcessingConsent"),
        mspa_covered_transaction: covered == 1,
        mspa_opt_out_option_mode: opt_out_option,
        mspa_service_provider_mode: service_provider,
        gpc,
    }
}

fn usp_signal(fields: &Value, name: &str) -> UspSignal {
    match fields.get(name).and_then(Value::as_str) {
        Some("Y") => UspSignal::Yes,
        Some("N") => UspSignal::No,
        Some("-") => UspSignal::NotApplicable,
        other => panic!("{name} = {other:?} in the fixture"),
    }
}

#[test]
fn every_library_case_decodes_to_what_the_library_decodes() {
    let mut us_sections_checked = 0;
    for case in cases() {
        let name = case["name"].as_str().expect("name");
        let string = case["string"].as_str().expect("string");
        let expected = &case["expected"];
        let gpp = GppString::decode(string).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(gpp.as_str(), string);

        let ids: Vec<u16> = expected["section_ids"]
            .as_array()
            .expect("section_ids")
            .iter()
            .map(|v| v.as_u64().and_then(|n| u16::try_from(n).ok()).expect("id"))
            .collect();
        assert_eq!(gpp.section_ids(), ids, "{name}");
        assert_eq!(gpp.tcf_eu_v2(), expected["tcfeuv2"].as_str(), "{name}");

        let sections = expected["sections"].as_object().expect("sections");
        assert_eq!(sections.len(), ids.len(), "{name}");
        let decoded_us = gpp.us_sections();
        for (id, section) in sections {
            let id: u16 = id.parse().expect("numeric id");
            let raw = section["raw"].as_str().expect("raw");
            assert_eq!(gpp.section(id), Some(raw), "{name}: section {id}");
            let section_name = section["name"].as_str().expect("section name");
            assert_eq!(super::section_name(id), Some(section_name), "{name}");
            let Some(fields) = section.get("fields") else {
                continue;
            };
            if id == USP_V1 {
                let expected = UsPrivacy {
                    notice: usp_signal(fields, "Notice"),
                    opt_out_sale: usp_signal(fields, "OptOutSale"),
                    lspa_covered: usp_signal(fields, "LspaCovered"),
                };
                assert_eq!(gpp.us_privacy(), Some(Ok(expected)), "{name}");
                continue;
            }
            let decoded = decoded_us
                .iter()
                .find(|(i, _)| *i == id)
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| panic!("{name}: section {id} not in us_sections"));
            let decoded = decoded.unwrap_or_else(|e| panic!("{name}: section {id}: {e}"));
            assert_eq!(
                decoded,
                us_section_from_library(fields),
                "{name}: {section_name}"
            );
            us_sections_checked += 1;
        }
        // us_sections() holds exactly the US sections, in header order.
        let us_ids: Vec<u16> = decoded_us.iter().map(|(id, _)| *id).collect();
        let expected_us: Vec<u16> = ids.iter().copied().filter(|&id| id >= US_NAT).collect();
        assert_eq!(us_ids, expected_us, "{name}");
        if !ids.contains(&USP_V1) {
            assert_eq!(gpp.us_privacy(), None, "{name}");
        }
    }
    assert!(us_sections_checked >= 60, "{us_sections_checked}");
}

#[test]
fn the_fixture_covers_what_it_claims() {
    let cases = cases();
    let mut ids_seen = std::collections::BTreeSet::new();
    let mut gpc = [false; 3]; // absent, false, true
    let mut children = [false; 3]; // not applicable, no consent, consent
    for case in &cases {
        let gpp = GppString::decode(case["string"].as_str().expect("string")).expect("decodes");
        ids_seen.extend(gpp.section_ids().iter().copied());
        for (_, section) in gpp.us_sections() {
            let section = section.expect("decodes");
            gpc[match section.gpc {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            }] = true;
            children[match section.known_child {
                Consent::NotApplicable => 0,
                Consent::NoConsent => 1,
                Consent::Consent => 2,
            }] = true;
        }
    }
    let wanted: Vec<u16> = [2, 5, 6].into_iter().chain(7..=27).collect();
    assert_eq!(ids_seen.into_iter().collect::<Vec<_>>(), wanted);
    assert_eq!(gpc, [true; 3]);
    assert_eq!(children, [true; 3]);
}

#[test]
fn an_unknown_section_is_kept_raw() {
    // Header listing ids 7 and 30, written here: type 3, version 1, two entries (7, then 30
    // as offset 23 from 7). Section 30 is not registered; its text is kept as sent.
    let header = super::bits::tests::text_of(
        &[
            "000011",
            "000001",
            &format!("{:012b}", 2),
            "0",
            "01011",
            "0",
            "01000011",
        ]
        .concat(),
    );
    let string = format!("{header}~CAAGAAAAAABA.QA~Zm9vYmFy.eHl6");
    let gpp = GppString::decode(&string).expect("decodes");
    assert_eq!(gpp.section_ids(), [7, 30]);
    assert_eq!(gpp.section(30), Some("Zm9vYmFy.eHl6"));
    assert_eq!(super::section_name(30), None);
    assert_eq!(gpp.us_sections().len(), 1);
    assert_eq!(gpp.tcf_eu_v2(), None);
}

#[test]
fn broken_strings_are_refused_with_their_reason() {
    let too_long = format!("DBABMA~{}", "A".repeat(MAX_GPP_LEN));
    let table: Vec<(&str, &str, GppError)> = vec![
        ("empty", "", GppError::Empty),
        (
            "over the limit",
            &too_long,
            GppError::TooLong {
                len: MAX_GPP_LEN + 7,
                max: MAX_GPP_LEN,
            },
        ),
        (
            "legacy TCF string",
            "CP4cy6AP4cy6AAfKAAENCWFgANPAAAAAAAAAH0QBIAAgAEAC",
            GppError::NotGppHeader(2),
        ),
        (
            "header version 2",
            "DCABMA~1YNN",
            GppError::UnsupportedHeaderVersion(2),
        ),
        (
            "header padding character",
            "DBABMA=~1YNN",
            GppError::HeaderNotBase64Url,
        ),
        (
            "header cut short",
            "DBAB~1YNN",
            GppError::HeaderTruncated {
                field: "section ids",
            },
        ),
        (
            "one id, two sections",
            "DBABTA~1YNN~1YNN",
            GppError::SectionCountMismatch {
                listed: 1,
                found: 2,
            },
        ),
        (
            "two ids, one section",
            "DBACNYA~CP4cy6AP4cy6AAfKAAENCWFgANPAAAAAAAAAH0QBIAAgAEAC",
            GppError::SectionCountMismatch {
                listed: 2,
                found: 1,
            },
        ),
        (
            "ids and no section",
            "DBABTA",
            GppError::SectionCountMismatch {
                listed: 1,
                found: 0,
            },
        ),
        (
            "no ids, one section",
            "DBAA~1YNN",
            GppError::SectionCountMismatch {
                listed: 0,
                found: 1,
            },
        ),
        ("empty section", "DBABTA~", GppError::EmptySection { id: 6 }),
        (
            "empty middle section",
            "DBACNYA~~1YNN",
            GppError::EmptySection { id: 2 },
        ),
        (
            "space in a section",
            "DBABLA~CAAGAAAAAABA .QA",
            GppError::SectionNotBase64Url { id: 7 },
        ),
        (
            "plus in a section",
            "DBABLA~CAAGAAAA+AABA.QA",
            GppError::SectionNotBase64Url { id: 7 },
        ),
    ];
    for (what, string, error) in table {
        assert_eq!(GppString::decode(string), Err(error.clone()), "{what}");
        assert!(!error.to_string().is_empty() && !error.label().is_empty());
    }
}

#[test]
fn a_broken_section_fails_alone() {
    // usnat cut to three characters (version and notices only), usca intact: the first is
    // refused, the second decoded.
    let gpp =
        GppString::decode("DBABrw~CAA.QA~BAAAAABA.YA").expect("the header and split are fine");
    let us = gpp.us_sections();
    assert_eq!(us.len(), 2);
    assert_eq!(
        us[0],
        (
            7,
            Err(GppError::SectionTruncated {
                id: 7,
                field: "SaleOptOut"
            })
        )
    );
    let usca = us[1].1.as_ref().expect("usca decodes");
    assert_eq!(usca.gpc, Some(true));
    // A US Privacy section that is not one.
    let gpp = GppString::decode("DBABTA~2YNN").expect("split");
    assert_eq!(gpp.us_privacy(), Some(Err(GppError::UspVersion)));
}

#[test]
fn section_count_is_bounded() {
    // A header listing the run 1..=65: over MAX_SECTIONS before any section is looked at.
    let header = super::bits::tests::text_of(
        &[
            "000011",
            "000001",
            &format!("{:012b}", 1),
            "1",
            "11",
            // 64 = 55 + 8 + 1: weights 1, 2, 3, 5, 8, 13, 21, 34, 55 -> bits 1,0,0,0,1,0,0,0,1.
            "1000100011",
        ]
        .concat(),
    );
    let string = format!("{header}{}", "~A".repeat(65));
    assert_eq!(
        GppString::decode(&string),
        Err(GppError::TooManySections { max: MAX_SECTIONS })
    );
}

/// The library's strings with a few random edits each (a character changed, removed or
/// inserted, `~`, `.` and `=` among them; or a cut), from a fixed seed: decoding and every
/// accessor never panic, and both outcomes, accepted and refused, are reached at every level.
/// The fuzz target `consent_gpp` does the same without the fixed budget.
#[test]
fn edited_library_strings_never_panic() {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~.=";
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % 1_000_003).expect("small")
    };
    let (mut refused, mut accepted, mut us_ok, mut us_err) = (0, 0, 0, 0);
    for case in cases() {
        let original = case["string"].as_str().expect("string").as_bytes().to_vec();
        for _ in 0..200 {
            let mut bytes = original.clone();
            for _ in 0..1 + next() % 3 {
                let at = next() % (bytes.len() + 1);
                let c = ALPHABET[next() % ALPHABET.len()];
                match next() % 8 {
                    0..=2 if at < bytes.len() => bytes[at] = c,
                    3..=4 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    7 => bytes.truncate(at),
                    _ => bytes.insert(at, c),
                }
            }
            let text = String::from_utf8(bytes).expect("ASCII edits");
            let Ok(gpp) = GppString::decode(&text) else {
                refused += 1;
                continue;
            };
            accepted += 1;
            for &id in gpp.section_ids() {
                assert!(gpp.section(id).is_some_and(|s| !s.is_empty()), "{text}");
            }
            let _ = (gpp.tcf_eu_v2(), gpp.us_privacy());
            for (_, section) in gpp.us_sections() {
                match section {
                    Ok(s) => {
                        us_ok += 1;
                        let entries = s.sensitive_data_processing.iter();
                        assert!(
                            entries
                                .chain(&s.known_child_sensitive_data_consents)
                                .all(|&v| v <= 2)
                        );
                    }
                    Err(e) => {
                        us_err += 1;
                        assert!(!e.to_string().is_empty());
                    }
                }
            }
        }
    }
    assert!(
        refused > 1000 && accepted > 1000,
        "{refused} refused, {accepted} accepted"
    );
    assert!(
        us_ok > 1000 && us_err > 100,
        "{us_ok} US sections decoded, {us_err} refused"
    );
}
