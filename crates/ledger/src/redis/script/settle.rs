//! `settle`: a notice in lease mode, whichever instance received it. Claims the reservation's
//! outcome so that it happens once across instances and replays, and when the caller does not
//! hold the reservation, charges the holder's lease (or the campaign) and tells the holder
//! through its inbox.

use units::Nanos;

use super::{
    Ctx, Encoded, Keys, LedgerScript, Routed, array, clamped, lua, nanos_at, status, unexpected,
};
use crate::book::SettleError;
use crate::redis::LedgerError;
use crate::redis::resp::Value;

/// A notice to settle in lease mode, whichever instance received it.
#[derive(Clone, Debug)]
pub(crate) struct SettleRequest {
    pub(crate) id: String,
    /// Charge `price` (a win or billing notice), or release (a loss).
    pub(crate) charge: bool,
    pub(crate) price: Nanos,
    pub(crate) campaign: String,
    /// The node that made the reservation (and holds it in its local book).
    pub(crate) owner: String,
    /// The caller is that node and still knows the reservation: it only claims the outcome.
    pub(crate) here: bool,
}

/// What a settlement did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// Claimed for the caller, who holds the reservation: settle it in the local book.
    Local,
    /// A charge claimed for the holder after a loss was claimed first: charge it in the local
    /// book (whose release may not have arrived yet), as a charge after the release.
    LocalAfterRelease,
    /// Charged against the holder's lease.
    Charged(Nanos),
    /// Charged from the campaign directly: the holder's lease is gone, or a loss came first.
    ChargedAfterRelease(Nanos),
    AlreadyCommitted(Nanos),
    /// Released for the holder (told through its inbox).
    Released,
    AlreadyReleased,
}

impl LedgerScript for SettleRequest {
    const NAME: &'static str = "settle";
    type Reply = Result<Settlement, SettleError>;
    lua!("settle.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(
            &self.campaign,
            &[
                format!("d:{}", self.id),
                format!("own:{}:{}", self.owner, self.campaign),
                format!("in:{}", self.owner),
            ],
        )
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        if self.price.get() < 0 {
            return Encoded::Answered(Ok(Err(SettleError::NegativePrice)));
        }
        let (kind, price) = if self.charge {
            ("charge", clamped(self.price))
        } else {
            ("release", "0".to_owned())
        };
        Encoded::Send(vec![
            self.id.clone(),
            kind.to_owned(),
            price,
            self.campaign.clone(),
            self.owner.clone(),
            if self.here { "1" } else { "0" }.to_owned(),
            ctx.day(),
            ctx.tombstone_ms.to_owned(),
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        Ok(match status(&items)? {
            "Local" => Ok(Settlement::Local),
            "LocalAfterRelease" => Ok(Settlement::LocalAfterRelease),
            "Charged" => Ok(Settlement::Charged(nanos_at(&items, 1)?)),
            "ChargedAfterRelease" => Ok(Settlement::ChargedAfterRelease(nanos_at(&items, 1)?)),
            "AlreadyCommitted" => Ok(Settlement::AlreadyCommitted(nanos_at(&items, 1)?)),
            "Released" => Ok(Settlement::Released),
            "AlreadyReleased" => Ok(Settlement::AlreadyReleased),
            "NegativePrice" => Err(SettleError::NegativePrice),
            "UnknownReservation" => Err(SettleError::UnknownReservation),
            other => return Err(unexpected(Self::NAME, other)),
        })
    }
}
