//! The per-bid protocol: every reservation and notice is one script call on the shared
//! ledger, with the same answers as [`crate::Book`]. Also the reads and the audit that both
//! modes share.
// On every bid's path to the ledger: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use units::{Limits, Nanos, Timestamp};

use super::error::Reply;
use super::handle::PIPELINE_MAX;
use super::resp::Value;
use super::script::{
    BALANCE_FIELDS, Check, Commit, LimitsBase, LimitsChange, LimitsConflict, LimitsWritten,
    Release, Reserve, STORED_FIELDS, SetLimits, StoredLimits, array, balance_of, stored_of, texts,
};
use super::{LedgerError, RedisLedger};
use crate::book::{Balance, CommitOutcome, Refusal, ReleaseOutcome, SettleError};

/// The writer of [`RedisLedger::set_limits`]: an operator's tool, overwriting what is stored.
fn forced(campaign: &str, limits: Limits) -> LimitsChange {
    LimitsChange {
        campaign: campaign.to_owned(),
        limits,
        writer: "operator".to_owned(),
        base: LimitsBase::Any,
    }
}

/// Campaigns read per round trip by [`RedisLedger::balances`] (one `HMGET` each, pipelined on
/// one Redis, concurrent on a cluster). A bare `HMGET` costs Redis a few microseconds, so a
/// chunk stays well under a tight per-call timeout (the bidder's default is 20 ms).
pub const BALANCES_CHUNK: usize = 500;

impl RedisLedger {
    /// Creates a campaign or replaces its limits whatever is stored (writer `operator`, a new
    /// version): for tools and tests. A bidder changes limits with [`RedisLedger::change_limits`],
    /// which never overwrites a change it has not seen. As [`crate::Book::set_limits`], the
    /// budget in force never drops below what is spent+reserved. Refused with
    /// [`LedgerError::OutOfRange`] beyond [`MAX_AMOUNT`](super::MAX_AMOUNT).
    pub async fn set_limits(
        &self,
        campaign: &str,
        limits: Limits,
        now: Timestamp,
    ) -> Result<(), LedgerError> {
        self.change_limits(&forced(campaign, limits), now)
            .await?
            .map(|_| ())
            .map_err(|c| LedgerError::Protocol(format!("a forced write was refused: {c}")))
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
        let changes: Vec<LimitsChange> = campaigns
            .iter()
            .map(|(campaign, limits)| forced(campaign, *limits))
            .collect();
        Ok(self
            .change_limits_many(&changes, now)
            .await?
            .into_iter()
            .map(|r| match r {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(c)) => Err(LedgerError::Protocol(format!(
                    "a forced write was refused: {c}"
                ))),
                Err(e) => Err(e),
            })
            .collect())
    }

    /// Changes one campaign's limits as a compare-and-set on their version (see
    /// [`LimitsBase`]): the new version, or the [`LimitsConflict`] that says what is stored
    /// (nothing written). Equal limits write nothing and answer the stored version.
    pub async fn change_limits(
        &self,
        change: &LimitsChange,
        now: Timestamp,
    ) -> Reply<LimitsWritten, LimitsConflict> {
        self.sweep_campaign(&change.campaign);
        self.run(&SetLimits(change.clone()), now).await
    }

    /// [`RedisLedger::change_limits`] for many campaigns, pipelined as
    /// [`RedisLedger::set_limits_many`]; answers per campaign, in order.
    pub async fn change_limits_many(
        &self,
        changes: &[LimitsChange],
        now: Timestamp,
    ) -> Result<Vec<Reply<LimitsWritten, LimitsConflict>>, LedgerError> {
        let mut out = Vec::with_capacity(changes.len());
        {
            let mut sweep = self.sweep_list();
            for change in changes {
                sweep.add(&change.campaign);
            }
        }
        for chunk in changes.chunks(PIPELINE_MAX) {
            let calls: Vec<SetLimits> = chunk.iter().cloned().map(SetLimits).collect();
            out.extend(self.pipeline_of(&calls, now).await?);
        }
        Ok(out)
    }

    /// The limits the ledger holds for `campaigns`, with their version and writer, in their
    /// order (`None`: missing). One `HMGET` each, [`BALANCES_CHUNK`] per round trip.
    pub async fn stored_limits<S: AsRef<str>>(
        &self,
        campaigns: &[S],
    ) -> Result<Vec<Option<StoredLimits>>, LedgerError> {
        let mut out = Vec::with_capacity(campaigns.len());
        for chunk in campaigns.chunks(BALANCES_CHUNK) {
            for reply in self.campaign_fields(chunk, &STORED_FIELDS).await? {
                out.push(stored_of(reply?)?);
            }
        }
        Ok(out)
    }

    /// `fields` of each campaign's hash, one `HMGET` each, in one round trip: the replies in
    /// the campaigns' order.
    async fn campaign_fields<S: AsRef<str>>(
        &self,
        campaigns: &[S],
        fields: &[&str],
    ) -> Result<Vec<Result<Value, LedgerError>>, LedgerError> {
        let keys: Vec<String> = campaigns
            .iter()
            .map(|c| self.keys().campaign(c.as_ref()))
            .collect();
        let commands: Vec<Vec<&[u8]>> = keys
            .iter()
            .map(|key| {
                let mut args: Vec<&[u8]> = vec![b"HMGET", key.as_bytes()];
                args.extend(fields.iter().map(|f| f.as_bytes()));
                args
            })
            .collect();
        self.commands(&commands).await
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
        // Due for a sweep once it expires, whatever Redis answers: a reservation whose answer
        // was lost may exist all the same.
        self.sweep_list().note_expiry(campaign, expires_at.millis());
        self.run(&call, now).await
    }

    /// Charges `price` for reservation `id` of `campaign`, as [`crate::Book::commit`]. The
    /// reservation's keys are in its campaign's slot: without the campaign the answer is
    /// [`LedgerError::NoCampaign`] (nothing is guessed).
    pub async fn commit(
        &self,
        id: &str,
        campaign: Option<&str>,
        price: Nanos,
        now: Timestamp,
    ) -> Reply<CommitOutcome, SettleError> {
        let campaign = campaign.ok_or(LedgerError::NoCampaign)?;
        self.run(
            &Commit {
                id,
                campaign,
                price,
            },
            now,
        )
        .await
    }

    /// Returns reservation `id`'s amount to its campaign, as [`crate::Book::release`]; without
    /// the campaign, [`LedgerError::NoCampaign`].
    pub async fn release(
        &self,
        id: &str,
        campaign: Option<&str>,
        now: Timestamp,
    ) -> Reply<ReleaseOutcome, SettleError> {
        let campaign = campaign.ok_or(LedgerError::NoCampaign)?;
        self.run(&Release { id, campaign }, now).await
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
    /// One `HMGET` per campaign (each a consistent snapshot of its campaign),
    /// [`BALANCES_CHUNK`] per round trip, each bounded by the timeout (100,000 campaigns are
    /// 200 round trips; their total cost in Redis grows with the number asked for).
    pub async fn balances<S: AsRef<str>>(
        &self,
        campaigns: &[S],
        now: Timestamp,
    ) -> Result<Vec<Balance>, LedgerError> {
        let mut out = Vec::with_capacity(campaigns.len());
        for chunk in campaigns.chunks(BALANCES_CHUNK) {
            let replies = self.campaign_fields(chunk, &BALANCE_FIELDS).await?;
            for (campaign, reply) in chunk.iter().zip(replies) {
                if let Some(balance) = balance_of(campaign.as_ref(), reply?, now)? {
                    out.push(balance);
                }
            }
        }
        Ok(out)
    }

    /// Every campaign that has limits in Redis, in no particular order. Looks through the keys
    /// of every primary (`SCAN`, bounded as [`RedisLedger::keys_under_prefix`]): for tests and
    /// operators.
    pub async fn campaigns(&self) -> Result<Vec<String>, LedgerError> {
        let mut out = Vec::new();
        for slot in self.listed_slots().await? {
            let key = self.keys().campaigns(slot);
            let reply = self.command(&[b"HKEYS", key.as_bytes()]).await?;
            out.extend(texts(array(reply)?, "campaign name")?);
        }
        Ok(out)
    }

    /// Audits Redis as [`crate::Book::check_invariants`] audits the book: each campaign's
    /// reserved (total and today's) is the sum of its open reservations and leases, and no
    /// counter is negative. One script call per hash slot that lists campaigns, found with
    /// `SCAN` on every primary: O(keys + campaigns + open items), for tests and operators.
    pub async fn check_invariants(&self) -> Result<Result<(), String>, LedgerError> {
        let mut problems = Vec::new();
        for slot in self.listed_slots().await? {
            problems.extend(self.run(&Check { slot }, Timestamp::now()).await?);
        }
        Ok(if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        })
    }
}
