//! OpenRTB 2.5 -> 2.6: move the 2.5 `ext` values that have a 2.6 field into it.
//!
//! Read from: `source.ext.schain` and, before it, the 2.4 spelling `ext.schain` (as Prebid
//! Server does), `regs.ext.gdpr`, `regs.ext.us_privacy`, `user.ext.consent`, `user.ext.eids`,
//! `imp.ext.prebid.is_rewarded_inventory`, and `site`/`app.ext.inventorypartnerdomain` (the
//! 2.6 change log: "previously ext"). Each is removed from its `ext` whether or not it moves; a
//! 2.6 field already set wins (the `ext` value is counted as dropped); an `ext` (or `prebid`)
//! left empty goes away. `null` counts as absent. A value of the wrong type is an error naming
//! its path, and so is an `ext` that is not an object. An `ext` with none of these keys is
//! left byte for byte as it was. Running this on a 2.6 request changes nothing (idempotent).
//!
//! Nothing is invented for 2.6-only fields (`regs.gpp` has no 2.5 home in the spec).

use serde::de::DeserializeOwned;

use super::Converted;
use super::error::{ConvertError, JsonPath};
use super::ext::{parse, take, with_fields};
use super::fields::Field;
use crate::raw::RawJson;
use crate::request::imp::Imp;
use crate::request::{BidRequest, Regs, Source, SupplyChain};
use crate::{Eid, User};

/// See the module documentation and [`super::up_from_2_5`].
pub(super) fn up_from_2_5(request: &mut BidRequest) -> Result<Converted, ConvertError> {
    let mut done = Converted::default();
    move_schain(request, &mut done)?;
    if let Some(regs) = &mut request.regs {
        move_regs(regs, &mut done)?;
    }
    if let Some(user) = &mut request.user {
        move_user(user, &mut done)?;
    }
    for (index, imp) in request.imp.iter_mut().enumerate() {
        move_imp(index, imp, &mut done)?;
    }
    if let Some(site) = &mut request.site {
        let taken = take_one(
            site.ext.as_ref(),
            "inventorypartnerdomain",
            JsonPath::top("site.ext"),
            JsonPath::top("site.ext.inventorypartnerdomain"),
        )?;
        if let Some((rest, value)) = taken {
            site.ext = rest;
            let field = Field::SiteInventorypartnerdomain;
            settle(&mut site.inventorypartnerdomain, value, field, &mut done);
        }
    }
    if let Some(app) = &mut request.app {
        let taken = take_one(
            app.ext.as_ref(),
            "inventorypartnerdomain",
            JsonPath::top("app.ext"),
            JsonPath::top("app.ext.inventorypartnerdomain"),
        )?;
        if let Some((rest, value)) = taken {
            app.ext = rest;
            let field = Field::AppInventorypartnerdomain;
            settle(&mut app.inventorypartnerdomain, value, field, &mut done);
        }
    }
    Ok(done)
}

/// Puts `value` (taken from an `ext`) into the 2.6 `slot` unless the slot is set already.
fn settle<T>(slot: &mut Option<T>, value: Option<T>, field: Field, done: &mut Converted) {
    let Some(value) = value else {
        return;
    };
    if slot.is_some() {
        done.dropped.insert(field);
    } else {
        *slot = Some(value);
        done.moved.insert(field);
    }
}

/// `Some((ext without key, typed value))` when `key` is a member of `ext` (at `ext_path`; the
/// value at `value_path`); nothing is changed, so that the caller can type every value before
/// it replaces any `ext`.
#[allow(clippy::type_complexity)]
fn take_one<T: DeserializeOwned>(
    ext: Option<&RawJson>,
    key: &'static str,
    ext_path: JsonPath,
    value_path: JsonPath,
) -> Result<Option<(Option<RawJson>, Option<T>)>, ConvertError> {
    let Some(object) = ext else {
        return Ok(None);
    };
    let Some(taken) = take(object.as_raw_value(), [key], ext_path)? else {
        return Ok(None);
    };
    let [raw] = taken.values;
    let value = parse(raw, value_path)?;
    Ok(Some((taken.rest, value)))
}

/// `source.schain` <- `source.ext.schain` <- `ext.schain` (2.4), the first one set winning;
/// both `ext` keys are removed. Both are read and typed before either `ext` is replaced.
fn move_schain(request: &mut BidRequest, done: &mut Converted) -> Result<(), ConvertError> {
    let from_request = take_one::<SupplyChain>(
        request.ext.as_ref(),
        "schain",
        JsonPath::top("ext"),
        JsonPath::top("ext.schain"),
    )?;
    let from_source = take_one::<SupplyChain>(
        request.source.as_ref().and_then(|s| s.ext.as_ref()),
        "schain",
        JsonPath::top("source.ext"),
        JsonPath::top("source.ext.schain"),
    )?;
    if from_request.is_none() && from_source.is_none() {
        return Ok(());
    }
    let mut candidates = Vec::with_capacity(2);
    if let Some((rest, value)) = from_source {
        if let Some(source) = &mut request.source {
            source.ext = rest;
        }
        candidates.extend(value);
    }
    if let Some((rest, value)) = from_request {
        request.ext = rest;
        candidates.extend(value);
    }
    for schain in candidates {
        let source = request.source.get_or_insert_with(Source::default);
        settle(&mut source.schain, Some(schain), Field::SourceSchain, done);
    }
    Ok(())
}

fn move_regs(regs: &mut Regs, done: &mut Converted) -> Result<(), ConvertError> {
    let Some(ext) = regs.ext.as_ref() else {
        return Ok(());
    };
    let path = JsonPath::top("regs.ext");
    let Some(taken) = take(ext.as_raw_value(), ["gdpr", "us_privacy"], path)? else {
        return Ok(());
    };
    let [gdpr, us_privacy] = taken.values;
    let gdpr = parse::<i32>(gdpr, JsonPath::top("regs.ext.gdpr"))?;
    let us_privacy = parse::<String>(us_privacy, JsonPath::top("regs.ext.us_privacy"))?;
    regs.ext = taken.rest;
    settle(&mut regs.gdpr, gdpr, Field::RegsGdpr, done);
    settle(&mut regs.us_privacy, us_privacy, Field::RegsUsPrivacy, done);
    Ok(())
}

fn move_user(user: &mut User, done: &mut Converted) -> Result<(), ConvertError> {
    let Some(ext) = user.ext.as_ref() else {
        return Ok(());
    };
    let path = JsonPath::top("user.ext");
    let Some(taken) = take(ext.as_raw_value(), ["consent", "eids"], path)? else {
        return Ok(());
    };
    let [consent, eids] = taken.values;
    let consent = parse::<String>(consent, JsonPath::top("user.ext.consent"))?;
    let eids = parse::<Vec<Eid>>(eids, JsonPath::top("user.ext.eids"))?;
    user.ext = taken.rest;
    settle(&mut user.consent, consent, Field::UserConsent, done);
    settle(&mut user.eids, eids, Field::UserEids, done);
    Ok(())
}

/// `imp.ext.prebid.is_rewarded_inventory` -> `imp.rwdd`, keeping the rest of `prebid`.
fn move_imp(index: usize, imp: &mut Imp, done: &mut Converted) -> Result<(), ConvertError> {
    let Some(ext) = imp.ext.as_ref() else {
        return Ok(());
    };
    let ext_path = JsonPath::imp(index, "ext");
    let prebid = RawJson::get_field(ext.as_raw_value(), "prebid")
        .map_err(|err| ConvertError::from_raw(ext_path, err))?;
    let Some(prebid) = prebid.filter(|p| p.get().trim() != "null") else {
        return Ok(());
    };
    let prebid_path = JsonPath::imp(index, "ext.prebid");
    let Some(taken) = take(prebid, ["is_rewarded_inventory"], prebid_path)? else {
        return Ok(());
    };
    let [raw] = taken.values;
    let rwdd = parse::<i32>(
        raw,
        JsonPath::imp(index, "ext.prebid.is_rewarded_inventory"),
    )?;
    let new_ext = match &taken.rest {
        Some(rest) => Some(with_fields(
            Some(ext),
            &[("prebid", rest.as_raw_value())],
            ext_path,
        )?),
        // `prebid` is left empty: take it out of `ext` too.
        None => take(ext.as_raw_value(), ["prebid"], ext_path)?.and_then(|t| t.rest),
    };
    imp.ext = new_ext;
    settle(&mut imp.rwdd, rwdd, Field::ImpRwdd, done);
    Ok(())
}
