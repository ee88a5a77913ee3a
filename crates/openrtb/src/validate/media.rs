//! One imp beyond its id and floors: what may be bought (banner, video, audio, native) and how
//! it is described, its private marketplace flags, `qty` and `refresh` (OpenRTB 2.6 sections
//! 3.2.4 - 3.2.12, 3.2.31, 3.2.33 - 3.2.35).

use crate::price::Price;
use crate::request::imp::{Deal, Imp, Pmp};
use crate::request::media::{Audio, Banner, DurFloors, Format, Video};

use super::native;
use super::path::{Check, Path, all_non_negative, fail, flag, non_negative, required};

pub(super) fn imp(imp: &Imp, at: Path<'_>) -> Check {
    // 3.2.4: "The presence of Banner, Video, and/or Native objects subordinate to the Imp
    // object indicates the type of impression being offered"; without one there is nothing to
    // bid on.
    if imp.banner.is_none() && imp.video.is_none() && imp.audio.is_none() && imp.native.is_none() {
        return Err(fail(at, "needs a banner, video, audio or native object"));
    }
    flag(imp.instl, at.key("instl"))?;
    flag(imp.clickbrowser, at.key("clickbrowser"))?;
    flag(imp.secure, at.key("secure"))?;
    flag(imp.rwdd, at.key("rwdd"))?;
    ssai(imp.ssai, at.key("ssai"))?;
    non_negative(imp.exp, at.key("exp"))?;
    if let Some(banner) = &imp.banner {
        self::banner(banner, at.key("banner"))?;
    }
    if let Some(v) = &imp.video {
        video(v, at.key("video"))?;
    }
    if let Some(a) = &imp.audio {
        audio(a, at.key("audio"))?;
    }
    if let Some(n) = &imp.native {
        let at = at.key("native");
        let request = n.request.as_deref();
        native::request(required(request, at.key("request"))?, at.key("request"))?;
    }
    if let Some(pmp) = &imp.pmp {
        self::pmp(pmp, at.key("pmp"))?;
    }
    if let Some(qty) = &imp.qty {
        non_negative(qty.multiplier, at.key("qty").key("multiplier"))?;
    }
    if let Some(refresh) = &imp.refresh {
        let at = at.key("refresh");
        non_negative(refresh.count, at.key("count"))?;
        let settings = at.key("refsettings");
        for (i, s) in refresh.refsettings.iter().flatten().enumerate() {
            non_negative(s.minint, settings.index(i).key("minint"))?;
        }
    }
    Ok(())
}

/// Server-side ad insertion: a closed list, 0 to 3.
pub(super) fn ssai(value: Option<i32>, at: Path<'_>) -> Check {
    match value {
        None | Some(0..=3) => Ok(()),
        Some(_) => Err(fail(at, "must be 0, 1, 2 or 3")),
    }
}

/// Also a companion ad of a video or audio impression.
fn banner(banner: &Banner, at: Path<'_>) -> Check {
    non_negative(banner.w, at.key("w"))?;
    non_negative(banner.h, at.key("h"))?;
    let formats = at.key("format");
    for (i, f) in banner.format.iter().flatten().enumerate() {
        format(f, formats.index(i))?;
    }
    flag(banner.topframe, at.key("topframe"))?;
    flag(banner.vcm, at.key("vcm"))
}

pub(super) fn format(format: &Format, at: Path<'_>) -> Check {
    non_negative(format.w, at.key("w"))?;
    non_negative(format.h, at.key("h"))?;
    non_negative(format.wratio, at.key("wratio"))?;
    non_negative(format.hratio, at.key("hratio"))?;
    non_negative(format.wmin, at.key("wmin"))
}

/// 3.2.7 and 3.2.8: "string array; required".
fn mimes(mimes: Option<&[String]>, at: Path<'_>) -> Check {
    match mimes {
        Some([_, ..]) => Ok(()),
        _ => Err(fail(at, "required, with at least one MIME type")),
    }
}

/// AdCOM List: Start Delay Modes: a delay in seconds, or -1 (generic mid-roll), -2 (generic
/// post-roll).
pub(super) fn start_delay(value: Option<i32>, at: Path<'_>) -> Check {
    match value {
        Some(v) if v < -2 => Err(fail(
            at,
            "must be 0 or more seconds, -1 (mid-roll) or -2 (post-roll)",
        )),
        _ => Ok(()),
    }
}

/// 3.2.7/3.2.8: "If -1, extension is allowed, and there is no time limit imposed."
pub(super) fn max_extended(value: Option<i32>, at: Path<'_>) -> Check {
    match value {
        Some(v) if v < -1 => Err(fail(at, "must be -1 (no limit) or 0 or more seconds")),
        _ => Ok(()),
    }
}

fn price(value: Option<Price>, at: Path<'_>) -> Check {
    non_negative(value.map(Price::micros), at)
}

fn video(video: &Video, at: Path<'_>) -> Check {
    mimes(video.mimes.as_deref(), at.key("mimes"))?;
    non_negative(video.minduration, at.key("minduration"))?;
    non_negative(video.maxduration, at.key("maxduration"))?;
    start_delay(video.startdelay.map(|s| s.0), at.key("startdelay"))?;
    non_negative(video.maxseq, at.key("maxseq"))?;
    non_negative(video.poddur, at.key("poddur"))?;
    non_negative(video.w, at.key("w"))?;
    non_negative(video.h, at.key("h"))?;
    all_non_negative(video.rqddurs.as_deref(), at.key("rqddurs"))?;
    flag(video.skip, at.key("skip"))?;
    non_negative(video.skipmin, at.key("skipmin"))?;
    non_negative(video.skipafter, at.key("skipafter"))?;
    non_negative(video.sequence, at.key("sequence"))?;
    price(video.mincpmpersec, at.key("mincpmpersec"))?;
    max_extended(video.maxextended, at.key("maxextended"))?;
    non_negative(video.minbitrate, at.key("minbitrate"))?;
    non_negative(video.maxbitrate, at.key("maxbitrate"))?;
    flag(video.boxingallowed, at.key("boxingallowed"))?;
    companions(video.companionad.as_deref(), at.key("companionad"))?;
    durfloors(video.durfloors.as_deref(), at.key("durfloors"))
}

fn audio(audio: &Audio, at: Path<'_>) -> Check {
    mimes(audio.mimes.as_deref(), at.key("mimes"))?;
    non_negative(audio.minduration, at.key("minduration"))?;
    non_negative(audio.maxduration, at.key("maxduration"))?;
    non_negative(audio.poddur, at.key("poddur"))?;
    start_delay(audio.startdelay.map(|s| s.0), at.key("startdelay"))?;
    all_non_negative(audio.rqddurs.as_deref(), at.key("rqddurs"))?;
    non_negative(audio.sequence, at.key("sequence"))?;
    price(audio.mincpmpersec, at.key("mincpmpersec"))?;
    max_extended(audio.maxextended, at.key("maxextended"))?;
    non_negative(audio.minbitrate, at.key("minbitrate"))?;
    non_negative(audio.maxbitrate, at.key("maxbitrate"))?;
    non_negative(audio.maxseq, at.key("maxseq"))?;
    flag(audio.stitched, at.key("stitched"))?;
    companions(audio.companionad.as_deref(), at.key("companionad"))?;
    durfloors(audio.durfloors.as_deref(), at.key("durfloors"))
}

fn companions(banners: Option<&[Banner]>, at: Path<'_>) -> Check {
    for (i, b) in banners.unwrap_or_default().iter().enumerate() {
        banner(b, at.index(i))?;
    }
    Ok(())
}

fn durfloors(floors: Option<&[DurFloors]>, at: Path<'_>) -> Check {
    for (i, f) in floors.unwrap_or_default().iter().enumerate() {
        let at = at.index(i);
        non_negative(f.mindur, at.key("mindur"))?;
        non_negative(f.maxdur, at.key("maxdur"))?;
        price(f.bidfloor, at.key("bidfloor"))?;
    }
    Ok(())
}

/// Deal ids and floors are checked in `mod.rs`; these are the remaining fields.
fn pmp(pmp: &Pmp, at: Path<'_>) -> Check {
    flag(pmp.private_auction, at.key("private_auction"))?;
    let deals = at.key("deals");
    for (i, d) in pmp.deals.iter().flatten().enumerate() {
        deal(d, deals.index(i))?;
    }
    Ok(())
}

fn deal(deal: &Deal, at: Path<'_>) -> Check {
    flag(deal.guar, at.key("guar"))?;
    price(deal.mincpmpersec, at.key("mincpmpersec"))?;
    durfloors(deal.durfloors.as_deref(), at.key("durfloors"))
}
