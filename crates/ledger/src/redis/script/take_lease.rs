//! `take_lease`: grants part of a campaign's budget to a lease, creating or growing it.

use units::{Nanos, Timestamp};

use super::{
    Ctx, Encoded, Keys, LedgerScript, Routed, array, clamped, lease_error, lua, ms, nanos_at,
    status, time_at,
};
use crate::redis::resp::Value;
use crate::redis::{LeaseError, LedgerError};

/// The answer to a take: what it added and what the lease now holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseGrant {
    /// Added to the lease by this call: `min(want, total available, today's available)`, maybe 0.
    pub granted: Nanos,
    /// The lease's amount after this call (everything ever granted to it).
    pub amount: Nanos,
    /// The lease's expiry after this call (it only moves forward).
    pub expires_at: Timestamp,
}

/// What a take may do to the lease of that id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Create it, or grow it if it exists (`RedisLedger::take_lease`).
    CreateOrGrow,
    /// Grow it only: answer [`LeaseError::UnknownLease`] rather than create it. The caller
    /// holds it, so a Redis that does not know it lost it, and must not re-create it under the
    /// old id with the amount the caller believes in.
    GrowOnly,
    /// Create it only: if it exists, answer it as it stands. A creation whose answer was lost
    /// (a timeout) is sent again under the same id; had it been applied, growing the lease a
    /// second time would park a second chunk on this instance.
    CreateOnce,
}

#[derive(Clone, Debug)]
pub(crate) struct TakeLease {
    pub(crate) id: String,
    pub(crate) campaign: String,
    pub(crate) want: Nanos,
    pub(crate) expires_at: Timestamp,
    /// Whether the lease may be created, grown, or both.
    pub(crate) take: Take,
    /// The holder's node: a lease it creates becomes the node's lease of the campaign, which
    /// other instances charge when they settle its reservations (empty: none).
    pub(crate) node: String,
}

impl LedgerScript for TakeLease {
    const NAME: &'static str = "take_lease";
    type Reply = Result<LeaseGrant, LeaseError>;
    lua!("take_lease.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(
            &self.campaign,
            &[
                format!("l:{}", self.id),
                format!("own:{}:{}", self.node, self.campaign),
            ],
        )
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        if !self.want.is_positive() {
            return Encoded::Answered(Ok(Err(LeaseError::NonPositiveAmount)));
        }
        let take = match self.take {
            Take::CreateOrGrow => "0",
            Take::GrowOnly => "1",
            Take::CreateOnce => "2",
        };
        Encoded::Send(vec![
            self.id.clone(),
            self.campaign.clone(),
            clamped(self.want),
            ms(self.expires_at),
            ctx.day(),
            take.to_owned(),
            self.node.clone(),
            ctx.ledger.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        Ok(match status(&items)? {
            "NoLedger" => return Err(LedgerError::NoLedger),
            "ok" => Ok(LeaseGrant {
                granted: nanos_at(&items, 1)?,
                amount: nanos_at(&items, 2)?,
                expires_at: time_at(&items, 3)?,
            }),
            other => Err(lease_error(Self::NAME, other)?),
        })
    }
}
