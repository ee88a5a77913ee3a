//! The bid price rule, a pure function of the campaign's bid settings, the floor and the
//! auction kind.

use openrtb::Price;

use crate::model::{BidRule, Campaign};

/// The CPM `campaign` bids on an impression with `floor`, or `None` when it will not pay the
/// floor.
///
/// - target: `cpm` in a second-price auction (bidding one's value is the dominant strategy,
///   the winner pays the second price); in a first-price auction `cpm × shading` when shading
///   is set (rounded down to the micro: never bid more than intended), else `cpm`;
/// - bid = max(target, floor): a target below the floor is raised to the floor, as long as
///   the floor is within the ceiling, `max_cpm` (which is `cpm` unless configured);
/// - `None` when the floor is above the ceiling, or the bid would not be positive.
///
/// A negative floor counts as 0.
pub fn bid_price(campaign: &Campaign, floor: Price, first_price: bool) -> Option<Price> {
    rule_price(campaign.bid(), floor, first_price)
}

/// [`bid_price`] from the campaign's bid rule alone (ranking reads the rule from a packed copy,
/// [`crate::CampaignSet::bid_rule`]).
pub fn rule_price(rule: &BidRule, floor: Price, first_price: bool) -> Option<Price> {
    let floor = floor.max(Price::ZERO);
    if floor > rule.max_cpm {
        return None;
    }
    let target = match (first_price, rule.shading_ppm) {
        (true, Some(ppm)) => {
            let shaded = i128::from(rule.cpm.micros()) * i128::from(ppm) / 1_000_000;
            // shaded <= cpm because ppm <= 1_000_000, so it fits in i64.
            Price::from_micros(i64::try_from(shaded).unwrap_or(rule.cpm.micros()))
        }
        _ => rule.cpm,
    };
    let bid = target.max(floor);
    bid.is_positive().then_some(bid)
}
