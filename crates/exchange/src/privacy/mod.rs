//! Privacy law, per bidder: what each bidder may receive of a request, from the request's own
//! signals (`regs.gdpr` and the TCF consent string, GPP, `us_privacy`, `regs.coppa`,
//! `device.lmt`) and the bidder's vendor id in the Global Vendor List. Pure: the exchange reads
//! the signals once per request (`Signals::read`), decides per bidder (`policy::actions`) and
//! applies the decision to that bidder's copy (`scrub::scrub`). docs/privacy.md has the table
//! the tests in `policy.rs` and `scrub.rs` hold it to.
//!
//! | signal | what a bidder gets |
//! | --- | --- |
//! | GDPR applies, TCF enforced (a vendor list is loaded) | called only with a legal basis for purpose 2 for its vendor id; user and device ids and demographics only with one for purpose 4; `eids` only with one for any of purposes 2-10; precise geo and the full IP only with special feature 1 |
//! | a US section of GPP (or `us_privacy`) opted out of sale, sharing or targeted ads, a known child without consent, GPC | no ids, no `eids`, geo coarsened, IP masked |
//! | `regs.coppa = 1`, `device.lmt = 1` | no ids, no `eids`, no demographics, geo coarsened, IP masked |
//!
//! Fail closed: with GDPR applying, a missing or undecodable consent string is no consent; a
//! GPP string or US section that does not decode counts as an opt-out.

pub mod policy;
pub mod scrub;
pub mod signals;

use crate::outcome::{NotCalled, PrivacyAction};

pub use policy::actions;
pub use scrub::scrub;
pub use signals::Signals;

/// What privacy enforcement does to one bidder's copy of one request. Bidders with equal
/// actions (and protocol) share one encoded request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Actions {
    /// Left out of the auction, and why.
    pub not_called: Option<NotCalled>,
    /// `user.id`, `user.buyeruid` and the device's advertising and hashed ids removed.
    pub ids_removed: bool,
    /// `user.eids` removed.
    pub eids_removed: bool,
    /// `user.yob`, `gender`, `keywords`, `kwarray`, `customdata` and `data` removed.
    pub demographics_removed: bool,
    /// Latitude and longitude (device and user) rounded to two decimals (about 1 km).
    pub geo_coarsened: bool,
    /// `device.ip` to its /24, `device.ipv6` to its /56.
    pub ip_masked: bool,
}

impl Actions {
    /// Nothing to do: the bidder gets the request as it is.
    pub const NONE: Actions = Actions {
        not_called: None,
        ids_removed: false,
        eids_removed: false,
        demographics_removed: false,
        geo_coarsened: false,
        ip_masked: false,
    };

    /// Everything that identifies or locates the user precisely goes (COPPA, `lmt`).
    pub const ANONYMOUS: Actions = Actions {
        not_called: None,
        ids_removed: true,
        eids_removed: true,
        demographics_removed: true,
        geo_coarsened: true,
        ip_masked: true,
    };

    pub fn is_none(&self) -> bool {
        *self == Actions::NONE
    }

    /// Both sets of removals (the stricter of two rules wins); the first reason not to call.
    pub fn and(self, other: Actions) -> Actions {
        Actions {
            not_called: self.not_called.or(other.not_called),
            ids_removed: self.ids_removed || other.ids_removed,
            eids_removed: self.eids_removed || other.eids_removed,
            demographics_removed: self.demographics_removed || other.demographics_removed,
            geo_coarsened: self.geo_coarsened || other.geo_coarsened,
            ip_masked: self.ip_masked || other.ip_masked,
        }
    }

    /// The actions taken, as metric labels.
    pub fn taken(&self) -> impl Iterator<Item = PrivacyAction> + '_ {
        [
            (self.not_called.is_some(), PrivacyAction::NotCalled),
            (self.ids_removed, PrivacyAction::IdsRemoved),
            (self.eids_removed, PrivacyAction::EidsRemoved),
            (
                self.demographics_removed,
                PrivacyAction::DemographicsRemoved,
            ),
            (self.geo_coarsened, PrivacyAction::GeoCoarsened),
            (self.ip_masked, PrivacyAction::IpMasked),
        ]
        .into_iter()
        .filter_map(|(taken, action)| taken.then_some(action))
    }
}
