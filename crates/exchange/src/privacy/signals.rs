//! The privacy signals of one request, read and decoded once: whether GDPR applies, the TCF
//! consent string, the US opt-outs (GPP's US sections and `us_privacy`), COPPA and `lmt`.

use consent::gpp::{ChildConsent, GppString, OptOut, UsSection};
use consent::tcf::TcString;
use openrtb::BidRequest;

/// GPP's section id of the TCF EU v2 string, and of `uspv1`.
const GPP_TCF_EU_V2: u16 = 2;
const GPP_USP_V1: u16 = 6;
/// GPP's US national section and the state sections after it.
const GPP_US_FIRST: u16 = 7;
const GPP_US_LAST: u16 = 63;

/// The TCF consent string of a request where GDPR applies.
#[derive(Debug, Clone, PartialEq)]
pub enum Tcf {
    /// No string: no consent.
    Absent,
    /// A string that does not decode (or is not version 2): no consent.
    Invalid,
    Valid(Box<TcString>),
}

/// What the request says about privacy law.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals {
    /// GDPR applies: `regs.gdpr = 1`, or GPP names its TCF section, or the flag is absent and
    /// the seller's (else the host's) default says it applies.
    pub gdpr: bool,
    /// The consent string (`user.consent`, else GPP's TCF section); read only when GDPR applies.
    pub tcf: Tcf,
    /// A US law says no sale, sharing or targeted advertising with this user's data.
    pub us_opt_out: bool,
    pub coppa: bool,
    pub lmt: bool,
    /// A GPP string was present but did not decode, or `gpp_sid` named sections it lacks
    /// (with a US section among them, that counts as an opt-out: fail closed).
    pub gpp_invalid: bool,
}

impl Signals {
    /// Reads the signals of `request`; `gdpr_default` applies when `regs.gdpr` is absent. The
    /// consent string is decoded only when `tcf_enforced` (a vendor list is loaded): nothing
    /// else reads it.
    pub fn read(request: &BidRequest, gdpr_default: bool, tcf_enforced: bool) -> Signals {
        let regs = request.regs.as_ref();
        let gpp_text = regs.and_then(|r| r.gpp.as_deref());
        let gpp_sid: Option<&[i32]> = regs.and_then(|r| r.gpp_sid.as_deref());
        let gpp = gpp_text.map(GppString::decode);
        let gpp_ok = gpp.as_ref().and_then(|g| g.as_ref().ok());
        let names = |id: u16| gpp_sid.is_some_and(|sids| sids.contains(&i32::from(id)));
        // A section applies when `gpp_sid` names it; with no `gpp_sid`, every section present.
        let applies = |id: u16| gpp_sid.is_none_or(|_| names(id));
        let gpp_invalid = match (gpp.as_ref(), gpp_sid) {
            (Some(Err(_)), _) => true,
            (Some(Ok(g)), Some(sids)) => sids
                .iter()
                .any(|&sid| u16::try_from(sid).map_or(true, |sid| !g.section_ids().contains(&sid))),
            (None, Some(sids)) => !sids.is_empty(),
            _ => false,
        };

        let gdpr = match regs.and_then(|r| r.gdpr) {
            Some(flag) => flag == 1,
            None if names(GPP_TCF_EU_V2) => true,
            None => gdpr_default,
        };
        let tcf = if gdpr && tcf_enforced {
            let from_gpp = gpp_ok
                .filter(|_| applies(GPP_TCF_EU_V2))
                .and_then(GppString::tcf_eu_v2);
            let text = request
                .user
                .as_ref()
                .and_then(|u| u.consent.as_deref())
                .filter(|s| !s.is_empty())
                .or(from_gpp);
            match text.map(TcString::decode) {
                None => Tcf::Absent,
                Some(Ok(tc)) => Tcf::Valid(Box::new(tc)),
                Some(Err(_)) => Tcf::Invalid,
            }
        } else {
            Tcf::Absent
        };

        let usp_opt_out = regs
            .and_then(|r| r.us_privacy.as_deref())
            .map(|s| consent::gpp::UsPrivacy::parse(s).map_or(true, |u| u.opted_out_of_sale()));
        let gpp_usp_opt_out = gpp_ok
            .filter(|_| applies(GPP_USP_V1))
            .and_then(GppString::us_privacy)
            .map(|u| u.map_or(true, |u| u.opted_out_of_sale()));
        let us_sections_opt_out = match gpp_ok {
            Some(g) => g
                .us_sections()
                .iter()
                .filter(|(id, _)| applies(*id))
                .any(|(_, section)| section.as_ref().map_or(true, us_section_opts_out)),
            None => false,
        };
        // `gpp_sid` names a US section the string lacks, or the string does not decode.
        let names_us = gpp_sid.is_some_and(|sids| {
            sids.iter()
                .any(|&s| (i32::from(GPP_US_FIRST)..=i32::from(GPP_US_LAST)).contains(&s))
        });
        Signals {
            gdpr,
            tcf,
            us_opt_out: usp_opt_out == Some(true)
                || gpp_usp_opt_out == Some(true)
                || us_sections_opt_out
                || (gpp_invalid && names_us),
            coppa: regs.and_then(|r| r.coppa) == Some(1),
            lmt: request.device.as_ref().and_then(|d| d.lmt) == Some(1),
            gpp_invalid,
        }
    }
}

/// A US section forbids passing the user's data on when the user opted out of its sale,
/// sharing or targeted advertising, is a known child without a parent's consent, or sent GPC.
fn us_section_opts_out(section: &UsSection) -> bool {
    section.sale_opt_out == OptOut::OptedOut
        || section.sharing_opt_out == OptOut::OptedOut
        || section.targeted_advertising_opt_out == OptOut::OptedOut
        || section.known_child == ChildConsent::NoConsent
        || section.gpc == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consents() -> serde_json::Value {
        serde_json::from_str(include_str!("../../tests/fixtures/privacy/consents.json")).unwrap()
    }

    fn read(regs: serde_json::Value, user: serde_json::Value, default: bool) -> Signals {
        let request = serde_json::json!({"id": "r", "imp": [{"id": "1", "banner": {"w": 1, "h": 1}}],
                                         "regs": regs, "user": user});
        let request = BidRequest::from_slice(request.to_string().as_bytes()).unwrap();
        Signals::read(&request, default, true)
    }

    #[test]
    fn gdpr_applies_by_flag_then_gpp_then_default() {
        let none = serde_json::json!({});
        assert!(read(serde_json::json!({"gdpr": 1}), none.clone(), false).gdpr);
        assert!(!read(serde_json::json!({"gdpr": 0}), none.clone(), true).gdpr);
        assert!(read(serde_json::json!({"gpp_sid": [2]}), none.clone(), false).gdpr);
        assert!(read(serde_json::json!({}), none.clone(), true).gdpr);
        assert!(!read(serde_json::json!({}), none, false).gdpr);
    }

    #[test]
    fn the_consent_string_comes_from_the_user_else_from_gpp() {
        let c = consents();
        let own = c["tcf"]["all_consent"].as_str().unwrap();
        let s = read(
            serde_json::json!({"gdpr": 1}),
            serde_json::json!({"consent": own}),
            false,
        );
        assert!(matches!(s.tcf, Tcf::Valid(_)));
        let gpp = c["gpp"]["tcf_in_gpp"].as_str().unwrap();
        let s = read(
            serde_json::json!({"gpp": gpp, "gpp_sid": [2]}),
            serde_json::json!({}),
            false,
        );
        let Tcf::Valid(tc) = s.tcf else {
            panic!("GPP's TCF section is read: {:?}", s.tcf)
        };
        assert!(tc.vendor_consent(1) && tc.vendor_consent(3) && !tc.vendor_consent(2));
        let s = read(
            serde_json::json!({"gdpr": 1}),
            serde_json::json!({"consent": "x"}),
            false,
        );
        assert_eq!(s.tcf, Tcf::Invalid);
        let s = read(serde_json::json!({"gdpr": 1}), serde_json::json!({}), false);
        assert_eq!(s.tcf, Tcf::Absent);
    }

    #[test]
    fn us_opt_outs_and_fail_closed_gpp() {
        let c = consents();
        let gpp = |name: &str| c["gpp"][name].as_str().unwrap().to_owned();
        let none = serde_json::json!({});
        let opted = |regs: serde_json::Value| read(regs, none.clone(), false).us_opt_out;
        assert!(opted(serde_json::json!({"us_privacy": "1YYN"})));
        assert!(!opted(serde_json::json!({"us_privacy": "1YNN"})));
        assert!(opted(serde_json::json!({"us_privacy": "garbage"})));
        assert!(opted(
            serde_json::json!({"gpp": gpp("usnat_sale_opt_out"), "gpp_sid": [7]})
        ));
        assert!(!opted(
            serde_json::json!({"gpp": gpp("usnat_no_opt_out"), "gpp_sid": [7]})
        ));
        assert!(opted(
            serde_json::json!({"gpp": gpp("usca_sharing_opt_out"), "gpp_sid": [8]})
        ));
        // A section the string has but `gpp_sid` does not name does not apply...
        assert!(!opted(
            serde_json::json!({"gpp": gpp("usnat_sale_opt_out"), "gpp_sid": [2]})
        ));
        // ...and one `gpp_sid` names that the string lacks fails closed.
        assert!(opted(
            serde_json::json!({"gpp": gpp("usnat_no_opt_out"), "gpp_sid": [8]})
        ));
        assert!(opted(serde_json::json!({"gpp": "not gpp", "gpp_sid": [7]})));
        assert!(!opted(
            serde_json::json!({"gpp": "not gpp", "gpp_sid": [2]})
        ));
    }
}
