//! The sweep: releasing reservations and reclaiming leases whose expiry passed. Each campaign's
//! hash tag has its own sweep index (`P{tag}exp`: a script may only touch keys of one slot), so
//! a sweep walks campaigns, one script call each, sent as one batch. [`RedisLedger::expire`]
//! sweeps two kinds of campaign:
//! - **due**: those this handle reserved on, once the latest of those reservations has expired
//!   (noted by [`RedisLedger::reserve`]), up to [`SWEEP_CAMPAIGNS`] per call;
//! - **in turn**: the next [`SWEEP_ROTATION`] of every campaign whose limits this handle wrote,
//!   for what other handles left behind (an instance that died with open reservations).
//!
//! So the sweep's cost follows the campaigns being bid on, not the campaigns configured: a
//! walk over all of them each second cost one script call per campaign per second (10,000
//! calls/s, a third of a Redis core, for 10,000 campaigns; BENCHMARKS.md, issue 36).
//!
//! Reclaim bound: a reservation this handle made is released by the first sweep call after its
//! expiry (plus one call per further [`SWEEP_CAMPAIGNS`] campaigns due at once, and per further
//! full batch of [`RedisConfig::sweep_batch`](super::RedisConfig::sweep_batch) in an index:
//! [`Swept::more`] says to call again at once); one another handle left behind, within
//! `ceil(n / SWEEP_ROTATION)` calls with `n` campaigns in the list, unless a handle that bids
//! on its campaign sweeps it first.

use units::Timestamp;

use super::script::{Expire, Swept};
use super::{LedgerError, RedisLedger};

/// Due campaigns (hash tags) one [`RedisLedger::expire`] call sweeps at most.
pub const SWEEP_CAMPAIGNS: usize = super::PIPELINE_MAX;

/// Campaigns one [`RedisLedger::expire`] call sweeps in turn, besides the due ones.
pub const SWEEP_ROTATION: usize = 10;

impl RedisLedger {
    /// Sweeps the next [`SWEEP_CAMPAIGNS`] campaigns of this handle's list (see the module
    /// docs): releases their open reservations and reclaims their open leases whose expiry is
    /// at or before `now`, at most `sweep_batch` per campaign. Call again at once while
    /// [`Swept::more`]. Tombstones are forgotten by Redis itself (`PEXPIRE`).
    pub async fn expire(&self, now: Timestamp) -> Result<Swept, LedgerError> {
        let now_ms = now.millis();
        let (due, backlog, turn) = {
            let mut list = self.sweep_list();
            let (due, backlog) = list.take_due(now_ms, SWEEP_CAMPAIGNS);
            let (turn, _) = list.window(SWEEP_ROTATION);
            (due, backlog, turn)
        };
        let mut campaigns = due.clone();
        campaigns.extend(turn.into_iter().filter(|c| !due.contains(c)));
        match self.expire_campaigns(&campaigns, now).await {
            Ok(mut swept) => {
                swept.more |= backlog;
                Ok(swept)
            }
            Err(e) => {
                // Not swept: due again at the next call.
                let mut list = self.sweep_list();
                for c in &due {
                    list.note_expiry(c, now_ms);
                }
                Err(e)
            }
        }
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
