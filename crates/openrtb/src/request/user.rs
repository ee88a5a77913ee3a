//! The human user: IDs, consent, first-party data and extended IDs (3.2.20 - 3.2.22, 3.2.27,
//! 3.2.28).

use crate::enums::{AgentType, IdMatchMethod};
use crate::object::openrtb_object;

use super::device::Geo;

openrtb_object! {
    /// The audience of the ad (3.2.20).
    pub struct User {
        required {}
        optional {
            /// Exchange-specific user ID.
            id: String = "id",
            /// The buyer's ID for this user, from cookie sync.
            buyeruid: String = "buyeruid",
            /// Deprecated.
            yob: i32 = "yob",
            /// Deprecated.
            gender: String = "gender",
            keywords: String = "keywords",
            kwarray: Vec<String> = "kwarray",
            customdata: String = "customdata",
            /// Home location (not necessarily the current one).
            geo: Geo = "geo",
            data: Vec<Data> = "data",
            /// TCF consent string when GDPR applies.
            consent: String = "consent",
            eids: Vec<Eid> = "eids",
        }
    }
}

openrtb_object! {
    /// Data from one provider about the user or the content (3.2.21).
    pub struct Data {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            segment: Vec<Segment> = "segment",
        }
    }
}

openrtb_object! {
    /// One data point from a provider (3.2.22).
    pub struct Segment {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            value: String = "value",
        }
    }
}

openrtb_object! {
    /// IDs of the user from one identity source (3.2.27).
    pub struct Eid {
        required {}
        optional {
            /// Domain of whoever added this entry.
            inserter: String = "inserter",
            /// Canonical domain of the ID.
            source: String = "source",
            matcher: String = "matcher",
            mm: IdMatchMethod = "mm",
            uids: Vec<Uid> = "uids",
        }
    }
}

openrtb_object! {
    /// One user ID of an [`Eid`] (3.2.28).
    pub struct Uid {
        required {}
        optional {
            id: String = "id",
            atype: AgentType = "atype",
        }
    }
}
