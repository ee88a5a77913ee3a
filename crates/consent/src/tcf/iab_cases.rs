//! The decoder against IAB's own: every string of `fixtures/tcf/tcf_cases.json` was written by
//! IAB's encoder (`@iabtcf/core`) and its expected fields read back by IAB's decoder
//! (`fixtures/tcf/gen.mjs`). Each field of the API is compared; vendor sets id by id over
//! their whole range and past it.

use super::{Restriction, TcString, VendorSet};
use serde_json::Value;

const CASES: &str = include_str!("../../fixtures/tcf/tcf_cases.json");

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("a list of ids")
        .iter()
        .map(|id| id.as_u64().expect("an id"))
        .collect()
}

fn num(v: &Value) -> u64 {
    v.as_u64().expect("a number")
}

fn letters(v: &Value) -> [u8; 2] {
    let s = v.as_str().expect("two letters").as_bytes();
    [s[0], s[1]]
}

/// `check(id)` agrees with the id list for every id from 0 to `upto`.
fn same_flags(name: &str, what: &str, upto: u16, expected: &[u64], check: impl Fn(u16) -> bool) {
    for id in 0..=upto {
        assert_eq!(
            check(id),
            expected.contains(&u64::from(id)),
            "{name}: {what} {id}"
        );
    }
}

fn same_set(name: &str, what: &str, set: &VendorSet, expected: &Value) {
    let want = ids(&expected["ids"]);
    assert_eq!(
        u64::from(set.max_vendor_id()),
        num(&expected["max_vendor_id"]),
        "{name}: {what} MaxVendorId"
    );
    let got: Vec<u64> = set.ids().map(u64::from).collect();
    assert_eq!(got, want, "{name}: {what} ids");
    assert_eq!(set.len(), want.len(), "{name}: {what} len");
    let upto = set.max_vendor_id().saturating_add(70);
    same_flags(name, what, upto, &want, |id| set.contains(id));
    assert!(
        !set.contains(u16::MAX) || want.contains(&65535),
        "{name}: {what} 65535"
    );
}

fn restriction_type(r: Option<Restriction>) -> Value {
    match r {
        None => Value::Null,
        Some(Restriction::NotAllowed) => Value::from(0),
        Some(Restriction::RequireConsent) => Value::from(1),
        Some(Restriction::RequireLegitimateInterest) => Value::from(2),
    }
}

fn check_case(case: &Value) {
    let name = case["name"].as_str().expect("a name");
    let e = &case["expected"];
    let string = case["string"].as_str().expect("a string");
    let tc = TcString::decode(string).unwrap_or_else(|err| panic!("{name}: {err}"));

    assert_eq!(
        u64::from(tc.version()),
        num(&e["version"]),
        "{name}: version"
    );
    assert_eq!(tc.created(), num(&e["created"]), "{name}: created");
    assert_eq!(
        tc.last_updated(),
        num(&e["last_updated"]),
        "{name}: last_updated"
    );
    assert_eq!(u64::from(tc.cmp_id()), num(&e["cmp_id"]), "{name}: cmp_id");
    assert_eq!(
        u64::from(tc.cmp_version()),
        num(&e["cmp_version"]),
        "{name}: cmp_version"
    );
    assert_eq!(
        u64::from(tc.consent_screen()),
        num(&e["consent_screen"]),
        "{name}"
    );
    assert_eq!(
        tc.consent_language(),
        letters(&e["consent_language"]),
        "{name}"
    );
    assert_eq!(
        u64::from(tc.vendor_list_version()),
        num(&e["vendor_list_version"]),
        "{name}"
    );
    assert_eq!(
        u64::from(tc.policy_version()),
        num(&e["policy_version"]),
        "{name}"
    );
    assert_eq!(
        Some(tc.is_service_specific()),
        e["is_service_specific"].as_bool(),
        "{name}"
    );
    assert_eq!(
        Some(tc.use_non_standard_texts()),
        e["use_non_standard_texts"].as_bool(),
        "{name}"
    );
    assert_eq!(
        Some(tc.purpose_one_treatment()),
        e["purpose_one_treatment"].as_bool(),
        "{name}"
    );
    assert_eq!(
        tc.publisher_cc(),
        letters(&e["publisher_cc"]),
        "{name}: publisher_cc"
    );

    let small = |what, upto: u8, want: &Value, check: &dyn Fn(u8) -> bool| {
        same_flags(name, what, u16::from(upto), &ids(want), |id| {
            u8::try_from(id).is_ok_and(check)
        });
    };
    small("special feature", 14, &e["special_feature_opt_ins"], &|f| {
        tc.special_feature(f)
    });
    small("purpose consent", 30, &e["purpose_consents"], &|p| {
        tc.purpose_consent(p)
    });
    small("purpose LI", 30, &e["purpose_li"], &|p| tc.purpose_li(p));

    same_set(
        name,
        "vendor consents",
        tc.vendor_consents(),
        &e["vendor_consents"],
    );
    same_set(name, "vendor LI", tc.vendor_lis(), &e["vendor_li"]);
    for id in tc.vendor_consents().ids() {
        assert!(tc.vendor_consent(id), "{name}: vendor_consent({id})");
    }
    for id in tc.vendor_lis().ids() {
        assert!(tc.vendor_li(id), "{name}: vendor_li({id})");
    }

    // IAB merges entries of the same purpose and type; compare the vendors each pair covers.
    for want in e["publisher_restrictions"]
        .as_array()
        .expect("restrictions")
    {
        let purpose = num(&want["purpose"]);
        let kind = want["type"].clone();
        let mut got: Vec<u64> = tc
            .publisher_restrictions()
            .filter(|r| u64::from(r.purpose) == purpose)
            .filter(|r| restriction_type(Some(r.restriction)) == kind)
            .flat_map(|r| r.vendors.iter().flat_map(|v| v.start..=v.end))
            .map(u64::from)
            .collect();
        got.sort_unstable();
        got.dedup();
        assert_eq!(
            got,
            ids(&want["vendors"]),
            "{name}: restriction {purpose}/{kind}"
        );
    }
    for probe in e["restriction_probes"].as_array().expect("probes") {
        let purpose = u8::try_from(num(&probe[0])).expect("purpose");
        let vendor = u16::try_from(num(&probe[1])).expect("vendor");
        let got = restriction_type(tc.restriction(purpose, vendor));
        assert_eq!(got, probe[2], "{name}: restriction({purpose}, {vendor})");
    }

    match (&e["disclosed_vendors"], tc.disclosed_vendors()) {
        (Value::Null, None) => assert_eq!(tc.disclosed_vendor(1), None, "{name}"),
        (want, Some(set)) if !want.is_null() => {
            same_set(name, "disclosed vendors", set, want);
            for id in set.ids() {
                assert_eq!(
                    tc.disclosed_vendor(id),
                    Some(true),
                    "{name}: disclosed {id}"
                );
            }
        }
        (want, got) => panic!("{name}: disclosed vendors {want} vs {got:?}"),
    }

    match (&e["publisher_tc"], tc.publisher_tc()) {
        (Value::Null, None) => {}
        (want, Some(p)) if !want.is_null() => {
            small("publisher consent", 30, &want["purpose_consents"], &|id| {
                p.purpose_consent(id)
            });
            small("publisher LI", 30, &want["purpose_li"], &|id| {
                p.purpose_li(id)
            });
            assert_eq!(
                u64::from(p.num_custom_purposes()),
                num(&want["num_custom_purposes"])
            );
            small("custom consent", 64, &want["custom_consents"], &|id| {
                p.custom_purpose_consent(id)
            });
            small("custom LI", 64, &want["custom_li"], &|id| {
                p.custom_purpose_li(id)
            });
        }
        (want, got) => panic!("{name}: publisher TC {want} vs {got:?}"),
    }
}

#[test]
fn every_iab_case_decodes_to_what_iab_reads() {
    let cases: Value = serde_json::from_str(CASES).expect("tcf_cases.json");
    let cases = cases.as_array().expect("a list of cases");
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for case in cases {
        check_case(case);
    }
}

/// The fixture file still covers what it was made to cover (a regenerated file that lost a
/// kind of case fails here, not silently).
#[test]
fn the_iab_cases_cover_each_encoding_and_segment() {
    let cases: Value = serde_json::from_str(CASES).expect("tcf_cases.json");
    let cases = cases.as_array().expect("a list of cases");
    let count = |f: &dyn Fn(&Value) -> bool| cases.iter().filter(|c| f(&c["expected"])).count();
    let range = |e: &Value, k: &str| e[k]["range"].as_bool() == Some(true);
    assert!(count(&|e| range(e, "vendor_consents")) >= 3);
    assert!(
        count(&|e| !range(e, "vendor_consents") && num(&e["vendor_consents"]["max_vendor_id"]) > 0)
            >= 3
    );
    assert!(count(&|e| range(e, "vendor_li")) >= 2);
    assert!(count(&|e| !e["disclosed_vendors"].is_null() && range(e, "disclosed_vendors")) >= 1);
    assert!(count(&|e| !e["disclosed_vendors"].is_null() && !range(e, "disclosed_vendors")) >= 1);
    assert!(count(&|e| !e["publisher_tc"].is_null()) >= 2);
    for kind in 0..3 {
        let has = |e: &Value| {
            e["publisher_restrictions"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|r| r["type"] == kind))
        };
        assert!(count(&has) >= 2, "restriction type {kind}");
    }
    assert!(count(&|e| e["purpose_one_treatment"] == true) >= 1);
    assert!(count(&|e| e["is_service_specific"] == false) >= 1);
}

/// The bench input is the `realistic` case, so the figure measured is of a string checked above.
#[test]
fn the_bench_string_is_the_realistic_case() {
    let cases: Value = serde_json::from_str(CASES).expect("tcf_cases.json");
    let realistic = cases
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "realistic"))
        .expect("a realistic case");
    let file = include_str!("../../fixtures/tcf/realistic.txt");
    assert_eq!(Some(file.trim()), realistic["string"].as_str());
    let tc = TcString::decode(file.trim()).expect("decodes");
    assert_eq!(tc.vendor_consents().len(), 300);
    assert_eq!(tc.vendor_lis().len(), 100);
    assert_eq!(tc.publisher_restrictions().count(), 2);
}
