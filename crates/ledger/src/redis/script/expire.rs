//! `expire`: the sweep. Releases open reservations and reclaims open leases whose expiry has
//! passed, at most one batch per call.

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, count_at, int_at, lua, ms};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Reservations released because their expiry passed.
    pub reservations: usize,
    /// Leases reclaimed because their expiry passed.
    pub leases: usize,
    /// The batch was full: call again to continue.
    pub more: bool,
}

impl Swept {
    pub const fn total(&self) -> usize {
        self.reservations + self.leases
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Expire {
    /// The campaign whose sweep index (its hash tag's) is swept.
    pub(crate) campaign: String,
}

impl LedgerScript for Expire {
    const NAME: &'static str = "expire";
    type Reply = Swept;
    lua!("expire.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(&self.campaign, &[])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Swept> {
        Encoded::Send(vec![
            ms(ctx.now),
            ctx.day(),
            ctx.tombstone_ms.to_owned(),
            ctx.sweep_batch.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Swept, LedgerError> {
        let items = array(reply)?;
        Ok(Swept {
            reservations: count_at(&items, 0)?,
            leases: count_at(&items, 1)?,
            more: int_at(&items, 2)? != 0,
        })
    }
}
