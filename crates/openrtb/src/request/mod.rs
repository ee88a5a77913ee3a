//! The bid request (OpenRTB 2.6 section 3): the top-level [`BidRequest`] and its small
//! request-wide objects; impressions, context, device and user live in the submodules.

pub mod context;
pub mod device;
pub mod imp;
pub mod media;
pub mod user;

use crate::enums::{AuctionType, CategoryTaxonomy};
use crate::object::openrtb_object;

use self::context::{App, Dooh, Site};
use self::device::Device;
use self::imp::Imp;
use self::user::User;

openrtb_object! {
    /// Top-level bid request (3.2.1). Only `id` and `imp` are required; an empty `imp` array
    /// decodes (deciding that it is unusable is the exchange's job, not the codec's).
    pub struct BidRequest {
        required {
            /// Auction ID, unique per exchange.
            id: String = "id",
            /// Impressions on offer (at least one in a valid request).
            imp: Vec<Imp> = "imp",
        }
        optional {
            site: Site = "site",
            app: App = "app",
            dooh: Dooh = "dooh",
            device: Device = "device",
            user: User = "user",
            /// 1 = test mode (not billable); absent means 0.
            test: i32 = "test",
            /// Absent means [`AuctionType::SECOND_PRICE_PLUS`].
            at: AuctionType = "at",
            /// Milliseconds the exchange waits for bids, network included.
            tmax: i32 = "tmax",
            wseat: Vec<String> = "wseat",
            bseat: Vec<String> = "bseat",
            allimps: i32 = "allimps",
            /// Accepted bid currencies (ISO-4217).
            cur: Vec<String> = "cur",
            wlang: Vec<String> = "wlang",
            wlangb: Vec<String> = "wlangb",
            acat: Vec<String> = "acat",
            bcat: Vec<String> = "bcat",
            cattax: CategoryTaxonomy = "cattax",
            badv: Vec<String> = "badv",
            bapp: Vec<String> = "bapp",
            source: Source = "source",
            regs: Regs = "regs",
        }
    }
}

openrtb_object! {
    /// Upstream source of the request and who makes the final decision (3.2.2).
    pub struct Source {
        required {}
        optional {
            /// Final decision made by 0 = exchange, 1 = upstream source.
            fd: i32 = "fd",
            /// Transaction ID shared by every participant in this auction.
            tid: String = "tid",
            pchain: String = "pchain",
            schain: SupplyChain = "schain",
        }
    }
}

openrtb_object! {
    /// Supply chain (3.2.25). `complete`, `nodes` and `ver` are required by the spec but
    /// optional here so that an incomplete chain can still be read and judged by the exchange.
    pub struct SupplyChain {
        required {}
        optional {
            complete: i32 = "complete",
            nodes: Vec<SupplyChainNode> = "nodes",
            ver: String = "ver",
        }
    }
}

openrtb_object! {
    /// One entity in the supply chain (3.2.26).
    pub struct SupplyChainNode {
        required {}
        optional {
            /// Canonical domain of the advertising system (as in ads.txt).
            asi: String = "asi",
            /// Seller ID within `asi`.
            sid: String = "sid",
            rid: String = "rid",
            name: String = "name",
            domain: String = "domain",
            /// 1 = this node is in the flow of payment.
            hp: i32 = "hp",
        }
    }
}

openrtb_object! {
    /// Regulations in force (3.2.3).
    pub struct Regs {
        required {}
        optional {
            coppa: i32 = "coppa",
            /// 1 = GDPR applies, 0 = it does not, absent = unknown.
            gdpr: i32 = "gdpr",
            us_privacy: String = "us_privacy",
            /// Global Privacy Platform string.
            gpp: String = "gpp",
            /// GPP section IDs that apply.
            gpp_sid: Vec<i32> = "gpp_sid",
        }
    }
}
