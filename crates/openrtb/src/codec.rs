//! JSON entry points: decode a bid request or response from bytes, encode one to bytes.
//!
//! `BidRequest::from_slice` and `BidResponse::from_slice` first try the direct decoder
//! (`direct`: one pass, in place, no serde), which takes the valid traffic. Whatever it leaves
//! goes to [`decode`], plain `serde_json::from_slice` (with its recursion limit of 128 left on,
//! so deep nesting is an error rather than a stack overflow). Only when that fails too is the
//! input decoded a third time through `serde_path_to_error` to learn *where* it failed: path
//! tracking costs on every field, and valid traffic should not pay for the quality of error
//! messages.

use std::fmt;
use std::io;

use serde::Deserialize;

use crate::direct;
use crate::request::BidRequest;
use crate::response::BidResponse;

/// A payload that could not be decoded, with the JSON path of the problem.
///
/// Displays as `imp[0].bidfloor: invalid type: string "x", expected f64 at line 1 column 42`,
/// or without the `path: ` prefix when the problem is at the top level (syntax errors,
/// trailing characters, a missing top-level field).
#[derive(Debug)]
pub struct DecodeError {
    path: String,
    inner: serde_json::Error,
}

impl DecodeError {
    /// Path of the failing value, e.g. `imp[0].banner.format[1].w`; `.` for the top level.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The error as serde_json reported it (without the path).
    pub fn json_error(&self) -> &serde_json::Error {
        &self.inner
    }

    /// 1-based line of the input where the problem was noticed.
    pub fn line(&self) -> usize {
        self.inner.line()
    }

    /// 1-based column of the input where the problem was noticed.
    pub fn column(&self) -> usize {
        self.inner.column()
    }

    /// Syntax, data (valid JSON of the wrong shape), truncated input, or I/O.
    pub fn category(&self) -> serde_json::error::Category {
        self.inner.classify()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() || self.path == "." {
            write!(f, "{}", self.inner)
        } else {
            write!(f, "{}: {}", self.path, self.inner)
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.inner)
    }
}

/// Decodes any OpenRTB object (or other type) from JSON bytes, with a path-naming error.
///
/// Always through serde. For a whole request or response prefer `BidRequest::from_slice` /
/// `BidResponse::from_slice`: same result, same errors, but they try the direct decoder first
/// (about twice as fast on valid traffic).
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(fast) => Err(locate::<T>(bytes, fast)),
    }
}

/// The slow path: decode again, tracking the path, to say where `fast` happened.
#[cold]
fn locate<'a, T: Deserialize<'a>>(bytes: &'a [u8], fast: serde_json::Error) -> DecodeError {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(err) => DecodeError {
            path: err.path().to_string(),
            inner: err.into_inner(),
        },
        // The value itself decoded: the problem is after it (trailing characters).
        Ok(_) => DecodeError {
            path: String::from("."),
            inner: de.end().err().unwrap_or(fast),
        },
    }
}

macro_rules! codec_methods {
    ($ty:ident) => {
        impl $ty {
            /// Decodes from JSON bytes. Unknown fields and `ext` are kept verbatim.
            ///
            /// Takes the direct decoder first; whatever it leaves to serde (errors, and the
            /// rare valid shapes it does not handle) goes through [`decode`], so the result
            /// and any error are the same as `decode`'s.
            pub fn from_slice(bytes: &[u8]) -> Result<$ty, DecodeError> {
                let mut value = $ty::default();
                if direct::decode_into(bytes, &mut value) {
                    Ok(value)
                } else {
                    decode(bytes)
                }
            }

            /// Encodes as compact JSON.
            pub fn to_vec(&self) -> Result<Vec<u8>, serde_json::Error> {
                serde_json::to_vec(self)
            }

            /// Encodes as compact JSON into `writer` (wrap unbuffered writers in a `BufWriter`).
            pub fn to_writer<W: io::Write>(&self, writer: W) -> Result<(), serde_json::Error> {
                serde_json::to_writer(writer, self)
            }
        }
    };
}

codec_methods!(BidRequest);
codec_methods!(BidResponse);
