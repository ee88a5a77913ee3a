//! The lease protocol on the shared ledger (see "The lease protocol" in [`crate::redis`]):
//! taking, reporting and closing leases, and settling notices whichever instance received
//! them. Lease mode's background task sends the same scripts pipelined ([`Call`](super::script::Call)).

use units::{Nanos, Timestamp};

use super::error::Reply;
use super::script::{
    CloseLease, LeaseClose, LeaseGrant, LeaseReport, ReportLease, SettleRequest, Settlement, Take,
    TakeLease,
};
use super::{LeaseError, RedisLedger};
use crate::book::SettleError;

impl RedisLedger {
    /// Grants up to `want` of `campaign`'s budget to lease `lease_id` (creating it, or growing it
    /// if open): `min(want, total available, today's available)`, possibly zero, counted as
    /// reserved until reported as spent or returned. The expiry becomes the later of the
    /// lease's and `expires_at`.
    pub async fn take_lease(
        &self,
        lease_id: &str,
        campaign: &str,
        want: Nanos,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Reply<LeaseGrant, LeaseError> {
        let call = TakeLease {
            id: lease_id.to_owned(),
            campaign: campaign.to_owned(),
            want,
            expires_at,
            take: Take::CreateOrGrow,
            node: String::new(),
        };
        self.run(&call, now).await
    }

    /// Reports the lease holder's cumulative spend (lease `lease_id` of `campaign`): charges what is new since the highest
    /// earlier report (so repeats and reordering change nothing), capped at the lease amount;
    /// extends an open lease's expiry to `new_expires_at` (never shortens it). After the lease
    /// was reclaimed or closed, charges at most what the campaign still has available and says
    /// how much it could not charge.
    pub async fn report_lease(
        &self,
        lease_id: &str,
        campaign: &str,
        cumulative_spent: Nanos,
        new_expires_at: Timestamp,
        now: Timestamp,
    ) -> Reply<LeaseReport, LeaseError> {
        let call = ReportLease {
            id: lease_id.to_owned(),
            campaign: campaign.to_owned(),
            cumulative: cumulative_spent,
            expires_at: new_expires_at,
        };
        self.run(&call, now).await
    }

    /// Reports the final cumulative spend (as [`RedisLedger::report_lease`]) and returns the
    /// lease's unreported remainder to the campaign. Closing again only reports.
    pub async fn close_lease(
        &self,
        lease_id: &str,
        campaign: &str,
        cumulative_spent: Nanos,
        now: Timestamp,
    ) -> Reply<LeaseClose, LeaseError> {
        let call = CloseLease {
            id: lease_id.to_owned(),
            campaign: campaign.to_owned(),
            cumulative: cumulative_spent,
        };
        self.run(&call, now).await
    }

    /// Settles a notice in lease mode, whichever instance received it (see `lua/settle.lua`):
    /// claims the reservation's outcome so that it happens once across instances and replays,
    /// and, when the caller does not hold the reservation, charges the holder's lease (or the
    /// campaign) and tells the holder through its inbox.
    pub(crate) async fn settle(
        &self,
        request: SettleRequest,
        now: Timestamp,
    ) -> Reply<Settlement, SettleError> {
        self.run(&request, now).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::redis::RedisConfig;
    use std::time::Duration;
    use units::Limits;

    const NOW: Timestamp = Timestamp(10 * Timestamp::MS_PER_DAY);

    fn take(id: &str, want: i64, take: Take) -> TakeLease {
        TakeLease {
            id: id.to_owned(),
            campaign: "c".to_owned(),
            want: Nanos(want),
            expires_at: Timestamp(NOW.0 + 10_000),
            take,
            node: "n1".to_owned(),
        }
    }

    async fn grant(l: &RedisLedger, call: &TakeLease) -> Result<LeaseGrant, LeaseError> {
        l.run(call, NOW).await.unwrap()
    }

    /// The lease task's takes: a creation sent again (its first answer lost) grants nothing
    /// more; a grow of a lease Redis does not know is refused; the public take does both.
    #[tokio::test]
    async fn each_kind_of_take_does_only_what_it_may() {
        let server = testkit::RedisServer::start().await;
        let l = RedisLedger::new(RedisConfig {
            addr: server.addr(),
            timeout: Duration::from_secs(2),
            ..RedisConfig::default()
        });
        let limits = Limits {
            total: Nanos(1_000),
            daily: None,
        };
        l.set_limits("c", limits, NOW).await.unwrap();

        let first = grant(&l, &take("l1", 100, Take::CreateOnce)).await.unwrap();
        assert_eq!((first.granted, first.amount), (Nanos(100), Nanos(100)));
        let again = grant(&l, &take("l1", 100, Take::CreateOnce)).await.unwrap();
        assert_eq!((again.granted, again.amount), (Nanos(0), Nanos(100)));
        assert_eq!(
            l.balance("c", NOW).await.unwrap().unwrap().reserved,
            Nanos(100)
        );

        let grown = grant(&l, &take("l1", 50, Take::GrowOnly)).await.unwrap();
        assert_eq!((grown.granted, grown.amount), (Nanos(50), Nanos(150)));
        assert_eq!(
            grant(&l, &take("l2", 50, Take::GrowOnly)).await,
            Err(LeaseError::UnknownLease)
        );
        let public = grant(&l, &take("l1", 10, Take::CreateOrGrow))
            .await
            .unwrap();
        assert_eq!(public.amount, Nanos(160));
        assert_eq!(
            l.balance("c", NOW).await.unwrap().unwrap().reserved,
            Nanos(160)
        );
    }
}
