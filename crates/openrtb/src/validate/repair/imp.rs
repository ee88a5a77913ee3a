//! One imp: its flags, the banner, video and audio objects (and their companion banners), the
//! refresh settings, and its native request string (`native.rs`). Floors, deals, `qty` and
//! `secure` are left as they are (module documentation of `repair`).

use crate::request::imp::{Imp, Refresh};
use crate::request::media::{Audio, Banner, Video};

use super::super::media;
use super::super::path::{self, Path};
use super::{Log, native};

/// The labels of a banner's repairable fields, which depend on where the banner sits.
struct BannerFields {
    w: &'static str,
    h: &'static str,
    format: &'static str,
    topframe: &'static str,
    vcm: &'static str,
}

macro_rules! banner_fields {
    ($prefix:literal) => {
        BannerFields {
            w: concat!($prefix, ".w"),
            h: concat!($prefix, ".h"),
            format: concat!($prefix, ".format"),
            topframe: concat!($prefix, ".topframe"),
            vcm: concat!($prefix, ".vcm"),
        }
    };
}

const IMP_BANNER: BannerFields = banner_fields!("imp.banner");
const VIDEO_COMPANION: BannerFields = banner_fields!("imp.video.companionad");
const AUDIO_COMPANION: BannerFields = banner_fields!("imp.audio.companionad");

pub(super) fn imp(imp: &mut Imp, at: Path<'_>, log: &mut Log) {
    log.flag(&mut imp.instl, at.key("instl"), "imp.instl");
    log.flag(
        &mut imp.clickbrowser,
        at.key("clickbrowser"),
        "imp.clickbrowser",
    );
    log.flag(&mut imp.rwdd, at.key("rwdd"), "imp.rwdd");
    log.drop_refused(&mut imp.ssai, at.key("ssai"), "imp.ssai", media::ssai);
    log.non_negative(&mut imp.exp, at.key("exp"), "imp.exp");
    if let Some(b) = &mut imp.banner {
        banner(b, at.key("banner"), &IMP_BANNER, log);
    }
    if let Some(v) = &mut imp.video {
        video(v, at.key("video"), log);
    }
    if let Some(a) = &mut imp.audio {
        audio(a, at.key("audio"), log);
    }
    if let Some(n) = &mut imp.native {
        let at = at.key("native");
        native::request(&mut n.request, at.key("request"), log);
    }
    if let Some(r) = &mut imp.refresh {
        refresh(r, at.key("refresh"), log);
    }
}

fn banner(b: &mut Banner, at: Path<'_>, fields: &BannerFields, log: &mut Log) {
    log.non_negative(&mut b.w, at.key("w"), fields.w);
    log.non_negative(&mut b.h, at.key("h"), fields.h);
    if let Some(formats) = &mut b.format {
        log.retain_valid(formats, at.key("format"), fields.format, |f, at| {
            media::format(f, at).is_ok()
        });
    }
    log.flag(&mut b.topframe, at.key("topframe"), fields.topframe);
    log.flag(&mut b.vcm, at.key("vcm"), fields.vcm);
}

fn companions(
    banners: Option<&mut Vec<Banner>>,
    at: Path<'_>,
    fields: &BannerFields,
    log: &mut Log,
) {
    for (i, b) in banners.into_iter().flatten().enumerate() {
        banner(b, at.index(i), fields, log);
    }
}

fn durations(list: Option<&mut Vec<i32>>, at: Path<'_>, field: &'static str, log: &mut Log) {
    if let Some(list) = list {
        log.retain_valid(list, at, field, |&d, at| {
            path::non_negative(Some(d), at).is_ok()
        });
    }
}

fn video(v: &mut Video, at: Path<'_>, log: &mut Log) {
    log.non_negative(
        &mut v.minduration,
        at.key("minduration"),
        "imp.video.minduration",
    );
    log.non_negative(
        &mut v.maxduration,
        at.key("maxduration"),
        "imp.video.maxduration",
    );
    log.drop_refused(
        &mut v.startdelay,
        at.key("startdelay"),
        "imp.video.startdelay",
        |s, at| media::start_delay(s.map(|s| s.0), at),
    );
    log.non_negative(&mut v.maxseq, at.key("maxseq"), "imp.video.maxseq");
    log.non_negative(&mut v.poddur, at.key("poddur"), "imp.video.poddur");
    log.non_negative(&mut v.w, at.key("w"), "imp.video.w");
    log.non_negative(&mut v.h, at.key("h"), "imp.video.h");
    durations(
        v.rqddurs.as_mut(),
        at.key("rqddurs"),
        "imp.video.rqddurs",
        log,
    );
    log.flag(&mut v.skip, at.key("skip"), "imp.video.skip");
    log.non_negative(&mut v.skipmin, at.key("skipmin"), "imp.video.skipmin");
    log.non_negative(&mut v.skipafter, at.key("skipafter"), "imp.video.skipafter");
    log.non_negative(&mut v.sequence, at.key("sequence"), "imp.video.sequence");
    log.drop_refused(
        &mut v.maxextended,
        at.key("maxextended"),
        "imp.video.maxextended",
        media::max_extended,
    );
    log.non_negative(
        &mut v.minbitrate,
        at.key("minbitrate"),
        "imp.video.minbitrate",
    );
    log.non_negative(
        &mut v.maxbitrate,
        at.key("maxbitrate"),
        "imp.video.maxbitrate",
    );
    log.flag(
        &mut v.boxingallowed,
        at.key("boxingallowed"),
        "imp.video.boxingallowed",
    );
    companions(
        v.companionad.as_mut(),
        at.key("companionad"),
        &VIDEO_COMPANION,
        log,
    );
}

fn audio(a: &mut Audio, at: Path<'_>, log: &mut Log) {
    log.non_negative(
        &mut a.minduration,
        at.key("minduration"),
        "imp.audio.minduration",
    );
    log.non_negative(
        &mut a.maxduration,
        at.key("maxduration"),
        "imp.audio.maxduration",
    );
    log.non_negative(&mut a.poddur, at.key("poddur"), "imp.audio.poddur");
    log.drop_refused(
        &mut a.startdelay,
        at.key("startdelay"),
        "imp.audio.startdelay",
        |s, at| media::start_delay(s.map(|s| s.0), at),
    );
    durations(
        a.rqddurs.as_mut(),
        at.key("rqddurs"),
        "imp.audio.rqddurs",
        log,
    );
    log.non_negative(&mut a.sequence, at.key("sequence"), "imp.audio.sequence");
    log.drop_refused(
        &mut a.maxextended,
        at.key("maxextended"),
        "imp.audio.maxextended",
        media::max_extended,
    );
    log.non_negative(
        &mut a.minbitrate,
        at.key("minbitrate"),
        "imp.audio.minbitrate",
    );
    log.non_negative(
        &mut a.maxbitrate,
        at.key("maxbitrate"),
        "imp.audio.maxbitrate",
    );
    log.non_negative(&mut a.maxseq, at.key("maxseq"), "imp.audio.maxseq");
    log.flag(&mut a.stitched, at.key("stitched"), "imp.audio.stitched");
    companions(
        a.companionad.as_mut(),
        at.key("companionad"),
        &AUDIO_COMPANION,
        log,
    );
}

fn refresh(r: &mut Refresh, at: Path<'_>, log: &mut Log) {
    log.non_negative(&mut r.count, at.key("count"), "imp.refresh.count");
    let settings = at.key("refsettings");
    for (i, s) in r.refsettings.iter_mut().flatten().enumerate() {
        let at = settings.index(i);
        log.non_negative(
            &mut s.minint,
            at.key("minint"),
            "imp.refresh.refsettings.minint",
        );
    }
}
