//! `balances`: read only. The counters of up to one chunk of campaigns, as one consistent
//! snapshot; the balances are computed here exactly as [`crate::Book`] computes them.

use super::{Ctx, Encoded, LedgerScript, array, int_at, lua, nanos_at, protocol, status};
use crate::book::{Balance, DailyBalance};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

/// Campaigns to read; unknown ones are left out of the answer.
#[derive(Clone, Debug)]
pub(crate) struct Balances<'a, S> {
    pub(crate) campaigns: &'a [S],
}

impl<S: AsRef<str>> LedgerScript for Balances<'_, S> {
    const NAME: &'static str = "balances";
    type Answer = Vec<Balance>;
    lua!("balances.lua");

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Vec<Balance>> {
        let mut args = Vec::with_capacity(self.campaigns.len() + 1);
        args.push(ctx.day());
        args.extend(self.campaigns.iter().map(|c| c.as_ref().to_owned()));
        Encoded::Send(args)
    }

    fn decode(&self, reply: Value) -> Result<Vec<Balance>, LedgerError> {
        array(reply)?.into_iter().map(balance_of).collect()
    }
}

/// A balance from the raw counters: the budget in force is the configured one clamped up to
/// spent+reserved; availability is never negative.
fn balance_of(v: Value) -> Result<Balance, LedgerError> {
    let items = array(v)?;
    let campaign = status(&items)?.to_owned();
    let (total, spent, reserved) = (
        nanos_at(&items, 1)?,
        nanos_at(&items, 2)?,
        nanos_at(&items, 3)?,
    );
    let has_daily = int_at(&items, 4)? != 0;
    let used = spent.saturating_add(reserved);
    let daily = if has_daily {
        let daily = nanos_at(&items, 5)?;
        let day = u64::try_from(int_at(&items, 6)?).map_err(|_| protocol("negative day"))?;
        let (day_spent, day_reserved) = (nanos_at(&items, 7)?, nanos_at(&items, 8)?);
        let day_used = day_spent.saturating_add(day_reserved);
        let budget = daily.max(day_used);
        Some(DailyBalance {
            day,
            budget,
            spent: day_spent,
            reserved: day_reserved,
            available: budget.saturating_sub(day_used),
        })
    } else {
        None
    };
    let budget = total.max(used);
    Ok(Balance {
        campaign,
        budget,
        spent,
        reserved,
        available: budget.saturating_sub(used),
        daily,
    })
}
