//! The direct decoder: one pass from JSON bytes into the object model, without serde.
//!
//! Why: through serde, a 2.5 kB request cost six times serde_json's bare scan of the same
//! text. The profile put the difference in the value-returning visitor style (every `Option`
//! of a large object is built on the stack and copied into its parent, about a tenth of the
//! time in `memcpy`), in UTF-8 checks per string, and in the generic field and `Option`
//! plumbing. Here each object is decoded in place into its parent's slot, the input is checked
//! to be UTF-8 once, and keys are matched as borrowed slices.
//!
//! The serde `Deserialize` impls stay the reference: this path accepts only input it reads to
//! exactly the value they produce, and rejects everything else without saying why. The entry
//! points in [`codec`](crate::codec) then run the serde decoder, which either decodes the input
//! after all (for the odd valid shapes this path leaves out) or reports the error with its
//! JSON path. The equivalence is tested beside the code (`tests.rs`) on the fixtures and on
//! mutations of them.

mod reader;
#[cfg(test)]
mod tests;

pub(crate) use reader::{Reader, Reject, Result};

use crate::price::Price;

/// A type the direct decoder can read. Leaves implement [`Decode::decode`]; objects (see
/// `openrtb_object!`) also override the in-place methods so that they are never moved once
/// built.
pub(crate) trait Decode: Sized {
    /// Reads one value.
    fn decode(r: &mut Reader<'_>) -> Result<Self>;

    /// Reads one value into `out`, which holds its default.
    #[inline]
    fn decode_into(r: &mut Reader<'_>, out: &mut Self) -> Result<()> {
        *out = Self::decode(r)?;
        Ok(())
    }

    /// Reads an optional field's value into `out` (`None` so far); `null` leaves it `None`.
    #[inline]
    fn decode_option(r: &mut Reader<'_>, out: &mut Option<Self>) -> Result<()> {
        if !r.null() {
            *out = Some(Self::decode(r)?);
        }
        Ok(())
    }

    /// Reads an array, appending its elements to `out` (empty so far).
    ///
    /// Arrays of leaves in a bid request are short (`cur`, `battr`, `api`, `mimes`...): they are
    /// gathered on the stack and moved into one allocation of the exact size, where growing a
    /// `Vec` element by element would allocate two or three times. Objects override this.
    #[inline]
    fn decode_vec(r: &mut Reader<'_>, out: &mut Vec<Self>) -> Result<()> {
        if !r.begin_array()? {
            return Ok(());
        }
        let mut stack: [Option<Self>; STACK_ELEMENTS] = Default::default();
        let mut len = 0;
        loop {
            let value = Self::decode(r)?;
            match stack.get_mut(len) {
                Some(slot) => *slot = Some(value),
                None => {
                    if len == STACK_ELEMENTS {
                        out.reserve(2 * STACK_ELEMENTS);
                        out.extend(stack.iter_mut().filter_map(Option::take));
                    }
                    out.push(value);
                }
            }
            len += 1;
            if !r.next_element()? {
                break;
            }
        }
        if len <= STACK_ELEMENTS {
            out.reserve_exact(len);
            out.extend(stack.iter_mut().filter_map(Option::take));
        }
        Ok(())
    }
}

/// Elements of a leaf array gathered on the stack before the one allocation (at most
/// 16 * 24 bytes for strings).
const STACK_ELEMENTS: usize = 16;

/// `Ok` when every member of `required` is in `seen` (both bit sets of an object's members);
/// a missing required member is left to serde to report.
#[inline]
pub(crate) fn all_seen(seen: u64, required: u64) -> Result<()> {
    if seen & required == required {
        Ok(())
    } else {
        Err(Reject)
    }
}

/// Decodes `bytes` as one `T` into `out` (which holds `T::default()`), or `false` when the
/// serde decoder must have the last word (`out` is then partly filled). In place because a
/// `BidRequest` is 6 kB: each move of it through a `Result` or an `Option` is a `memcpy`.
pub(crate) fn decode_into<T: Decode>(bytes: &[u8], out: &mut T) -> bool {
    // serde_json checks UTF-8 string by string (and refuses any other non-ASCII byte as a
    // syntax error); checking the whole input once is the same rule at a fraction of the cost.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let mut r = Reader::new(text);
    T::decode_into(&mut r, out).is_ok() && r.end().is_ok()
}

impl Decode for String {
    #[inline]
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        r.string()
    }
}

impl Decode for i32 {
    #[inline]
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        r.i32()
    }
}

impl Decode for f64 {
    #[inline]
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        r.f64()
    }
}

impl Decode for Price {
    #[inline]
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        Price::from_cpm(r.f64()?).map_err(|_| Reject)
    }
}

impl<T: Decode> Decode for Vec<T> {
    #[inline]
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let mut out = Vec::new();
        T::decode_vec(r, &mut out)?;
        Ok(out)
    }
}
