//! `drain`: takes the settlements other instances made for one node's reservations from its
//! inbox (lease mode).

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, lua, texts};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

/// Most settlements one drain takes from an inbox.
pub(crate) const DRAIN_MAX: usize = 1_000;

#[derive(Clone, Debug)]
pub(crate) struct Drain {
    pub(crate) node: String,
    /// The inbox is the node's for this campaign's hash tag.
    pub(crate) campaign: String,
}

impl LedgerScript for Drain {
    const NAME: &'static str = "drain";
    /// The inbox entries, oldest first.
    type Reply = Vec<String>;
    lua!("drain.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(&self.campaign, &[format!("in:{}", self.node)])
    }

    fn encode(&self, _: &Ctx<'_>) -> Encoded<Vec<String>> {
        Encoded::Send(vec![self.node.clone(), DRAIN_MAX.to_string()])
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, LedgerError> {
        texts(array(reply)?, "inbox item")
    }
}
