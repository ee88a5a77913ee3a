//! The media objects of an impression: banner (with its formats), video, audio and native
//! (3.2.6 - 3.2.10).

use crate::enums::{
    AdPosition, ApiFramework, BannerAdType, CompanionType, CreativeAttribute, DeliveryMethod,
    ExpandableDirection, FeedType, LinearityMode, PlaybackCessationMode, PlaybackMethod, Plcmt,
    PodSequence, Protocol, SlotPositionInPod, StartDelay, VideoPlacementType,
    VolumeNormalizationMode,
};
use crate::object::openrtb_object;
use crate::price::Price;

openrtb_object! {
    /// A banner impression, or a companion ad inside `Video`/`Audio` (3.2.6).
    pub struct Banner {
        required {}
        optional {
            /// Allowed sizes; preferred over `w`/`h`.
            format: Vec<Format> = "format",
            w: i32 = "w",
            h: i32 = "h",
            /// Blocked banner types.
            btype: Vec<BannerAdType> = "btype",
            /// Blocked creative attributes.
            battr: Vec<CreativeAttribute> = "battr",
            pos: AdPosition = "pos",
            mimes: Vec<String> = "mimes",
            topframe: i32 = "topframe",
            expdir: Vec<ExpandableDirection> = "expdir",
            api: Vec<ApiFramework> = "api",
            id: String = "id",
            /// Companion rendering: 0 = concurrent, 1 = end-card.
            vcm: i32 = "vcm",
        }
    }
}

openrtb_object! {
    /// One allowed banner size, or Flex Ad ratio (3.2.10).
    pub struct Format {
        required {}
        optional {
            w: i32 = "w",
            h: i32 = "h",
            wratio: i32 = "wratio",
            hratio: i32 = "hratio",
            wmin: i32 = "wmin",
        }
    }
}

openrtb_object! {
    /// A video impression (3.2.7). `mimes` is required by the spec, optional here:
    /// decoding accepts its absence, [`validate`](crate::validate) refuses it.
    pub struct Video {
        required {}
        optional {
            mimes: Vec<String> = "mimes",
            minduration: i32 = "minduration",
            maxduration: i32 = "maxduration",
            startdelay: StartDelay = "startdelay",
            /// Most ads in a dynamic pod.
            maxseq: i32 = "maxseq",
            /// Seconds of a dynamic pod advertisers may fill.
            poddur: i32 = "poddur",
            protocols: Vec<Protocol> = "protocols",
            w: i32 = "w",
            h: i32 = "h",
            podid: String = "podid",
            podseq: PodSequence = "podseq",
            /// Exact acceptable durations (exclusive with min/maxduration).
            rqddurs: Vec<i32> = "rqddurs",
            /// Deprecated by `plcmt`.
            placement: VideoPlacementType = "placement",
            plcmt: Plcmt = "plcmt",
            linearity: LinearityMode = "linearity",
            skip: i32 = "skip",
            skipmin: i32 = "skipmin",
            skipafter: i32 = "skipafter",
            /// Deprecated.
            sequence: i32 = "sequence",
            slotinpod: SlotPositionInPod = "slotinpod",
            /// Floor per second of the dynamic part of a pod, CPM.
            mincpmpersec: Price = "mincpmpersec",
            battr: Vec<CreativeAttribute> = "battr",
            maxextended: i32 = "maxextended",
            minbitrate: i32 = "minbitrate",
            maxbitrate: i32 = "maxbitrate",
            boxingallowed: i32 = "boxingallowed",
            playbackmethod: Vec<PlaybackMethod> = "playbackmethod",
            playbackend: PlaybackCessationMode = "playbackend",
            delivery: Vec<DeliveryMethod> = "delivery",
            pos: AdPosition = "pos",
            companionad: Vec<Banner> = "companionad",
            api: Vec<ApiFramework> = "api",
            companiontype: Vec<CompanionType> = "companiontype",
            /// Pod deduplication settings (provisional list in AdCOM; kept as raw codes).
            poddedupe: Vec<i32> = "poddedupe",
            durfloors: Vec<DurFloors> = "durfloors",
        }
    }
}

openrtb_object! {
    /// An audio impression (3.2.8). `mimes` is required by the spec, optional here:
    /// decoding accepts its absence, [`validate`](crate::validate) refuses it.
    pub struct Audio {
        required {}
        optional {
            mimes: Vec<String> = "mimes",
            minduration: i32 = "minduration",
            maxduration: i32 = "maxduration",
            poddur: i32 = "poddur",
            protocols: Vec<Protocol> = "protocols",
            startdelay: StartDelay = "startdelay",
            rqddurs: Vec<i32> = "rqddurs",
            podid: String = "podid",
            podseq: PodSequence = "podseq",
            /// Deprecated.
            sequence: i32 = "sequence",
            slotinpod: SlotPositionInPod = "slotinpod",
            /// Floor per second of the dynamic part of a pod, CPM.
            mincpmpersec: Price = "mincpmpersec",
            battr: Vec<CreativeAttribute> = "battr",
            maxextended: i32 = "maxextended",
            minbitrate: i32 = "minbitrate",
            maxbitrate: i32 = "maxbitrate",
            delivery: Vec<DeliveryMethod> = "delivery",
            companionad: Vec<Banner> = "companionad",
            api: Vec<ApiFramework> = "api",
            companiontype: Vec<CompanionType> = "companiontype",
            maxseq: i32 = "maxseq",
            feed: FeedType = "feed",
            /// 1 = stitched into the audio content.
            stitched: i32 = "stitched",
            nvol: VolumeNormalizationMode = "nvol",
            durfloors: Vec<DurFloors> = "durfloors",
        }
    }
}

openrtb_object! {
    /// A native impression (3.2.9). `request` is the Native Ads API payload as a JSON-encoded
    /// string; it is carried and forwarded as the string it came as, and
    /// [`validate`](crate::validate) parses it to check the Native 1.2 rules.
    pub struct Native {
        required {}
        optional {
            request: String = "request",
            ver: String = "ver",
            api: Vec<ApiFramework> = "api",
            battr: Vec<CreativeAttribute> = "battr",
        }
    }
}

openrtb_object! {
    /// Floor for creatives whose duration falls in `[mindur, maxdur]` seconds (3.2.35).
    pub struct DurFloors {
        required {}
        optional {
            mindur: i32 = "mindur",
            maxdur: i32 = "maxdur",
            bidfloor: Price = "bidfloor",
        }
    }
}
