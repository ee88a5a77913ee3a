//! `close_lease`: a final report, then the lease's unreported remainder back to its campaign.

use units::Nanos;

use super::{
    Ctx, Encoded, Keys, LedgerScript, Routed, array, clamped, lease_error, lua, nanos_at, status,
};
use crate::redis::resp::Value;
use crate::redis::{LeaseError, LedgerError};

/// The answer to a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseClose {
    pub charged: Nanos,
    pub uncharged: Nanos,
    /// Returned to the campaign by this call (zero if the lease was already closed or reclaimed).
    pub released: Nanos,
    pub amount: Nanos,
    pub reported: Nanos,
}

#[derive(Clone, Debug)]
pub(crate) struct CloseLease {
    pub(crate) id: String,
    /// The lease's campaign: its keys are in the campaign's slot.
    pub(crate) campaign: String,
    pub(crate) cumulative: Nanos,
}

impl LedgerScript for CloseLease {
    const NAME: &'static str = "close_lease";
    type Reply = Result<LeaseClose, LeaseError>;
    lua!("close_lease.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(&self.campaign, &[format!("l:{}", self.id)])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        if self.cumulative.get() < 0 {
            return Encoded::Answered(Ok(Err(LeaseError::NegativeSpend)));
        }
        Encoded::Send(vec![
            self.id.clone(),
            clamped(self.cumulative),
            ctx.day(),
            ctx.tombstone_ms.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        Ok(match status(&items)? {
            "ok" => Ok(LeaseClose {
                charged: nanos_at(&items, 1)?,
                uncharged: nanos_at(&items, 2)?,
                released: nanos_at(&items, 3)?,
                amount: nanos_at(&items, 4)?,
                reported: nanos_at(&items, 5)?,
            }),
            other => Err(lease_error(Self::NAME, other)?),
        })
    }
}
