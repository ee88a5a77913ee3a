//! The decoder's own rules: refusals (each with its error), limits, and properties over strings
//! written by `test_encoder` (round trip) and over any input (no panic). Agreement with IAB's
//! decoder is `iab_cases.rs`.

use super::test_encoder::{BitWriter, Model, PublisherTcModel, RestrictionEntry, Section};
use super::*;
use proptest::prelude::*;

const REALISTIC: &str = include_str!("../../fixtures/tcf/realistic.txt");

fn realistic() -> &'static str {
    REALISTIC.trim()
}

fn with_consents(section: Section) -> String {
    Model {
        vendor_consents: section,
        ..Model::default()
    }
    .encode()
}

fn ranges(max: u16, ranges: &[(u16, u16)]) -> Section {
    Section {
        max,
        range: true,
        ranges: Some(ranges.to_vec()),
        ..Section::default()
    }
}

#[test]
fn refusals_name_the_problem() {
    let v1 = "BOEFEAyOEFEAyAHABDENAI4AAAB9vABAASA";
    let core = Model::default().encode();
    let cases: Vec<(&str, String, TcfError)> = vec![
        ("empty", String::new(), TcfError::Empty),
        (
            "bad base64: '+' is standard base64, not base64url",
            format!("{}+{}", &core[..10], &core[11..]),
            TcfError::NotBase64 {
                offset: 10,
                byte: b'+',
            },
        ),
        (
            "padding is not base64url",
            format!("{core}=="),
            TcfError::NotBase64 {
                offset: core.len(),
                byte: b'=',
            },
        ),
        (
            "a bad byte in the disclosed vendors segment",
            format!("{core}.IA!A"),
            TcfError::NotBase64 {
                offset: core.len() + 3,
                byte: b'!',
            },
        ),
        (
            "a bad byte in the allowed vendors segment, which is otherwise skipped",
            format!("{core}.QA*"),
            TcfError::NotBase64 {
                offset: core.len() + 3,
                byte: b'*',
            },
        ),
        (
            "a segment starting with a bad byte",
            format!("{core}. AA"),
            TcfError::NotBase64 {
                offset: core.len() + 1,
                byte: b' ',
            },
        ),
        (
            "version 1 (TCF v1.1 string)",
            v1.to_string(),
            TcfError::UnsupportedVersion { version: 1 },
        ),
        (
            "a trailing dot",
            format!("{core}."),
            TcfError::EmptySegment { index: 1 },
        ),
        (
            "no core segment",
            format!(".{core}"),
            TcfError::EmptySegment { index: 0 },
        ),
        (
            "segment type 4",
            format!("{core}.gAAA"),
            TcfError::UnknownSegment { index: 1, kind: 4 },
        ),
        (
            "a second core segment",
            format!("{core}.{core}"),
            TcfError::DuplicateSegment {
                index: 1,
                segment: Segment::Core,
            },
        ),
        (
            "range past MaxVendorId",
            with_consents(ranges(10, &[(2, 3), (5, 12)])),
            TcfError::PastMaxVendorId {
                segment: Segment::Core,
                field: "vendor consents",
                id: 12,
                max: 10,
                bit: 213 + 17 + 12 + 33,
            },
        ),
        (
            "reversed range",
            with_consents(ranges(10, &[(9, 5)])),
            TcfError::ReversedRange {
                segment: Segment::Core,
                field: "vendor consents",
                start: 9,
                end: 5,
                bit: 213 + 17 + 12,
            },
        ),
        (
            "vendor id 0",
            with_consents(ranges(10, &[(0, 0)])),
            TcfError::VendorZero {
                segment: Segment::Core,
                field: "vendor consents",
                bit: 213 + 17 + 12,
            },
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(TcString::decode(&input), Err(want), "{name}: {input}");
    }
}

#[test]
fn truncation_names_the_field_and_where_the_segment_ended() {
    // The default core has no vendors; 216 bits (36 characters) hold the fixed fields and three
    // bits of the vendor consents' MaxVendorId.
    let core = Model::default().encode();
    let err = TcString::decode(&core[..36]).expect_err("cut in MaxVendorId");
    assert_eq!(
        err.to_string(),
        "core segment: ended at bit 216 reading vendor consents"
    );
    let err = TcString::decode(&core[..20]).expect_err("cut in the fixed fields");
    assert_eq!(
        err,
        TcfError::Truncated {
            segment: Segment::Core,
            field: "VendorListVersion",
            bit: 120,
        }
    );
    // Every prefix of a real string is refused or (past its last field) decoded; none panics.
    // IAB pads segments to 24 bits, so a core four characters short has lost a field: refused,
    // as cut short or as holding fewer range entries than it counts.
    let full = realistic();
    let core_len = full.find('.').unwrap_or(full.len());
    for end in 1..full.len() {
        let result = TcString::decode(&full[..end]);
        if end <= core_len - 4 {
            assert!(
                matches!(
                    result,
                    Err(TcfError::Truncated { .. } | TcfError::TooManyEntries { .. })
                ),
                "{end}: {result:?}"
            );
        }
    }
}

#[test]
fn counts_the_string_cannot_hold_are_refused_before_reading() {
    // Vendor consents declaring 4095 range entries (at least 17 bits each) in 200 bits.
    let mut w = fixed_fields();
    w.push(5000, 16);
    w.push_bool(true);
    w.push(4095, 12);
    w.push(0, 200);
    let err = TcString::decode(&w.finish()).expect_err("4095 entries in 200 bits");
    assert!(
        matches!(
            err,
            TcfError::TooManyEntries {
                count: 4095,
                field: "vendor consents",
                ..
            }
        ),
        "{err}"
    );

    let mut w = fixed_fields();
    w.push(0, 17); // consents: MaxVendorId 0, bitfield
    w.push(0, 17); // LI: likewise
    w.push(4095, 12); // NumPubRestrictions
    w.push(0, 100);
    let err = TcString::decode(&w.finish()).expect_err("4095 restrictions in 100 bits");
    assert!(
        matches!(
            err,
            TcfError::TooManyEntries {
                count: 4095,
                field: "publisher restrictions",
                ..
            }
        ),
        "{err}"
    );
}

/// The core's fixed fields (213 bits) of the default model.
fn fixed_fields() -> BitWriter {
    let model = Model::default();
    let mut w = BitWriter::default();
    w.push(2, 6);
    w.push(model.created, 36);
    w.push(model.last_updated, 36);
    w.push(7, 12);
    w.push(3, 12);
    w.push(1, 6);
    w.push(4, 6); // E
    w.push(13, 6); // N
    w.push(150, 12);
    w.push(4, 6);
    w.push(0b10, 2); // service specific, standard texts
    w.push(0, 12 + 24 + 24 + 1);
    w.push(3, 6); // D
    w.push(4, 6); // E
    w
}

#[test]
fn the_fixed_fields_helper_matches_the_encoder() {
    let mut w = fixed_fields();
    w.push(0, 17 + 17 + 12);
    assert_eq!(w.finish(), Model::default().encode());
}

#[test]
fn restrictions_of_purpose_zero_or_type_three_are_refused() {
    let entry = |purpose, kind| Model {
        restrictions: vec![RestrictionEntry {
            purpose,
            kind,
            ranges: vec![(1, 2)],
        }],
        ..Model::default()
    };
    let at = 213 + 17 + 17 + 12;
    assert_eq!(
        TcString::decode(&entry(3, 3).encode()),
        Err(TcfError::UndefinedRestrictionType { bit: at })
    );
    assert_eq!(
        TcString::decode(&entry(0, 0).encode()),
        Err(TcfError::RestrictionPurposeZero { bit: at })
    );
    let ok = TcString::decode(&entry(63, 2).encode()).expect("purpose 63 is encodable");
    assert_eq!(
        ok.restriction(63, 2),
        Some(Restriction::RequireLegitimateInterest)
    );
    assert_eq!(ok.restriction(63, 3), None);
}

#[test]
fn letters_past_z_are_refused() {
    let model = Model {
        publisher_cc: [b'Z' + 1, b'A'],
        ..Model::default()
    };
    assert_eq!(
        TcString::decode(&model.encode()),
        Err(TcfError::NotALetter {
            segment: Segment::Core,
            field: "PublisherCC",
            value: 26,
            bit: 201,
        })
    );
}

#[test]
fn duplicate_optional_segments_are_refused_and_allowed_vendors_skipped() {
    let base = Model {
        disclosed: Some(Section::of(&[1, 2], false)),
        ..Model::default()
    }
    .encode();
    let disclosed = base.split('.').nth(1).expect("a disclosed segment");
    assert_eq!(
        TcString::decode(&format!("{base}.{disclosed}")),
        Err(TcfError::DuplicateSegment {
            index: 2,
            segment: Segment::DisclosedVendors
        })
    );
    // Type 2 (allowed vendors) is skipped unread, whatever it holds, once.
    let allowed = "QA";
    let tc = TcString::decode(&format!("{base}.{allowed}")).expect("allowed vendors skipped");
    assert_eq!(tc.disclosed_vendor(2), Some(true));
    assert_eq!(
        TcString::decode(&format!("{base}.{allowed}.{allowed}")),
        Err(TcfError::DuplicateSegment {
            index: 3,
            segment: Segment::AllowedVendors
        })
    );
}

#[test]
fn the_length_limit_counts_bytes_and_trailing_bits_are_ignored() {
    let full = realistic();
    let core = full.split('.').next().expect("core");
    let base = TcString::decode(core).expect("realistic core");
    // Zero characters after the last field change nothing, up to the limit exactly.
    let padded = format!("{core}{}", "A".repeat(MAX_TC_STRING_BYTES - core.len()));
    assert_eq!(TcString::decode(&padded), Ok(base.clone()));
    let over = format!("{padded}A");
    assert_eq!(
        TcString::decode(&over),
        Err(TcfError::TooLong {
            len: MAX_TC_STRING_BYTES + 1,
            max: MAX_TC_STRING_BYTES,
        })
    );
    // Any characters after the last field are ignored, as IAB's decoder ignores them.
    assert_eq!(TcString::decode(&format!("{core}_-_-")), Ok(base));
}

#[test]
fn lengths_that_are_not_whole_bytes_decode() {
    // IAB's decoder reads six bits a character: a length of 4n + 1 is fine (standard base64
    // decoders refuse it). 259 bits and a bitfield of 9: 45 characters.
    let core = Model {
        vendor_consents: Section::of(&[3, 9], false),
        ..Model::default()
    }
    .encode();
    assert_eq!(core.len() % 4, 1, "{core}");
    let tc = TcString::decode(&core).expect("decodes");
    assert!(tc.vendor_consent(3));
}

#[test]
fn accessors_outside_their_ranges_are_false() {
    let model = Model {
        special_features: (1..=12).collect(),
        purpose_consents: (1..=24).collect(),
        purpose_lis: (1..=24).collect(),
        vendor_consents: Section::of(&[1, 64, 65, 128, 129], false),
        ..Model::default()
    };
    let tc = TcString::decode(&model.encode()).expect("decodes");
    assert!(tc.purpose_consent(24) && !tc.purpose_consent(25) && !tc.purpose_consent(0));
    assert!(tc.purpose_li(1) && !tc.purpose_li(255));
    assert!(tc.special_feature(12) && !tc.special_feature(13) && !tc.special_feature(0));
    for id in [1, 64, 65, 128, 129] {
        assert!(tc.vendor_consent(id), "{id}");
    }
    for id in [0, 2, 63, 66, 127, 130, u16::MAX] {
        assert!(!tc.vendor_consent(id), "{id}");
    }
    assert_eq!(tc.disclosed_vendor(1), None);
    assert!(tc.publisher_tc().is_none());
    assert_eq!(tc.version(), 2);
}

#[test]
fn a_restriction_names_the_lowest_type_that_applies() {
    let model = Model {
        restrictions: vec![
            RestrictionEntry {
                purpose: 7,
                kind: 2,
                ranges: vec![(1, 10)],
            },
            RestrictionEntry {
                purpose: 7,
                kind: 1,
                ranges: vec![(5, 6)],
            },
            RestrictionEntry {
                purpose: 7,
                kind: 0,
                ranges: vec![(6, 6), (40, 65535)],
            },
        ],
        ..Model::default()
    };
    let tc = TcString::decode(&model.encode()).expect("decodes");
    assert_eq!(
        tc.restriction(7, 1),
        Some(Restriction::RequireLegitimateInterest)
    );
    assert_eq!(tc.restriction(7, 5), Some(Restriction::RequireConsent));
    assert_eq!(tc.restriction(7, 6), Some(Restriction::NotAllowed));
    assert_eq!(tc.restriction(7, 65535), Some(Restriction::NotAllowed));
    assert_eq!(tc.restriction(7, 11), None);
    assert_eq!(tc.restriction(8, 6), None);
    assert_eq!(tc.publisher_restrictions().count(), 3);
}

#[test]
fn labels_are_short_and_fixed() {
    let err = TcString::decode("").expect_err("empty");
    assert_eq!(err.label(), "empty");
    let err = TcString::decode("C").expect_err("truncated");
    assert_eq!(err.label(), "truncated");
}

// --- properties ---

fn id_set(max: u16, size: usize) -> impl Strategy<Value = Vec<u16>> {
    prop::collection::vec(1..=max, 0..=size).prop_map(|mut v| {
        v.sort_unstable();
        v.dedup();
        v
    })
}

fn section() -> impl Strategy<Value = Section> {
    (1u16..3000, any::<bool>(), 0usize..200, any::<u16>()).prop_flat_map(
        |(max, range, size, extra)| {
            id_set(max, size).prop_map(move |ids| Section {
                // MaxVendorId at or above the highest id (encoders may write a larger one).
                max: ids
                    .last()
                    .copied()
                    .unwrap_or(0)
                    .max(if extra % 3 == 0 { max } else { 0 }),
                ids,
                range,
                ranges: None,
            })
        },
    )
}

fn purposes(width: u8) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(1..=width, 0..=usize::from(width))
}

prop_compose! {
    fn restriction()(purpose in 1u8..64, kind in 0u8..3,
                     ranges in prop::collection::vec((1u16..=u16::MAX, 0u16..50), 0..5))
                     -> RestrictionEntry {
        let ranges = ranges.into_iter().map(|(s, len)| (s, s.saturating_add(len))).collect();
        RestrictionEntry { purpose, kind, ranges }
    }
}

prop_compose! {
    fn model()(
        created in 0u64..(1 << 36), cmp_id in 0u16..4096, language in (0u8..26, 0u8..26),
        policy in 0u8..64, flags in any::<[bool; 3]>(),
        special_features in purposes(12), purpose_consents in purposes(24),
        purpose_lis in purposes(24), cc in (0u8..26, 0u8..26),
        vendor_consents in section(), vendor_lis in section(),
        restrictions in prop::collection::vec(restriction(), 0..4),
        disclosed in prop::option::of(section()),
        publisher in prop::option::of((purposes(24), purposes(24), 0u8..64)),
    ) -> Model {
        Model {
            created,
            last_updated: created,
            cmp_id,
            consent_language: [b'A' + language.0, b'A' + language.1],
            policy_version: policy,
            is_service_specific: flags[0],
            use_non_standard_texts: flags[1],
            purpose_one_treatment: flags[2],
            special_features,
            purpose_consents,
            purpose_lis,
            publisher_cc: [b'A' + cc.0, b'A' + cc.1],
            vendor_consents,
            vendor_lis,
            restrictions,
            disclosed,
            publisher_tc: publisher.map(|(consents, lis, n)| PublisherTcModel {
                custom_consents: (1..=n).filter(|i| i % 3 == 0).collect(),
                custom_lis: (1..=n).filter(|i| i % 5 == 1).collect(),
                consents,
                lis,
                num_custom: n,
            }),
            ..Model::default()
        }
    }
}

fn same_ids(set: &VendorSet, section: &Section) {
    assert_eq!(set.max_vendor_id(), section.max);
    assert_eq!(set.ids().collect::<Vec<_>>(), section.ids);
    for id in 0..=section.max.saturating_add(65) {
        assert_eq!(set.contains(id), section.ids.contains(&id), "{id}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// What the encoder writes, the decoder reads back, field by field.
    #[test]
    fn every_field_round_trips(model in model()) {
        let s = model.encode();
        let tc = TcString::decode(&s).map_err(|e| TestCaseError::fail(format!("{e}: {s}")))?;
        prop_assert_eq!(tc.created(), model.created);
        prop_assert_eq!(tc.cmp_id(), model.cmp_id);
        prop_assert_eq!(tc.consent_language(), model.consent_language);
        prop_assert_eq!(tc.policy_version(), model.policy_version);
        prop_assert_eq!(tc.is_service_specific(), model.is_service_specific);
        prop_assert_eq!(tc.use_non_standard_texts(), model.use_non_standard_texts);
        prop_assert_eq!(tc.purpose_one_treatment(), model.purpose_one_treatment);
        prop_assert_eq!(tc.publisher_cc(), model.publisher_cc);
        for p in 0..=30u8 {
            prop_assert_eq!(tc.purpose_consent(p), model.purpose_consents.contains(&p));
            prop_assert_eq!(tc.purpose_li(p), model.purpose_lis.contains(&p));
            prop_assert_eq!(tc.special_feature(p), model.special_features.contains(&p));
        }
        same_ids(tc.vendor_consents(), &model.vendor_consents);
        same_ids(tc.vendor_lis(), &model.vendor_lis);
        match (&model.disclosed, tc.disclosed_vendors()) {
            (None, None) => {}
            (Some(want), Some(got)) => same_ids(got, want),
            (want, got) => prop_assert!(false, "{want:?} vs {got:?}"),
        }
        for r in &model.restrictions {
            for &(start, end) in &r.ranges {
                for v in [start, end] {
                    let lowest = model.restrictions.iter()
                        .filter(|o| o.purpose == r.purpose && o.ranges.iter().any(|&(s, e)| s <= v && v <= e))
                        .map(|o| o.kind).min();
                    let got = tc.restriction(r.purpose, v).map(|k| k as u8);
                    prop_assert_eq!(got, lowest);
                }
            }
        }
        match (&model.publisher_tc, tc.publisher_tc()) {
            (None, None) => {}
            (Some(want), Some(got)) => {
                prop_assert_eq!(got.num_custom_purposes(), want.num_custom);
                for p in 0..=64u8 {
                    prop_assert_eq!(got.purpose_consent(p), want.consents.contains(&p));
                    prop_assert_eq!(got.purpose_li(p), want.lis.contains(&p));
                    prop_assert_eq!(got.custom_purpose_consent(p), want.custom_consents.contains(&p));
                    prop_assert_eq!(got.custom_purpose_li(p), want.custom_lis.contains(&p));
                }
            }
            (want, got) => prop_assert!(false, "{want:?} vs {got:?}"),
        }
        // Decoding is a function of the string.
        prop_assert_eq!(TcString::decode(&s), Ok(tc));
    }

    /// Any text: refused or decoded, never a panic; what decodes answers every question.
    #[test]
    fn any_text_is_refused_or_decoded(s in "[A-Za-z0-9_.-]{0,300}") {
        if let Ok(tc) = TcString::decode(&s) {
            for id in [0, 1, 2, 63, 64, 65, 1000, u16::MAX] {
                let _ = (tc.vendor_consent(id), tc.vendor_li(id), tc.disclosed_vendor(id));
                for p in [0, 1, 24, 25, 63, 255] {
                    let _ = tc.restriction(p, id);
                }
            }
        }
    }

    /// A valid string with one character changed: refused or decoded, never a panic.
    #[test]
    fn a_changed_character_never_panics(at in any::<prop::sample::Index>(), c in "[A-Za-z0-9_-]") {
        let full = realistic();
        let i = at.index(full.len());
        let mut changed = full.to_string();
        changed.replace_range(i..=i, &c);
        let _ = TcString::decode(&changed);
    }
}
