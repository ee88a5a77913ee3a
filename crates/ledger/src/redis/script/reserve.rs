//! `reserve`: holds an amount of a campaign's budget (and its day's) under a reservation id
//! until the win, loss or expiry settles it, as [`crate::Book::reserve`].

use units::{Nanos, Timestamp};

use super::{
    Ctx, Encoded, Keys, LedgerScript, Routed, array, beyond_any_budget, lua, ms, status, unexpected,
};
use crate::book::Refusal;
use crate::redis::LedgerError;
use crate::redis::resp::Value;

#[derive(Clone, Debug)]
pub(crate) struct Reserve<'a> {
    pub(crate) id: &'a str,
    pub(crate) campaign: &'a str,
    pub(crate) amount: Nanos,
    pub(crate) expires_at: Timestamp,
}

impl LedgerScript for Reserve<'_> {
    const NAME: &'static str = "reserve";
    type Reply = Result<(), Refusal>;
    lua!("reserve.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(self.campaign, &[format!("r:{}", self.id)])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        if !self.amount.is_positive() {
            return Encoded::Answered(Ok(Err(Refusal::NonPositiveAmount)));
        }
        Encoded::Send(vec![
            self.id.to_owned(),
            self.campaign.to_owned(),
            beyond_any_budget(self.amount),
            ms(self.expires_at),
            ctx.day(),
            ctx.ledger.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        Ok(match status(&array(reply)?)? {
            "ok" => Ok(()),
            "NoLedger" => return Err(LedgerError::NoLedger),
            "NonPositiveAmount" => Err(Refusal::NonPositiveAmount),
            "DuplicateId" => Err(Refusal::DuplicateId),
            "UnknownCampaign" => Err(Refusal::UnknownCampaign),
            "InsufficientBudget" => Err(Refusal::InsufficientBudget),
            "InsufficientDailyBudget" => Err(Refusal::InsufficientDailyBudget),
            other => return Err(unexpected(Self::NAME, other)),
        })
    }
}
