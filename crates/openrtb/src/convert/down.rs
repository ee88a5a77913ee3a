//! OpenRTB 2.6 -> 2.5: move the fields that have a 2.5 `ext` home there, drop the fields 2.5
//! does not know.
//!
//! Homes (those Prebid Server's `ConvertDownTo25` uses, so a bidder gets what it gets from
//! Prebid): `source.schain` -> `source.ext.schain`, `regs.gdpr` -> `regs.ext.gdpr`,
//! `regs.us_privacy` -> `regs.ext.us_privacy`, `user.consent` -> `user.ext.consent`,
//! `user.eids` -> `user.ext.eids`, `imp.rwdd` -> `imp.ext.prebid.is_rewarded_inventory`. A
//! value already in the home is overwritten by the 2.6 one. Moved objects go verbatim (an EID's
//! 2.6-202409 `inserter`/`matcher`/`mm` included: inside `ext` 2.5 sets no schema, and Prebid
//! moves them as they are).
//!
//! Dropped: every other field the 2.6 text (up to 2.6-202409 and the later `content.gtax`,
//! `genres`, `realtime`, `firstbroadcast`, `data.cids`) added over 2.5; the tables below are
//! the list. `regs.gpp`/`gpp_sid` and `site`/`app.inventorypartnerdomain` have been carried in
//! `ext` by some before 2.6, but Prebid drops them for 2.5 bidders (its `Clear202211Fields`)
//! and so do we. A DOOH request loses its `dooh` object and reaches a 2.5 bidder with neither
//! `site` nor `app`: [`Converted::dropped`] says so, and whether to send it at all is the
//! caller's decision. Fields the object model does not know (`unknown`) pass through, except
//! the 2.6 ones named above.

use super::Converted;
use super::error::{ConvertError, JsonPath};
use super::ext::{encode, with_fields};
use super::fields::{Field, FieldSet};
use crate::raw::RawJson;
use crate::request::context::{App, Content, Publisher, Site};
use crate::request::imp::{Deal, Imp};
use crate::request::media::{Audio, Video};
use crate::request::user::{Data, User};
use crate::request::{BidRequest, Regs, Source};
use crate::{Device, Producer};

/// Removes one 2.6-only field from an object; true if it was there.
type Dropper<T> = fn(&mut T) -> bool;

const REQUEST: &[(Field, Dropper<BidRequest>)] = &[
    (Field::Dooh, |r| r.dooh.take().is_some()),
    (Field::Wlangb, |r| r.wlangb.take().is_some()),
    (Field::Acat, |r| r.acat.take().is_some()),
    (Field::Cattax, |r| r.cattax.take().is_some()),
];

const REGS: &[(Field, Dropper<Regs>)] = &[
    (Field::RegsGpp, |r| r.gpp.take().is_some()),
    (Field::RegsGppSid, |r| r.gpp_sid.take().is_some()),
];

const IMP: &[(Field, Dropper<Imp>)] = &[
    (Field::ImpSsai, |i| i.ssai.take().is_some()),
    (Field::ImpQty, |i| i.qty.take().is_some()),
    (Field::ImpDt, |i| i.dt.take().is_some()),
    (Field::ImpRefresh, |i| i.refresh.take().is_some()),
];

const VIDEO: &[(Field, Dropper<Video>)] = &[
    (Field::VideoMaxseq, |v| v.maxseq.take().is_some()),
    (Field::VideoPoddur, |v| v.poddur.take().is_some()),
    (Field::VideoPodid, |v| v.podid.take().is_some()),
    (Field::VideoPodseq, |v| v.podseq.take().is_some()),
    (Field::VideoRqddurs, |v| v.rqddurs.take().is_some()),
    (Field::VideoPlcmt, |v| v.plcmt.take().is_some()),
    (Field::VideoSlotinpod, |v| v.slotinpod.take().is_some()),
    (Field::VideoMincpmpersec, |v| {
        v.mincpmpersec.take().is_some()
    }),
    (Field::VideoPoddedupe, |v| v.poddedupe.take().is_some()),
    (Field::VideoDurfloors, |v| v.durfloors.take().is_some()),
];

// `audio.maxseq` is 2.5 already, unlike `video.maxseq`.
const AUDIO: &[(Field, Dropper<Audio>)] = &[
    (Field::AudioPoddur, |a| a.poddur.take().is_some()),
    (Field::AudioPodid, |a| a.podid.take().is_some()),
    (Field::AudioPodseq, |a| a.podseq.take().is_some()),
    (Field::AudioRqddurs, |a| a.rqddurs.take().is_some()),
    (Field::AudioSlotinpod, |a| a.slotinpod.take().is_some()),
    (Field::AudioMincpmpersec, |a| {
        a.mincpmpersec.take().is_some()
    }),
    (Field::AudioDurfloors, |a| a.durfloors.take().is_some()),
];

const DEAL: &[(Field, Dropper<Deal>)] = &[
    (Field::DealGuar, |d| d.guar.take().is_some()),
    (Field::DealMincpmpersec, |d| d.mincpmpersec.take().is_some()),
    (Field::DealDurfloors, |d| d.durfloors.take().is_some()),
];

const SITE: &[(Field, Dropper<Site>)] = &[
    (Field::SiteCattax, |s| s.cattax.take().is_some()),
    (Field::SiteKwarray, |s| s.kwarray.take().is_some()),
    (Field::SiteInventorypartnerdomain, |s| {
        s.inventorypartnerdomain.take().is_some()
    }),
];

const APP: &[(Field, Dropper<App>)] = &[
    (Field::AppCattax, |a| a.cattax.take().is_some()),
    (Field::AppKwarray, |a| a.kwarray.take().is_some()),
    (Field::AppInventorypartnerdomain, |a| {
        a.inventorypartnerdomain.take().is_some()
    }),
];

const PUBLISHER: &[(Field, Dropper<Publisher>)] =
    &[(Field::PublisherCattax, |p| p.cattax.take().is_some())];

const PRODUCER: &[(Field, Dropper<Producer>)] =
    &[(Field::ProducerCattax, |p| p.cattax.take().is_some())];

const CONTENT: &[(Field, Dropper<Content>)] = &[
    (Field::ContentCattax, |c| c.cattax.take().is_some()),
    (Field::ContentKwarray, |c| c.kwarray.take().is_some()),
    (Field::ContentLangb, |c| c.langb.take().is_some()),
    (Field::ContentNetwork, |c| c.network.take().is_some()),
    (Field::ContentChannel, |c| c.channel.take().is_some()),
    (Field::ContentGtax, |c| c.unknown.remove("gtax").is_some()),
    (Field::ContentGenres, |c| {
        c.unknown.remove("genres").is_some()
    }),
    (Field::ContentRealtime, |c| {
        c.unknown.remove("realtime").is_some()
    }),
    (Field::ContentFirstbroadcast, |c| {
        c.unknown.remove("firstbroadcast").is_some()
    }),
];

const DEVICE: &[(Field, Dropper<Device>)] = &[
    (Field::DeviceSua, |d| d.sua.take().is_some()),
    (Field::DeviceLangb, |d| d.langb.take().is_some()),
];

const USER: &[(Field, Dropper<User>)] = &[(Field::UserKwarray, |u| u.kwarray.take().is_some())];

const DATA: &[(Field, Dropper<Data>)] =
    &[(Field::DataCids, |d| d.unknown.remove("cids").is_some())];

/// Applies every dropper of `table` to `object`, noting what was there in `dropped`.
fn drop_fields<T>(object: &mut T, table: &[(Field, Dropper<T>)], dropped: &mut FieldSet) {
    for (field, dropper) in table {
        if dropper(object) {
            dropped.insert(*field);
        }
    }
}

/// See the module documentation and [`super::down_to_2_5`].
pub(super) fn down_to_2_5(request: &mut BidRequest) -> Result<Converted, ConvertError> {
    let mut done = Converted::default();
    drop_fields(request, REQUEST, &mut done.dropped);
    if let Some(source) = &mut request.source {
        move_source(source, &mut done)?;
    }
    if let Some(regs) = &mut request.regs {
        move_regs(regs, &mut done)?;
        drop_fields(regs, REGS, &mut done.dropped);
    }
    if let Some(user) = &mut request.user {
        move_user(user, &mut done)?;
        drop_fields(user, USER, &mut done.dropped);
        drop_data(user.data.as_mut(), &mut done.dropped);
    }
    for (index, imp) in request.imp.iter_mut().enumerate() {
        move_imp(index, imp, &mut done)?;
        drop_imp(imp, &mut done.dropped);
    }
    if let Some(site) = &mut request.site {
        drop_fields(site, SITE, &mut done.dropped);
        drop_publisher_content(site.publisher.as_mut(), site.content.as_mut(), &mut done);
    }
    if let Some(app) = &mut request.app {
        drop_fields(app, APP, &mut done.dropped);
        drop_publisher_content(app.publisher.as_mut(), app.content.as_mut(), &mut done);
    }
    if let Some(device) = &mut request.device {
        drop_fields(device, DEVICE, &mut done.dropped);
    }
    Ok(done)
}

fn move_source(source: &mut Source, done: &mut Converted) -> Result<(), ConvertError> {
    let Some(schain) = &source.schain else {
        return Ok(());
    };
    let path = JsonPath::top("source.ext");
    let value = encode(schain, path)?;
    source.ext = Some(with_fields(
        source.ext.as_ref(),
        &[("schain", &value)],
        path,
    )?);
    source.schain = None;
    done.moved.insert(Field::SourceSchain);
    Ok(())
}

fn move_regs(regs: &mut Regs, done: &mut Converted) -> Result<(), ConvertError> {
    let path = JsonPath::top("regs.ext");
    let gdpr = regs.gdpr.map(|v| encode(&v, path)).transpose()?;
    let us_privacy = regs
        .us_privacy
        .as_ref()
        .map(|v| encode(v, path))
        .transpose()?;
    let fields = present([
        ("gdpr", gdpr.as_deref()),
        ("us_privacy", us_privacy.as_deref()),
    ]);
    if fields.is_empty() {
        return Ok(());
    }
    regs.ext = Some(with_fields(regs.ext.as_ref(), &fields, path)?);
    if regs.gdpr.take().is_some() {
        done.moved.insert(Field::RegsGdpr);
    }
    if regs.us_privacy.take().is_some() {
        done.moved.insert(Field::RegsUsPrivacy);
    }
    Ok(())
}

fn move_user(user: &mut User, done: &mut Converted) -> Result<(), ConvertError> {
    let path = JsonPath::top("user.ext");
    let consent = user.consent.as_ref().map(|v| encode(v, path)).transpose()?;
    let eids = user.eids.as_ref().map(|v| encode(v, path)).transpose()?;
    let fields = present([("consent", consent.as_deref()), ("eids", eids.as_deref())]);
    if fields.is_empty() {
        return Ok(());
    }
    user.ext = Some(with_fields(user.ext.as_ref(), &fields, path)?);
    if user.consent.take().is_some() {
        done.moved.insert(Field::UserConsent);
    }
    if user.eids.take().is_some() {
        done.moved.insert(Field::UserEids);
    }
    Ok(())
}

/// `imp.rwdd` -> `imp.ext.prebid.is_rewarded_inventory`, keeping the rest of `prebid`.
fn move_imp(index: usize, imp: &mut Imp, done: &mut Converted) -> Result<(), ConvertError> {
    let Some(rwdd) = imp.rwdd else {
        return Ok(());
    };
    let ext_path = JsonPath::imp(index, "ext");
    let prebid_path = JsonPath::imp(index, "ext.prebid");
    let value = encode(&rwdd, ext_path)?;
    let prebid = match &imp.ext {
        Some(ext) => RawJson::get_field(ext.as_raw_value(), "prebid")
            .map_err(|err| ConvertError::from_raw(ext_path, err))?
            // `"prebid": null` is no prebid object: start a new one.
            .filter(|p| p.get().trim() != "null"),
        None => None,
    };
    let prebid = RawJson::with_fields(prebid, &[("is_rewarded_inventory", &value)])
        .map_err(|err| ConvertError::from_raw(prebid_path, err))?;
    imp.ext = Some(with_fields(
        imp.ext.as_ref(),
        &[("prebid", prebid.as_raw_value())],
        ext_path,
    )?);
    imp.rwdd = None;
    done.moved.insert(Field::ImpRwdd);
    Ok(())
}

fn drop_imp(imp: &mut Imp, dropped: &mut FieldSet) {
    drop_fields(imp, IMP, dropped);
    if let Some(video) = &mut imp.video {
        drop_fields(video, VIDEO, dropped);
    }
    if let Some(audio) = &mut imp.audio {
        drop_fields(audio, AUDIO, dropped);
    }
    if let Some(deals) = imp.pmp.as_mut().and_then(|pmp| pmp.deals.as_mut()) {
        for deal in deals {
            drop_fields(deal, DEAL, dropped);
        }
    }
}

fn drop_publisher_content(
    publisher: Option<&mut Publisher>,
    content: Option<&mut Content>,
    done: &mut Converted,
) {
    if let Some(publisher) = publisher {
        drop_fields(publisher, PUBLISHER, &mut done.dropped);
    }
    if let Some(content) = content {
        drop_fields(content, CONTENT, &mut done.dropped);
        if let Some(producer) = &mut content.producer {
            drop_fields(producer, PRODUCER, &mut done.dropped);
        }
        drop_data(content.data.as_mut(), &mut done.dropped);
    }
}

fn drop_data(data: Option<&mut Vec<Data>>, dropped: &mut FieldSet) {
    for data in data.into_iter().flatten() {
        drop_fields(data, DATA, dropped);
    }
}

/// The `(key, value)` pairs whose value is there, in order (at most two per object).
fn present<'a, const N: usize>(
    fields: [(&'a str, Option<&'a serde_json::value::RawValue>); N],
) -> Vec<(&'a str, &'a serde_json::value::RawValue)> {
    fields
        .into_iter()
        .filter_map(|(key, value)| value.map(|v| (key, v)))
        .collect()
}
