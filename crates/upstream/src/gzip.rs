//! gzip (RFC 1952) for the bodies of calls to bidders, pure: [`compress`] a request body once
//! for every bidder that asked for gzip, [`inflate`] an answer that came back gzip-encoded.
//!
//! Rules: inflating is bounded by the caller's `max` and stops as soon as the output would
//! pass it, so a small answer that inflates to gigabytes (a zip bomb) costs at most `max` + 1
//! bytes and the time to produce them, never more. A stream must be whole: a truncated one,
//! a bad checksum or length, or bytes after the last member are errors. Several members one
//! after another (RFC 1952 §2.2) are one body, as the RFC has it.

use std::cell::RefCell;
use std::io::Read;

use bytes::Bytes;
use flate2::bufread::MultiGzDecoder;
use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// The compression level of request bodies: 2. On a typical 2.8 KB bid request (zlib-rs,
/// benches/gzip.rs, CPU time, state reused) it saves 45% (1526 B) in 34-39 µs; level 1 takes
/// 18-20 µs but saves only 33% (1884 B: zlib-rs's level 1 uses fixed Huffman codes only), and
/// level 6 saves 46% (1498 B) in 50-53 µs. The exchange pays this once per distinct body and
/// auction; the bytes saved are saved again for every gzip bidder. (miniz_oxide, the other
/// pure-Rust backend, was slower at every level and inflated 15-30% slower.)
pub const LEVEL: Compression = Compression::new(2);

/// A member header with no name, time or comment: magic, deflate, no flags, no time, no
/// extra flags (neither the fastest nor the best level), OS unknown (RFC 1952 §2.3).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
/// The trailer: CRC-32 and length modulo 2^32 of the uncompressed body, little-endian.
const GZIP_TRAILER_LEN: usize = 8;

thread_local! {
    /// One deflate state per thread, reset for every body: allocating and clearing a fresh
    /// one (a few hundred KB) cost more than a quarter of compressing a bid request.
    static DEFLATE: RefCell<Option<Compress>> = const { RefCell::new(None) };
}

/// The first output buffer of [`inflate`], before it knows the body's inflated size: JSON
/// usually deflates 3 to 8 times, so four times the input holds most bodies at once.
const FIRST_GUESS_RATIO: usize = 4;
/// The smallest first output buffer, so that tiny inputs do not grow by many small steps.
const MIN_FIRST_BUFFER: usize = 4 * 1024;

/// Why a gzip body could not be inflated.
#[derive(Debug, thiserror::Error)]
pub enum InflateError {
    /// The inflated body would be larger than the limit (a zip bomb, or just a large answer).
    #[error("gzip body inflates to more than {0} bytes")]
    TooLarge(usize),
    /// The stream stops before its end: cut short in a member's header, data or trailer.
    #[error("gzip body is truncated")]
    Truncated,
    /// Not a gzip stream, corrupt data, a checksum or length that does not match, or bytes
    /// after the last member.
    #[error("gzip body is malformed: {0}")]
    Malformed(std::io::Error),
}

/// Why a body could not be compressed: the compressor's own refusal, which a whole body in
/// memory never meets (no I/O, the output grows as needed). The caller then sends the body
/// uncompressed.
#[derive(Debug, thiserror::Error)]
pub enum CompressError {
    #[error("deflate failed: {0}")]
    Deflate(#[from] flate2::CompressError),
    #[error("deflate stopped making progress")]
    Stalled,
}

/// `body` as one gzip member at [`LEVEL`], with a minimal header (no name, time or comment).
pub fn compress(body: &[u8]) -> Result<Bytes, CompressError> {
    let mut out = Vec::with_capacity(
        GZIP_HEADER
            .len()
            .saturating_add(deflate_bound(body.len()))
            .saturating_add(GZIP_TRAILER_LEN),
    );
    out.extend_from_slice(&GZIP_HEADER);
    // The thread's state when it is there and free; a fresh one otherwise (the thread is
    // exiting, or this is a call from inside another, which nothing here makes).
    let reused = DEFLATE.try_with(|slot| {
        let mut slot = slot.try_borrow_mut().ok()?;
        let deflate = slot.get_or_insert_with(|| Compress::new(LEVEL, false));
        deflate.reset();
        Some(deflate_into(deflate, body, &mut out))
    });
    match reused {
        Ok(Some(done)) => done?,
        _ => deflate_into(&mut Compress::new(LEVEL, false), body, &mut out)?,
    }
    let mut crc = Crc::new();
    crc.update(body);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    Ok(Bytes::from(out))
}

/// Deflates all of `body` onto the end of `out` with a fresh (or just reset) `deflate`,
/// growing `out` whenever it is full.
fn deflate_into(
    deflate: &mut Compress,
    body: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressError> {
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity().max(256));
        }
        let consumed = usize::try_from(deflate.total_in()).unwrap_or(usize::MAX);
        let rest = body.get(consumed..).unwrap_or_default();
        let before = (deflate.total_in(), deflate.total_out());
        if deflate.compress_vec(rest, out, FlushCompress::Finish)? == Status::StreamEnd {
            return Ok(());
        }
        // With input left or room to write, a step that moved nothing would loop forever.
        if (deflate.total_in(), deflate.total_out()) == before && out.len() < out.capacity() {
            return Err(CompressError::Stalled);
        }
    }
}

/// Room for the deflated form of `len` bytes, as zlib bounds it (`compressBound`: stored blocks
/// cost 5 bytes per 16 KB). A first guess only: miniz_oxide may exceed it on bytes that do not
/// compress, and the output then grows.
fn deflate_bound(len: usize) -> usize {
    len.saturating_add(len >> 12)
        .saturating_add(len >> 14)
        .saturating_add(len >> 25)
        .saturating_add(13)
}

/// `body` inflated, if it is a whole gzip stream that inflates to at most `max` bytes. Never
/// holds more than `max` + 1 bytes of output (besides the inflater's own fixed state, its
/// 32 KB window and tables): it stops at the first byte beyond `max`.
pub fn inflate(body: &[u8], max: usize) -> Result<Vec<u8>, InflateError> {
    let mut decoder = MultiGzDecoder::new(body);
    // One byte past the limit is where a too-large body is seen, without reading further.
    let ceiling = max.saturating_add(1);
    let mut out = vec![0u8; first_buffer(body.len(), ceiling)];
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if filled >= ceiling {
                return Err(InflateError::TooLarge(max));
            }
            out.resize(grown(filled, ceiling), 0);
        }
        let Some(free) = out.get_mut(filled..) else {
            return Err(InflateError::TooLarge(max));
        };
        match decoder.read(free) {
            Ok(0) => break,
            Ok(n) => filled = filled.saturating_add(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(InflateError::Truncated);
            }
            Err(e) => return Err(InflateError::Malformed(e)),
        }
    }
    if filled > max {
        return Err(InflateError::TooLarge(max));
    }
    out.truncate(filled);
    Ok(out)
}

/// The first output buffer for an input of `input_len` bytes: a guess at the inflated size,
/// never beyond `ceiling`.
fn first_buffer(input_len: usize, ceiling: usize) -> usize {
    input_len
        .saturating_mul(FIRST_GUESS_RATIO)
        .max(MIN_FIRST_BUFFER)
        .min(ceiling)
}

/// The next size of a full output buffer of `len` bytes: doubled (so that growing costs
/// amortized constant time per byte), never beyond `ceiling`.
fn grown(len: usize, ceiling: usize) -> usize {
    len.saturating_mul(2).max(MIN_FIRST_BUFFER).min(ceiling)
}

#[cfg(test)]
mod tests;
