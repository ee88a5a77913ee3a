//! `report_lease`: charges a lease holder's cumulative spend (what is new since the highest
//! earlier report) and extends an open lease.

use units::{Nanos, Timestamp};

use super::{
    Ctx, Encoded, Keys, LedgerScript, Routed, array, clamped, lease_error, lua, ms, nanos_at,
    status, time_at,
};
use crate::redis::resp::Value;
use crate::redis::{LeaseError, LedgerError};

/// The state of a lease in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Its unreported amount is reserved for its holder.
    Open,
    /// Closed by its holder; its remainder went back to the campaign.
    Closed,
    /// Expired before its holder extended it; the sweep returned its remainder.
    Reclaimed,
}

impl LeaseState {
    fn read(v: Option<&Value>) -> Result<LeaseState, LedgerError> {
        match v.and_then(Value::as_str) {
            Some("open") => Ok(LeaseState::Open),
            Some("closed") => Ok(LeaseState::Closed),
            Some("reclaimed") => Ok(LeaseState::Reclaimed),
            other => Err(LedgerError::Protocol(format!(
                "unknown lease state {other:?}"
            ))),
        }
    }
}

/// The answer to a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseReport {
    /// Newly charged by this call (moved from reserved to spent, or for a lease no longer open,
    /// taken from what the campaign still had available).
    pub charged: Nanos,
    /// Newly reported spend that could not be charged (beyond the lease, or beyond what the
    /// campaign had left after the lease was reclaimed). Count it as a metric: it was spent but
    /// is not in the books.
    pub uncharged: Nanos,
    pub state: LeaseState,
    pub amount: Nanos,
    /// Charged so far against this lease, in total.
    pub reported: Nanos,
    pub expires_at: Timestamp,
}

#[derive(Clone, Debug)]
pub(crate) struct ReportLease {
    pub(crate) id: String,
    /// The lease's campaign: its keys are in the campaign's slot.
    pub(crate) campaign: String,
    /// Everything spent against the lease so far (cumulative, so repeats change nothing).
    pub(crate) cumulative: Nanos,
    /// The new expiry of an open lease (it never moves back).
    pub(crate) expires_at: Timestamp,
}

impl LedgerScript for ReportLease {
    const NAME: &'static str = "report_lease";
    type Reply = Result<LeaseReport, LeaseError>;
    lua!("report_lease.lua");

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
            ms(self.expires_at),
            ctx.day(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        Ok(match status(&items)? {
            "ok" => Ok(LeaseReport {
                charged: nanos_at(&items, 1)?,
                uncharged: nanos_at(&items, 2)?,
                state: LeaseState::read(items.get(3))?,
                amount: nanos_at(&items, 4)?,
                reported: nanos_at(&items, 5)?,
                expires_at: time_at(&items, 6)?,
            }),
            other => Err(lease_error(Self::NAME, other)?),
        })
    }
}
