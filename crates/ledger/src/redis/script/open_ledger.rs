//! `open_ledger`: reads one hash slot's ledger marker, or writes it. Every write that carries
//! the id the handle opened is refused in a slot that no longer holds that id.

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, lua, protocol, status, unexpected};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

/// What opening does to a slot's marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Open {
    /// Reads it.
    Read,
    /// Writes the id when the marker is missing.
    CreateMissing,
    /// Writes the id whatever the marker holds (an operator's new ledger after part of a
    /// cluster lost its data: every slot then holds one id).
    Overwrite,
}

#[derive(Clone, Debug)]
pub(crate) struct OpenLedger {
    pub(crate) slot: u16,
    pub(crate) open: Open,
    /// The id written, if one is.
    pub(crate) fresh_id: String,
}

impl LedgerScript for OpenLedger {
    const NAME: &'static str = "open_ledger";
    /// The slot's ledger id; `None`: missing, and not created.
    type Reply = Option<String>;
    lua!("open_ledger.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_slot(self.slot)
    }

    fn encode(&self, _: &Ctx<'_>) -> Encoded<Option<String>> {
        let mode = match self.open {
            Open::Read => "0",
            Open::CreateMissing => "1",
            Open::Overwrite => "2",
        };
        Encoded::Send(vec![mode.to_owned(), self.fresh_id.clone()])
    }

    fn decode(&self, reply: Value) -> Result<Option<String>, LedgerError> {
        let items = array(reply)?;
        match status(&items)? {
            "ok" | "created" => items
                .get(1)
                .and_then(Value::as_str)
                .map(|id| Some(id.to_owned()))
                .ok_or_else(|| protocol("open_ledger: no id")),
            "missing" => Ok(None),
            other => Err(unexpected(Self::NAME, other)),
        }
    }
}
