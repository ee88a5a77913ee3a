//! `check`: an O(n) audit of every campaign's counters against its open reservations and
//! leases, for tests and operators.

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, lua};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

#[derive(Clone, Debug)]
pub(crate) struct Check {
    /// The hash slot audited.
    pub(crate) slot: u16,
}

impl LedgerScript for Check {
    const NAME: &'static str = "check";
    /// The problems found, in words (none: the invariants hold).
    type Reply = Vec<String>;
    lua!("check.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_slot(self.slot)
    }

    fn encode(&self, _: &Ctx<'_>) -> Encoded<Vec<String>> {
        Encoded::Send(Vec::new())
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, LedgerError> {
        Ok(array(reply)?
            .iter()
            .map(|v| v.as_str().unwrap_or("(not text)").to_owned())
            .collect())
    }
}
