//! Verbatim JSON: [`RawJson`] holds an `ext` object or an unknown field exactly as it arrived,
//! and [`UnknownFields`] keeps every field this crate does not model, in arrival order.
//!
//! OpenRTB 2.6 asks every party to pass on fields it does not understand (section 2.6), and
//! exchange-specific `ext` objects are opaque to us. Keeping them as text, not as a parsed
//! `serde_json::Value`, costs one copy of the bytes, preserves key order and number spelling,
//! and re-emits them byte for byte.

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
        let members: Vec<(String, &RawValue)> = match ext {
            None => Vec::new(),
            Some(ext) => {
                let text = ext.get().trim_start();
                if !text.starts_with('{') {
                    return Err(RawJsonError::NotAnObject);
                }
                serde_json::from_str::<OrderedMembers<'_>>(text)?.0
            }
        };
        let mut out = String::with_capacity(
            ext.map_or(0, |e| e.get().len()) + key.len() + new_value.get().len() + 8,
        );
        out.push('{');
        let mut replaced = false;
        let mut first = true;
        let mut push_member = |out: &mut String, k: &str, v: &str| -> Result<(), RawJsonError> {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&serde_json::to_string(k)?);
            out.push(':');
            out.push_str(v);
            Ok(())
        };
        for (k, v) in &members {
            if k == key {
                if !replaced {
                    replaced = true;
                    push_member(&mut out, k, new_value.get())?;
                }
            } else {
                push_member(&mut out, k, v.get())?;
            }
        }
        if !replaced {
            push_member(&mut out, key, new_value.get())?;
        }
        out.push('}');
        Ok(RawJson(RawValue::from_string(out)?))
    }
}

/// Members of a JSON object in document order, values borrowed as raw text.
struct OrderedMembers<'a>(Vec<(String, &'a RawValue)>);

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
                while let Some(key) = map.next_key::<String>()? {
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
