//! The impression and what hangs off it apart from the media objects: metrics, private
//! marketplace deals, quantity, refresh and duration floors (3.2.4, 3.2.5, 3.2.11, 3.2.12,
//! 3.2.31, 3.2.33 - 3.2.35).

use crate::enums::{AuctionType, AutoRefreshTrigger, MultiplierSourceType};
use crate::object::openrtb_object;
use crate::price::Price;

use super::media::{Audio, Banner, DurFloors, Native, Video};

openrtb_object! {
    /// One impression on offer (3.2.4). At least one of `banner`, `video`, `audio`, `native`
    /// says what may be bought.
    pub struct Imp {
        required {
            /// Unique within the request; bids point at it with `Bid.impid`.
            id: String = "id",
        }
        optional {
            metric: Vec<Metric> = "metric",
            banner: Banner = "banner",
            video: Video = "video",
            audio: Audio = "audio",
            native: Native = "native",
            pmp: Pmp = "pmp",
            displaymanager: String = "displaymanager",
            displaymanagerver: String = "displaymanagerver",
            /// 1 = interstitial or full screen.
            instl: i32 = "instl",
            tagid: String = "tagid",
            /// Minimum CPM, in `bidfloorcur` (absent: no floor).
            bidfloor: Price = "bidfloor",
            /// Currency of every floor in this Imp; absent means USD.
            bidfloorcur: String = "bidfloorcur",
            clickbrowser: i32 = "clickbrowser",
            /// 1 = markup and assets must be HTTPS.
            secure: i32 = "secure",
            iframebuster: Vec<String> = "iframebuster",
            /// 1 = the user is rewarded for viewing.
            rwdd: i32 = "rwdd",
            /// Server-side ad insertion: 0 unknown, 1 client side, 2 stitched with client
            /// tracking, 3 all server side.
            ssai: i32 = "ssai",
            /// Seconds that may pass between auction and impression.
            exp: i32 = "exp",
            qty: Qty = "qty",
            /// Estimated fulfilment time in Unix milliseconds. The spec types it as a float,
            /// so it is an `f64` (an integer type would refuse `1.7e12`).
            dt: f64 = "dt",
            refresh: Refresh = "refresh",
        }
    }
}

openrtb_object! {
    /// A measured property of the impression, e.g. viewability (3.2.5).
    pub struct Metric {
        required {}
        optional {
            r#type: String = "type",
            value: f64 = "value",
            vendor: String = "vendor",
        }
    }
}

openrtb_object! {
    /// Private marketplace container (3.2.11).
    pub struct Pmp {
        required {}
        optional {
            /// 1 = only bids on the listed deals are accepted.
            private_auction: i32 = "private_auction",
            deals: Vec<Deal> = "deals",
        }
    }
}

openrtb_object! {
    /// A deal between a seller and a buyer that applies to this impression (3.2.12).
    pub struct Deal {
        required {}
        optional {
            id: String = "id",
            /// Minimum CPM in `bidfloorcur`.
            bidfloor: Price = "bidfloor",
            /// Does not inherit `Imp.bidfloorcur`: absent means USD.
            bidfloorcur: String = "bidfloorcur",
            /// Overrides `BidRequest.at` for this deal; [`AuctionType::FIXED_PRICE`] means
            /// `bidfloor` is the price.
            at: AuctionType = "at",
            wseat: Vec<String> = "wseat",
            wadomain: Vec<String> = "wadomain",
            /// 1 = guaranteed deal.
            guar: i32 = "guar",
            /// Floor per second of creative duration, CPM.
            mincpmpersec: Price = "mincpmpersec",
            durfloors: Vec<DurFloors> = "durfloors",
        }
    }
}

openrtb_object! {
    /// Impression multiplier, e.g. a DOOH screen seen by many (3.2.31).
    pub struct Qty {
        required {}
        optional {
            /// Billable events counted if this item is bought (not money: stays a float).
            multiplier: f64 = "multiplier",
            sourcetype: MultiplierSourceType = "sourcetype",
            vendor: String = "vendor",
        }
    }
}

openrtb_object! {
    /// How the ad slot refreshes (3.2.33).
    pub struct Refresh {
        required {}
        optional {
            refsettings: Vec<RefSettings> = "refsettings",
            /// Refreshes since the last page load.
            count: i32 = "count",
        }
    }
}

openrtb_object! {
    /// One refresh trigger and its interval (3.2.34).
    pub struct RefSettings {
        required {}
        optional {
            reftype: AutoRefreshTrigger = "reftype",
            /// Minimum seconds between refreshes.
            minint: i32 = "minint",
        }
    }
}
