//! The per-bid protocol: every reservation and notice is one script call on the shared
//! ledger, with the same answers as [`crate::Book`]. Also the reads and the audit that both
//! modes share.

use units::{Limits, Nanos, Timestamp};

use super::error::Reply;
use super::handle::PIPELINE_MAX;
use super::script::{
    Balances, Check, Commit, Expire, Release, Reserve, SetLimits, Swept, array, texts,
};
use super::{LedgerError, RedisLedger};
use crate::book::{Balance, CommitOutcome, Refusal, ReleaseOutcome, SettleError};

/// Campaigns read per script call by [`RedisLedger::balances`]. Reading a campaign costs the
/// script a few microseconds (measured: about 8 ms per 1,000 on a small shared machine, where
/// the bare `HMGET`s alone are half of it), so a chunk stays well under a tight per-call
/// timeout (the bidder's default is 20 ms) and never holds Redis for long.
pub const BALANCES_CHUNK: usize = 500;

impl RedisLedger {
    /// Creates a campaign or replaces its limits, as [`crate::Book::set_limits`]: the budget in
    /// force never drops below what is spent+reserved. Refused with
    /// [`LedgerError::OutOfRange`] beyond [`MAX_AMOUNT`](super::MAX_AMOUNT).
    pub async fn set_limits(
        &self,
        campaign: &str,
        limits: Limits,
        now: Timestamp,
    ) -> Result<(), LedgerError> {
        let call = SetLimits {
            campaign: campaign.to_owned(),
            limits,
        };
        self.run(&call, now).await
    }

    /// [`RedisLedger::set_limits`] for many campaigns, pipelined: [`PIPELINE_MAX`] scripts per
    /// round trip, each round trip bounded by the timeout. Answers per campaign, in order
    /// (e.g. [`LedgerError::OutOfRange`] for one does not stop the others). The outer error is
    /// the transport, which stops at the first failure: some limits may have been written;
    /// writing them again is harmless.
    pub async fn set_limits_many(
        &self,
        campaigns: &[(String, Limits)],
        now: Timestamp,
    ) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
        let mut out = Vec::with_capacity(campaigns.len());
        for chunk in campaigns.chunks(PIPELINE_MAX) {
            let calls: Vec<SetLimits> = chunk
                .iter()
                .map(|(campaign, limits)| SetLimits {
                    campaign: campaign.clone(),
                    limits: *limits,
                })
                .collect();
            out.extend(self.pipeline_of(&calls, now).await?);
        }
        Ok(out)
    }

    /// Reserves `amount` of `campaign`'s budget (and its day's) under `id` until `expires_at`,
    /// as [`crate::Book::reserve`].
    pub async fn reserve(
        &self,
        id: &str,
        campaign: &str,
        amount: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Reply<(), Refusal> {
        let call = Reserve {
            id,
            campaign,
            amount,
            expires_at,
        };
        self.run(&call, now).await
    }

    /// Charges `price` for reservation `id`, as [`crate::Book::commit`].
    pub async fn commit(
        &self,
        id: &str,
        price: Nanos,
        now: Timestamp,
    ) -> Reply<CommitOutcome, SettleError> {
        self.run(&Commit { id, price }, now).await
    }

    /// Returns reservation `id`'s amount to its campaign, as [`crate::Book::release`].
    pub async fn release(&self, id: &str, now: Timestamp) -> Reply<ReleaseOutcome, SettleError> {
        self.run(&Release { id }, now).await
    }

    /// Releases open reservations and reclaims open leases whose expiry is at or before `now`,
    /// at most `sweep_batch` of them (call again while [`Swept::more`]). Tombstones are
    /// forgotten by Redis itself (`PEXPIRE`).
    pub async fn expire(&self, now: Timestamp) -> Result<Swept, LedgerError> {
        self.run(&Expire, now).await
    }

    /// One campaign's balance as of `now`, as [`crate::Book::balance`].
    pub async fn balance(
        &self,
        campaign: &str,
        now: Timestamp,
    ) -> Result<Option<Balance>, LedgerError> {
        let mut all = self.balances(&[campaign], now).await?;
        Ok(all.pop())
    }

    /// The balances of `campaigns` as of `now`, in their order; unknown campaigns are left out.
    /// Read [`BALANCES_CHUNK`] campaigns per script call, one call per round trip, each bounded
    /// by the timeout: each chunk is a consistent snapshot, and no single script holds Redis for
    /// long however many campaigns are asked for (100,000 campaigns are 200 short calls; their
    /// total cost in Redis still grows with the number asked for).
    pub async fn balances<S: AsRef<str>>(
        &self,
        campaigns: &[S],
        now: Timestamp,
    ) -> Result<Vec<Balance>, LedgerError> {
        let mut out = Vec::with_capacity(campaigns.len());
        for chunk in campaigns.chunks(BALANCES_CHUNK) {
            out.extend(self.run(&Balances { campaigns: chunk }, now).await?);
        }
        Ok(out)
    }

    /// Every campaign that has limits in Redis, in no particular order.
    pub async fn campaigns(&self) -> Result<Vec<String>, LedgerError> {
        let key = format!("{}campaigns", self.prefix());
        let reply = self.command(&[b"SMEMBERS", key.as_bytes()]).await?;
        texts(array(reply)?, "campaign name")
    }

    /// Audits Redis as [`crate::Book::check_invariants`] audits the book: each campaign's
    /// reserved (total and today's) is the sum of its open reservations and leases, and no
    /// counter is negative. O(campaigns + open items): for tests and operators.
    pub async fn check_invariants(&self) -> Result<Result<(), String>, LedgerError> {
        let problems = self.run(&Check, Timestamp::now()).await?;
        Ok(if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        })
    }
}
