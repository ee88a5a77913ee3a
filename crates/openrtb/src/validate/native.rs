//! The Native 1.2 request carried as a JSON string in `imp.native.request` (OpenRTB 2.6 section
//! 3.2.9; OpenRTB Dynamic Native Ads API 1.2, sections 4 and 7).
//!
//! The string is parsed into the small typed model below, which holds only the fields a rule
//! reads: no strings are kept, unknown fields (`ver`, `ext`, Native 1.0's `layout` and `adunit`,
//! misspellings) are skipped, and a field of the wrong JSON type is an error naming its path
//! inside the native request. Both root shapes seen in traffic are accepted: the bare Native
//! 1.1+ request object, and Native 1.0's `{"native": {...}}` wrapper (then paths go through
//! `native.`).
//!
//! Bounds: the string is at most [`MAX_NATIVE_REQUEST_BYTES`] and holds at most
//! [`MAX_NATIVE_ASSETS`] assets; nesting is bounded by serde_json's recursion limit (128).
//! Parsing takes the fast path of [`crate::decode`] and only re-parses with path tracking when
//! the string is refused.
//!
//! Rules (Native 1.2): `assets` required and non-empty (4.1); each asset has an `id` (4.2),
//! unique within the request, and exactly one of `title`, `img`, `video`, `data` (4.2 note 1);
//! `title.len` (4.3), `data.type` (4.6), `video.mimes`/`minduration`/`maxduration`/`protocols`
//! (4.5) and `eventtrackers[].event`/`methods` (4.7) are required; the closed lists of section 7
//! (context, context subtype and its context, data and image asset types, event types and
//! tracking methods) accept their listed values and the exchange-specific 500 and above;
//! `required`, `aurlsupport`, `durlsupport`, `privacy` are 0/1 flags; sizes, lengths, durations
//! and counts are not negative. Two exceptions, because traffic follows them: image type 2 (the
//! logo type Native 1.1 merged into type 1) is still sent by SDKs and is accepted, and
//! `plcmttype` only has to be 1 or more, since the spec's own examples send 11.

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, Visitor};

use crate::codec::{DecodeError, decode};

use super::InvalidRequest;
use super::path::{Check, Path, fail, flag, listed_or_vendor, non_negative, required};

/// Longest `imp.native.request` string accepted, in bytes. Real native requests are well under
/// 4 KB even with a dozen assets.
pub const MAX_NATIVE_REQUEST_BYTES: usize = 32 * 1024;
/// Most assets one native request may list. Real requests list up to a dozen or so.
pub const MAX_NATIVE_ASSETS: usize = 64;
// The messages below spell these numbers out.
const _: () = assert!(MAX_NATIVE_REQUEST_BYTES == 32768 && MAX_NATIVE_ASSETS == 64);

/// Native Markup Request Object (4.1). `W` is the type of the Native 1.0 root wrapper
/// `native`: the outer document is a `Markup<Markup<IgnoredAny>>`, so that the wrapper is
/// read one level deep and no further.
#[derive(Debug, serde::Deserialize)]
struct Markup<W> {
    native: Option<W>,
    context: Option<i32>,
    contextsubtype: Option<i32>,
    plcmttype: Option<i32>,
    plcmtcnt: Option<i32>,
    seq: Option<i32>,
    assets: Option<Vec<Asset>>,
    aurlsupport: Option<i32>,
    durlsupport: Option<i32>,
    eventtrackers: Option<Vec<EventTracker>>,
    privacy: Option<i32>,
}

/// Asset Request Object (4.2).
#[derive(Debug, serde::Deserialize)]
struct Asset {
    id: Option<i32>,
    required: Option<i32>,
    title: Option<Title>,
    img: Option<Image>,
    video: Option<Video>,
    data: Option<Data>,
}

/// Title Request Object (4.3).
#[derive(Debug, serde::Deserialize)]
struct Title {
    len: Option<i32>,
}

/// Image Request Object (4.4).
#[derive(Debug, serde::Deserialize)]
struct Image {
    #[serde(rename = "type")]
    kind: Option<i32>,
    w: Option<i32>,
    wmin: Option<i32>,
    h: Option<i32>,
    hmin: Option<i32>,
}

/// Video Request Object (4.5).
#[derive(Debug, serde::Deserialize)]
struct Video {
    mimes: Option<Vec<AnyString>>,
    minduration: Option<i32>,
    maxduration: Option<i32>,
    protocols: Option<Vec<i32>>,
}

/// Data Request Object (4.6).
#[derive(Debug, serde::Deserialize)]
struct Data {
    #[serde(rename = "type")]
    kind: Option<i32>,
    len: Option<i32>,
}

/// Event Trackers Request Object (4.7).
#[derive(Debug, serde::Deserialize)]
struct EventTracker {
    event: Option<i32>,
    methods: Option<Vec<i32>>,
}

/// A JSON string whose content no rule reads (a MIME type): its type is checked, nothing is
/// kept, and a `Vec` of it never allocates.
#[derive(Debug)]
struct AnyString;

impl<'de> Deserialize<'de> for AnyString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl Visitor<'_> for StrVisitor {
            type Value = AnyString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<AnyString, E> {
                Ok(AnyString)
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// Checks `imp[i].native.request`; `at` is the path of that string.
pub(super) fn request(text: &str, at: Path<'_>) -> Check {
    if text.len() > MAX_NATIVE_REQUEST_BYTES {
        return Err(fail(at, "longer than 32768 bytes"));
    }
    // serde would read an array positionally into the model; the spec says object.
    if text.as_bytes().trim_ascii_start().first() != Some(&b'{') {
        return Err(fail(
            at,
            "must be a JSON object: a Native 1.2 request, or one wrapped as {\"native\": ...}",
        ));
    }
    let document: Markup<Markup<IgnoredAny>> =
        decode(text.as_bytes()).map_err(|e| json_error(&e, at))?;
    match &document.native {
        Some(wrapped) => markup(wrapped, at.key("native")),
        None => markup(&document, at),
    }
}

/// 7.1 Context Type IDs: 1 content, 2 social, 3 product.
pub(super) fn is_context(v: i32) -> bool {
    (1..=3).contains(&v)
}

/// 7.2 Context Sub Type IDs, by decade of their context (the listed ones and the rest of each
/// decade, see [`context_subtype`]).
pub(super) fn is_listed_subtype(v: i32) -> bool {
    (10..=39).contains(&v)
}

/// 7.5 Image Asset Types: 1 icon, 3 main, and 2 (see the module documentation).
pub(super) fn is_image_type(v: i32) -> bool {
    (1..=3).contains(&v)
}

/// 7.6 Event Types: 1 impression, 2-4 viewability.
pub(super) fn is_event(v: i32) -> bool {
    (1..=4).contains(&v)
}

/// 7.7 Event Tracking Methods: 1 image pixel, 2 JavaScript.
pub(super) fn is_method(v: i32) -> bool {
    matches!(v, 1 | 2)
}

#[cold]
fn json_error(e: &DecodeError, at: Path<'_>) -> InvalidRequest {
    // serde_path_to_error writes `?` for a key it did not get to read (a syntax error there).
    let inner = e.path();
    let inner = inner.strip_suffix('?').unwrap_or(inner);
    let inner = inner.strip_suffix('.').unwrap_or(inner);
    let path = if inner.is_empty() || inner == "." {
        at.to_string()
    } else {
        format!("{at}.{inner}")
    };
    InvalidRequest::NativeJson {
        path,
        reason: e.json_error().to_string(),
    }
}

fn markup<W>(m: &Markup<W>, at: Path<'_>) -> Check {
    // 7.1 Context Type IDs.
    listed_or_vendor(
        m.context,
        is_context,
        at.key("context"),
        "must be 1 (content), 2 (social), 3 (product) or an exchange-specific 500 or more",
    )?;
    context_subtype(m.context, m.contextsubtype, at.key("contextsubtype"))?;
    // 7.3 Placement Type IDs lists 1-4 and 500+, but the spec's own request examples (6.1 -
    // 6.3) send 11, so implementations copying them do too: only non-codes are refused.
    if m.plcmttype.is_some_and(|v| v < 1) {
        return Err(fail(at.key("plcmttype"), "must be 1 or more"));
    }
    non_negative(m.plcmtcnt, at.key("plcmtcnt"))?;
    non_negative(m.seq, at.key("seq"))?;
    flag(m.aurlsupport, at.key("aurlsupport"))?;
    flag(m.durlsupport, at.key("durlsupport"))?;
    flag(m.privacy, at.key("privacy"))?;
    assets(m.assets.as_deref(), at.key("assets"))?;
    let trackers = at.key("eventtrackers");
    for (i, t) in m.eventtrackers.iter().flatten().enumerate() {
        event_tracker(t, trackers.index(i))?;
    }
    Ok(())
}

/// 7.2: "SubType should only be combined with the primary context type as indicated (ie for a
/// context type of 1, only context subtypes that start with 1 are valid)". The listed subtypes
/// are 10-15, 20-22 and 30-32; the rest of each decade is accepted with its context, since
/// that is the rule the text states.
pub(super) fn context_subtype(context: Option<i32>, subtype: Option<i32>, at: Path<'_>) -> Check {
    let Some(subtype) = subtype else {
        return Ok(());
    };
    if subtype >= 500 {
        return Ok(());
    }
    if !is_listed_subtype(subtype) {
        return Err(fail(
            at,
            "must be 10-19 (content), 20-29 (social), 30-39 (product) or an exchange-specific 500 or more",
        ));
    }
    match context {
        Some(c @ 1..=3) if c != subtype / 10 => Err(fail(
            at,
            "does not match context (10-19 go with context 1, 20-29 with 2, 30-39 with 3)",
        )),
        _ => Ok(()),
    }
}

fn assets(assets: Option<&[Asset]>, at: Path<'_>) -> Check {
    let assets = match assets {
        Some(list @ [_, ..]) => list,
        _ => return Err(fail(at, "required, with at least one asset")),
    };
    if assets.len() > MAX_NATIVE_ASSETS {
        return Err(fail(at, "more than 64 assets"));
    }
    for (i, asset) in assets.iter().enumerate() {
        let at = at.index(i);
        let id = required(asset.id, at.key("id"))?;
        // At most MAX_NATIVE_ASSETS squared / 2 comparisons, and no allocation.
        if assets.iter().take(i).any(|a| a.id == Some(id)) {
            return Err(fail(at.key("id"), "used by another asset"));
        }
        flag(asset.required, at.key("required"))?;
        match (&asset.title, &asset.img, &asset.video, &asset.data) {
            (Some(t), None, None, None) => title(t, at.key("title"))?,
            (None, Some(i), None, None) => image(i, at.key("img"))?,
            (None, None, Some(v), None) => video(v, at.key("video"))?,
            (None, None, None, Some(d)) => data(d, at.key("data"))?,
            _ => return Err(fail(at, "needs exactly one of title, img, video and data")),
        }
    }
    Ok(())
}

fn title(t: &Title, at: Path<'_>) -> Check {
    let len = required(t.len, at.key("len"))?;
    non_negative(Some(len), at.key("len"))
}

fn image(img: &Image, at: Path<'_>) -> Check {
    // 7.5 Image Asset Types: 1 icon, 3 main; 2 is accepted (see the module documentation).
    listed_or_vendor(
        img.kind,
        is_image_type,
        at.key("type"),
        "must be 1 (icon), 3 (main), 2 (deprecated logo) or an exchange-specific 500 or more",
    )?;
    non_negative(img.w, at.key("w"))?;
    non_negative(img.wmin, at.key("wmin"))?;
    non_negative(img.h, at.key("h"))?;
    non_negative(img.hmin, at.key("hmin"))
}

fn video(v: &Video, at: Path<'_>) -> Check {
    if v.mimes.as_ref().is_none_or(Vec::is_empty) {
        return Err(fail(
            at.key("mimes"),
            "required, with at least one MIME type",
        ));
    }
    let min = required(v.minduration, at.key("minduration"))?;
    non_negative(Some(min), at.key("minduration"))?;
    let max = required(v.maxduration, at.key("maxduration"))?;
    non_negative(Some(max), at.key("maxduration"))?;
    required(v.protocols.as_ref(), at.key("protocols")).map(drop)
}

fn data(d: &Data, at: Path<'_>) -> Check {
    // 7.4 Data Asset Types: 1 (sponsored) to 12 (ctatext).
    let kind = required(d.kind, at.key("type"))?;
    listed_or_vendor(
        Some(kind),
        |v| (1..=12).contains(&v),
        at.key("type"),
        "must be 1 to 12 or an exchange-specific 500 or more",
    )?;
    non_negative(d.len, at.key("len"))
}

fn event_tracker(t: &EventTracker, at: Path<'_>) -> Check {
    // 7.6 Event Types: 1 impression, 2-4 viewability.
    let event = required(t.event, at.key("event"))?;
    listed_or_vendor(
        Some(event),
        is_event,
        at.key("event"),
        "must be 1 to 4 or an exchange-specific 500 or more",
    )?;
    // 7.7 Event Tracking Methods: 1 image pixel, 2 JavaScript.
    let methods_at = at.key("methods");
    let methods = required(t.methods.as_deref(), methods_at)?;
    for (i, &method) in methods.iter().enumerate() {
        listed_or_vendor(
            Some(method),
            is_method,
            methods_at.index(i),
            "must be 1 (image), 2 (JavaScript) or an exchange-specific 500 or more",
        )?;
    }
    Ok(())
}
