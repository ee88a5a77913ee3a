//! Verbatim JSON: [`RawJson`] holds an `ext` object or an unknown field exactly as it arrived,
//! and [`UnknownFields`] keeps every field this crate does not model, in arrival order.
//!
//! OpenRTB 2.6 asks every party to pass on fields it does not understand (section 2.6), and
//! exchange-specific `ext` objects are opaque to us. Keeping them as text, not as a parsed
//! `serde_json::Value`, costs one copy of the bytes, preserves key order and number spelling,
//! and re-emits them byte for byte.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

/// Deepest `[`/`{` nesting accepted inside a raw value. serde_json skips raw values with an
/// iterative scanner that has no depth limit, so without this check a 100 kB run of `[` in an
/// `ext` would be accepted here and blow up whoever parses it downstream. 128 matches
/// serde_json's own recursion limit for typed values.
pub const MAX_RAW_DEPTH: usize = 128;

/// Why a [`RawJson`] operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RawJsonError {
    /// [`RawJson::with_field`] was given an `ext` that is not a JSON object.
    #[error("ext is not a JSON object")]
    NotAnObject,
    /// The text is not valid JSON, or a value could not be serialized or deserialized.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// One JSON value kept as its original text (a newtype over `Box<RawValue>`).
///
/// Equality compares the text, so `{"a":1}` and `{ "a": 1 }` differ: this type is about
/// faithful pass-through, not JSON semantics.
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// The JSON text, exactly as received (or as produced by [`RawJson::from_value`]).
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Serializes `value` to compact JSON text.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<RawJson, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(RawJson)
    }

    /// Validates `json` as one JSON value and keeps it as is (surrounding whitespace included).
    pub fn from_string(json: String) -> Result<RawJson, serde_json::Error> {
        RawValue::from_string(json).map(RawJson)
    }

    /// Deserializes the text into `T` (e.g. an exchange's typed `ext` struct).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    pub fn as_raw_value(&self) -> &RawValue {
        &self.0
    }

    pub fn into_raw_value(self) -> Box<RawValue> {
        self.0
    }

    /// Returns an object equal to `ext` with `key` set to `value`: an existing `key` is replaced
    /// in place (later duplicates of it are dropped), otherwise `key` is appended. `ext` of
    /// `None` yields a new one-key object; an `ext` that is not an object is an error.
    ///
    /// The other members keep their original value text and order; their keys are re-escaped
    /// canonically (identical for ordinary ASCII keys).
    pub fn with_field<V: Serialize>(
        ext: Option<&RawJson>,
        key: &str,
        value: V,
    ) -> Result<RawJson, RawJsonError> {
        let new_value = serde_json::value::to_raw_value(&value)?;
        RawJson::with_fields(ext.map(RawJson::as_raw_value), &[(key, &new_value)])
    }

    /// [`RawJson::with_field`] for several keys at once, in one rewrite of the object: each
    /// `(key, value)` replaces the first member named `key` in place (dropping later duplicates)
    /// or is appended, in the order given. `object` of `None` is taken as `{}`. If `fields`
    /// names a key twice, the first value wins.
    pub fn with_fields(
        object: Option<&RawValue>,
        fields: &[(&str, &RawValue)],
    ) -> Result<RawJson, RawJsonError> {
        let members = match object {
            None => Vec::new(),
            Some(object) => object_members(object.get())?,
        };
        let mut out = ObjectWriter::with_capacity(members.len().saturating_add(fields.len()));
        let is_member = |key: &str| members.iter().any(|(k, _)| k == key);
        for (n, (key, value)) in members.iter().enumerate() {
            match fields.iter().find(|(k, _)| *k == key.as_ref()) {
                None => out.member(key, value),
                // In place of the first member of that name; later ones are dropped.
                Some((_, new)) => {
                    if !members.iter().take(n).any(|(k, _)| k == key) {
                        out.member(key, new);
                    }
                }
            }
        }
        for (i, (key, value)) in fields.iter().enumerate() {
            let first_of_name = !fields.iter().take(i).any(|(k, _)| k == key);
            if first_of_name && !is_member(key) {
                out.member(key, value);
            }
        }
        out.finish()
    }

    /// The value of the first member of `object` named `key`, borrowed from its text.
    /// `object` that is not a JSON object is an error.
    pub fn get_field<'a>(
        object: &'a RawValue,
        key: &str,
    ) -> Result<Option<&'a RawValue>, RawJsonError> {
        let text = object.get();
        if !text.trim_start().starts_with('{') {
            return Err(RawJsonError::NotAnObject);
        }
        if !may_hold_key(text, key) {
            return Ok(None);
        }
        Ok(object_members(text)?
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v))
    }

    /// Takes `keys` out of `object`: `Ok(None)` when none of them is a member (the object needs
    /// no rewrite, and none is made), otherwise the object without them (`None` when nothing is
    /// left) and the value of each key in the order of `keys` (its first occurrence; every
    /// occurrence is removed). `object` that is not a JSON object is an error.
    ///
    /// Objects whose text cannot hold any of the keys (not even `\u`-escaped) are answered
    /// without parsing them: the common case of an `ext` with nothing to take costs one scan.
    pub fn without_fields<'a, const N: usize>(
        object: &'a RawValue,
        keys: [&str; N],
    ) -> Result<Option<WithoutFields<'a, N>>, RawJsonError> {
        let text = object.get();
        if !text.trim_start().starts_with('{') {
            return Err(RawJsonError::NotAnObject);
        }
        if !keys.iter().any(|key| may_hold_key(text, key)) {
            return Ok(None);
        }
        let members = object_members(text)?;
        let mut values: [Option<&'a RawValue>; N] = [None; N];
        let mut found = false;
        let mut out = ObjectWriter::with_capacity(members.len());
        for (key, value) in &members {
            match keys.iter().position(|k| *k == key.as_ref()) {
                Some(i) => {
                    found = true;
                    if let Some(slot @ None) = values.get_mut(i) {
                        *slot = Some(*value);
                    }
                }
                None => out.member(key, value),
            }
        }
        if !found {
            return Ok(None);
        }
        let rest = if out.is_empty() {
            None
        } else {
            Some(out.finish()?)
        };
        Ok(Some(WithoutFields { rest, values }))
    }
}

/// What [`RawJson::without_fields`] took out of an object.
#[derive(Debug)]
pub struct WithoutFields<'a, const N: usize> {
    /// The object without the keys; `None` when no member is left.
    pub rest: Option<RawJson>,
    /// The value of each key asked for, in the order asked (`None`: not a member).
    pub values: [Option<&'a RawValue>; N],
}

/// False only when `text` certainly has no member named `key`: the key's characters appear
/// nowhere and there is no `\u` escape that could spell them. A quick substring scan that
/// spares the parse of an object that cannot hold `key`.
fn may_hold_key(text: &str, key: &str) -> bool {
    text.contains(key) || text.contains("\\u")
}

/// The members of the JSON object `text` (surrounding whitespace allowed), in document order.
fn object_members(text: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, RawJsonError> {
    if !text.trim_start().starts_with('{') {
        return Err(RawJsonError::NotAnObject);
    }
    Ok(serde_json::from_str::<OrderedMembers<'_>>(text)?.0)
}

/// Collects the members of a JSON object to write, borrowing keys and value text.
struct ObjectWriter<'a> {
    members: Vec<(&'a str, &'a RawValue)>,
}

impl<'a> ObjectWriter<'a> {
    fn with_capacity(members: usize) -> Self {
        ObjectWriter {
            members: Vec::with_capacity(members),
        }
    }

    fn member(&mut self, key: &'a str, value: &'a RawValue) {
        self.members.push((key, value));
    }

    fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The object as compact JSON text. Goes through serde_json's serializer, which escapes
    /// the keys and copies each value's text as is; `to_raw_value` does not re-validate what it
    /// wrote (`RawValue::from_string` would scan it all again).
    fn finish(self) -> Result<RawJson, RawJsonError> {
        Ok(RawJson(serde_json::value::to_raw_value(&self)?))
    }
}

impl Serialize for ObjectWriter<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.members.len()))?;
        for (key, value) in &self.members {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Members of a JSON object in document order, keys and values borrowed from the text where
/// they can be (a key with escapes is unescaped into an owned string).
struct OrderedMembers<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

/// An object key, borrowed from the text unless it had escapes.
struct MemberKey<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for MemberKey<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = MemberKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
                Ok(MemberKey(Cow::Borrowed(key)))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
                Ok(MemberKey(Cow::Owned(key.to_owned())))
            }
            fn visit_string<E: de::Error>(self, key: String) -> Result<Self::Value, E> {
                Ok(MemberKey(Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for OrderedMembers<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = OrderedMembers<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(MemberKey(key)) = map.next_key::<MemberKey<'de>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(OrderedMembers(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RawJson").field(&self.get()).finish()
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl RawJson {
    /// A copy of `raw` (as read by the direct decoder), or `None` if nested deeper than
    /// [`MAX_RAW_DEPTH`], the same rule as the `Deserialize` impl.
    pub(crate) fn from_borrowed(raw: &RawValue) -> Option<RawJson> {
        if nesting_depth_exceeds(raw.get().as_bytes(), MAX_RAW_DEPTH) {
            return None;
        }
        Some(RawJson(raw.to_owned()))
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if nesting_depth_exceeds(raw.get().as_bytes(), MAX_RAW_DEPTH) {
            return Err(de::Error::custom(format_args!(
                "JSON nested deeper than {MAX_RAW_DEPTH} levels"
            )));
        }
        Ok(RawJson(raw))
    }
}

/// True when `json` (already validated by serde_json) opens more than `limit` nested arrays or
/// objects. Brackets inside strings do not count.
fn nesting_depth_exceeds(json: &[u8], limit: usize) -> bool {
    // Scalars cannot nest: skip the scan for the common `"string"` / number cases. Neither can
    // text too short to hold `limit + 1` opening brackets and their closing ones (the common
    // small `ext`).
    if !matches!(json.first(), Some(b'[' | b'{')) || json.len() < 2 * (limit + 1) {
        return false;
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Fields of one object that this crate does not model, as `(key, raw value)` in arrival order.
///
/// Decoding fills it; encoding writes its entries after the modelled fields. Duplicate unknown
/// keys are kept as they came. Nothing stops a caller from inserting a key that is also a
/// modelled field; the encoded object would then carry that key twice, so don't.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnknownFields(pub Vec<(String, RawJson)>);

impl UnknownFields {
    pub const fn new() -> Self {
        UnknownFields(Vec::new())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawJson)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The first value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&RawJson> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replaces the first value stored under `key`, or appends it.
    pub fn insert(&mut self, key: impl Into<String>, value: RawJson) {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Removes every value stored under `key`, returning the first one.
    pub fn remove(&mut self, key: &str) -> Option<RawJson> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        let first = self.0.remove(pos).1;
        self.0.retain(|(k, _)| k != key);
        Some(first)
    }

    /// Appends without looking for an existing `key` (what the decoder does).
    pub fn push(&mut self, key: String, value: RawJson) {
        self.0.push((key, value));
    }
}

impl<'a> IntoIterator for &'a UnknownFields {
    type Item = &'a (String, RawJson);
    type IntoIter = std::slice::Iter<'a, (String, RawJson)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> RawJson {
        RawJson::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn with_field_appends_replaces_and_creates() {
        let ext = raw(r#"{"b": [1, 2],"a":{"x":1}}"#);
        let added = RawJson::with_field(Some(&ext), "c", 7).unwrap();
        assert_eq!(added.get(), r#"{"b":[1, 2],"a":{"x":1},"c":7}"#);
        let replaced = RawJson::with_field(Some(&ext), "b", "z").unwrap();
        assert_eq!(replaced.get(), r#"{"b":"z","a":{"x":1}}"#);
        let created = RawJson::with_field(None, "gpid", "/1/home").unwrap();
        assert_eq!(created.get(), r#"{"gpid":"/1/home"}"#);
        let empty = RawJson::with_field(Some(&raw("{}")), "k", true).unwrap();
        assert_eq!(empty.get(), r#"{"k":true}"#);
    }

    fn raw_value(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn with_fields_sets_several_keys_in_one_rewrite() {
        let one = raw_value("1");
        let two = raw_value(r#"{"b":2}"#);
        let ext = raw(r#"{"a":0, "k":"v","a":9,"x":[ ]}"#);
        let set = |base: Option<&RawJson>, fields: &[(&str, &RawValue)]| {
            RawJson::with_fields(base.map(RawJson::as_raw_value), fields)
                .unwrap()
                .get()
                .to_owned()
        };
        // Replaced in place, later duplicates dropped, new keys appended in order.
        assert_eq!(
            set(Some(&ext), &[("n", &two), ("a", &one)]),
            r#"{"a":1,"k":"v","x":[ ],"n":{"b":2}}"#
        );
        // The first of two equal keys in `fields` wins.
        assert_eq!(set(None, &[("a", &one), ("a", &two)]), r#"{"a":1}"#);
        assert_eq!(set(None, &[]), "{}");
        // Keys that need escaping are escaped.
        assert_eq!(set(None, &[("q\"", &one)]), r#"{"q\"":1}"#);
        for text in ["[1]", "3", "\"{}\"", "null"] {
            let err = RawJson::with_fields(Some(&raw_value(text)), &[("k", &one)]).unwrap_err();
            assert!(matches!(err, RawJsonError::NotAnObject), "{text}: {err}");
        }
    }

    #[test]
    fn get_field_finds_the_first_member() {
        let ext = raw_value(r#"{"a":{"x":1},"pre\u0062id":true,"a":2}"#);
        assert_eq!(
            RawJson::get_field(&ext, "a").unwrap().unwrap().get(),
            r#"{"x":1}"#
        );
        assert_eq!(
            RawJson::get_field(&ext, "prebid").unwrap().unwrap().get(),
            "true"
        );
        assert!(RawJson::get_field(&ext, "zz").unwrap().is_none());
        let err = RawJson::get_field(&raw_value("[]"), "a").unwrap_err();
        assert!(matches!(err, RawJsonError::NotAnObject), "{err}");
    }

    #[test]
    fn without_fields_takes_keys_out() {
        let ext = raw_value(r#"{"gdpr":1,"dsa":{"x":"gdpr"},"us_privacy":"1YNN","gdpr":0}"#);
        let taken = RawJson::without_fields(&ext, ["gdpr", "us_privacy", "none"])
            .unwrap()
            .unwrap();
        assert_eq!(taken.rest.unwrap().get(), r#"{"dsa":{"x":"gdpr"}}"#);
        let values = taken.values.map(|v| v.map(RawValue::get));
        assert_eq!(values, [Some("1"), Some(r#""1YNN""#), None]);

        // Everything taken: no object left.
        let only = raw_value(r#"{ "gdpr" : 1 }"#);
        let taken = RawJson::without_fields(&only, ["gdpr"]).unwrap().unwrap();
        assert!(taken.rest.is_none());

        // A key that appears only inside a value, or not at all: nothing to rewrite.
        assert!(RawJson::without_fields(&ext, ["x"]).unwrap().is_none());
        assert!(RawJson::without_fields(&ext, ["eids"]).unwrap().is_none());
        // An escaped key is still found.
        let escaped = raw_value(r#"{"\u0067dpr":1,"k":2}"#);
        let taken = RawJson::without_fields(&escaped, ["gdpr"])
            .unwrap()
            .unwrap();
        assert_eq!(taken.rest.unwrap().get(), r#"{"k":2}"#);
        // Not an object: refused even when it could not hold the key.
        for text in ["[1]", "\"gdpr\"", "null", "4"] {
            let err = RawJson::without_fields(&raw_value(text), ["k"]).unwrap_err();
            assert!(matches!(err, RawJsonError::NotAnObject), "{text}: {err}");
        }
    }

    #[test]
    fn with_field_refuses_non_objects() {
        for text in ["[1]", "3", "\"{}\"", "null"] {
            let err = RawJson::with_field(Some(&raw(text)), "k", 1).unwrap_err();
            assert!(matches!(err, RawJsonError::NotAnObject), "{text}: {err}");
        }
    }

    #[test]
    fn raw_json_keeps_text_and_compares_text() {
        let a: RawJson = serde_json::from_str(r#"{ "a" : 1.50 }"#).unwrap();
        assert_eq!(a.get(), r#"{ "a" : 1.50 }"#);
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{ "a" : 1.50 }"#);
        assert_ne!(a, raw(r#"{"a":1.5}"#));
        let v: serde_json::Value = a.parse().unwrap();
        assert_eq!(v["a"].as_f64(), Some(1.5));
        assert_eq!(RawJson::from_value(&[1, 2]).unwrap().get(), "[1,2]");
    }

    #[test]
    fn raw_depth_is_limited_and_strings_do_not_count() {
        let ok = format!("{}{}", "[".repeat(MAX_RAW_DEPTH), "]".repeat(MAX_RAW_DEPTH));
        assert!(serde_json::from_str::<RawJson>(&ok).is_ok());
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_RAW_DEPTH + 1),
            "]".repeat(MAX_RAW_DEPTH + 1)
        );
        assert!(serde_json::from_str::<RawJson>(&deep).is_err());
        let in_string = format!("[\"{}\\\"{}\"]", "[".repeat(500), "{".repeat(500));
        assert!(serde_json::from_str::<RawJson>(&in_string).is_ok());
    }

    #[test]
    fn unknown_fields_insert_get_remove() {
        let mut u = UnknownFields::new();
        u.insert("a", raw("1"));
        u.push("b".into(), raw("2"));
        u.push("a".into(), raw("3"));
        u.insert("a", raw("4"));
        assert_eq!(u.get("a"), Some(&raw("4")));
        assert_eq!(u.len(), 3);
        assert_eq!(u.remove("a"), Some(raw("4")));
        assert_eq!(u.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["b"]);
    }
}
