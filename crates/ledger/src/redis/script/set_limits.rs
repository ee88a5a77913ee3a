//! `set_limits`: creates a campaign or changes its limits as a compare-and-set on the limits'
//! version (one writer changes them; a change based on a stale version is refused with what is
//! stored, writing nothing); the budget in force never drops below what is spent and reserved.

use units::{Limits, Nanos};

use super::{Ctx, Encoded, Keys, LedgerScript, Routed, array, exact, lua, status, unexpected};
use crate::redis::LedgerError;
use crate::redis::resp::Value;

/// Longest writer name stored with the limits (`file:<node>`, `admin:<name>`).
pub const MAX_WRITER_BYTES: usize = 128;

/// What a change of limits is based on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitsBase {
    /// The version the writer last saw: the change is refused if the stored version is another.
    /// 0: the campaign must not exist yet (or predates versions).
    Version(u64),
    /// The writer's own: accepted if the campaign is missing, has no writer on record, or was
    /// last written by this same writer (a writer that restarted and remembers no version).
    Own,
    /// Whatever is stored (tools and tests; never the bidder).
    Any,
}

/// A campaign's limits as the ledger holds them, with who wrote them and their version.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StoredLimits {
    pub limits: Limits,
    /// Incremented by every change of the limits; 0 for a campaign written before versions.
    pub version: u64,
    /// Who wrote the current version (`file:<node>`, `admin:<name>`); empty if unknown.
    pub writer: String,
}

/// A change of limits refused: the ledger holds another version than the change was based on.
/// Nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "limits of campaign {campaign:?} changed since: the ledger holds version {version}{}",
    stored.as_ref().map_or_else(|| " (no such campaign)".to_owned(), |s| format!(" by {:?}", s.writer))
)]
pub struct LimitsConflict {
    pub campaign: String,
    /// The version stored (0 when the campaign is missing).
    pub version: u64,
    /// What is stored; `None` when the campaign is missing.
    pub stored: Option<StoredLimits>,
}

/// A change of limits accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsWritten {
    /// The version now stored.
    pub version: u64,
    /// False when the limits were already these (nothing written, the version kept).
    pub changed: bool,
}

/// A compare-and-set of one campaign's limits.
#[derive(Clone, Debug)]
pub struct LimitsChange {
    pub campaign: String,
    pub limits: Limits,
    /// Who writes (at most [`MAX_WRITER_BYTES`]).
    pub writer: String,
    pub base: LimitsBase,
}

#[derive(Clone, Debug)]
pub(crate) struct SetLimits(pub(crate) LimitsChange);

impl LedgerScript for SetLimits {
    const NAME: &'static str = "set_limits";
    type Reply = Result<LimitsWritten, LimitsConflict>;
    lua!("set_limits.lua");

    fn routed(&self, keys: &Keys) -> Routed {
        keys.for_campaign(&self.0.campaign, &[])
    }

    fn encode(&self, ctx: &Ctx<'_>) -> Encoded<Self::Reply> {
        let change = &self.0;
        let total = match exact(change.limits.total, "total budget") {
            Ok(t) => t,
            Err(e) => return Encoded::Answered(Err(e)),
        };
        let daily = match change.limits.daily.map(|d| exact(d, "daily budget")) {
            None => String::new(),
            Some(Ok(d)) => d,
            Some(Err(e)) => return Encoded::Answered(Err(e)),
        };
        if change.writer.len() > MAX_WRITER_BYTES {
            return Encoded::Answered(Err(LedgerError::OutOfRange("limits writer name")));
        }
        let base = match change.base {
            LimitsBase::Version(v) if v > super::MAX_AMOUNT.unsigned_abs() => {
                return Encoded::Answered(Err(LedgerError::OutOfRange("limits base version")));
            }
            LimitsBase::Version(v) => v.to_string(),
            LimitsBase::Own => String::new(),
            LimitsBase::Any => "*".to_owned(),
        };
        Encoded::Send(vec![
            change.campaign.clone(),
            total,
            daily,
            ctx.day(),
            ctx.ledger.to_owned(),
            change.writer.clone(),
            base,
        ])
    }

    fn decode(&self, reply: Value) -> Result<Self::Reply, LedgerError> {
        let items = array(reply)?;
        match status(&items)? {
            "ok" => Ok(Ok(LimitsWritten {
                version: version_at(&items, 1)?,
                changed: super::int_at(&items, 2)? != 0,
            })),
            "Conflict" => Ok(Err(conflict(&self.0.campaign, &items)?)),
            "NoLedger" => Err(LedgerError::NoLedger),
            "CampaignGone" => Err(LedgerError::CampaignGone(self.0.campaign.clone())),
            other => Err(unexpected(Self::NAME, other)),
        }
    }
}

fn version_at(items: &[Value], i: usize) -> Result<u64, LedgerError> {
    u64::try_from(super::int_at(items, i)?).map_err(|_| super::protocol("negative version"))
}

/// `{ 'Conflict', version, writer, total, daily }`, total '' for a missing campaign.
fn conflict(campaign: &str, items: &[Value]) -> Result<LimitsConflict, LedgerError> {
    let text = |i: usize| items.get(i).and_then(Value::as_str).unwrap_or("");
    // '' (or nothing) where a number would be: the field is absent.
    let absent = |i: usize| match items.get(i) {
        None | Some(Value::Nil) => true,
        Some(Value::Int(_)) => false,
        Some(v) => v.as_str() == Some(""),
    };
    let version = version_at(items, 1)?;
    let stored = if absent(3) {
        None
    } else {
        let total = super::int_at(items, 3)?;
        let daily = if absent(4) {
            None
        } else {
            Some(Nanos(super::int_at(items, 4)?))
        };
        Some(StoredLimits {
            limits: Limits {
                total: Nanos(total),
                daily,
            },
            version,
            writer: text(2).to_owned(),
        })
    };
    Ok(LimitsConflict {
        campaign: campaign.to_owned(),
        version,
        stored,
    })
}

/// The fields read by [`stored_of`], in its order.
pub(crate) const STORED_FIELDS: [&str; 4] = ["total", "daily", "version", "writer"];

/// A campaign's stored limits from the `HMGET` of [`STORED_FIELDS`]; `None` when it is missing.
pub(crate) fn stored_of(reply: Value) -> Result<Option<StoredLimits>, LedgerError> {
    let items = array(reply)?;
    let int = |i: usize| -> Result<Option<i64>, LedgerError> {
        match items.get(i) {
            None | Some(Value::Nil) => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| {
                LedgerError::Protocol(format!(
                    "campaign field {} is not an integer",
                    STORED_FIELDS.get(i).unwrap_or(&"?")
                ))
            }),
        }
    };
    let Some(total) = int(0)? else {
        return Ok(None);
    };
    let version =
        u64::try_from(int(2)?.unwrap_or(0)).map_err(|_| super::protocol("negative version"))?;
    Ok(Some(StoredLimits {
        limits: Limits {
            total: Nanos(total),
            daily: int(1)?.map(Nanos),
        },
        version,
        writer: items
            .get(3)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    }))
}

/// Whether an instance writes the limits of its campaigns to the shared ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitsRole {
    /// Writes them as this writer (`file:<node>`): each change based on the version it last
    /// wrote or found equal to its own, so a change made by another writer since is reported,
    /// never overwritten.
    Writer(String),
    /// Never writes limits: reads them, with their version, from the ledger.
    Follower,
}

impl LimitsRole {
    /// The writer's name; `None` for a follower.
    pub fn writer(&self) -> Option<&str> {
        match self {
            LimitsRole::Writer(w) => Some(w),
            LimitsRole::Follower => None,
        }
    }
}

/// A campaign's limits in the local configuration beside those of record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LimitsStatus {
    pub campaign: String,
    /// As the local campaign file says.
    pub local: Limits,
    /// As the ledger holds them; `None`: it does not hold the campaign.
    pub ledger: Option<StoredLimits>,
}

impl LimitsStatus {
    /// The ledger holds other limits than the local file: the file is not the budget of record.
    pub fn conflict(&self) -> bool {
        self.ledger.as_ref().is_some_and(|s| s.limits != self.local)
    }

    /// The ledger does not hold the campaign: no budget of record, no bids.
    pub fn missing(&self) -> bool {
        self.ledger.is_none()
    }
}
