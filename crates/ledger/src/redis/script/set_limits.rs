//! `set_limits`: creates a campaign or replaces its limits; the budget in force never drops
//! below what is spent and reserved.

use units::Limits;

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, exact, lua, status, unexpected};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

#[derive(Clone, Debug)]
pub(crate) struct SetLimits {
    pub(crate) campaign: String,
    pub(crate) limits: Limits,
}

impl LedgerScript for SetLimits {
    const NAME: &'static str = "set_limits";
    type Answer = ();
    lua!("set_limits.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(&self.campaign, &[])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<()> {
        let total = match exact(self.limits.total, "total budget") {
            Ok(t) => t,
            Err(e) => return Encoded::Answered(Err(e)),
        };
        let daily = match self.limits.daily.map(|d| exact(d, "daily budget")) {
            None => String::new(),
            Some(Ok(d)) => d,
            Some(Err(e)) => return Encoded::Answered(Err(e)),
        };
        Encoded::Send(vec![
            self.campaign.clone(),
            total,
            daily,
            ctx.day(),
            ctx.ledger.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<(), LedgerError> {
        match status(&array(reply)?)? {
            "ok" => Ok(()),
            "NoLedger" => Err(LedgerError::NoLedger),
            other => Err(unexpected(Self::NAME, other)),
        }
    }
}
