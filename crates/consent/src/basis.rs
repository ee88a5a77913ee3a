//! A vendor's legal basis for a purpose under TCF 2.2: what the vendor declared in the GVL,
//! what the publisher restricted in the TC string, and what the user signalled, put together.
//!
//! Rules (the spec, "Consent string and vendor list formats v2": "What are publisher
//! restrictions?" and the core string's RestrictionType field; TCF 2.2's policy):
//! 1. a deleted vendor has no basis for anything;
//! 2. the declared basis is consent (`purposes`) or legitimate interest (`legIntPurposes`); a
//!    purpose declared in neither has no basis;
//! 3. restriction type 0 (not allowed) removes any basis; type 1 (require consent) makes a
//!    flexible purpose consent, and type 2 (require LI) makes it LI; on a purpose that is not
//!    flexible, a restriction asking for the declared basis is ignored and one asking for the
//!    other leaves no basis (the spec's table for non-flexible registrations);
//! 4. a flexible purpose without a restriction keeps its declared (default) basis: the spec says
//!    the vendor "may not apply a consent signal without a legal basis restriction signal to
//!    require consent". Prebid Server's full enforcement (`gdpr/full_enforcement.go` over
//!    go-gdpr, where a flexible purpose counts as both) accepts either signal there; this
//!    follows the spec;
//! 5. legitimate interest is never a basis for purpose 1 (the policy requires consent for it,
//!    and IAB's encoder clears that bit), and, from policy version 4 (TCF 2.2) on, not for
//!    purposes 3 to 6, whatever the vendor declared or the bits say; Prebid relies on CMPs
//!    writing those bits as 0, this does not;
//! 6. consent needs the purpose's consent bit and the vendor's consent bit; legitimate interest
//!    needs the purpose's LI transparency bit and the vendor's LI bit.
//!
//! PurposeOneTreatment, IsServiceSpecific and the disclosed vendors are not read here: they are
//! the exchange's policy, over the `TcString` it holds.

use crate::gvl::Vendor;
use crate::tcf::{Restriction, TcString};

#[cfg(test)]
mod tests;

/// The legal basis on which a vendor may process for a purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basis {
    Consent,
    LegitimateInterest,
}

/// Purposes 3 to 6 (personalised advertising and content profiles) lost legitimate interest as
/// a basis with this policy version (TCF 2.2).
const NO_LI_FOR_3_TO_6_FROM_POLICY: u8 = 4;

/// The vendor's legal basis for `purpose`; `None` when it has none. The vendor's id is its GVL
/// id (`vendor.id()`), the one the TC string's vendor sections use.
pub fn basis(tc: &TcString, vendor: &Vendor, purpose: u8) -> Option<Basis> {
    if vendor.is_deleted() {
        return None;
    }
    let by_consent = vendor.purposes().contains(purpose);
    let by_li = vendor.leg_int_purposes().contains(purpose);
    let flexible = vendor.flexible_purposes().contains(purpose);
    let declared = match (by_consent, by_li) {
        (true, _) => Basis::Consent,
        (false, true) => Basis::LegitimateInterest,
        (false, false) => return None,
    };
    let wanted = match tc.restriction(purpose, vendor.id()) {
        None => declared,
        Some(Restriction::NotAllowed) => return None,
        Some(Restriction::RequireConsent) if flexible || declared == Basis::Consent => {
            Basis::Consent
        }
        Some(Restriction::RequireLegitimateInterest)
            if flexible || declared == Basis::LegitimateInterest =>
        {
            Basis::LegitimateInterest
        }
        // The publisher asks for the basis the vendor did not declare and cannot switch to.
        Some(Restriction::RequireConsent | Restriction::RequireLegitimateInterest) => return None,
    };
    let established = match wanted {
        Basis::Consent => tc.purpose_consent(purpose) && tc.vendor_consent(vendor.id()),
        Basis::LegitimateInterest => {
            li_allowed(tc.policy_version(), purpose)
                && tc.purpose_li(purpose)
                && tc.vendor_li(vendor.id())
        }
    };
    established.then_some(wanted)
}

/// Whether legitimate interest can be a basis for `purpose` under `policy_version`.
fn li_allowed(policy_version: u8, purpose: u8) -> bool {
    match purpose {
        1 => false,
        3..=6 => policy_version < NO_LI_FOR_3_TO_6_FROM_POLICY,
        _ => true,
    }
}

/// Special feature `feature` (1 is precise geolocation, 2 active device scanning): the user
/// opted in and the vendor, not deleted, declared it.
pub fn special_feature(tc: &TcString, vendor: &Vendor, feature: u8) -> bool {
    !vendor.is_deleted()
        && vendor.special_features().contains(feature)
        && tc.special_feature(feature)
}
