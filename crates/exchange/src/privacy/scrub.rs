//! Applies a bidder's [`Actions`] to its copy of the request: fields removed, coordinates
//! rounded, addresses masked. Nothing else changes.

// `core::net`: addresses as values; nothing here opens a socket.
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use openrtb::{BidRequest, Geo};

use super::Actions;

/// Decimal places a coarsened coordinate keeps: 0.01 degree is about 1.1 km of latitude.
const COARSE_DECIMALS: i32 = 2;
/// Bits of an address a masked one keeps: a /24 (IPv4) and a /56 (IPv6), the usual
/// anonymisation (Prebid Server's defaults too).
const IPV4_KEEP_BITS: u32 = 24;
const IPV6_KEEP_BITS: u32 = 56;

/// Applies `actions` to `request` (a bidder's own copy). A bidder not to be called is not
/// scrubbed here: it gets no copy.
pub fn scrub(request: &mut BidRequest, actions: Actions) {
    if let Some(user) = request.user.as_mut() {
        if actions.ids_removed {
            user.id = None;
            user.buyeruid = None;
        }
        if actions.eids_removed {
            user.eids = None;
        }
        if actions.demographics_removed {
            user.yob = None;
            user.gender = None;
            user.keywords = None;
            user.kwarray = None;
            user.customdata = None;
            user.data = None;
        }
        if actions.geo_coarsened {
            coarsen(user.geo.as_mut());
        }
    }
    if let Some(device) = request.device.as_mut() {
        if actions.ids_removed {
            device.ifa = None;
            device.didsha1 = None;
            device.didmd5 = None;
            device.dpidsha1 = None;
            device.dpidmd5 = None;
            device.macsha1 = None;
            device.macmd5 = None;
        }
        if actions.geo_coarsened {
            coarsen(device.geo.as_mut());
        }
        if actions.ip_masked {
            device.ip = device.ip.as_deref().and_then(|ip| mask(ip, IPV4_KEEP_BITS));
            device.ipv6 = device
                .ipv6
                .as_deref()
                .and_then(|ip| mask(ip, IPV6_KEEP_BITS));
        }
    }
}

/// Rounds a location's coordinates and drops what only describes their precision.
fn coarsen(geo: Option<&mut Geo>) {
    let Some(geo) = geo else { return };
    let scale = 10f64.powi(COARSE_DECIMALS);
    let round = |v: f64| (v * scale).round() / scale;
    geo.lat = geo.lat.map(round);
    geo.lon = geo.lon.map(round);
    geo.accuracy = None;
}

/// An address as records keep it: its network, as a masked address is (/24, /56); `None` when
/// it does not parse.
pub fn network_of(ip: &str) -> Option<String> {
    let keep = if ip.contains(':') {
        IPV6_KEEP_BITS
    } else {
        IPV4_KEEP_BITS
    };
    mask(ip, keep)
}

/// The address with all but its first `keep` bits zeroed (IPv4 keeps at most `keep` of 32,
/// IPv6 of 128); an unreadable address is removed rather than passed on.
fn mask(ip: &str, keep: u32) -> Option<String> {
    match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => {
            let keep = keep.min(32);
            let bits = u32::from(v4) & u32::MAX.checked_shl(32 - keep).unwrap_or(0);
            Some(Ipv4Addr::from(bits).to_string())
        }
        IpAddr::V6(v6) => {
            let keep = keep.min(128);
            let bits = u128::from(v6) & u128::MAX.checked_shl(128 - keep).unwrap_or(0);
            Some(Ipv6Addr::from(bits).to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> BidRequest {
        BidRequest::from_slice(
            br#"{"id":"r","imp":[{"id":"1","banner":{"w":300,"h":250}}],
            "user":{"id":"u1","buyeruid":"b1","yob":1980,"gender":"F","keywords":"k","kwarray":["k"],
                "customdata":"c","data":[{"id":"d"}],"consent":"CP","eids":[{"source":"s.com","uids":[{"id":"e"}]}],
                "geo":{"lat":48.85661,"lon":2.35222,"country":"FRA"},"ext":{"x":1}},
            "device":{"ua":"UA","ip":"192.0.2.123","ipv6":"2001:db8:1234:5678:9abc::1","ifa":"IFA",
                "didsha1":"a","didmd5":"b","dpidsha1":"c","dpidmd5":"d","macsha1":"e","macmd5":"f",
                "geo":{"lat":-33.868820,"lon":151.209296,"accuracy":5,"city":"Sydney"}}}"#,
        )
        .unwrap()
    }

    fn encoded(actions: Actions) -> String {
        let mut r = request();
        scrub(&mut r, actions);
        String::from_utf8(r.to_vec().unwrap()).unwrap()
    }

    #[test]
    fn no_action_changes_nothing() {
        assert_eq!(
            encoded(Actions::NONE),
            String::from_utf8(request().to_vec().unwrap()).unwrap()
        );
    }

    /// Each action touches exactly its fields: the encoded request, field by field.
    #[test]
    fn each_action_removes_exactly_its_fields() {
        let only = |f: fn(&mut Actions)| {
            let mut a = Actions::NONE;
            f(&mut a);
            encoded(a)
        };
        let ids = only(|a| a.ids_removed = true);
        for gone in [
            r#""id":"u1""#,
            "buyeruid",
            "IFA",
            "didsha1",
            "didmd5",
            "dpidsha1",
            "dpidmd5",
            "macsha1",
            "macmd5",
        ] {
            assert!(!ids.contains(gone), "{gone} left in {ids}");
        }
        for kept in ["eids", "yob", "48.85661", "192.0.2.123", "consent"] {
            assert!(ids.contains(kept), "{kept} lost from {ids}");
        }

        let eids = only(|a| a.eids_removed = true);
        assert!(!eids.contains("eids") && eids.contains("buyeruid"));

        let demo = only(|a| a.demographics_removed = true);
        for gone in [
            "yob",
            "gender",
            "keywords",
            "kwarray",
            "customdata",
            r#""data""#,
        ] {
            assert!(!demo.contains(gone), "{gone} left in {demo}");
        }
        assert!(demo.contains("buyeruid") && demo.contains("eids"));

        let geo = only(|a| a.geo_coarsened = true);
        assert!(geo.contains(r#""lat":48.86,"lon":2.35"#), "{geo}");
        assert!(geo.contains(r#""lat":-33.87,"lon":151.21"#), "{geo}");
        assert!(!geo.contains("accuracy") && geo.contains("Sydney") && geo.contains("FRA"));
        assert!(geo.contains("192.0.2.123"), "geo alone leaves the address");

        let ip = only(|a| a.ip_masked = true);
        assert!(ip.contains(r#""ip":"192.0.2.0""#), "{ip}");
        assert!(ip.contains(r#""ipv6":"2001:db8:1234:5600::""#), "{ip}");
        assert!(ip.contains("48.85661"), "masking leaves the coordinates");
    }

    #[test]
    fn an_unreadable_address_is_removed_not_passed_on() {
        let mut r = request();
        r.device.as_mut().unwrap().ip = Some("not-an-ip".into());
        scrub(
            &mut r,
            Actions {
                ip_masked: true,
                ..Actions::NONE
            },
        );
        assert_eq!(r.device.unwrap().ip, None);
    }

    #[test]
    fn masks_keep_the_network() {
        assert_eq!(mask("10.1.2.3", 24).as_deref(), Some("10.1.2.0"));
        assert_eq!(
            mask("255.255.255.255", 24).as_deref(),
            Some("255.255.255.0")
        );
        assert_eq!(
            mask("2001:db8:ffff:ffff:ffff::1", 56).as_deref(),
            Some("2001:db8:ffff:ff00::")
        );
        assert_eq!(mask("", 24), None);
    }
}
