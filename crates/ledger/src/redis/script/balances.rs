//! A campaign's balance, read with one `HMGET` of its hash (not a script: a read needs no
//! atomicity beyond one command, and `HMGET`s pipeline, or on a cluster go to each campaign's
//! node). The day's rollover is applied to the view, not stored; the balance is computed here
//! exactly as [`crate::Book`] computes it.

use units::Timestamp;

use super::{array, protocol};
use crate::book::{Balance, DailyBalance};
use crate::redis::LedgerError;
use crate::redis::resp::Value;
use units::Nanos;

/// The fields read, in the order [`balance_of`] reads them.
pub(crate) const BALANCE_FIELDS: [&str; 7] = [
    "total",
    "spent",
    "reserved",
    "daily",
    "day",
    "day_spent",
    "day_reserved",
];

/// A counter of the hash: absent is zero, as the scripts read it.
fn field(items: &[Value], i: usize) -> Result<Option<i64>, LedgerError> {
    match items.get(i) {
        None | Some(Value::Nil) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| LedgerError::Protocol(format!("campaign field {i} is not an integer"))),
    }
}

/// `campaign`'s balance as of `now` from the `HMGET` of [`BALANCE_FIELDS`]; `None` when the
/// campaign is unknown (no `total`).
pub(crate) fn balance_of(
    campaign: &str,
    reply: Value,
    now: Timestamp,
) -> Result<Option<Balance>, LedgerError> {
    let items = array(reply)?;
    let Some(total) = field(&items, 0)? else {
        return Ok(None);
    };
    let n = |i| field(&items, i).map(|v| Nanos(v.unwrap_or(0)));
    let (total, spent, reserved) = (Nanos(total), n(1)?, n(2)?);
    let daily = field(&items, 3)?.map(Nanos);
    let stored_day =
        u64::try_from(field(&items, 4)?.unwrap_or(0)).map_err(|_| protocol("negative day"))?;
    // The lazy rollover the scripts apply: a later day starts its counters at zero.
    let today = now.day();
    let (day, day_spent, day_reserved) = if today > stored_day {
        (today, Nanos::ZERO, Nanos::ZERO)
    } else {
        (stored_day, n(5)?, n(6)?)
    };
    let used = spent.saturating_add(reserved);
    let daily = daily.map(|daily| {
        let day_used = day_spent.saturating_add(day_reserved);
        let budget = daily.max(day_used);
        DailyBalance {
            day,
            budget,
            spent: day_spent,
            reserved: day_reserved,
            available: budget.saturating_sub(day_used),
        }
    });
    let budget = total.max(used);
    Ok(Some(Balance {
        campaign: campaign.to_owned(),
        budget,
        spent,
        reserved,
        available: budget.saturating_sub(used),
        daily,
    }))
}
