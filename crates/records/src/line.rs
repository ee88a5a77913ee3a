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
    #[error("record version {0} is not one Gavel writes (1 to {VERSION})")]
    UnknownVersion(u16),
    #[error("record field {field} is negative ({value}): money in a record never is")]
    Negative { field: String, value: i64 },
}

/// `record` as one JSON object, without the newline.
pub fn to_line(record: &Record, out: &mut Vec<u8>) -> Result<(), RecordError> {
    serde_json::to_writer(out, record).map_err(RecordError::Invalid)
}

/// The record on one line (a trailing `\n` or `\r\n` is allowed), checked: a version Gavel
/// writes, no negative money (refused naming the field).
pub fn from_line(line: &[u8]) -> Result<Record, RecordError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(RecordError::TooLong(line.len()));
    }
    let record: Record = serde_json::from_slice(line)?;
    check(&record)?;
    Ok(record)
}

/// A record's version and money, as a reader must find them.
fn check(record: &Record) -> Result<(), RecordError> {
    match record.version() {
        0 => return Err(RecordError::UnknownVersion(0)),
        v if v > VERSION => return Err(RecordError::NewerVersion(v)),
        _ => {}
    }
    let not_negative = |field: &dyn Fn() -> String, value: i64| {
        if value < 0 {
            Err(RecordError::Negative {
                field: field(),
                value,
            })
        } else {
            Ok(())
        }
    };
    match record {
        Record::Auction(a) => {
            for (i, imp) in a.imps.iter().enumerate() {
                not_negative(&|| format!("imps[{i}].floor_micros"), imp.floor_micros)?;
                for (j, deal) in imp.deals.iter().enumerate() {
                    not_negative(
                        &|| format!("imps[{i}].deals[{j}].floor_micros"),
                        deal.floor_micros,
                    )?;
                }
            }
            for (i, win) in a.wins.iter().enumerate() {
                not_negative(&|| format!("wins[{i}].cleared_micros"), win.cleared_micros)?;
                not_negative(&|| format!("wins[{i}].charged_micros"), win.charged_micros)?;
            }
            Ok(())
        }
        Record::Notice(n) => {
            not_negative(&|| "price_micros".to_owned(), n.price_micros.unwrap_or(0))
        }
        Record::Ledger(l) => not_negative(&|| "amount_nanos".to_owned(), l.amount_nanos),
    }
}
