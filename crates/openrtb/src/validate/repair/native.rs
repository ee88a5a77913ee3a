//! The Native 1.2 request string of an imp: asset ids filled in, values out of their lists or
//! ranges dropped, bad event trackers and methods dropped when a good one remains.
//!
//! The string is left alone when `validate`'s native check accepts it (the one parse a valid
//! request pays here), and when that check refuses it as unreadable (not JSON, wrong types,
//! duplicate keys, too long). Otherwise it is opened as a [`json::Value`], repaired, written
//! back and checked again: the new string replaces the old one only if the check accepts it, so
//! a request with a fault that cannot be fixed keeps its string and its refusal. Both root
//! shapes are handled, the bare request and Native 1.0's `{"native": {...}}` wrapper (kept).

use super::super::InvalidRequest;
use super::super::native::{
    MAX_NATIVE_ASSETS, context_subtype, is_context, is_event, is_image_type, is_listed_subtype,
    is_method, request as check,
};
use super::super::path::{Path, is_flag, is_listed_or_vendor};
use super::json::{Object, Value};
use super::{Action, Log};

/// Repairs `imp.native.request`, at `at`.
pub(super) fn request(slot: &mut Option<String>, at: Path<'_>, log: &mut Log) {
    let Some(text) = slot.as_deref() else { return };
    match check(text, at) {
        Ok(()) | Err(InvalidRequest::NativeJson { .. }) => return,
        Err(_) => {}
    }
    let mut repairs = Log::default();
    let Some(fixed) = rewrite(text, at, &mut repairs) else {
        return;
    };
    if check(&fixed, at).is_ok() {
        *slot = Some(fixed);
        log.done.append(&mut repairs.done);
    }
}

/// The repaired text, or `None` when there was nothing to repair (or no object to repair).
fn rewrite(text: &str, at: Path<'_>, log: &mut Log) -> Option<String> {
    let mut document = Value::parse(text)?;
    let root = document.as_object_mut()?;
    if root.has("native") {
        let at = at.key("native");
        markup(root.object_mut("native")?, at, log);
    } else {
        markup(root, at, log);
    }
    if log.done.is_empty() {
        return None;
    }
    document.to_json()
}

/// Native Markup Request Object (4.1).
fn markup(m: &mut Object<'_>, at: Path<'_>, log: &mut Log) {
    context(m, at, log);
    drop_int(
        m,
        "plcmttype",
        at,
        "imp.native.request.plcmttype",
        log,
        |v| v < 1,
    );
    drop_int(m, "plcmtcnt", at, "imp.native.request.plcmtcnt", log, |v| {
        v < 0
    });
    drop_int(m, "seq", at, "imp.native.request.seq", log, |v| v < 0);
    drop_flag(m, "aurlsupport", at, "imp.native.request.aurlsupport", log);
    drop_flag(m, "durlsupport", at, "imp.native.request.durlsupport", log);
    drop_flag(m, "privacy", at, "imp.native.request.privacy", log);
    assets(m, at.key("assets"), log);
    event_trackers(m, at.key("eventtrackers"), log);
}

/// Drops the member `key` when it is an integer `refused` refuses (other types are left for
/// the check to refuse).
fn drop_int(
    object: &mut Object<'_>,
    key: &'static str,
    at: Path<'_>,
    field: &'static str,
    log: &mut Log,
    refused: impl FnOnce(i32) -> bool,
) {
    if let Ok(Some(v)) = object.int(key)
        && refused(v)
    {
        object.remove(key);
        log.record(field, at.key(key), Action::Dropped);
    }
}

fn drop_flag(
    object: &mut Object<'_>,
    key: &'static str,
    at: Path<'_>,
    field: &'static str,
    log: &mut Log,
) {
    drop_int(object, key, at, field, log, |v| !is_flag(v));
}

/// 7.1 and 7.2. An unlisted context or subtype is dropped; a listed subtype of another context
/// contradicts it, and both are dropped, since nothing says which of the two is wrong.
fn context(m: &mut Object<'_>, at: Path<'_>, log: &mut Log) {
    const CONTEXT: &str = "imp.native.request.context";
    const SUBTYPE: &str = "imp.native.request.contextsubtype";
    let (Ok(mut context), Ok(subtype)) = (m.int("context"), m.int("contextsubtype")) else {
        return;
    };
    if context.is_some_and(|c| !is_listed_or_vendor(c, is_context)) {
        m.remove("context");
        log.record(CONTEXT, at.key("context"), Action::Dropped);
        context = None;
    }
    let Some(sub) = subtype else { return };
    if context_subtype(context, subtype, at).is_ok() {
        return;
    }
    m.remove("contextsubtype");
    log.record(SUBTYPE, at.key("contextsubtype"), Action::Dropped);
    if is_listed_subtype(sub) && m.remove("context") {
        log.record(CONTEXT, at.key("context"), Action::Dropped);
    }
}

/// Asset Request Objects (4.2 - 4.6): optional values out of range dropped, missing ids filled.
fn assets(m: &mut Object<'_>, at: Path<'_>, log: &mut Log) {
    let Some(assets) = m.array_mut("assets") else {
        return;
    };
    if assets.len() > MAX_NATIVE_ASSETS {
        return;
    }
    // Each asset's id as the typed model reads it (`Err`: not an object, or an id of the wrong
    // type, which the check refuses and which is not ours to replace).
    let mut ids = Vec::with_capacity(assets.len());
    for (i, item) in assets.items_mut().iter_mut().enumerate() {
        let at = at.index(i);
        let Some(asset) = item.as_object_mut() else {
            ids.push(Err(()));
            continue;
        };
        drop_flag(
            asset,
            "required",
            at,
            "imp.native.request.assets.required",
            log,
        );
        if let Some(img) = asset.object_mut("img") {
            let at = at.key("img");
            drop_int(
                img,
                "type",
                at,
                "imp.native.request.assets.img.type",
                log,
                |v| !is_listed_or_vendor(v, is_image_type),
            );
            for (key, field) in [
                ("w", "imp.native.request.assets.img.w"),
                ("wmin", "imp.native.request.assets.img.wmin"),
                ("h", "imp.native.request.assets.img.h"),
                ("hmin", "imp.native.request.assets.img.hmin"),
            ] {
                drop_int(img, key, at, field, log, |v| v < 0);
            }
        }
        if let Some(data) = asset.object_mut("data") {
            let at = at.key("data");
            drop_int(
                data,
                "len",
                at,
                "imp.native.request.assets.data.len",
                log,
                |v| v < 0,
            );
        }
        ids.push(asset.int("id").map_err(drop));
    }
    let mut used: Vec<i32> = ids.iter().filter_map(|id| id.ok().flatten()).collect();
    for (i, item) in assets.items_mut().iter_mut().enumerate() {
        if !matches!(ids.get(i), Some(Ok(None))) {
            continue;
        }
        let Some(asset) = item.as_object_mut() else {
            continue;
        };
        let id = free_id(i, &used);
        used.push(id);
        asset.set("id", id.to_string());
        log.record(
            "imp.native.request.assets.id",
            at.index(i).key("id"),
            Action::Filled,
        );
    }
}

/// The id for the asset at `index` that has none: its index, as Prebid Server numbers assets
/// when none has an id, unless another asset uses it; then the smallest number none uses.
fn free_id(index: usize, used: &[i32]) -> i32 {
    let index = i32::try_from(index).unwrap_or(i32::MAX);
    if !used.contains(&index) {
        return index;
    }
    // `used` holds at most MAX_NATIVE_ASSETS ids, so a free one is found within as many steps.
    (0..=i32::MAX)
        .find(|id| !used.contains(id))
        .unwrap_or(i32::MAX)
}

/// What an event tracker needs (4.7, 7.6, 7.7).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tracker {
    /// Valid, or valid once its unlisted methods are dropped.
    Good,
    /// Missing or unlisted `event`, missing `methods`, or no listed method: droppable.
    Bad,
    /// Of a shape the check refuses (not an object, wrong types): left to it.
    Unreadable,
}

/// Event Trackers Request Objects: unlisted methods dropped from a tracker that keeps one,
/// bad trackers dropped from a list that keeps one.
fn event_trackers(m: &mut Object<'_>, at: Path<'_>, log: &mut Log) {
    const TRACKER: &str = "imp.native.request.eventtrackers";
    const METHOD: &str = "imp.native.request.eventtrackers.methods";
    // No count limit of their own: the work is linear in the string, at most 32 KiB.
    let Some(trackers) = m.array_mut("eventtrackers") else {
        return;
    };
    let mut kinds = Vec::with_capacity(trackers.len());
    for item in trackers.items_mut() {
        kinds.push(classify(item));
    }
    let good = kinds.iter().filter(|&&k| k == Tracker::Good).count();
    for (i, item) in trackers.items_mut().iter_mut().enumerate() {
        if kinds.get(i) != Some(&Tracker::Good) {
            continue;
        }
        let at = at.index(i);
        let Some(methods) = item.as_object_mut().and_then(|t| t.array_mut("methods")) else {
            continue;
        };
        let listed: Vec<bool> = methods.items_mut().iter().map(is_listed_method).collect();
        let methods_at = at.key("methods");
        methods.retain_indexed(|j| {
            let keep = listed.get(j).copied().unwrap_or(true);
            if !keep {
                log.record(METHOD, methods_at.index(j), Action::Dropped);
            }
            keep
        });
    }
    if good > 0 {
        trackers.retain_indexed(|i| {
            let keep = kinds.get(i) != Some(&Tracker::Bad);
            if !keep {
                log.record(TRACKER, at.index(i), Action::Dropped);
            }
            keep
        });
    }
}

fn is_listed_method(method: &Value<'_>) -> bool {
    // A method of the wrong type is not dropped: the check refuses it.
    !matches!(method.int(), Ok(Some(m)) if !is_listed_or_vendor(m, is_method))
}

fn classify(item: &mut Value<'_>) -> Tracker {
    let Some(tracker) = item.as_object_mut() else {
        return Tracker::Unreadable;
    };
    let Ok(event) = tracker.int("event") else {
        return Tracker::Unreadable;
    };
    let Some(methods) = tracker.array_mut("methods") else {
        return if tracker.has("methods") {
            Tracker::Unreadable
        } else {
            Tracker::Bad
        };
    };
    let mut listed = 0;
    for method in methods.items_mut().iter() {
        match method.int() {
            Ok(Some(m)) if is_listed_or_vendor(m, is_method) => listed += 1,
            Ok(Some(_)) => {}
            _ => return Tracker::Unreadable,
        }
    }
    let no_method_left = listed == 0 && methods.len() > 0;
    if event.is_none_or(|e| !is_listed_or_vendor(e, is_event)) || no_method_left {
        Tracker::Bad
    } else {
        Tracker::Good
    }
}
