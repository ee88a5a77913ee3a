//! The bid response (OpenRTB 2.6 section 4): [`BidResponse`], [`SeatBid`], [`Bid`].

use crate::codes::NoBidReason;
use crate::enums::{
    ApiFramework, CategoryTaxonomy, CreativeAttribute, MarkupType, MediaRating, Protocol,
    SlotPositionInPod,
};
use crate::object::openrtb_object;
use crate::price::Price;

openrtb_object! {
    /// Top-level bid response (4.2.1). A no-bid is an HTTP 204, or a response with no
    /// `seatbid` and optionally `nbr`.
    pub struct BidResponse {
        required {
            /// The `BidRequest.id` this answers.
            id: String = "id",
        }
        optional {
            seatbid: Vec<SeatBid> = "seatbid",
            /// Bidder's response ID (`${AUCTION_BID_ID}`).
            bidid: String = "bidid",
            /// Currency of every bid; absent means USD.
            cur: String = "cur",
            customdata: String = "customdata",
            nbr: NoBidReason = "nbr",
        }
    }
}

openrtb_object! {
    /// Bids made on behalf of one buyer seat (4.2.2).
    pub struct SeatBid {
        required {
            bid: Vec<Bid> = "bid",
        }
        optional {
            seat: String = "seat",
            /// 1 = all impressions must be won or lost together.
            group: i32 = "group",
        }
    }
}

openrtb_object! {
    /// An offer to buy one impression (4.2.3).
    pub struct Bid {
        required {
            /// Bidder's bid ID.
            id: String = "id",
            /// The `Imp.id` this bid is for.
            impid: String = "impid",
            /// Bid CPM in `BidResponse.cur`.
            price: Price = "price",
        }
        optional {
            /// Win notice URL (macros substituted before the call).
            nurl: String = "nurl",
            /// Billing notice URL.
            burl: String = "burl",
            /// Loss notice URL.
            lurl: String = "lurl",
            /// Ad markup; overrides markup returned by the win notice.
            adm: String = "adm",
            adid: String = "adid",
            adomain: Vec<String> = "adomain",
            bundle: String = "bundle",
            iurl: String = "iurl",
            cid: String = "cid",
            crid: String = "crid",
            tactic: String = "tactic",
            cattax: CategoryTaxonomy = "cattax",
            cat: Vec<String> = "cat",
            attr: Vec<CreativeAttribute> = "attr",
            apis: Vec<ApiFramework> = "apis",
            /// Deprecated in favour of `apis`.
            api: ApiFramework = "api",
            protocol: Protocol = "protocol",
            qagmediarating: MediaRating = "qagmediarating",
            language: String = "language",
            langb: String = "langb",
            /// The `Deal.id` this bid is made under.
            dealid: String = "dealid",
            w: i32 = "w",
            h: i32 = "h",
            wratio: i32 = "wratio",
            hratio: i32 = "hratio",
            exp: i32 = "exp",
            /// Creative duration in seconds.
            dur: i32 = "dur",
            mtype: MarkupType = "mtype",
            slotinpod: SlotPositionInPod = "slotinpod",
        }
    }
}
