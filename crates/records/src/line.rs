//! A record as one line of JSON, and back.

use thiserror::Error;

use crate::{Record, VERSION};

/// Longest line a reader accepts: an auction record at fan-out 10 is about 3 KB; a line past
/// this is not a record Gavel wrote.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Why a line is not a record.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("record line is {0} bytes, more than the {MAX_LINE_BYTES} allowed")]
    TooLong(usize),
    #[error("record line is not a record: {0}")]
    Invalid(#[from] serde_json::Error),
    #[error("record version {0} is newer than this build reads ({VERSION}); upgrade gavel")]
    NewerVersion(u16),
}

/// `record` as one JSON object, without the newline.
pub fn to_line(record: &Record, out: &mut Vec<u8>) -> Result<(), RecordError> {
    serde_json::to_writer(out, record).map_err(RecordError::Invalid)
}

/// The record on one line (a trailing `\n` or `\r\n` is allowed).
pub fn from_line(line: &[u8]) -> Result<Record, RecordError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(RecordError::TooLong(line.len()));
    }
    let record: Record = serde_json::from_slice(line)?;
    match record.version() {
        v if v > VERSION => Err(RecordError::NewerVersion(v)),
        _ => Ok(record),
    }
}
