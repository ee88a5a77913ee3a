//! Why a conversion failed, with the JSON path of the value at fault.

use std::fmt;

use crate::raw::RawJsonError;

/// Where a conversion failed: a fixed path (`regs.ext.gdpr`), under `imp[i]` for imp fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonPath {
    imp: Option<usize>,
    path: &'static str,
}

impl JsonPath {
    /// A path from the top of the request, e.g. `user.ext.eids`.
    pub(super) const fn top(path: &'static str) -> JsonPath {
        JsonPath { imp: None, path }
    }

    /// `path` under `imp[index]`, e.g. `ext.prebid` of imp 2 is `imp[2].ext.prebid`.
    pub(super) const fn imp(index: usize, path: &'static str) -> JsonPath {
        JsonPath {
            imp: Some(index),
            path,
        }
    }

    /// The imp the path is under, if any.
    pub const fn imp_index(self) -> Option<usize> {
        self.imp
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.imp {
            Some(index) => write!(f, "imp[{index}].{}", self.path),
            None => f.write_str(self.path),
        }
    }
}

/// A request that cannot be converted; the message names the JSON path and is safe to send
/// back to the seller.
///
/// On error the request may be partly converted (each object is converted whole or not at all,
/// but objects before the failing one are done): discard it.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// An `ext` (or `imp.ext.prebid`) that a field must be read from or written into is not a
    /// JSON object.
    #[error("{0}: must be a JSON object")]
    NotAnObject(JsonPath),
    /// A 2.5 `ext` value has the wrong type for its 2.6 field (`regs.ext.gdpr: "yes"`).
    #[error("{path}: {source}")]
    WrongType {
        path: JsonPath,
        source: serde_json::Error,
    },
    /// A moved value could not be written as JSON (not expected: the moved types have no
    /// floats); kept as an error rather than a panic.
    #[error("{path}: cannot encode: {source}")]
    Encode {
        path: JsonPath,
        source: serde_json::Error,
    },
}

impl ConvertError {
    /// The path of the value at fault.
    pub const fn path(&self) -> JsonPath {
        match self {
            ConvertError::NotAnObject(path)
            | ConvertError::WrongType { path, .. }
            | ConvertError::Encode { path, .. } => *path,
        }
    }

    /// A bounded label for metrics.
    pub const fn label(&self) -> &'static str {
        match self {
            ConvertError::NotAnObject(_) => "not_an_object",
            ConvertError::WrongType { .. } => "wrong_type",
            ConvertError::Encode { .. } => "encode",
        }
    }

    /// The error of a [`RawJson`](crate::RawJson) edit of the object at `path`. Its text was
    /// validated when it was decoded, so a JSON error there is a write failure.
    pub(super) fn from_raw(path: JsonPath, err: RawJsonError) -> ConvertError {
        match err {
            RawJsonError::NotAnObject => ConvertError::NotAnObject(path),
            RawJsonError::Json(source) => ConvertError::Encode { path, source },
        }
    }
}
