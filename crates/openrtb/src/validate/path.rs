//! Field paths for error messages, and the small checks every rule is made of.
//!
//! A [`Path`] is built on the stack as the checks descend (`imp` -> `[0]` -> `video` ->
//! `mimes`), one borrowed link per level, and is written out as text only when a check fails:
//! the valid path allocates nothing.

use std::fmt::{self, Write as _};

use super::InvalidRequest;

#[derive(Clone, Copy, Debug)]
enum Step {
    Key(&'static str),
    Index(usize),
}

/// Where a value sits in the request, e.g. `imp[0].banner.format[1].w`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    step: Step,
}

impl Path<'static> {
    /// A top-level key of the request.
    pub(super) const fn root(key: &'static str) -> Path<'static> {
        Path {
            parent: None,
            step: Step::Key(key),
        }
    }
}

impl<'a> Path<'a> {
    /// The member `key` of the object at `self`.
    pub(super) fn key(&'a self, key: &'static str) -> Path<'a> {
        Path {
            parent: Some(self),
            step: Step::Key(key),
        }
    }

    /// Element `index` of the array at `self`.
    pub(super) fn index(&'a self, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            step: Step::Index(index),
        }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parent) = self.parent {
            parent.fmt(f)?;
        }
        match self.step {
            Step::Key(key) => {
                if self.parent.is_some() {
                    f.write_char('.')?;
                }
                f.write_str(key)
            }
            Step::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// The refusal of the value at `at`.
#[cold]
pub(super) fn fail(at: Path<'_>, problem: &'static str) -> InvalidRequest {
    InvalidRequest::Field {
        path: at.to_string(),
        problem,
    }
}

pub(super) type Check = Result<(), InvalidRequest>;

/// A `0 = no, 1 = yes` flag, when present.
pub(super) fn flag(value: Option<i32>, at: Path<'_>) -> Check {
    match value {
        Some(v) if !is_flag(v) => Err(fail(at, "must be 0 or 1")),
        _ => Ok(()),
    }
}

/// The values of a `0 = no, 1 = yes` flag.
pub(super) fn is_flag(value: i32) -> bool {
    matches!(value, 0 | 1)
}

/// A count, size, duration or rate, when present.
pub(super) fn non_negative<T: PartialOrd + Default>(value: Option<T>, at: Path<'_>) -> Check {
    match value {
        Some(v) if v < T::default() => Err(fail(at, "must not be negative")),
        _ => Ok(()),
    }
}

/// Each element of an array of counts or durations.
pub(super) fn all_non_negative(values: Option<&[i32]>, at: Path<'_>) -> Check {
    for (i, &v) in values.unwrap_or_default().iter().enumerate() {
        non_negative(Some(v), at.index(i))?;
    }
    Ok(())
}

/// A value that must be present.
pub(super) fn required<T>(value: Option<T>, at: Path<'_>) -> Result<T, InvalidRequest> {
    value.ok_or_else(|| fail(at, "required"))
}

/// A code from a list of `listed` values that reserves 500 and above for exchange-specific
/// codes (the Native 1.2 lists, `BidRequest.at`), when present.
pub(super) fn listed_or_vendor(
    value: Option<i32>,
    listed: impl Fn(i32) -> bool,
    at: Path<'_>,
    problem: &'static str,
) -> Check {
    match value {
        Some(v) if !is_listed_or_vendor(v, listed) => Err(fail(at, problem)),
        _ => Ok(()),
    }
}

/// Whether `value` is a `listed` code or an exchange-specific one (500 and above).
pub(super) fn is_listed_or_vendor(value: i32, listed: impl Fn(i32) -> bool) -> bool {
    listed(value) || value >= 500
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_as_json_paths() {
        let imp = Path::root("imp");
        let first = imp.index(0);
        let format = first.key("banner");
        let format = format.key("format");
        let second = format.index(1);
        assert_eq!(second.key("w").to_string(), "imp[0].banner.format[1].w");
        assert_eq!(Path::root("device").to_string(), "device");
    }
}
