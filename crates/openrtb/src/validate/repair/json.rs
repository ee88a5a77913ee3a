//! A JSON document edited in place, for the native request string: objects and arrays are
//! opened only where a repair looks, as their members in order with each value kept as its
//! original text; writing the document back copies every object, array and value that no repair
//! changed byte for byte, and rebuilds only those that were (compact, members in their order).
//!
//! A rebuilt object writes its keys as they came when they held no escape sequence, otherwise
//! re-escaped by serde_json (the same key, possibly spelt differently).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One JSON value: as received, opened for editing, or written by a repair.
pub(super) enum Value<'a> {
    Raw(&'a RawValue),
    Object(Object<'a>),
    Array(Array<'a>),
    /// JSON text set by a repair.
    Written(String),
}

pub(super) struct Object<'a> {
    source: &'a RawValue,
    members: Vec<(Key<'a>, Value<'a>)>,
    /// A member was removed, added or replaced (changes inside a member are the member's).
    edited: bool,
}

pub(super) struct Array<'a> {
    source: &'a RawValue,
    items: Vec<Value<'a>>,
    edited: bool,
}

/// A member name: borrowed from the input when it held no escape sequence, so that its text
/// is the name itself.
struct Key<'a>(Cow<'a, str>);

/// A value that is not a JSON integer in the `i32` range, nor `null`.
#[derive(Debug)]
pub(super) struct NotAnInt;

impl<'a> Value<'a> {
    /// The JSON text `text`, unopened; `None` when it is not JSON.
    pub(super) fn parse(text: &'a str) -> Option<Value<'a>> {
        serde_json::from_str::<&RawValue>(text).ok().map(Value::Raw)
    }

    /// Opens the value as an object; `None` when it is not one.
    pub(super) fn as_object_mut(&mut self) -> Option<&mut Object<'a>> {
        if let Value::Raw(raw) = *self {
            let Members(members) = serde_json::from_str(raw.get()).ok()?;
            *self = Value::Object(Object {
                source: raw,
                members,
                edited: false,
            });
        }
        match self {
            Value::Object(object) => Some(object),
            _ => None,
        }
    }

    /// Opens the value as an array; `None` when it is not one.
    pub(super) fn as_array_mut(&mut self) -> Option<&mut Array<'a>> {
        if let Value::Raw(raw) = *self {
            let items: Vec<&RawValue> = serde_json::from_str(raw.get()).ok()?;
            *self = Value::Array(Array {
                source: raw,
                items: items.into_iter().map(Value::Raw).collect(),
                edited: false,
            });
        }
        match self {
            Value::Array(array) => Some(array),
            _ => None,
        }
    }

    /// The value as the typed model reads an `Option<i32>`: `null` is `None`.
    pub(super) fn int(&self) -> Result<Option<i32>, NotAnInt> {
        let text = match self {
            Value::Raw(raw) => raw.get(),
            Value::Written(text) => text,
            Value::Object(_) | Value::Array(_) => return Err(NotAnInt),
        };
        serde_json::from_str(text).map_err(|_| NotAnInt)
    }

    fn is_null(&self) -> bool {
        matches!(self, Value::Raw(raw) if raw.get() == "null")
    }

    fn is_edited(&self) -> bool {
        match self {
            Value::Raw(_) => false,
            Value::Written(_) => true,
            Value::Object(o) => o.edited || o.members.iter().any(|(_, v)| v.is_edited()),
            Value::Array(a) => a.edited || a.items.iter().any(Value::is_edited),
        }
    }

    /// The value as JSON text.
    pub(super) fn to_json(&self) -> Option<String> {
        let mut out = String::new();
        self.write(&mut out)?;
        Some(out)
    }

    fn write(&self, out: &mut String) -> Option<()> {
        match self {
            Value::Raw(raw) => out.push_str(raw.get()),
            Value::Written(text) => out.push_str(text),
            Value::Object(o) if !self.is_edited() => out.push_str(o.source.get()),
            Value::Array(a) if !self.is_edited() => out.push_str(a.source.get()),
            Value::Object(o) => {
                out.push('{');
                for (i, (key, value)) in o.members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    key.write(out)?;
                    out.push(':');
                    value.write(out)?;
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, item) in a.items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out)?;
                }
                out.push(']');
            }
        }
        Some(())
    }
}

impl<'a> Object<'a> {
    fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.members
            .iter()
            .find(|(k, _)| k.0 == key)
            .map(|(_, v)| v)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Value<'a>> {
        self.members
            .iter_mut()
            .find(|(k, _)| k.0 == key)
            .map(|(_, v)| v)
    }

    /// Whether `key` is present with a value other than `null` (what the typed model reads as
    /// `Some`).
    pub(super) fn has(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| !v.is_null())
    }

    /// The member `key` read as an `Option<i32>`; absent is `None`. With a key given twice, the
    /// first (the typed model refuses such a document anyway).
    pub(super) fn int(&self, key: &str) -> Result<Option<i32>, NotAnInt> {
        self.get(key).map_or(Ok(None), Value::int)
    }

    /// The member `key`, opened as an object.
    pub(super) fn object_mut(&mut self, key: &str) -> Option<&mut Object<'a>> {
        self.get_mut(key)?.as_object_mut()
    }

    /// The member `key`, opened as an array.
    pub(super) fn array_mut(&mut self, key: &str) -> Option<&mut Array<'a>> {
        self.get_mut(key)?.as_array_mut()
    }

    /// Removes every member named `key`; whether there was one.
    pub(super) fn remove(&mut self, key: &str) -> bool {
        let before = self.members.len();
        self.members.retain(|(k, _)| k.0 != key);
        let removed = self.members.len() != before;
        self.edited |= removed;
        removed
    }

    /// Sets the member `key` to the JSON text `json`: in place of its first occurrence, or
    /// first in the object (where ids go).
    pub(super) fn set(&mut self, key: &'static str, json: String) {
        self.edited = true;
        match self.get_mut(key) {
            Some(value) => *value = Value::Written(json),
            None => self
                .members
                .insert(0, (Key(Cow::Borrowed(key)), Value::Written(json))),
        }
    }
}

impl<'a> Array<'a> {
    pub(super) fn items_mut(&mut self) -> &mut [Value<'a>] {
        &mut self.items
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// Keeps the items for which `keep` (given each item's index) is true.
    pub(super) fn retain_indexed(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let mut i = 0;
        let before = self.items.len();
        self.items.retain(|_| {
            let kept = keep(i);
            i += 1;
            kept
        });
        self.edited |= self.items.len() != before;
    }
}

impl Key<'_> {
    fn write(&self, out: &mut String) -> Option<()> {
        match &self.0 {
            Cow::Borrowed(name) => {
                out.push('"');
                out.push_str(name);
                out.push('"');
            }
            Cow::Owned(name) => out.push_str(&serde_json::to_string(name).ok()?),
        }
        Some(())
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(name)))
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// An object's members in order, duplicates included.
struct Members<'a>(Vec<(Key<'a>, Value<'a>)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    members.push((key, Value::Raw(value)));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}
