//! Request-wide fields: `allimps`, site, app and DOOH content, device and its geo, the user's
//! geo, `source.fd`. `test`, `at`, `dnt`, `lmt`, the supply chain and `regs` are left as they
//! are (module documentation of `repair`).

use crate::BidRequest;
use crate::request::context::Content;
use crate::request::device::{Device, Geo};

use super::super::context::{latitude_in_range, longitude_in_range};
use super::super::path::Path;
use super::Log;

/// The labels of a content object's repairable fields, by the object that holds it.
struct ContentFields {
    livestream: &'static str,
    sourcerelationship: &'static str,
    embeddable: &'static str,
    len: &'static str,
}

macro_rules! content_fields {
    ($prefix:literal) => {
        ContentFields {
            livestream: concat!($prefix, ".livestream"),
            sourcerelationship: concat!($prefix, ".sourcerelationship"),
            embeddable: concat!($prefix, ".embeddable"),
            len: concat!($prefix, ".len"),
        }
    };
}

const SITE_CONTENT: ContentFields = content_fields!("site.content");
const APP_CONTENT: ContentFields = content_fields!("app.content");
const DOOH_CONTENT: ContentFields = content_fields!("dooh.content");

/// The labels of a geo object's repairable fields, by the object that holds it.
struct GeoFields {
    lat: &'static str,
    lon: &'static str,
    accuracy: &'static str,
    lastfix: &'static str,
}

macro_rules! geo_fields {
    ($prefix:literal) => {
        GeoFields {
            lat: concat!($prefix, ".lat"),
            lon: concat!($prefix, ".lon"),
            accuracy: concat!($prefix, ".accuracy"),
            lastfix: concat!($prefix, ".lastfix"),
        }
    };
}

const DEVICE_GEO: GeoFields = geo_fields!("device.geo");
const USER_GEO: GeoFields = geo_fields!("user.geo");

pub(super) fn request(r: &mut BidRequest, log: &mut Log) {
    log.flag(&mut r.allimps, Path::root("allimps"), "allimps");
    if let Some(site) = &mut r.site {
        let at = Path::root("site");
        log.flag(&mut site.mobile, at.key("mobile"), "site.mobile");
        log.flag(
            &mut site.privacypolicy,
            at.key("privacypolicy"),
            "site.privacypolicy",
        );
        content(site.content.as_mut(), at.key("content"), &SITE_CONTENT, log);
    }
    if let Some(app) = &mut r.app {
        let at = Path::root("app");
        log.flag(
            &mut app.privacypolicy,
            at.key("privacypolicy"),
            "app.privacypolicy",
        );
        log.flag(&mut app.paid, at.key("paid"), "app.paid");
        content(app.content.as_mut(), at.key("content"), &APP_CONTENT, log);
    }
    if let Some(dooh) = &mut r.dooh {
        let at = Path::root("dooh");
        content(dooh.content.as_mut(), at.key("content"), &DOOH_CONTENT, log);
    }
    if let Some(d) = &mut r.device {
        device(d, Path::root("device"), log);
    }
    if let Some(g) = r.user.as_mut().and_then(|u| u.geo.as_mut()) {
        let user = Path::root("user");
        geo(g, user.key("geo"), &USER_GEO, log);
    }
    if let Some(source) = &mut r.source {
        let at = Path::root("source");
        log.flag(&mut source.fd, at.key("fd"), "source.fd");
    }
}

fn content(c: Option<&mut Content>, at: Path<'_>, fields: &ContentFields, log: &mut Log) {
    let Some(c) = c else { return };
    log.flag(&mut c.livestream, at.key("livestream"), fields.livestream);
    log.flag(
        &mut c.sourcerelationship,
        at.key("sourcerelationship"),
        fields.sourcerelationship,
    );
    log.flag(&mut c.embeddable, at.key("embeddable"), fields.embeddable);
    log.non_negative(&mut c.len, at.key("len"), fields.len);
}

fn device(d: &mut Device, at: Path<'_>, log: &mut Log) {
    log.non_negative(&mut d.h, at.key("h"), "device.h");
    log.non_negative(&mut d.w, at.key("w"), "device.w");
    log.non_negative(&mut d.ppi, at.key("ppi"), "device.ppi");
    log.non_negative(&mut d.pxratio, at.key("pxratio"), "device.pxratio");
    log.flag(&mut d.js, at.key("js"), "device.js");
    log.flag(&mut d.geofetch, at.key("geofetch"), "device.geofetch");
    if let Some(sua) = &mut d.sua {
        let at = at.key("sua");
        log.flag(&mut sua.mobile, at.key("mobile"), "device.sua.mobile");
    }
    if let Some(g) = &mut d.geo {
        geo(g, at.key("geo"), &DEVICE_GEO, log);
    }
}

/// A coordinate out of range (or not a number) makes the fix worthless: both coordinates go,
/// with the accuracy and age of that fix. The location type and IP service stay: they also say
/// where `country`, `region`, `city`... came from.
fn geo(g: &mut Geo, at: Path<'_>, fields: &GeoFields, log: &mut Log) {
    let bad_fix = g.lat.is_some_and(|lat| !latitude_in_range(lat))
        || g.lon.is_some_and(|lon| !longitude_in_range(lon));
    if bad_fix {
        log.drop(&mut g.lat, at.key("lat"), fields.lat);
        log.drop(&mut g.lon, at.key("lon"), fields.lon);
        log.drop(&mut g.accuracy, at.key("accuracy"), fields.accuracy);
        log.drop(&mut g.lastfix, at.key("lastfix"), fields.lastfix);
    }
    log.non_negative(&mut g.accuracy, at.key("accuracy"), fields.accuracy);
    log.non_negative(&mut g.lastfix, at.key("lastfix"), fields.lastfix);
}
