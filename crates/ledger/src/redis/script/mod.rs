//! The ledger's Lua scripts, one module each: the call's arguments as a type, how they are
//! sent, and how the reply reads. Each script is the shared prelude (`lua/common.lua`) followed
//! by its own body; Redis runs it atomically, so each ledger operation is one indivisible step.
//!
//! Every script declares the keys it names in `KEYS` ([`LedgerScript::routed`], built by
//! [`Keys`]), which also route it to its slot's node on Redis Cluster. `ARGV[1]` is the base of
//! the keys a script finds inside (ids read from an index: same hash tag, so same slot), which
//! the handle adds; [`LedgerScript::encode`] gives the rest, in the order the script reads them
//! (see the module docs of [`crate::redis`]).

mod balances;
mod call;
mod check;
mod close_lease;
mod commit;
mod drain;
mod expire;
mod open_ledger;
mod release;
mod report_lease;
mod reserve;
mod set_limits;
mod settle;
mod take_lease;

pub(crate) use balances::{BALANCE_FIELDS, balance_of};
pub(crate) use call::{Call, Ready, ScriptReply};
pub(crate) use check::Check;
pub(crate) use close_lease::CloseLease;
pub use close_lease::LeaseClose;
pub(crate) use commit::Commit;
pub(crate) use drain::{DRAIN_MAX, Drain};
pub(crate) use expire::Expire;
pub use expire::Swept;
pub(crate) use open_ledger::{Open, OpenLedger};
pub(crate) use release::Release;
pub(crate) use report_lease::ReportLease;
pub use report_lease::{LeaseReport, LeaseState};
pub(crate) use reserve::Reserve;
pub use set_limits::{
    LimitsBase, LimitsChange, LimitsConflict, LimitsRole, LimitsStatus, LimitsWritten,
    MAX_WRITER_BYTES, StoredLimits,
};
pub(crate) use set_limits::{STORED_FIELDS, SetLimits, stored_of};
pub(crate) use settle::{SettleRequest, Settlement};
pub use take_lease::LeaseGrant;
pub(crate) use take_lease::{Take, TakeLease};

use units::{Nanos, Timestamp};

use super::client::Script;
use super::keys::{Keys, Routed};
use super::resp::Value;
use super::{LeaseError, LedgerError, MAX_AMOUNT};

/// Every ledger script (for `SCRIPT LOAD` on every primary).
pub(crate) fn all() -> [&'static Script; 12] {
    [
        SetLimits::script(),
        Reserve::script(),
        Commit::script(),
        Release::script(),
        Expire::script(),
        Check::script(),
        OpenLedger::script(),
        TakeLease::script(),
        ReportLease::script(),
        CloseLease::script(),
        SettleRequest::script(),
        Drain::script(),
    ]
}

/// One Lua script of the ledger: its arguments are the implementing type's fields.
pub(crate) trait LedgerScript {
    /// The script's name, in protocol errors.
    const NAME: &'static str;
    /// What the script answers.
    type Reply;
    /// The script's text and SHA-1.
    fn script() -> &'static Script;
    /// The keys the call declares and the base of those it finds inside, all in one slot.
    fn routed(&self, keys: &Keys) -> Routed;
    /// The arguments after the key prefix, or the answer when no call is needed: arguments the
    /// script would refuse are refused here, without a round trip.
    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply>;
    /// Reads the script's reply (an error reply never gets here: it is a transport error).
    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError>;
}

/// A call, ready to send or already answered.
pub(crate) enum Encoded<A> {
    Send(Vec<String>),
    Answered(Result<A, LedgerError>),
}

/// What every script call may need besides its own arguments: the caller's clock and the
/// handle's settings.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Timestamp,
    /// The ledger id the handle has open (empty: unchecked; see `RedisLedger::open_ledger`).
    pub(crate) ledger: &'a str,
    /// How long Redis keeps a resolved reservation or lease, in ms, as sent.
    pub(crate) tombstone_ms: &'a str,
    /// Most items one sweep handles, as sent.
    pub(crate) sweep_batch: &'a str,
}

impl Ctx<'_> {
    /// `now`'s UTC day, as the scripts read it.
    pub(crate) fn day(&self) -> String {
        self.now.day().to_string()
    }
}

/// Declares a script's text: the prelude, then the body in `lua/<file>`.
macro_rules! lua {
    ($file:literal) => {
        fn script() -> &'static $crate::redis::client::Script {
            static SCRIPT: std::sync::LazyLock<$crate::redis::client::Script> =
                std::sync::LazyLock::new(|| {
                    $crate::redis::client::Script::new(concat!(
                        include_str!("../lua/common.lua"),
                        include_str!(concat!("../lua/", $file))
                    ))
                });
            &SCRIPT
        }
    };
}
pub(crate) use lua;

// Encoding: amounts and times as the decimal integers the scripts read.

/// An amount as sent, refused beyond the exact range (a configured limit).
pub(crate) fn exact(n: Nanos, what: &'static str) -> Result<String, LedgerError> {
    if n.get().unsigned_abs() > MAX_AMOUNT.unsigned_abs() {
        return Err(LedgerError::OutOfRange(what));
    }
    Ok(n.get().to_string())
}

/// An amount as sent, clamped to the exact range (a want or a report: less is still correct).
pub(crate) fn clamped(n: Nanos) -> String {
    n.get().min(MAX_AMOUNT).to_string()
}

/// A price or reservation as sent: above the exact range, any amount is beyond every budget
/// and reservation, so 2^53 (which Lua holds exactly) is sent and refused as the book would.
pub(crate) fn beyond_any_budget(n: Nanos) -> String {
    n.get().min(MAX_AMOUNT + 1).to_string()
}

/// A timestamp as the scripts read it; beyond 2^53 ms (year 287,000) it saturates.
pub(crate) fn ms(t: Timestamp) -> String {
    t.millis().min(MAX_AMOUNT as u64).to_string()
}

// Decoding: a reply is an array whose first item is a status word, then numbers.

pub(crate) fn protocol(what: &str) -> LedgerError {
    LedgerError::Protocol(what.to_owned())
}

pub(crate) fn unexpected(op: &str, status: &str) -> LedgerError {
    LedgerError::Protocol(format!("{op}: unexpected answer {status:?}"))
}

pub(crate) fn array(v: Value) -> Result<Vec<Value>, LedgerError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(LedgerError::Protocol(format!(
            "expected an array, got {other:?}"
        ))),
    }
}

pub(crate) fn status(items: &[Value]) -> Result<&str, LedgerError> {
    items
        .first()
        .and_then(Value::as_str)
        .ok_or_else(|| protocol("answer without a status"))
}

pub(crate) fn int_at(items: &[Value], i: usize) -> Result<i64, LedgerError> {
    items
        .get(i)
        .and_then(Value::as_i64)
        .ok_or_else(|| LedgerError::Protocol(format!("answer field {i} is not an integer")))
}

pub(crate) fn nanos_at(items: &[Value], i: usize) -> Result<Nanos, LedgerError> {
    int_at(items, i).map(Nanos)
}

pub(crate) fn count_at(items: &[Value], i: usize) -> Result<usize, LedgerError> {
    usize::try_from(int_at(items, i)?).map_err(|_| protocol("negative count"))
}

pub(crate) fn time_at(items: &[Value], i: usize) -> Result<Timestamp, LedgerError> {
    u64::try_from(int_at(items, i)?)
        .map(Timestamp)
        .map_err(|_| protocol("negative timestamp"))
}

/// Text items (campaign names, inbox entries, audit findings).
pub(crate) fn texts(items: Vec<Value>, what: &str) -> Result<Vec<String>, LedgerError> {
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| LedgerError::Protocol(format!("{what} is not text")))
        })
        .collect()
}

/// The refusals the lease scripts share.
pub(crate) fn lease_error(op: &str, status: &str) -> Result<LeaseError, LedgerError> {
    Ok(match status {
        "UnknownCampaign" => LeaseError::UnknownCampaign,
        "UnknownLease" => LeaseError::UnknownLease,
        "NonPositiveAmount" => LeaseError::NonPositiveAmount,
        "NegativeSpend" => LeaseError::NegativeSpend,
        "LeaseClosed" => LeaseError::LeaseClosed,
        "CampaignMismatch" => LeaseError::CampaignMismatch,
        other => return Err(unexpected(op, other)),
    })
}

#[cfg(test)]
mod tests;
