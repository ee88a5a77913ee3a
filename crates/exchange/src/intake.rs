//! A request made fit for the auction before it is validated: converted up from OpenRTB 2.5,
//! its imps capped, repaired where the seller allows it (`validation = "repair"`), and its
//! floors brought into the auction currency. What cannot be made fit is left for `validate`
//! to refuse, naming the field. Pure: configuration and rates are passed in.

use openrtb::BidRequest;
use openrtb::validate::repair;

use crate::config::ImpOverflow;
use crate::money::{self, Rates};
use crate::sellers::Validation;

/// What the exchange changed in a request before its auction: counted, and named to the
/// seller in a debug header.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Amended {
    /// Fields `validate::repair` fixed, by their bounded labels.
    pub repaired: Vec<&'static str>,
    /// The exact JSON paths repaired, for the debug header.
    pub repaired_paths: Vec<String>,
    /// Imps past `auction.max_imps`, dropped.
    pub imps_dropped: u32,
    /// The request arrived in OpenRTB 2.5 shape and was converted up.
    pub upgraded: bool,
}

/// The rules one request is amended by.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub validation: Validation,
    pub max_imps: usize,
    pub overflow: ImpOverflow,
    /// The auction currency.
    pub currency: &'a str,
    pub rates: Rates<'a>,
}

/// Amends `request` as `rules` say; an error is the 400 message.
pub(crate) fn amend(request: &mut BidRequest, rules: &Rules<'_>) -> Result<Amended, String> {
    let mut amended = Amended::default();
    let converted = openrtb::convert::up_from_2_5(request).map_err(|e| e.to_string())?;
    amended.upgraded = !converted.is_empty();
    if request.imp.len() > rules.max_imps {
        match rules.overflow {
            ImpOverflow::Refuse => {
                return Err(format!(
                    "imp: {} imps exceed this exchange's limit of {}",
                    request.imp.len(),
                    rules.max_imps
                ));
            }
            ImpOverflow::Drop => {
                let dropped = repair::cap_imps(request, rules.max_imps);
                amended.imps_dropped = u32::try_from(dropped).unwrap_or(u32::MAX);
            }
        }
    }
    if rules.validation == Validation::Repair {
        for r in repair::repair(request) {
            amended.repaired.push(r.field);
            amended.repaired_paths.push(r.path);
        }
    }
    // Floors in another currency: converted when a rate exists; otherwise `validate` refuses
    // them, naming the imp.
    if money::floors_outside(request, rules.currency) {
        let _ = money::floors_to(request, rules.currency, &rules.rates);
    }
    Ok(amended)
}
