//! The user's device: hardware, network, location and structured user agent (3.2.18, 3.2.19,
//! 3.2.29, 3.2.30).

use crate::enums::{ConnectionType, DeviceType, IpLocationService, LocationType, UserAgentSource};
use crate::object::openrtb_object;

openrtb_object! {
    /// The device showing the ad (3.2.18).
    pub struct Device {
        required {}
        optional {
            /// Current location of the device.
            geo: Geo = "geo",
            /// Do Not Track: 1 = do not track.
            dnt: i32 = "dnt",
            /// Limit Ad Tracking: 1 = limited.
            lmt: i32 = "lmt",
            ua: String = "ua",
            /// Structured user agent; preferred over `ua` when both are present.
            sua: UserAgent = "sua",
            ip: String = "ip",
            ipv6: String = "ipv6",
            devicetype: DeviceType = "devicetype",
            make: String = "make",
            model: String = "model",
            os: String = "os",
            osv: String = "osv",
            hwv: String = "hwv",
            h: i32 = "h",
            w: i32 = "w",
            ppi: i32 = "ppi",
            pxratio: f64 = "pxratio",
            js: i32 = "js",
            geofetch: i32 = "geofetch",
            flashver: String = "flashver",
            language: String = "language",
            langb: String = "langb",
            carrier: String = "carrier",
            mccmnc: String = "mccmnc",
            connectiontype: ConnectionType = "connectiontype",
            /// Advertising ID in the clear.
            ifa: String = "ifa",
            /// Deprecated hashed IDs.
            didsha1: String = "didsha1",
            didmd5: String = "didmd5",
            dpidsha1: String = "dpidsha1",
            dpidmd5: String = "dpidmd5",
            macsha1: String = "macsha1",
            macmd5: String = "macmd5",
        }
    }
}

openrtb_object! {
    /// A location: the device's current one under `Device`, the user's home under `User`
    /// (3.2.19).
    pub struct Geo {
        required {}
        optional {
            lat: f64 = "lat",
            lon: f64 = "lon",
            /// How the location was obtained.
            r#type: LocationType = "type",
            /// Accuracy in metres.
            accuracy: i32 = "accuracy",
            /// Seconds since the fix.
            lastfix: i32 = "lastfix",
            ipservice: IpLocationService = "ipservice",
            /// ISO-3166-1 alpha-3.
            country: String = "country",
            region: String = "region",
            regionfips104: String = "regionfips104",
            metro: String = "metro",
            city: String = "city",
            zip: String = "zip",
            /// Minutes from UTC.
            utcoffset: i32 = "utcoffset",
        }
    }
}

openrtb_object! {
    /// Structured user agent from User-Agent Client Hints (3.2.29).
    pub struct UserAgent {
        required {}
        optional {
            browsers: Vec<BrandVersion> = "browsers",
            platform: BrandVersion = "platform",
            /// 1 = prefers mobile content.
            mobile: i32 = "mobile",
            architecture: String = "architecture",
            bitness: String = "bitness",
            model: String = "model",
            source: UserAgentSource = "source",
        }
    }
}

openrtb_object! {
    /// A browser or platform brand and its version components (3.2.30).
    pub struct BrandVersion {
        required {}
        optional {
            brand: String = "brand",
            version: Vec<String> = "version",
        }
    }
}
