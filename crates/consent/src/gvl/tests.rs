use super::*;

const SMALL: &str = include_str!("../../fixtures/gvl/small.json");

fn list_with(vendors: &str) -> String {
    format!(
        r#"{{"gvlSpecificationVersion": 3, "vendorListVersion": 12, "tcfPolicyVersion": 4,
            "lastUpdated": "2024-05-02T16:00:00Z", "vendors": {{{vendors}}}}}"#
    )
}

#[test]
fn the_small_list_loads_with_each_declaration() {
    let gvl = VendorList::from_json(SMALL.as_bytes()).expect("small.json");
    assert_eq!(gvl.version(), 150);
    assert_eq!(gvl.policy_version(), 4);
    assert_eq!(gvl.last_updated(), "2024-05-02T16:00:00Z");
    assert_eq!(gvl.len(), 8);
    let ids: Vec<u16> = gvl.vendors().map(Vendor::id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 8, 1201]);
    for absent in [0, 7, 9, 1200, 1202, u16::MAX] {
        assert!(gvl.vendor(absent).is_none(), "{absent}");
    }
    let ids_of = |set: IdSet| set.ids().collect::<Vec<_>>();
    let flexible = gvl.vendor(4).expect("vendor 4");
    assert_eq!(ids_of(flexible.purposes()), [1, 3, 4]);
    assert_eq!(ids_of(flexible.leg_int_purposes()), [2, 7, 8, 10]);
    assert_eq!(ids_of(flexible.flexible_purposes()), [2, 7, 10]);
    assert_eq!(ids_of(flexible.special_purposes()), [1, 2]);
    assert_eq!(ids_of(flexible.features()), [1, 3]);
    assert_eq!(ids_of(flexible.special_features()), [1, 2]);
    assert!(!flexible.is_deleted());
    let deleted = gvl.vendor(5).expect("vendor 5 is kept");
    assert!(deleted.is_deleted());
    assert_eq!(deleted.deleted_date(), Some("2024-03-01T00:00:00Z"));
    let only_special = gvl.vendor(1201).expect("vendor 1201");
    assert!(only_special.purposes().is_empty() && only_special.leg_int_purposes().is_empty());
    assert!(!gvl.vendor(6).expect("vendor 6").purposes().contains(2));
}

#[test]
fn missing_lists_are_empty_and_other_keys_are_skipped() {
    let json = list_with(
        r#""3": {"id": 3, "name": "x", "urls": [{"a": [1, {"b": null}]}], "purposes": [1]}"#,
    );
    let gvl = VendorList::from_json(json.as_bytes()).expect("loads");
    let v = gvl.vendor(3).expect("vendor 3");
    assert!(v.purposes().contains(1));
    assert!(v.leg_int_purposes().is_empty() && v.flexible_purposes().is_empty());
    assert!(v.special_features().is_empty() && !v.is_deleted());
    let null_date = list_with(r#""3": {"id": 3, "deletedDate": null}"#);
    let gvl = VendorList::from_json(null_date.as_bytes()).expect("loads");
    assert!(!gvl.vendor(3).expect("vendor 3").is_deleted());
}

#[test]
fn refusals_name_the_key_and_the_problem() {
    let vendor = |body: &str| list_with(&format!(r#""9": {{"id": 9, {body}}}"#));
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "format 2",
            SMALL.replace(
                r#""gvlSpecificationVersion": 3"#,
                r#""gvlSpecificationVersion": 2"#,
            ),
            "vendor list: gvlSpecificationVersion: 2; only format 3 is read",
        ),
        (
            "version 0",
            list_with("").replace(r#""vendorListVersion": 12"#, r#""vendorListVersion": 0"#),
            "vendor list: vendorListVersion: 0 is not 1..=4095 (12 bits in a TC string)",
        ),
        (
            "version past 12 bits",
            list_with("").replace(r#""vendorListVersion": 12"#, r#""vendorListVersion": 4096"#),
            "vendor list: vendorListVersion: 4096 is not 1..=4095 (12 bits in a TC string)",
        ),
        (
            "policy past 6 bits",
            list_with("").replace(r#""tcfPolicyVersion": 4"#, r#""tcfPolicyVersion": 64"#),
            "vendor list: tcfPolicyVersion: 64 is not 0..=63 (6 bits in a TC string)",
        ),
        (
            "key 0",
            list_with(r#""0": {"id": 0}"#),
            "vendor list: vendors[\"0\"]: the key is not a vendor id 1..=65535",
        ),
        (
            "key past 65535",
            list_with(r#""70000": {"id": 70000}"#),
            "vendor list: vendors[\"70000\"]: the key is not a vendor id 1..=65535",
        ),
        (
            "key not a number",
            list_with(r#""x1": {"id": 1}"#),
            "vendor list: vendors[\"x1\"]: the key is not a vendor id 1..=65535",
        ),
        (
            "id differs from its key",
            list_with(r#""9": {"id": 10}"#),
            "vendor list: vendors[\"9\"]: id 10 differs from its key",
        ),
        (
            "purpose 12 (TCF 2.2 has 11)",
            vendor(r#""purposes": [1, 12]"#),
            "vendor list: vendors[\"9\"].purposes: 12 is not 1..=11",
        ),
        (
            "purpose 0",
            vendor(r#""legIntPurposes": [0]"#),
            "vendor list: vendors[\"9\"].legIntPurposes: 0 is not 1..=11",
        ),
        (
            "a huge id",
            vendor(r#""flexiblePurposes": [18446744073709551615]"#),
            "vendor list: vendors[\"9\"].flexiblePurposes: 18446744073709551615 is not 1..=11",
        ),
        (
            "special feature 3",
            vendor(r#""specialFeatures": [1, 3]"#),
            "vendor list: vendors[\"9\"].specialFeatures: 3 is not 1..=2",
        ),
        (
            "feature 65",
            vendor(r#""features": [65]"#),
            "vendor list: vendors[\"9\"].features: 65 is not 1..=64",
        ),
        (
            "a purpose on both bases",
            vendor(r#""purposes": [1, 2], "legIntPurposes": [2]"#),
            "vendor list: vendors[\"9\"].legIntPurposes: purpose 2 is also in purposes (one legal basis each)",
        ),
        (
            "a flexible purpose not declared",
            vendor(r#""purposes": [1], "legIntPurposes": [7], "flexiblePurposes": [7, 9]"#),
            "vendor list: vendors[\"9\"].flexiblePurposes: purpose 9 is in neither purposes nor legIntPurposes",
        ),
        (
            "a vendor twice",
            list_with(r#""9": {"id": 9}, "4": {"id": 4}, "9": {"id": 9}"#),
            "vendor list: vendors[\"9\"]: appears twice",
        ),
    ];
    for (name, json, want) in cases {
        let err = VendorList::from_json(json.as_bytes()).expect_err(name);
        assert_eq!(err.to_string(), want, "{name}");
        assert_eq!(err.label(), "invalid", "{name}");
    }
}

#[test]
fn what_is_not_the_gvl_json_is_refused_as_json() {
    for (name, json) in [
        ("not JSON", "{".to_string()),
        (
            "a negative id",
            list_with(r#""9": {"id": 9, "purposes": [-1]}"#),
        ),
        (
            "a fractional id",
            list_with(r#""9": {"id": 9, "purposes": [1.5]}"#),
        ),
        (
            "no vendors",
            r#"{"gvlSpecificationVersion": 3}"#.to_string(),
        ),
        (
            "vendors as a list",
            list_with("").replace("\"vendors\": {}", "\"vendors\": []"),
        ),
    ] {
        let err = VendorList::from_json(json.as_bytes()).expect_err(name);
        assert!(matches!(err, GvlError::Json(_)), "{name}: {err}");
        assert_eq!(err.label(), "json");
    }
}

#[test]
fn the_byte_limit_is_checked_before_parsing() {
    let big = vec![b' '; MAX_GVL_BYTES + 1];
    assert_eq!(
        VendorList::from_json(&big),
        Err(GvlError::TooLarge {
            len: MAX_GVL_BYTES + 1,
            max: MAX_GVL_BYTES
        })
    );
    // At the limit, parsing happens (and finds no list in spaces).
    let at_limit = vec![b' '; MAX_GVL_BYTES];
    assert!(matches!(
        VendorList::from_json(&at_limit),
        Err(GvlError::Json(_))
    ));
}

#[test]
fn id_sets_answer_only_for_their_ids() {
    let set = IdSet::from_bits(0b1011 | (1 << 63));
    assert_eq!(set.ids().collect::<Vec<_>>(), [1, 2, 4, 64]);
    assert_eq!(set.max(), Some(64));
    for id in [0, 3, 5, 65, 255] {
        assert!(!set.contains(id), "{id}");
    }
    assert_eq!(IdSet::default().max(), None);
}
