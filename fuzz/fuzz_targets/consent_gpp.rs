//! Any text as a GPP string, a US Privacy string and every US section's text:
//! - `GppString::decode` never panics; only an input over `MAX_GPP_LEN` is `TooLong`; a
//!   refusal has a message and a label;
//! - an accepted string lists at most `MAX_SECTIONS` ids, strictly increasing; every listed
//!   section is present, non-empty base64url (and `.`), and header plus sections joined by `~`
//!   give back the input exactly; `tcf_eu_v2` is section 2, `us_privacy` is there exactly when
//!   section 6 is, `us_sections` holds exactly the ids 7-27 in header order and each result is
//!   what `UsSection::decode` gives for that section's text;
//! - `UsSection::decode`, for every US id, on the whole input: a decoded section has 0/1/2
//!   entries only, a version under 64, and a `known_child` that summarises its per-age list;
//! - `UsPrivacy::parse`: accepted only for four bytes, `1` then three of `YyNn-`, and
//!   `opted_out_of_sale` is exactly a `Y`/`y` in the third place.
#![no_main]

use consent::gpp::{
    Consent, GppError, GppString, MAX_GPP_LEN, MAX_SECTIONS, UsPrivacy, UsSection,
};
use libfuzzer_sys::fuzz_target;

/// The ids `us_sections` decodes.
const US_IDS: std::ops::RangeInclusive<u16> = 7..=27;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    check_usp(&text);
    for id in US_IDS {
        if let Ok(section) = UsSection::decode(id, &text) {
            check_us_section(&section);
        }
    }
    match GppString::decode(&text) {
        Ok(gpp) => check_gpp(&text, &gpp),
        Err(e) => {
            assert!(!e.to_string().is_empty() && !e.label().is_empty());
            assert_eq!(
                matches!(e, GppError::TooLong { .. }),
                text.len() > MAX_GPP_LEN,
                "{e}"
            );
        }
    }
});

fn check_gpp(text: &str, gpp: &GppString) {
    assert!(text.len() <= MAX_GPP_LEN);
    assert_eq!(gpp.as_str(), text);
    let ids = gpp.section_ids();
    assert!(ids.len() <= MAX_SECTIONS);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let header = text.split('~').next().unwrap_or_default();
    let mut rebuilt = header.to_owned();
    for &id in ids {
        let section = gpp.section(id).expect("a listed section is present");
        assert!(!section.is_empty());
        assert!(
            section
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')),
            "{section}"
        );
        rebuilt.push('~');
        rebuilt.push_str(section);
    }
    assert_eq!(rebuilt, text);
    assert_eq!(gpp.tcf_eu_v2(), gpp.section(2));
    assert_eq!(gpp.us_privacy().is_some(), ids.contains(&6));
    if let Some(Ok(usp)) = gpp.us_privacy() {
        assert_eq!(UsPrivacy::parse(gpp.section(6).unwrap_or_default()), Ok(usp));
    }
    let us = gpp.us_sections();
    let us_ids: Vec<u16> = us.iter().map(|(id, _)| *id).collect();
    let expected: Vec<u16> = ids.iter().copied().filter(|id| US_IDS.contains(id)).collect();
    assert_eq!(us_ids, expected);
    for (id, result) in us {
        let raw = gpp.section(id).unwrap_or_default();
        assert_eq!(result, UsSection::decode(id, raw));
        if let Ok(section) = result {
            check_us_section(&section);
        }
    }
}

fn check_us_section(section: &UsSection) {
    assert!(section.version < 64);
    let lists = [
        &section.sensitive_data_processing,
        &section.known_child_sensitive_data_consents,
    ];
    assert!(lists.iter().all(|l| l.len() <= 16 && l.iter().all(|&v| v <= 2)));
    let children = &section.known_child_sensitive_data_consents;
    let summary = if children.contains(&1) {
        Consent::NoConsent
    } else if children.contains(&2) {
        Consent::Consent
    } else {
        Consent::NotApplicable
    };
    assert_eq!(section.known_child, summary);
}

fn check_usp(text: &str) {
    let bytes = text.as_bytes();
    let well_formed = bytes.len() == 4
        && bytes[0] == b'1'
        && bytes[1..].iter().all(|c| b"YyNn-".contains(c));
    let parsed = UsPrivacy::parse(text);
    assert_eq!(parsed.is_ok(), well_formed, "{text:?}");
    match parsed {
        Ok(usp) => assert_eq!(usp.opted_out_of_sale(), matches!(bytes[2], b'Y' | b'y')),
        Err(e) => assert!(!e.to_string().is_empty() && !e.label().is_empty()),
    }
}
