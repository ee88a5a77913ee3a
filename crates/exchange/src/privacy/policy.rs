//! What one bidder may receive, from the request's signals and the bidder's vendor id: the
//! rules of docs/privacy.md as one function, and its table test.

use consent::basis::{basis, special_feature};
use consent::gvl::VendorList;

use super::Actions;
use super::signals::{Signals, Tcf};
use crate::outcome::NotCalled;

/// TCF purposes and special features the rules read.
const BASIC_ADS: u8 = 2;
const PERSONALISED_ADS_PROFILE: u8 = 4;
const PRECISE_GEO: u8 = 1;

/// The actions for a bidder with vendor id `vendor` (its `gvl_vendor_id`). `gvl` is the
/// Global Vendor List when TCF is enforced (`[privacy] gvl_file`), `None` when it is not.
pub fn actions(signals: &Signals, vendor: Option<u16>, gvl: Option<&VendorList>) -> Actions {
    let mut actions = Actions::NONE;
    if signals.coppa || signals.lmt {
        actions = actions.and(Actions::ANONYMOUS);
    }
    if signals.us_opt_out {
        actions = actions.and(Actions {
            ids_removed: true,
            eids_removed: true,
            geo_coarsened: true,
            ip_masked: true,
            ..Actions::NONE
        });
    }
    if signals.gdpr
        && let Some(gvl) = gvl
    {
        actions = actions.and(tcf_actions(&signals.tcf, vendor, gvl));
    }
    actions
}

/// TCF 2.2 where GDPR applies: a legal basis for purpose 2 to be called at all, for purpose 4
/// to receive user and device ids and demographics (Prebid's "transmit user first-party
/// data"), for any of purposes 2-10 to receive `eids`, and special feature 1 for precise geo.
fn tcf_actions(tcf: &Tcf, vendor: Option<u16>, gvl: &VendorList) -> Actions {
    let not_called = |reason| Actions {
        not_called: Some(reason),
        ..Actions::NONE
    };
    let Some(vendor_id) = vendor else {
        return not_called(NotCalled::NoVendorId);
    };
    let Tcf::Valid(tc) = tcf else {
        return not_called(NotCalled::NoConsent);
    };
    let Some(declared) = gvl.vendor(vendor_id).filter(|v| !v.is_deleted()) else {
        return not_called(NotCalled::UnknownVendor);
    };
    let has = |purpose| basis(tc, declared, purpose).is_some();
    if !has(BASIC_ADS) {
        return not_called(NotCalled::NoBasis);
    }
    let ids = has(PERSONALISED_ADS_PROFILE);
    let precise_geo = special_feature(tc, declared, PRECISE_GEO);
    Actions {
        not_called: None,
        ids_removed: !ids,
        demographics_removed: !ids,
        eids_removed: !(2..=10).any(has),
        geo_coarsened: !precise_geo,
        ip_masked: !precise_geo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::signals::Tcf;
    use consent::tcf::TcString;

    /// The strings of `tests/fixtures/privacy/consents.json`, made by IAB's encoder, and the
    /// hand-made list beside them (vendors 1-5; see `tests/privacy.rs` for what each declares).
    fn fixture(name: &str) -> TcString {
        let all: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/privacy/consents.json"))
                .unwrap();
        TcString::decode(all["tcf"][name].as_str().unwrap()).unwrap()
    }

    fn gvl() -> VendorList {
        VendorList::from_json(include_bytes!("../../tests/fixtures/privacy/gvl.json")).unwrap()
    }

    fn gdpr(tcf: Tcf) -> Signals {
        Signals {
            gdpr: true,
            tcf,
            us_opt_out: false,
            coppa: false,
            lmt: false,
            gpp_invalid: false,
        }
    }

    /// `-reason` when not called, else five letters as in `tests/privacy.rs`: I ids, E eids,
    /// D demographics, G precise geo, P full IP; lower case when removed.
    fn code(a: Actions) -> String {
        if let Some(reason) = a.not_called {
            return format!("-{}", reason.label());
        }
        [
            ('I', a.ids_removed),
            ('E', a.eids_removed),
            ('D', a.demographics_removed),
            ('G', a.geo_coarsened),
            ('P', a.ip_masked),
        ]
        .iter()
        .map(|(c, removed)| if *removed { c.to_ascii_lowercase() } else { *c })
        .collect()
    }

    /// docs/privacy.md's table, per vendor (1-5, none, 99).
    #[test]
    fn the_privacy_table() {
        let list = gvl();
        let valid = |name| Tcf::Valid(Box::new(fixture(name)));
        let vendors = [Some(1), Some(2), Some(3), Some(4), Some(5), None, Some(99)];
        let rows: Vec<(&str, Signals, [&str; 7])> = vec![
            (
                "everything consented",
                gdpr(valid("all_consent")),
                [
                    "IEDGP",
                    "iEdgp",
                    "IEDgp",
                    "-unknown_vendor",
                    "-no_basis",
                    "-no_vendor_id",
                    "-unknown_vendor",
                ],
            ),
            (
                "no purpose 4, no special feature",
                gdpr(valid("no_profile_no_geo")),
                [
                    "iEdgp",
                    "iEdgp",
                    "iEdgp",
                    "-unknown_vendor",
                    "-no_basis",
                    "-no_vendor_id",
                    "-unknown_vendor",
                ],
            ),
            (
                "publisher restrictions",
                gdpr(valid("restricted")),
                [
                    "-no_basis",
                    "iEdgp",
                    "-no_basis",
                    "-unknown_vendor",
                    "-no_basis",
                    "-no_vendor_id",
                    "-unknown_vendor",
                ],
            ),
            (
                "no string",
                gdpr(Tcf::Absent),
                [
                    "-no_consent",
                    "-no_consent",
                    "-no_consent",
                    "-no_consent",
                    "-no_consent",
                    "-no_vendor_id",
                    "-no_consent",
                ],
            ),
            (
                "a string that does not decode",
                gdpr(Tcf::Invalid),
                [
                    "-no_consent",
                    "-no_consent",
                    "-no_consent",
                    "-no_consent",
                    "-no_consent",
                    "-no_vendor_id",
                    "-no_consent",
                ],
            ),
            (
                "US opt-out",
                Signals {
                    gdpr: false,
                    us_opt_out: true,
                    ..gdpr(Tcf::Absent)
                },
                ["ieDgp"; 7],
            ),
            (
                "COPPA",
                Signals {
                    gdpr: false,
                    coppa: true,
                    ..gdpr(Tcf::Absent)
                },
                ["iedgp"; 7],
            ),
            (
                "lmt, with everything consented under GDPR",
                Signals {
                    lmt: true,
                    ..gdpr(valid("all_consent"))
                },
                [
                    "iedgp",
                    "iedgp",
                    "iedgp",
                    "-unknown_vendor",
                    "-no_basis",
                    "-no_vendor_id",
                    "-unknown_vendor",
                ],
            ),
            (
                "no GDPR, nothing else",
                Signals {
                    gdpr: false,
                    ..gdpr(Tcf::Absent)
                },
                ["IEDGP"; 7],
            ),
        ];
        for (what, signals, expected) in rows {
            let got: Vec<String> = vendors
                .iter()
                .map(|v| code(actions(&signals, *v, Some(&list))))
                .collect();
            assert_eq!(got, expected, "{what}");
        }
    }

    #[test]
    fn without_a_vendor_list_gdpr_changes_nothing_and_us_law_still_applies() {
        let s = gdpr(Tcf::Absent);
        assert_eq!(code(actions(&s, None, None)), "IEDGP");
        let s = Signals {
            coppa: true,
            ..gdpr(Tcf::Absent)
        };
        assert_eq!(code(actions(&s, Some(1), None)), "iedgp");
    }
}
