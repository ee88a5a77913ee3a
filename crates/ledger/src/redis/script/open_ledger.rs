//! `open_ledger`: reads the ledger's marker, or creates it when asked and missing. Every write
//! that carries the id it answered is refused once Redis no longer holds that id.

use super::{Ctx, Encoded, LedgerScript, array, lua, protocol, status, unexpected};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

#[derive(Clone, Debug)]
pub(crate) struct OpenLedger {
    /// May create a missing marker.
    pub(crate) create: bool,
    /// The id of a marker created now.
    pub(crate) fresh_id: String,
}

impl LedgerScript for OpenLedger {
    const NAME: &'static str = "open_ledger";
    /// The ledger's id; `None`: missing, and not created.
    type Answer = Option<String>;
    lua!("open_ledger.lua");

    fn encode(&self, _: &Ctx<'_>) -> Encoded<Option<String>> {
        let create = if self.create { "1" } else { "0" };
        Encoded::Send(vec![create.to_owned(), self.fresh_id.clone()])
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
