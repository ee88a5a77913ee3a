//! `commit`: charges a reservation's clearing price, once; a duplicate is answered with what
//! was charged, as [`crate::Book::commit`].

use units::Nanos;

use super::{
    Ctx, Encoded, Keys, LedgerScript, Routed, array, beyond_any_budget, lua, ms, nanos_at, status,
    unexpected,
};
use crate::book::{CommitOutcome, SettleError};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

#[derive(Clone, Debug)]
pub(crate) struct Commit<'a> {
    pub(crate) id: &'a str,
    /// The reservation's campaign: its keys are in the campaign's slot.
    pub(crate) campaign: &'a str,
    pub(crate) price: Nanos,
}

impl LedgerScript for Commit<'_> {
    const NAME: &'static str = "commit";
    type Reply = Result<CommitOutcome, SettleError>;
    lua!("commit.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(self.campaign, &[format!("r:{}", self.id)])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        if self.price.get() < 0 {
            return Encoded::Answered(Ok(Err(SettleError::NegativePrice)));
        }
        Encoded::Send(vec![
            self.id.to_owned(),
            beyond_any_budget(self.price),
            ms(ctx.now),
            ctx.day(),
            ctx.tombstone_ms.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        Ok(match status(&items)? {
            "Charged" => Ok(CommitOutcome::Charged(nanos_at(&items, 1)?)),
            "ChargedAfterRelease" => Ok(CommitOutcome::ChargedAfterRelease(nanos_at(&items, 1)?)),
            "AlreadyCommitted" => Ok(CommitOutcome::AlreadyCommitted(nanos_at(&items, 1)?)),
            "UnknownReservation" => Err(SettleError::UnknownReservation),
            "NegativePrice" => Err(SettleError::NegativePrice),
            // The price as the caller gave it, not as clamped for Lua.
            "AboveReservation" => Err(SettleError::AboveReservation {
                reserved: nanos_at(&items, 1)?,
                price: self.price,
            }),
            other => return Err(unexpected(Self::NAME, other)),
        })
    }
}
