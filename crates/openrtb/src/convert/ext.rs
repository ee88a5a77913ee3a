//! The `ext` edits both directions are made of: write moved values into an `ext` in one
//! rewrite, take 2.5 values out of one and type them. An `ext` with nothing to take is left
//! as it is, text untouched and not reserialized.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::error::{ConvertError, JsonPath};
use crate::raw::{RawJson, WithoutFields};

/// `value` as JSON text, to be written into an `ext` at `path`.
pub(super) fn encode<T: Serialize + ?Sized>(
    value: &T,
    path: JsonPath,
) -> Result<Box<RawValue>, ConvertError> {
    serde_json::value::to_raw_value(value).map_err(|source| ConvertError::Encode { path, source })
}

/// `ext` with `fields` set (existing keys overwritten in place, new ones appended), in one
/// rewrite. `ext` of `None` becomes an object of just `fields`; `path` names `ext` in errors.
pub(super) fn with_fields(
    ext: Option<&RawJson>,
    fields: &[(&str, &RawValue)],
    path: JsonPath,
) -> Result<RawJson, ConvertError> {
    RawJson::with_fields(ext.map(RawJson::as_raw_value), fields)
        .map_err(|err| ConvertError::from_raw(path, err))
}

/// Takes `keys` out of `ext` (see [`RawJson::without_fields`]): `None` when `ext` has none of
/// them. `path` names `ext` in errors.
pub(super) fn take<'a, const N: usize>(
    ext: &'a RawValue,
    keys: [&str; N],
    path: JsonPath,
) -> Result<Option<WithoutFields<'a, N>>, ConvertError> {
    RawJson::without_fields(ext, keys).map_err(|err| ConvertError::from_raw(path, err))
}

/// A value taken from a 2.5 `ext`, typed for its 2.6 field: absent or `null` is `None`, a
/// value of the wrong type an error at `path`.
pub(super) fn parse<T: DeserializeOwned>(
    value: Option<&RawValue>,
    path: JsonPath,
) -> Result<Option<T>, ConvertError> {
    match value {
        None => Ok(None),
        Some(raw) if raw.get().trim() == "null" => Ok(None),
        Some(raw) => serde_json::from_str(raw.get())
            .map(Some)
            .map_err(|source| ConvertError::WrongType { path, source }),
    }
}
