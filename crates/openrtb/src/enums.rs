//! Enumerated lists used by OpenRTB 2.6 fields. Since 2.6 the lists live in AdCOM 1.0 (and the
//! few lists written inline in the 2.6 object tables).
//!
//! Every list is an integer newtype, never a Rust `enum`: OpenRTB requires tolerating values a
//! party does not know (vendor codes of 500+, values added to AdCOM after this was written), and
//! such a value must decode and re-encode unchanged rather than fail the whole request. The
//! named constants are the values of the lists at the time of writing; `label()` gives the
//! list's name for one, `None` for values not listed here.

/// Declares an `i32` newtype with named constants and a `label()` lookup (also used by
/// `codes.rs`).
macro_rules! code_list {
    ($(#[$meta:meta])* $name:ident { $($(#[$cmeta:meta])* $konst:ident = $value:expr => $label:expr,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i32);

        impl $crate::direct::Decode for $name {
            #[inline]
            fn decode(r: &mut $crate::direct::Reader<'_>) -> $crate::direct::Result<Self> {
                r.i32().map(Self)
            }
        }

        impl $name {
            $($(#[$cmeta])* pub const $konst: Self = Self($value);)*

            /// The specification's name for this code, `None` for codes it does not list.
            pub fn label(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some($label),)*
                    _ => None,
                }
            }
        }
    };
}

pub(crate) use code_list;

code_list! {
    /// Auction type (`BidRequest.at`, `Deal.at`). Values of 500+ are exchange specific.
    AuctionType {
        FIRST_PRICE = 1 => "First Price",
        SECOND_PRICE_PLUS = 2 => "Second Price Plus",
        /// Only on `Deal.at`: the deal's `bidfloor` is the agreed price.
        FIXED_PRICE = 3 => "Fixed Price (Deal bidfloor is the price)",
    }
}

code_list! {
    /// AdCOM List: Device Types (`Device.devicetype`).
    DeviceType {
        MOBILE_TABLET = 1 => "Mobile/Tablet - General",
        PERSONAL_COMPUTER = 2 => "Personal Computer",
        CONNECTED_TV = 3 => "Connected TV",
        PHONE = 4 => "Phone",
        TABLET = 5 => "Tablet",
        CONNECTED_DEVICE = 6 => "Connected Device",
        SET_TOP_BOX = 7 => "Set Top Box",
        OOH_DEVICE = 8 => "OOH Device",
    }
}

code_list! {
    /// AdCOM List: Connection Types (`Device.connectiontype`); 0 is OpenRTB 2.x's "unknown".
    ConnectionType {
        UNKNOWN = 0 => "Unknown",
        ETHERNET = 1 => "Ethernet; Wired Connection",
        WIFI = 2 => "WIFI",
        CELLULAR_UNKNOWN = 3 => "Cellular Network - Unknown Generation",
        CELLULAR_2G = 4 => "Cellular Network - 2G",
        CELLULAR_3G = 5 => "Cellular Network - 3G",
        CELLULAR_4G = 6 => "Cellular Network - 4G",
        CELLULAR_5G = 7 => "Cellular Network - 5G",
    }
}

code_list! {
    /// AdCOM List: API Frameworks (`api` arrays, `Bid.apis`, `Bid.api`). 500+ vendor specific.
    ApiFramework {
        VPAID_1 = 1 => "VPAID 1.0",
        VPAID_2 = 2 => "VPAID 2.0",
        MRAID_1 = 3 => "MRAID 1.0",
        ORMMA = 4 => "ORMMA",
        MRAID_2 = 5 => "MRAID 2.0",
        MRAID_3 = 6 => "MRAID 3.0",
        OMID_1 = 7 => "OMID 1.0",
        SIMID_1_0 = 8 => "SIMID 1.0",
        SIMID_1_1 = 9 => "SIMID 1.1",
    }
}

code_list! {
    /// AdCOM List: Creative Subtypes - Audio/Video (`Video.protocols`, `Audio.protocols`,
    /// `Bid.protocol`).
    Protocol {
        VAST_1 = 1 => "VAST 1.0",
        VAST_2 = 2 => "VAST 2.0",
        VAST_3 = 3 => "VAST 3.0",
        VAST_1_WRAPPER = 4 => "VAST 1.0 Wrapper",
        VAST_2_WRAPPER = 5 => "VAST 2.0 Wrapper",
        VAST_3_WRAPPER = 6 => "VAST 3.0 Wrapper",
        VAST_4 = 7 => "VAST 4.0",
        VAST_4_WRAPPER = 8 => "VAST 4.0 Wrapper",
        DAAST_1 = 9 => "DAAST 1.0",
        DAAST_1_WRAPPER = 10 => "DAAST 1.0 Wrapper",
        VAST_4_1 = 11 => "VAST 4.1",
        VAST_4_1_WRAPPER = 12 => "VAST 4.1 Wrapper",
        VAST_4_2 = 13 => "VAST 4.2",
        VAST_4_2_WRAPPER = 14 => "VAST 4.2 Wrapper",
        VAST_4_3 = 15 => "VAST 4.3",
        VAST_4_3_WRAPPER = 16 => "VAST 4.3 Wrapper",
    }
}

code_list! {
    /// AdCOM List: Placement Subtypes - Video (`Video.placement`, deprecated in favour of
    /// `plcmt`).
    VideoPlacementType {
        IN_STREAM = 1 => "In-Stream",
        IN_BANNER = 2 => "In-Banner",
        IN_ARTICLE = 3 => "In-Article",
        IN_FEED = 4 => "In-Feed",
        INTERSTITIAL_SLIDER_FLOATING = 5 => "Interstitial/Slider/Floating",
    }
}

code_list! {
    /// AdCOM List: Plcmt Subtypes - Video (`Video.plcmt`).
    Plcmt {
        INSTREAM = 1 => "Instream",
        ACCOMPANYING_CONTENT = 2 => "Accompanying Content",
        INTERSTITIAL = 3 => "Interstitial",
        NO_CONTENT_STANDALONE = 4 => "No Content/Standalone",
    }
}

code_list! {
    /// AdCOM List: Creative Attributes (`battr` arrays, `Bid.attr`). 500+ vendor specific.
    CreativeAttribute {
        AUDIO_AUTOPLAY = 1 => "Audio Ad (Autoplay)",
        AUDIO_USER_INITIATED = 2 => "Audio Ad (User Initiated)",
        EXPANDABLE_AUTOMATIC = 3 => "Expandable (Automatic)",
        EXPANDABLE_CLICK = 4 => "Expandable (User Initiated - Click)",
        EXPANDABLE_ROLLOVER = 5 => "Expandable (User Initiated - Rollover)",
        IN_BANNER_VIDEO_AUTOPLAY = 6 => "In-Banner Video Ad (Autoplay)",
        IN_BANNER_VIDEO_USER_INITIATED = 7 => "In-Banner Video Ad (User Initiated)",
        POP = 8 => "Pop (e.g., Over, Under, or Upon Exit)",
        PROVOCATIVE = 9 => "Provocative or Suggestive Imagery",
        EXTREME_ANIMATION = 10 => "Shaky, Flashing, Flickering, Extreme Animation, Smileys",
        SURVEYS = 11 => "Surveys",
        TEXT_ONLY = 12 => "Text Only",
        USER_INTERACTIVE = 13 => "User Interactive (e.g., Embedded Games)",
        WINDOWS_DIALOG_OR_ALERT = 14 => "Windows Dialog or Alert Style",
        AUDIO_ON_OFF_BUTTON = 15 => "Has Audio On/Off Button",
        SKIP_BUTTON = 16 => "Ad Provides Skip Button",
        ADOBE_FLASH = 17 => "Adobe Flash",
        RESPONSIVE = 18 => "Responsive; Sizeless; Fluid",
    }
}

code_list! {
    /// AdCOM List: Placement Positions (`Banner.pos`, `Video.pos`); 0 is OpenRTB 2.x's
    /// "unknown".
    AdPosition {
        UNKNOWN = 0 => "Unknown",
        ABOVE_THE_FOLD = 1 => "Above The Fold",
        LOCKED = 2 => "Locked (i.e., fixed position)",
        BELOW_THE_FOLD = 3 => "Below The Fold",
        HEADER = 4 => "Header",
        FOOTER = 5 => "Footer",
        SIDEBAR = 6 => "Sidebar",
        FULLSCREEN = 7 => "Fullscreen",
    }
}

code_list! {
    /// Banner ad types (`Banner.btype`, listed inline in OpenRTB 2.6 section 3.2.6).
    BannerAdType {
        XHTML_TEXT = 1 => "XHTML Text Ad",
        XHTML_BANNER = 2 => "XHTML Banner Ad",
        JAVASCRIPT = 3 => "JavaScript Ad",
        IFRAME = 4 => "iframe",
    }
}

code_list! {
    /// AdCOM List: Expandable Directions (`Banner.expdir`).
    ExpandableDirection {
        LEFT = 1 => "Left",
        RIGHT = 2 => "Right",
        UP = 3 => "Up",
        DOWN = 4 => "Down",
        FULL_SCREEN = 5 => "Full Screen",
        RESIZE_MINIMIZE = 6 => "Resize/Minimize (make smaller)",
    }
}

code_list! {
    /// AdCOM List: Linearity Modes (`Video.linearity`).
    LinearityMode {
        LINEAR = 1 => "Linear",
        NON_LINEAR = 2 => "Non-Linear",
    }
}

code_list! {
    /// AdCOM List: Playback Methods (`Video.playbackmethod`).
    PlaybackMethod {
        PAGE_LOAD_SOUND_ON = 1 => "Initiates on Page Load with Sound On",
        PAGE_LOAD_SOUND_OFF = 2 => "Initiates on Page Load with Sound Off by Default",
        CLICK_SOUND_ON = 3 => "Initiates on Click with Sound On",
        MOUSE_OVER_SOUND_ON = 4 => "Initiates on Mouse-Over with Sound On",
        VIEWPORT_SOUND_ON = 5 => "Initiates on Entering Viewport with Sound On",
        VIEWPORT_SOUND_OFF = 6 => "Initiates on Entering Viewport with Sound Off by Default",
    }
}

code_list! {
    /// AdCOM List: Playback Cessation Modes (`Video.playbackend`).
    PlaybackCessationMode {
        COMPLETION_OR_USER = 1 => "On Video Completion or when Terminated by User",
        LEAVING_VIEWPORT_OR_USER = 2 => "On Leaving Viewport or when Terminated by User",
        FLOATING_UNTIL_COMPLETION = 3 => "On Leaving Viewport Continues as a Floating/Slider Unit",
    }
}

code_list! {
    /// AdCOM List: Delivery Methods (`Video.delivery`, `Audio.delivery`).
    DeliveryMethod {
        STREAMING = 1 => "Streaming",
        PROGRESSIVE = 2 => "Progressive",
        DOWNLOAD = 3 => "Download",
    }
}

code_list! {
    /// AdCOM List: Companion Types (`companiontype`).
    CompanionType {
        STATIC = 1 => "Static Resource",
        HTML = 2 => "HTML Resource",
        IFRAME = 3 => "iframe Resource",
    }
}

code_list! {
    /// AdCOM List: Start Delay Modes (`startdelay`). A positive value is a mid-roll's start
    /// delay in seconds.
    StartDelay {
        PRE_ROLL = 0 => "Pre-Roll",
        GENERIC_MID_ROLL = -1 => "Generic Mid-Roll",
        GENERIC_POST_ROLL = -2 => "Generic Post-Roll",
    }
}

code_list! {
    /// AdCOM List: Pod Sequence (`podseq`).
    PodSequence {
        LAST = -1 => "Last pod in the content stream",
        ANY = 0 => "Any pod in the content stream",
        FIRST = 1 => "First pod in the content stream",
    }
}

code_list! {
    /// AdCOM List: Slot Position in Pod (`slotinpod`).
    SlotPositionInPod {
        LAST = -1 => "Last ad in the pod",
        ANY = 0 => "Any ad in the pod",
        FIRST = 1 => "First ad in the pod",
        FIRST_OR_LAST = 2 => "First or last ad in the pod",
    }
}

code_list! {
    /// AdCOM List: Feed Types (`Audio.feed`).
    FeedType {
        MUSIC_SERVICE = 1 => "Music Service",
        BROADCAST = 2 => "FM/AM Broadcast",
        PODCAST = 3 => "Podcast",
    }
}

code_list! {
    /// AdCOM List: Volume Normalization Modes (`Audio.nvol`).
    VolumeNormalizationMode {
        NONE = 0 => "None",
        AVERAGE = 1 => "Ad Volume Average Normalized to Content",
        PEAK = 2 => "Ad Volume Peak Normalized to Content",
        LOUDNESS = 3 => "Ad Loudness Normalized to Content",
        CUSTOM = 4 => "Custom Volume Normalization",
    }
}

code_list! {
    /// AdCOM List: Content Contexts (`Content.context`).
    ContentContext {
        VIDEO = 1 => "Video",
        GAME = 2 => "Game",
        MUSIC = 3 => "Music",
        APPLICATION = 4 => "Application",
        TEXT = 5 => "Text",
        OTHER = 6 => "Other",
        UNKNOWN = 7 => "Unknown",
    }
}

code_list! {
    /// AdCOM List: Production Qualities (`Content.prodq`); 0 is OpenRTB 2.x's "unknown".
    ProductionQuality {
        UNKNOWN = 0 => "Unknown",
        PROFESSIONAL = 1 => "Professionally Produced",
        PROSUMER = 2 => "Prosumer",
        USER_GENERATED = 3 => "User Generated (UGC)",
    }
}

code_list! {
    /// AdCOM List: Media Ratings (`qagmediarating` on Content and Bid).
    MediaRating {
        ALL_AUDIENCES = 1 => "All Audiences",
        OVER_12 = 2 => "Everyone Over Age 12",
        MATURE = 3 => "Mature Audiences",
    }
}

code_list! {
    /// AdCOM List: Category Taxonomies (`cattax`). 500+ vendor specific.
    CategoryTaxonomy {
        IAB_CONTENT_1_0 = 1 => "IAB Tech Lab Content Category Taxonomy 1.0",
        IAB_CONTENT_2_0 = 2 => "IAB Tech Lab Content Category Taxonomy 2.0",
        IAB_AD_PRODUCT_1_0 = 3 => "IAB Tech Lab Ad Product Taxonomy 1.0",
        IAB_AUDIENCE_1_1 = 4 => "IAB Tech Lab Audience Taxonomy 1.1",
        IAB_CONTENT_2_1 = 5 => "IAB Tech Lab Content Taxonomy 2.1",
        IAB_CONTENT_2_2 = 6 => "IAB Tech Lab Content Taxonomy 2.2",
        IAB_CONTENT_3_0 = 7 => "IAB Tech Lab Content Taxonomy 3.0",
    }
}

code_list! {
    /// AdCOM List: Location Types (`Geo.type`).
    LocationType {
        GPS = 1 => "GPS/Location Services",
        IP = 2 => "IP Address",
        USER_PROVIDED = 3 => "User Provided",
    }
}

code_list! {
    /// AdCOM List: IP Location Services (`Geo.ipservice`).
    IpLocationService {
        IP2LOCATION = 1 => "ip2location",
        NEUSTAR = 2 => "Neustar (Quova)",
        MAXMIND = 3 => "MaxMind",
        NETACUITY = 4 => "NetAcuity (Digital Element)",
    }
}

code_list! {
    /// AdCOM List: Agent Types (`UID.atype`). 500+ vendor specific.
    AgentType {
        BROWSER_OR_DEVICE = 1 => "Web browser or device ID",
        IN_APP = 2 => "In-app device ID",
        PERSON = 3 => "Person-based ID",
    }
}

code_list! {
    /// AdCOM List: ID Match Methods (`EID.mm`).
    IdMatchMethod {
        UNKNOWN = 0 => "Unknown",
        NO_MATCHING = 1 => "No matching; ID came directly from the source",
        COOKIE_SYNC = 2 => "Cookie sync",
        AUTHENTICATED = 3 => "Authenticated",
        OBSERVED = 4 => "Observed",
        INFERENCE = 5 => "Inference",
    }
}

code_list! {
    /// AdCOM List: User-Agent Source (`UserAgent.source`).
    UserAgentSource {
        UNKNOWN = 0 => "Unspecified/unknown",
        CLIENT_HINTS_LOW_ENTROPY = 1 => "User-Agent Client Hints (only low-entropy headers)",
        CLIENT_HINTS_HIGH_ENTROPY = 2 => "User-Agent Client Hints (with high-entropy headers)",
        PARSED = 3 => "Parsed from User-Agent header",
    }
}

code_list! {
    /// Markup type of a bid (`Bid.mtype`, listed inline in OpenRTB 2.6 section 4.2.3).
    MarkupType {
        BANNER = 1 => "Banner",
        VIDEO = 2 => "Video",
        AUDIO = 3 => "Audio",
        NATIVE = 4 => "Native",
    }
}

code_list! {
    /// AdCOM List: Auto Refresh Triggers (`RefSettings.reftype`).
    AutoRefreshTrigger {
        UNKNOWN = 0 => "Unknown",
        USER_ACTION = 1 => "User Action",
        EVENT = 2 => "Event",
        TIME = 3 => "Time",
    }
}

code_list! {
    /// AdCOM List: Multiplier Measurement Source Types (`Qty.sourcetype`).
    MultiplierSourceType {
        UNKNOWN = 0 => "Unknown",
        MEASUREMENT_VENDOR = 1 => "Measurement Vendor Provided",
        PUBLISHER = 2 => "Publisher Provided",
        EXCHANGE = 3 => "Exchange Provided",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newtypes_are_plain_integers_and_accept_unlisted_values() {
        assert_eq!(
            serde_json::to_string(&AuctionType::FIRST_PRICE).unwrap(),
            "1"
        );
        let vendor: AuctionType = serde_json::from_str("501").unwrap();
        assert_eq!(vendor, AuctionType(501));
        assert_eq!(vendor.label(), None);
        assert_eq!(StartDelay(-2), StartDelay::GENERIC_POST_ROLL);
        assert_eq!(DeviceType::CONNECTED_TV.label(), Some("Connected TV"));
        let attrs: Vec<CreativeAttribute> = serde_json::from_str("[13,14,700]").unwrap();
        assert_eq!(attrs[2], CreativeAttribute(700));
    }
}
