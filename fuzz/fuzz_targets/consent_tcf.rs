//! TC strings and Global Vendor Lists, as the exchange receives them:
//! - `TcString::decode` never panics, on the input as text and on the input mapped onto the
//!   base64url alphabet behind a version-2 first character (so most inputs reach the fields
//!   past the version); an accepted string is at most `MAX_TC_STRING_BYTES`, decodes the same
//!   twice, and answers every accessor for any id: each vendor set's `contains` agrees with its
//!   `ids()`, never past MaxVendorId; each publisher restriction entry's vendors get that type
//!   or a lower one;
//! - `basis` over an accepted string and the vendors of `fixtures/gvl/small.json` never panics
//!   and gives a basis only with the bits it rests on: consent with the purpose's and the
//!   vendor's consent bits, LI with both LI bits and never for purpose 1, nor for 3-6 from
//!   policy 4; nothing for a deleted vendor;
//! - `VendorList::from_json` never panics on the bytes; an accepted list finds every vendor by
//!   its id and keeps the shape rules (purposes 1-11, special features 1-2, no purpose on both
//!   bases, flexible purposes declared).
#![no_main]

use consent::basis::{Basis, basis, special_feature};
use consent::gvl::{MAX_PURPOSE_ID, MAX_SPECIAL_FEATURE_ID, VendorList};
use consent::tcf::{MAX_TC_STRING_BYTES, TcString, VendorSet};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const SMALL_GVL: &str = include_str!("../../crates/consent/fixtures/gvl/small.json");
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn small_gvl() -> &'static VendorList {
    static GVL: OnceLock<VendorList> = OnceLock::new();
    GVL.get_or_init(|| VendorList::from_json(SMALL_GVL.as_bytes()).expect("small.json loads"))
}

/// Ids to ask a set about: around its edges, and every id up to a bound (a range section can
/// name MaxVendorId 65535 in a few bits; asking all of them would slow every run).
fn check_set(set: &VendorSet) {
    let ids: Vec<u16> = set.ids().collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascend");
    assert_eq!(ids.len(), set.len());
    assert_eq!(set.is_empty(), ids.is_empty());
    assert!(!set.contains(0));
    if let Some(&last) = ids.last() {
        assert!(last <= set.max_vendor_id(), "{last} past MaxVendorId");
    }
    for &id in &ids {
        assert!(set.contains(id));
    }
    let max = set.max_vendor_id();
    for id in (0..=max.min(2048)).chain([max, max.saturating_add(1), u16::MAX]) {
        assert_eq!(set.contains(id), ids.binary_search(&id).is_ok(), "{id}");
    }
}

fn check_tc(text: &str, tc: &TcString) {
    assert!(text.len() <= MAX_TC_STRING_BYTES);
    assert_eq!(TcString::decode(text).as_ref(), Ok(tc));
    assert_eq!(tc.version(), 2);
    for letter in tc.consent_language().into_iter().chain(tc.publisher_cc()) {
        assert!(letter.is_ascii_uppercase());
    }
    check_set(tc.vendor_consents());
    check_set(tc.vendor_lis());
    if let Some(set) = tc.disclosed_vendors() {
        check_set(set);
    }
    assert_eq!(
        tc.disclosed_vendor(1).is_some(),
        tc.disclosed_vendors().is_some()
    );
    for p in 0..=64u8 {
        let _ = (
            tc.purpose_consent(p),
            tc.purpose_li(p),
            tc.special_feature(p),
        );
        if let Some(publisher) = tc.publisher_tc() {
            let _ = (publisher.purpose_consent(p), publisher.custom_purpose_li(p));
        }
    }
    for entry in tc.publisher_restrictions() {
        assert!(entry.purpose > 0);
        for range in entry.vendors {
            assert!(0 < range.start && range.start <= range.end);
            for v in [range.start, range.end] {
                let got = tc.restriction(entry.purpose, v);
                assert!(got.is_some_and(|r| r <= entry.restriction), "{got:?}");
            }
        }
    }
    for vendor in small_gvl().vendors() {
        let id = vendor.id();
        for purpose in 0..=12u8 {
            match basis(tc, vendor, purpose) {
                None => {}
                Some(_) if vendor.is_deleted() => panic!("deleted vendor {id} has a basis"),
                Some(Basis::Consent) => {
                    assert!(tc.purpose_consent(purpose) && tc.vendor_consent(id));
                }
                Some(Basis::LegitimateInterest) => {
                    assert!(tc.purpose_li(purpose) && tc.vendor_li(id));
                    assert!(purpose != 1);
                    assert!(!(3..=6).contains(&purpose) || tc.policy_version() < 4);
                }
            }
        }
        for feature in 0..=13u8 {
            if special_feature(tc, vendor, feature) {
                assert!(tc.special_feature(feature) && !vendor.is_deleted());
            }
        }
    }
}

fn check_gvl(gvl: &VendorList) {
    assert!((1..=4095).contains(&gvl.version()));
    assert!(gvl.policy_version() <= 63);
    let mut last = 0u16;
    for vendor in gvl.vendors() {
        assert!(vendor.id() > last, "ids ascend and are unique");
        last = vendor.id();
        assert_eq!(gvl.vendor(vendor.id()), Some(vendor));
        let (consent, li, flexible) = (
            vendor.purposes(),
            vendor.leg_int_purposes(),
            vendor.flexible_purposes(),
        );
        for set in [consent, li, flexible] {
            assert!(set.max().is_none_or(|m| m <= MAX_PURPOSE_ID));
        }
        assert!(
            vendor
                .special_features()
                .max()
                .is_none_or(|m| m <= MAX_SPECIAL_FEATURE_ID)
        );
        for p in flexible.ids() {
            assert!(
                consent.contains(p) != li.contains(p),
                "flexible {p}: exactly one default"
            );
        }
        for p in consent.ids() {
            assert!(!li.contains(p));
        }
    }
    assert_eq!(gvl.vendor(0), None);
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(tc) = TcString::decode(&text) {
        check_tc(&text, &tc);
    }
    // The same bytes as base64url after a version-2 first character ('C'), 0xff as a '.'.
    let mapped: String = std::iter::once('C')
        .chain(data.iter().map(|&b| {
            if b == 0xff {
                '.'
            } else {
                char::from(ALPHABET[usize::from(b & 63)])
            }
        }))
        .collect();
    if let Ok(tc) = TcString::decode(&mapped) {
        check_tc(&mapped, &tc);
    }
    if let Ok(gvl) = VendorList::from_json(data) {
        check_gvl(&gvl);
    }
});
