//! [`Limits`]: what a campaign may spend, in total and per UTC day. The pacer spreads spend
//! under them; the budget of record (the `ledger` crate) enforces them.

use serde::{Deserialize, Serialize};

use crate::money::Nanos;

/// A campaign's budget limits, in nanos.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Lifetime budget of the campaign.
    pub total: Nanos,
    /// Budget per UTC day, if any.
    pub daily: Option<Nanos>,
}
