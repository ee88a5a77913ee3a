//! Reason codes of OpenRTB 2.6: no-bid reasons (list 5.24, `BidResponse.nbr`) and loss reasons
//! (list 5.25, the `${AUCTION_LOSS}` macro). Both are integer newtypes so that codes this crate
//! does not name (vendor values of 500+ / 1000+, codes added by later revisions) pass through.

use crate::enums::code_list;

code_list! {
    /// Why a bidder did not bid (`BidResponse.nbr`). Values of 500+ are exchange specific.
    NoBidReason {
        UNKNOWN_ERROR = 0 => "Unknown Error",
        TECHNICAL_ERROR = 1 => "Technical Error",
        INVALID_REQUEST = 2 => "Invalid Request",
        KNOWN_WEB_CRAWLER = 3 => "Known Web Crawler",
        SUSPECTED_NON_HUMAN_TRAFFIC = 4 => "Suspected Non-Human Traffic",
        CLOUD_DATA_CENTER_OR_PROXY_IP = 5 => "Cloud, Data Center, or Proxy IP",
        UNSUPPORTED_DEVICE = 6 => "Unsupported Device",
        BLOCKED_PUBLISHER_OR_SITE = 7 => "Blocked Publisher or Site",
        UNMATCHED_USER = 8 => "Unmatched User",
        DAILY_USER_CAP_MET = 9 => "Daily User Cap Met",
        DAILY_DOMAIN_CAP_MET = 10 => "Daily Domain Cap Met",
        ADS_TXT_AUTHORIZATION_UNAVAILABLE = 11 => "Ads.txt Authorization Unavailable",
        ADS_TXT_AUTHORIZATION_VIOLATION = 12 => "Ads.txt Authorization Violation",
        ADS_CERT_AUTHENTICATION_UNAVAILABLE = 13 => "Ads.cert Authentication Unavailable",
        ADS_CERT_AUTHENTICATION_VIOLATION = 14 => "Ads.cert Authentication Violation",
        INSUFFICIENT_AUCTION_TIME = 15 => "Insufficient Auction Time",
        INCOMPLETE_SUPPLY_CHAIN = 16 => "Incomplete SupplyChain",
        BLOCKED_SUPPLY_CHAIN_NODE = 17 => "Blocked SupplyChain Node",
    }
}

code_list! {
    /// Why a bid did not win (`${AUCTION_LOSS}`, loss notices). Values of 1000+ are exchange
    /// specific.
    LossReason {
        BID_WON = 0 => "Bid Won",
        INTERNAL_ERROR = 1 => "Internal Error",
        IMPRESSION_OPPORTUNITY_EXPIRED = 2 => "Impression Opportunity Expired",
        INVALID_BID_RESPONSE = 3 => "Invalid Bid Response",
        INVALID_DEAL_ID = 4 => "Invalid Deal ID",
        INVALID_AUCTION_ID = 5 => "Invalid Auction ID",
        INVALID_ADVERTISER_DOMAIN = 6 => "Invalid (i.e., malformed) Advertiser Domain",
        MISSING_MARKUP = 7 => "Missing Markup",
        MISSING_CREATIVE_ID = 8 => "Missing Creative ID",
        MISSING_BID_PRICE = 9 => "Missing Bid Price",
        MISSING_MINIMUM_CREATIVE_APPROVAL_DATA = 10 => "Missing Minimum Creative Approval Data",
        BELOW_AUCTION_FLOOR = 100 => "Bid was Below Auction Floor",
        BELOW_DEAL_FLOOR = 101 => "Bid was Below Deal Floor",
        LOST_TO_HIGHER_BID = 102 => "Lost to Higher Bid",
        LOST_TO_PMP_DEAL = 103 => "Lost to a Bid for a PMP Deal",
        BUYER_SEAT_BLOCKED = 104 => "Buyer Seat Blocked",
        CREATIVE_FILTERED_GENERAL = 200 => "Creative Filtered - General; Reason Unknown",
        CREATIVE_FILTERED_PENDING = 201 => "Creative Filtered - Pending Processing by Exchange",
        CREATIVE_FILTERED_DISAPPROVED = 202 => "Creative Filtered - Disapproved by Exchange",
        CREATIVE_FILTERED_SIZE = 203 => "Creative Filtered - Size Not Allowed",
        CREATIVE_FILTERED_FORMAT = 204 => "Creative Filtered - Incorrect Creative Format",
        CREATIVE_FILTERED_ADVERTISER = 205 => "Creative Filtered - Advertiser Exclusions",
        CREATIVE_FILTERED_APP_BUNDLE = 206 => "Creative Filtered - App Store ID Exclusions",
        CREATIVE_FILTERED_NOT_SECURE = 207 => "Creative Filtered - Not Secure",
        CREATIVE_FILTERED_LANGUAGE = 208 => "Creative Filtered - Language Exclusions",
        CREATIVE_FILTERED_CATEGORY = 209 => "Creative Filtered - Category Exclusions",
        CREATIVE_FILTERED_ATTRIBUTE = 210 => "Creative Filtered - Creative Attribute Exclusions",
        CREATIVE_FILTERED_AD_TYPE = 211 => "Creative Filtered - Ad Type Exclusions",
        CREATIVE_FILTERED_ANIMATION = 212 => "Creative Filtered - Animation Too Long",
        CREATIVE_FILTERED_NOT_ALLOWED_IN_DEAL = 213 => "Creative Filtered - Not Allowed in PMP Deal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_integers_and_unknown_values_survive() {
        assert_eq!(
            serde_json::to_string(&LossReason::LOST_TO_HIGHER_BID).unwrap(),
            "102"
        );
        let vendor: NoBidReason = serde_json::from_str("512").unwrap();
        assert_eq!(vendor, NoBidReason(512));
        assert_eq!(vendor.label(), None);
        assert_eq!(
            NoBidReason::INSUFFICIENT_AUCTION_TIME.label(),
            Some("Insufficient Auction Time")
        );
    }
}
