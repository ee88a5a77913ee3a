//! Errors of the Redis ledger: [`LedgerError`] for "the store did not answer usefully" (the
//! operation may or may not have been applied: retry with the same id, which is idempotent), and
//! [`LeaseError`] for lease refusals (a definite answer: nothing changed).

/// The answer of a ledger call: the outer error is the transport, the inner one the ledger's.
pub(crate) type Reply<T, E> = Result<Result<T, E>, LedgerError>;

/// Why a call to Redis did not produce a ledger answer. For a write, the script may still have
/// run (a timeout can fire after Redis applied it): every operation is keyed by an id, so
/// retrying with the same id is safe.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// Could not connect, the connection broke, or Redis answered that it cannot serve now
    /// (`LOADING`, `READONLY`, `BUSY`, `OOM`...).
    #[error("redis unavailable: {0}")]
    Unavailable(String),
    /// Redis refused this client: a wrong password or user (`WRONGPASS`, `NOAUTH`), missing
    /// ACL permissions, or a TLS certificate not trusted. It will not fix itself: an operator
    /// must act, so a start fails on it rather than waiting.
    #[error("redis refused the connection: {0}")]
    Refused(String),
    /// Redis holds no ledger under this id: it lost its data (a restart without persistence,
    /// a failover to an empty replica, eviction), or the ledger was never created. Nothing is
    /// re-created: the instance stops bidding until an operator opens the ledger again.
    #[error("redis holds no Gavel ledger here (data lost, or never created)")]
    NoLedger,
    /// The ledger is open and lists this campaign, but its record is gone (deleted, or
    /// evicted by a `maxmemory` policy): it is not re-created, which would reopen its budget.
    #[error(
        "campaign {0:?} is listed in the ledger but its record is gone (deleted or evicted); it is not re-created, which would reopen its budget"
    )]
    CampaignGone(String),
    /// No complete answer within the caller's deadline.
    #[error("redis call timed out")]
    Timeout,
    /// An answer the ledger does not understand, or a script error: a bug or a mismatched
    /// version on one side, not worth retrying.
    #[error("redis protocol error: {0}")]
    Protocol(String),
    /// A notice that names no campaign: a reservation's keys are in its campaign's hash slot,
    /// so it cannot be found without it (never guessed). The bidder's signed notices carry it.
    #[error("the notice names no campaign, so its reservation cannot be found")]
    NoCampaign,
    /// An amount beyond what the scripts compute exactly (see [`MAX_AMOUNT`](super::MAX_AMOUNT)).
    #[error("{0} is beyond the ledger's exact range")]
    OutOfRange(&'static str),
}

impl LedgerError {
    /// Bounded metric label.
    pub const fn label(&self) -> &'static str {
        match self {
            LedgerError::Unavailable(_) => "unavailable",
            LedgerError::Refused(_) => "refused",
            LedgerError::NoLedger => "no_ledger",
            LedgerError::CampaignGone(_) => "campaign_gone",
            LedgerError::Timeout => "timeout",
            LedgerError::Protocol(_) => "protocol",
            LedgerError::NoCampaign => "no_campaign",
            LedgerError::OutOfRange(_) => "out_of_range",
        }
    }
}

/// Why a lease operation was refused. Nothing changed in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("unknown campaign")]
    UnknownCampaign,
    /// Never taken, or resolved so long ago that its tombstone is gone (or Redis lost it).
    #[error("unknown lease")]
    UnknownLease,
    #[error("lease amount must be positive")]
    NonPositiveAmount,
    #[error("reported spend is negative")]
    NegativeSpend,
    /// The lease was closed or reclaimed: it cannot grow again; take a new lease id.
    #[error("lease already closed or reclaimed")]
    LeaseClosed,
    /// The lease id exists for another campaign.
    #[error("lease belongs to another campaign")]
    CampaignMismatch,
}

impl LeaseError {
    /// Bounded metric label.
    pub const fn label(&self) -> &'static str {
        match self {
            LeaseError::UnknownCampaign => "unknown_campaign",
            LeaseError::UnknownLease => "unknown_lease",
            LeaseError::NonPositiveAmount => "non_positive_amount",
            LeaseError::NegativeSpend => "negative_spend",
            LeaseError::LeaseClosed => "lease_closed",
            LeaseError::CampaignMismatch => "campaign_mismatch",
        }
    }
}

/// Error replies that mean "this Redis cannot serve now" (loading after a restart, a replica
/// after failover, out of memory, a busy script) are `Unavailable`, worth retrying; anything
/// else is a bug on one side: `Protocol`.
pub(crate) fn classify_error(msg: String) -> LedgerError {
    const TRANSIENT: [&str; 7] = [
        "LOADING",
        "READONLY",
        "BUSY",
        "OOM",
        "MASTERDOWN",
        "TRYAGAIN",
        "CLUSTERDOWN",
    ];
    // Credentials or permissions: an operator must act.
    const REFUSED: [&str; 3] = ["NOAUTH", "WRONGPASS", "NOPERM"];
    if TRANSIENT.iter().any(|p| msg.starts_with(p)) {
        LedgerError::Unavailable(msg)
    } else if REFUSED.iter().any(|p| msg.starts_with(p)) {
        LedgerError::Refused(msg)
    } else {
        LedgerError::Protocol(msg)
    }
}
