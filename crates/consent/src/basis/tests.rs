//! The legal-basis rules as a table: vendors from `fixtures/gvl/small.json` (plus two made up
//! here), TC strings written by the test encoder with exactly the signals each row names.

use super::*;
use crate::gvl::VendorList;
use crate::tcf::test_encoder::{Model, RestrictionEntry, Section};
use Basis::{Consent, LegitimateInterest as Li};

const SMALL: &str = include_str!("../../fixtures/gvl/small.json");

/// The user's signals for the row's purpose and vendor.
#[derive(Debug, Clone, Copy)]
struct Signals {
    purpose_consent: bool,
    purpose_li: bool,
    vendor_consent: bool,
    vendor_li: bool,
}

const ALL: Signals = Signals {
    purpose_consent: true,
    purpose_li: true,
    vendor_consent: true,
    vendor_li: true,
};
const CONSENT_ONLY: Signals = Signals {
    purpose_li: false,
    vendor_li: false,
    ..ALL
};
const LI_ONLY: Signals = Signals {
    purpose_consent: false,
    vendor_consent: false,
    ..ALL
};

#[derive(Debug)]
struct Row {
    /// What the row shows.
    name: &'static str,
    vendor: u16,
    purpose: u8,
    signals: Signals,
    /// A publisher restriction on this vendor: (purpose, type 0/1/2).
    restriction: Option<(u8, u8)>,
    policy: u8,
    want: Option<Basis>,
}

const fn row(
    name: &'static str,
    vendor: u16,
    purpose: u8,
    signals: Signals,
    want: Option<Basis>,
) -> Row {
    Row {
        name,
        vendor,
        purpose,
        signals,
        restriction: None,
        policy: 4,
        want,
    }
}

const fn restricted(mut r: Row, purpose: u8, kind: u8) -> Row {
    r.restriction = Some((purpose, kind));
    r
}

const fn policy(mut r: Row, policy: u8) -> Row {
    r.policy = policy;
    r
}

fn tc_for(r: &Row) -> TcString {
    let s = r.signals;
    let only = |on: bool| if on { vec![r.purpose] } else { Vec::new() };
    let ids = [r.vendor];
    let vendor = |on: bool| Section::of(if on { &ids[..] } else { &[] }, false);
    let model = Model {
        policy_version: r.policy,
        purpose_consents: only(s.purpose_consent),
        purpose_lis: only(s.purpose_li),
        vendor_consents: vendor(s.vendor_consent),
        vendor_lis: vendor(s.vendor_li),
        restrictions: r
            .restriction
            .map(|(purpose, kind)| RestrictionEntry {
                purpose,
                kind,
                ranges: vec![(r.vendor, r.vendor)],
            })
            .into_iter()
            .collect(),
        ..Model::default()
    };
    TcString::decode(&model.encode()).expect("the test encoder writes valid strings")
}

/// small.json, and two vendors no GVL of policy 4 would list: 90 declares LI for purpose 1,
/// 91 consent for purpose 3, flexible.
fn vendors() -> VendorList {
    let made_up = r#""90": {"id": 90, "legIntPurposes": [1, 2]},
        "91": {"id": 91, "purposes": [3], "flexiblePurposes": [3]}"#;
    let json = SMALL.replacen(r#""vendors": {"#, &format!(r#""vendors": {{{made_up},"#), 1);
    VendorList::from_json(json.as_bytes()).expect("small.json and two more")
}

const NOT_ALLOWED: u8 = 0;
const REQUIRE_CONSENT: u8 = 1;
const REQUIRE_LI: u8 = 2;

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Vendor 1: consent only (purposes 1-4, 7, 9, 10).
    row("consent vendor, every signal: consent", 1, 2, ALL, Some(Consent)),
    row("consent vendor, consent signals only: consent", 1, 2, CONSENT_ONLY, Some(Consent)),
    row("consent vendor, no purpose consent: none", 1, 2, Signals { purpose_consent: false, ..ALL }, None),
    row("consent vendor, no vendor consent: none", 1, 2, Signals { vendor_consent: false, ..ALL }, None),
    row("consent vendor, LI signals only: LI is not its basis", 1, 2, LI_ONLY, None),
    row("consent vendor, purpose 5 not declared: none", 1, 5, ALL, None),
    row("consent vendor, purpose 1: consent", 1, 1, ALL, Some(Consent)),
    restricted(row("consent vendor, not allowed: none", 1, 2, ALL, None), 2, NOT_ALLOWED),
    restricted(row("consent vendor, require consent: ignored", 1, 2, ALL, Some(Consent)), 2, REQUIRE_CONSENT),
    restricted(row("consent vendor, not flexible, require LI: none", 1, 2, ALL, None), 2, REQUIRE_LI),
    restricted(row("a restriction of another purpose does not apply", 1, 2, ALL, Some(Consent)), 3, NOT_ALLOWED),
    // Vendor 2: legitimate interest only (2, 7-11).
    row("LI vendor, every signal: LI", 2, 2, ALL, Some(Li)),
    row("LI vendor, purpose 7: LI", 2, 7, LI_ONLY, Some(Li)),
    row("LI vendor, user objected to the purpose: none", 2, 7, Signals { purpose_li: false, ..ALL }, None),
    row("LI vendor, vendor LI not established: none", 2, 7, Signals { vendor_li: false, ..ALL }, None),
    row("LI vendor, consent signals only: none", 2, 7, CONSENT_ONLY, None),
    row("LI vendor, purpose 1 not declared: none", 2, 1, ALL, None),
    restricted(row("LI vendor, require LI: ignored", 2, 7, ALL, Some(Li)), 7, REQUIRE_LI),
    restricted(row("LI vendor, not flexible, require consent: none", 2, 7, ALL, None), 7, REQUIRE_CONSENT),
    restricted(row("LI vendor, not allowed: none", 2, 7, ALL, None), 7, NOT_ALLOWED),
    // Vendor 3: consent 1-4, 7; LI 9, 10; flexible 2, 7, 9.
    row("flexible, default consent, no restriction: consent", 3, 2, ALL, Some(Consent)),
    row("flexible, default consent, LI signals only: none (the default basis only)", 3, 2, LI_ONLY, None),
    restricted(row("flexible, default consent, require LI: LI", 3, 2, ALL, Some(Li)), 2, REQUIRE_LI),
    restricted(row("flexible, default consent, require LI, consent signals only: none", 3, 2, CONSENT_ONLY, None), 2, REQUIRE_LI),
    restricted(row("flexible, default consent, require consent: consent", 3, 7, ALL, Some(Consent)), 7, REQUIRE_CONSENT),
    restricted(row("flexible, default consent, not allowed: none", 3, 7, ALL, None), 7, NOT_ALLOWED),
    row("flexible, default LI (purpose 9), no restriction: LI", 3, 9, ALL, Some(Li)),
    restricted(row("flexible, default LI (purpose 9), require consent: consent", 3, 9, ALL, Some(Consent)), 9, REQUIRE_CONSENT),
    restricted(row("not flexible (purpose 10, LI), require consent: none", 3, 10, ALL, None), 10, REQUIRE_CONSENT),
    // Vendor 4: consent 1, 3, 4; LI 2, 7, 8, 10; flexible 2, 7, 10.
    row("flexible, default LI, no restriction: LI", 4, 2, ALL, Some(Li)),
    row("flexible, default LI, consent signals only: none", 4, 2, CONSENT_ONLY, None),
    restricted(row("flexible, default LI, require consent: consent", 4, 2, ALL, Some(Consent)), 2, REQUIRE_CONSENT),
    restricted(row("flexible, default LI, require consent, LI signals only: none", 4, 2, LI_ONLY, None), 2, REQUIRE_CONSENT),
    restricted(row("flexible, default LI, require LI: LI", 4, 10, ALL, Some(Li)), 10, REQUIRE_LI),
    restricted(row("not flexible (purpose 3, consent), require LI: none", 4, 3, ALL, None), 3, REQUIRE_LI),
    // Purposes 1 and 3-6 and legitimate interest.
    row("LI for purpose 3 under policy 4 (TCF 2.2): none", 8, 3, ALL, None),
    policy(row("LI for purpose 6 under policy 5 (TCF 2.3): none", 8, 6, ALL, None), 5),
    policy(row("LI for purpose 4 under policy 2 (before TCF 2.2): LI", 8, 4, ALL, Some(Li)), 2),
    row("LI for purpose 2 under policy 4: still LI", 8, 2, ALL, Some(Li)),
    row("purpose 1 consent for the same vendor: consent", 8, 1, ALL, Some(Consent)),
    policy(row("LI for purpose 1, any policy: none", 90, 1, ALL, None), 2),
    restricted(row("flexible purpose 3 switched to LI under policy 4: none", 91, 3, ALL, None), 3, REQUIRE_LI),
    restricted(policy(row("flexible purpose 3 switched to LI under policy 3: LI", 91, 3, ALL, Some(Li)), 3), 3, REQUIRE_LI),
    // Vendors without a basis whatever the signals.
    row("deleted vendor: none", 5, 2, ALL, None),
    row("deleted vendor, LI purpose: none", 5, 7, ALL, None),
    row("purpose 2 not declared: none", 6, 2, ALL, None),
    row("special purposes only: no purpose basis", 1201, 1, ALL, None),
    row("purpose 0: none", 1, 0, ALL, None),
    row("purpose 12 (not in TCF 2.2): none", 1, 12, ALL, None),
];

#[test]
fn the_legal_basis_table() {
    let gvl = vendors();
    for r in ROWS {
        let vendor = gvl.vendor(r.vendor).expect("a vendor of the list");
        let tc = tc_for(r);
        assert_eq!(basis(&tc, vendor, r.purpose), r.want, "{}", r.name);
    }
}

#[test]
fn another_vendors_signals_do_not_count() {
    let gvl = vendors();
    let model = Model {
        purpose_consents: vec![2],
        purpose_lis: vec![2],
        vendor_consents: Section::of(&[2, 3, 4], false),
        vendor_lis: Section::of(&[1, 3], true),
        ..Model::default()
    };
    let tc = TcString::decode(&model.encode()).expect("decodes");
    let of = |id| gvl.vendor(id).expect("vendor");
    assert_eq!(basis(&tc, of(1), 2), None, "1 has neither bit of its own");
    assert_eq!(
        basis(&tc, of(2), 2),
        None,
        "2's consent bit is not its basis"
    );
    assert_eq!(basis(&tc, of(3), 2), Some(Consent));
    assert_eq!(
        basis(&tc, of(4), 2),
        None,
        "4 (LI by default) lacks its LI bit"
    );
    assert_eq!(
        basis(&tc, of(3), 9),
        None,
        "3's LI bit, but purpose 9 has no LI signal"
    );
}

#[test]
fn special_features_need_the_opt_in_and_the_declaration() {
    let gvl = vendors();
    let of = |id| gvl.vendor(id).expect("vendor");
    let tc = |features: Vec<u8>| {
        let model = Model {
            special_features: features,
            ..Model::default()
        };
        TcString::decode(&model.encode()).expect("decodes")
    };
    let both = tc(vec![1, 2]);
    let none = tc(Vec::new());
    // (what, vendor, feature, string, expected)
    let cases = [
        ("declared 1, opted in", 1, 1, &both, true),
        ("declared 1, not opted in", 1, 1, &none, false),
        ("feature 2 not declared", 1, 2, &both, false),
        ("declared 2 only", 3, 2, &both, true),
        ("declared 2 only, feature 1", 3, 1, &both, false),
        ("declared both", 4, 1, &both, true),
        ("deleted vendor", 5, 1, &both, false),
        ("declares none", 6, 1, &both, false),
        ("feature 0", 4, 0, &both, false),
        ("feature 13", 4, 13, &both, false),
    ];
    for (what, vendor, feature, tc, want) in cases {
        assert_eq!(special_feature(tc, of(vendor), feature), want, "{what}");
    }
}
