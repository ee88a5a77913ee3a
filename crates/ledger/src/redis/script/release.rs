//! `release`: returns a lost bid's reservation to its campaign, as [`crate::Book::release`].

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, lua, nanos_at, status, unexpected};
use crate::book::{ReleaseOutcome, SettleError};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

#[derive(Clone, Debug)]
pub(crate) struct Release<'a> {
    pub(crate) id: &'a str,
    /// The reservation's campaign: its keys are in the campaign's slot.
    pub(crate) campaign: &'a str,
}

impl LedgerScript for Release<'_> {
    const NAME: &'static str = "release";
    type Reply = Result<ReleaseOutcome, SettleError>;
    lua!("release.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(self.campaign, &[format!("r:{}", self.id)])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        Encoded::Send(vec![
            self.id.to_owned(),
            ctx.day(),
            ctx.tombstone_ms.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        Ok(match status(&items)? {
            "Released" => Ok(ReleaseOutcome::Released(nanos_at(&items, 1)?)),
            "AlreadyReleased" => Ok(ReleaseOutcome::AlreadyReleased),
            "AlreadyCommitted" => Ok(ReleaseOutcome::AlreadyCommitted),
            "UnknownReservation" => Err(SettleError::UnknownReservation),
            other => return Err(unexpected(Self::NAME, other)),
        })
    }
}
