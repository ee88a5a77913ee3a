//! The sweep: releasing reservations and reclaiming leases whose expiry passed. Each campaign's
//! hash tag has its own sweep index (`P{tag}exp`: a script may only touch keys of one slot), so
//! a sweep walks campaigns: [`RedisLedger::expire`] sweeps the next [`SWEEP_CAMPAIGNS`]
//! campaigns of the list this handle keeps (every campaign whose limits it wrote), one script
//! call each, sent as one batch, and remembers where it stopped.
//!
//! Reclaim bound: with `n` campaigns in the list, an item expired at `t` is released by the
//! `ceil(n / SWEEP_CAMPAIGNS)`-th sweep call after `t` at the latest (plus one call per further
//! full batch of [`RedisConfig::sweep_batch`](super::RedisConfig::sweep_batch) in its index):
//! [`Swept::more`] says to call again at once while a walk or a batch is unfinished.

use units::Timestamp;

use super::script::{Expire, Swept};
use super::{LedgerError, RedisLedger};

/// Campaigns (hash tags) one [`RedisLedger::expire`] call sweeps: one batch of script calls.
pub const SWEEP_CAMPAIGNS: usize = super::PIPELINE_MAX;

impl RedisLedger {
    /// Sweeps the next [`SWEEP_CAMPAIGNS`] campaigns of this handle's list (see the module
    /// docs): releases their open reservations and reclaims their open leases whose expiry is
    /// at or before `now`, at most `sweep_batch` per campaign. Call again at once while
    /// [`Swept::more`]. Tombstones are forgotten by Redis itself (`PEXPIRE`).
    pub async fn expire(&self, now: Timestamp) -> Result<Swept, LedgerError> {
        let (window, unfinished) = self.sweep_list().window(SWEEP_CAMPAIGNS);
        let mut swept = self.expire_campaigns(&window, now).await?;
        swept.more |= unfinished;
        Ok(swept)
    }

    /// Sweeps the indexes of `campaigns` (one call each, one batch), as
    /// [`RedisLedger::expire`]: the sum of what they did; `more` when any batch was full.
    pub async fn expire_campaigns<S: AsRef<str>>(
        &self,
        campaigns: &[S],
        now: Timestamp,
    ) -> Result<Swept, LedgerError> {
        let calls: Vec<Expire> = campaigns
            .iter()
            .map(|c| Expire {
                campaign: c.as_ref().to_owned(),
            })
            .collect();
        let mut total = Swept::default();
        for chunk in calls.chunks(super::PIPELINE_MAX) {
            for swept in self.pipeline_of(chunk, now).await? {
                let swept = swept?;
                total.reservations += swept.reservations;
                total.leases += swept.leases;
                total.more |= swept.more;
            }
        }
        Ok(total)
    }

    /// Adds `campaign` to the campaigns [`RedisLedger::expire`] walks (done by every limit
    /// write; for a handle that sweeps campaigns another one wrote).
    pub fn sweep_campaign(&self, campaign: &str) {
        self.sweep_list().add(campaign);
    }
}
