//! The budget of record of Gavel's bidder, in one crate: what a campaign has spent, what its
//! open bids hold, and what it may still spend, kept exact whether one instance or many share
//! it.
//!
//! | module | what it holds | I/O |
//! | --- | --- | --- |
//! | [`book`] | [`Book`]: the budget as a two-phase state machine (reserve with a timeout, then commit or release, once per id), its invariants checked after every step in the tests | none |
//! | [`redis`] | [`RedisLedger`]: the same operations as atomic Lua scripts on a shared Redis, per bid, plus leases | Redis |
//! | [`leased`] | [`LeasedLedger`]: a local [`Book`] spending budget leased from Redis, so that no bid waits for Redis | Redis, in a background task |
//! | [`front`] | [`Ledger`]: the one type the bidder calls, over memory, per-bid Redis or leases, every call bounded by a deadline | as its store |
//!
//! Invariants, in every store:
//! - after every operation `spent + reserved + available = budget` and `spent + reserved <=
//!   budget`, in total and for the current UTC day;
//! - a commit charges at most its reservation, and each reservation resolves at most once: a
//!   duplicate notice gets the recorded answer and moves no money;
//! - a store that does not answer in time is a refusal (fail closed), never a wait: the bid is
//!   not made.
//!
//! Money is [`units::Nanos`] and time [`units::Timestamp`], passed in by the caller.

pub mod book;
pub mod front;
pub mod leased;
pub mod redis;

pub use book::{Balance, Book, CommitOutcome, DailyBalance, Refusal, ReleaseOutcome, SettleError};
pub use front::{Ledger, LimitsFrom, NoticeError, ReserveError, Unavailable};
pub use leased::{LeaseConfig, LeaseStats, LeasedLedger};
pub use redis::{
    BALANCES_CHUNK, ClusterSetupError, EVIDENCE_SCAN_ROUNDS, KeyScan, Keys, LeaseClose, LeaseError,
    LeaseGrant, LeaseReport, LeaseState, LedgerError, LimitsBase, LimitsChange, LimitsConflict,
    LimitsRole, LimitsStatus, LimitsWritten, MAX_AMOUNT, MAX_WRITER_BYTES, OPEN_BATCH,
    PIPELINE_MAX, RedisConfig, RedisLedger, RedisTls, SWEEP_CAMPAIGNS, StoredLimits, Swept,
};
pub use units::Limits;
