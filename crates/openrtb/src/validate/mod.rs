//! Semantic checks of a decoded bid request, shared by the exchange and the bidder so that both
//! refuse the same input the same way. Each message names the field at fault as a JSON path
//! (`imp[0].banner.w: must not be negative`) and is safe to send back to the seller (answered
//! 400).
//!
//! What is checked, and where:
//!
//! - here: the request id, the imp list, imp ids, floors and their currencies, deals;
//! - `media.rs`: the rest of each imp: at least one of banner/video/audio/native, the media
//!   objects (sizes, durations, `mimes`, start delay...), PMP and deal flags, `qty`, `refresh`;
//! - `native.rs`: the Native 1.2 request carried as a string in `imp.native.request`;
//! - `context.rs`: request-wide fields: `test`, `at`, `allimps`, site/app/dooh, device and geo,
//!   user, source and supply chain, regs.
//!
//! The rules are those the OpenRTB 2.6 and Native 1.2 texts state as rules: required fields,
//! `0 = no, 1 = yes` flags, closed code lists, sizes, counts and durations that cannot be
//! negative, coordinates in range. Lists the spec leaves open (AdCOM lists, "500+ exchange
//! specific") keep accepting unknown values, and where the text only recommends, nothing is
//! refused: forwarding a slightly odd request costs less than refusing a valid one.
//!
//! Cost: a pass over the fields with integer comparisons; paths are only written out on
//! failure, so a valid request allocates nothing here except what parsing a native request
//! takes.
//!
//! Order: the checks above run first over every imp, then the `media.rs` checks over every imp,
//! then `context.rs`. A request refused by an earlier rule is refused with the same message as
//! before the later rules existed.

mod context;
mod media;
mod native;
mod path;
pub mod repair;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

use crate::BidRequest;

use self::path::Path;

pub use self::native::{MAX_NATIVE_ASSETS, MAX_NATIVE_REQUEST_BYTES};

/// Most imps one request may carry; beyond this it is an abuse, not an ad slot list.
pub const MAX_IMPS: usize = 64;
/// Most deals one imp may carry.
pub const MAX_DEALS: usize = 256;

/// Why a request was refused (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRequest {
    #[error("id: must be a non-empty string")]
    MissingId,
    #[error("imp: at least one imp is required")]
    NoImps,
    #[error("imp: {0} imps exceed the limit of {MAX_IMPS}")]
    TooManyImps(usize),
    #[error("imp[{0}].id: must be a non-empty string")]
    MissingImpId(usize),
    #[error("imp[{index}].id: {id:?} is used by another imp")]
    DuplicateImpId { index: usize, id: String },
    #[error("imp[{0}].bidfloor: must not be negative")]
    NegativeFloor(usize),
    #[error(
        "imp[{index}].bidfloorcur: {found} differs from the auction currency {auction} and no conversion is configured"
    )]
    FloorCurrency {
        index: usize,
        found: String,
        auction: String,
    },
    #[error("imp[{imp}].pmp.deals: {count} deals exceed the limit of {MAX_DEALS}")]
    TooManyDeals { imp: usize, count: usize },
    #[error("imp[{imp}].pmp.deals[{deal}].id: must be a non-empty string unique within the imp")]
    BadDealId { imp: usize, deal: usize },
    #[error("imp[{imp}].pmp.deals[{deal}].bidfloor: must not be negative")]
    NegativeDealFloor { imp: usize, deal: usize },
    #[error(
        "imp[{imp}].pmp.deals[{deal}].bidfloorcur: {found} differs from the auction currency {auction}"
    )]
    DealFloorCurrency {
        imp: usize,
        deal: usize,
        found: String,
        auction: String,
    },
    #[error("imp[{0}].pmp.private_auction: set but the imp has no deals")]
    PrivateWithoutDeals(usize),
    /// Any other rule: `path` is the JSON path of the value at fault, e.g.
    /// `imp[0].video.mimes`, `device.geo.lat`, `imp[1].native.request.assets[2].id`.
    #[error("{path}: {problem}")]
    Field { path: String, problem: &'static str },
    /// `imp[i].native.request` is not JSON of the expected shape; `reason` is the JSON parser's
    /// message, `path` goes down into the native request as far as the parser got.
    #[error("{path}: {reason}")]
    NativeJson { path: String, reason: String },
}

/// The auction currency: the first of `cur`, else the configured default.
pub fn auction_currency<'a>(request: &'a BidRequest, default: &'a str) -> &'a str {
    request
        .cur
        .as_ref()
        .and_then(|c| c.first())
        .map_or(default, String::as_str)
}

fn same_currency(floor_currency: Option<&String>, auction: &str) -> bool {
    // `bidfloorcur` defaults to USD in the spec.
    floor_currency
        .map_or("USD", String::as_str)
        .eq_ignore_ascii_case(auction)
}

/// Validates the request as a whole.
pub fn validate(request: &BidRequest, currency: &str) -> Result<(), InvalidRequest> {
    if request.id.is_empty() {
        return Err(InvalidRequest::MissingId);
    }
    if request.imp.is_empty() {
        return Err(InvalidRequest::NoImps);
    }
    if request.imp.len() > MAX_IMPS {
        return Err(InvalidRequest::TooManyImps(request.imp.len()));
    }
    let mut seen = HashSet::with_capacity(request.imp.len());
    for (i, imp) in request.imp.iter().enumerate() {
        if imp.id.is_empty() {
            return Err(InvalidRequest::MissingImpId(i));
        }
        if !seen.insert(imp.id.as_str()) {
            return Err(InvalidRequest::DuplicateImpId {
                index: i,
                id: imp.id.clone(),
            });
        }
        let floor = imp.bidfloor.unwrap_or_default();
        if floor.micros() < 0 {
            return Err(InvalidRequest::NegativeFloor(i));
        }
        if floor.is_positive() && !same_currency(imp.bidfloorcur.as_ref(), currency) {
            return Err(InvalidRequest::FloorCurrency {
                index: i,
                found: imp.bidfloorcur.clone().unwrap_or_default(),
                auction: currency.to_owned(),
            });
        }
        let Some(pmp) = &imp.pmp else { continue };
        let deals = pmp.deals.as_deref().unwrap_or(&[]);
        if deals.len() > MAX_DEALS {
            return Err(InvalidRequest::TooManyDeals {
                imp: i,
                count: deals.len(),
            });
        }
        if pmp.private_auction == Some(1) && deals.is_empty() {
            return Err(InvalidRequest::PrivateWithoutDeals(i));
        }
        let mut deal_ids = HashSet::with_capacity(deals.len());
        for (d, deal) in deals.iter().enumerate() {
            if deal.id.as_deref().is_none_or(str::is_empty) || !deal_ids.insert(deal.id.as_deref())
            {
                return Err(InvalidRequest::BadDealId { imp: i, deal: d });
            }
            let deal_floor = deal.bidfloor.unwrap_or_default();
            if deal_floor.micros() < 0 {
                return Err(InvalidRequest::NegativeDealFloor { imp: i, deal: d });
            }
            if deal_floor.is_positive() && !same_currency(deal.bidfloorcur.as_ref(), currency) {
                return Err(InvalidRequest::DealFloorCurrency {
                    imp: i,
                    deal: d,
                    found: deal.bidfloorcur.clone().unwrap_or_default(),
                    auction: currency.to_owned(),
                });
            }
        }
    }
    let imps = Path::root("imp");
    for (i, imp) in request.imp.iter().enumerate() {
        media::imp(imp, imps.index(i))?;
    }
    context::request(request)
}
