//! Request-wide fields: auction type and flags, where the ad appears (site, app, DOOH and their
//! content), device and location, user, source and supply chain, regulations (OpenRTB 2.6
//! sections 3.2.1 - 3.2.3, 3.2.13 - 3.2.20, 3.2.25, 3.2.26, 3.2.29, 3.2.32).

use crate::BidRequest;
use crate::request::context::Content;
use crate::request::device::{Device, Geo};

use super::path::{Check, Path, fail, flag, listed_or_vendor, non_negative};

pub(super) fn request(r: &BidRequest) -> Check {
    flag(r.test, Path::root("test"))?;
    // 3.2.1: "1 = First Price, 2 = Second Price Plus. Exchange-specific auction types can be
    // defined using values 500 and greater." (3, the fixed deal price, exists on Deal.at only.)
    listed_or_vendor(
        r.at.map(|a| a.0),
        |v| matches!(v, 1 | 2),
        Path::root("at"),
        "must be 1 (first price), 2 (second price) or an exchange-specific 500 or more",
    )?;
    flag(r.allimps, Path::root("allimps"))?;
    distribution_channel(r)?;
    if let Some(device) = &r.device {
        self::device(device, Path::root("device"))?;
    }
    if let Some(geo) = r.user.as_ref().and_then(|u| u.geo.as_ref()) {
        let user = Path::root("user");
        self::geo(geo, user.key("geo"))?;
    }
    if let Some(source) = &r.source {
        let at = Path::root("source");
        flag(source.fd, at.key("fd"))?;
        if let Some(schain) = &source.schain {
            let at = at.key("schain");
            flag(schain.complete, at.key("complete"))?;
            let nodes = at.key("nodes");
            for (i, node) in schain.nodes.iter().flatten().enumerate() {
                flag(node.hp, nodes.index(i).key("hp"))?;
            }
        }
    }
    if let Some(regs) = &r.regs {
        let at = Path::root("regs");
        flag(regs.coppa, at.key("coppa"))?;
        flag(regs.gdpr, at.key("gdpr"))?;
    }
    Ok(())
}

/// Site, app or DOOH: "A bid request must not contain more than one of a Site, App or DOOH
/// object" (3.2.13, 3.2.14, 3.2.32).
fn distribution_channel(r: &BidRequest) -> Check {
    if r.app.is_some() && r.site.is_some() {
        return Err(fail(
            Path::root("app"),
            "at most one of site, app and dooh may be present",
        ));
    }
    if r.dooh.is_some() && (r.site.is_some() || r.app.is_some()) {
        return Err(fail(
            Path::root("dooh"),
            "at most one of site, app and dooh may be present",
        ));
    }
    if let Some(site) = &r.site {
        let at = Path::root("site");
        flag(site.mobile, at.key("mobile"))?;
        flag(site.privacypolicy, at.key("privacypolicy"))?;
        content(site.content.as_ref(), at.key("content"))?;
    }
    if let Some(app) = &r.app {
        let at = Path::root("app");
        flag(app.privacypolicy, at.key("privacypolicy"))?;
        flag(app.paid, at.key("paid"))?;
        content(app.content.as_ref(), at.key("content"))?;
    }
    if let Some(dooh) = &r.dooh {
        content(dooh.content.as_ref(), Path::root("dooh").key("content"))?;
    }
    Ok(())
}

fn content(content: Option<&Content>, at: Path<'_>) -> Check {
    let Some(c) = content else { return Ok(()) };
    flag(c.livestream, at.key("livestream"))?;
    flag(c.sourcerelationship, at.key("sourcerelationship"))?;
    flag(c.embeddable, at.key("embeddable"))?;
    non_negative(c.len, at.key("len"))
}

fn device(d: &Device, at: Path<'_>) -> Check {
    flag(d.dnt, at.key("dnt"))?;
    flag(d.lmt, at.key("lmt"))?;
    non_negative(d.h, at.key("h"))?;
    non_negative(d.w, at.key("w"))?;
    non_negative(d.ppi, at.key("ppi"))?;
    non_negative(d.pxratio, at.key("pxratio"))?;
    flag(d.js, at.key("js"))?;
    flag(d.geofetch, at.key("geofetch"))?;
    if let Some(sua) = &d.sua {
        flag(sua.mobile, at.key("sua").key("mobile"))?;
    }
    if let Some(geo) = &d.geo {
        self::geo(geo, at.key("geo"))?;
    }
    Ok(())
}

/// 3.2.19: "Latitude from -90.0 to +90.0" (false for NaN too).
pub(super) fn latitude_in_range(lat: f64) -> bool {
    (-90.0..=90.0).contains(&lat)
}

/// 3.2.19: "Longitude from -180.0 to +180.0" (false for NaN too).
pub(super) fn longitude_in_range(lon: f64) -> bool {
    (-180.0..=180.0).contains(&lon)
}

fn geo(g: &Geo, at: Path<'_>) -> Check {
    if g.lat.is_some_and(|lat| !latitude_in_range(lat)) {
        return Err(fail(at.key("lat"), "must be between -90 and 90"));
    }
    if g.lon.is_some_and(|lon| !longitude_in_range(lon)) {
        return Err(fail(at.key("lon"), "must be between -180 and 180"));
    }
    non_negative(g.accuracy, at.key("accuracy"))?;
    non_negative(g.lastfix, at.key("lastfix"))
}
