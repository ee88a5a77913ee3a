//! [`LeaseConfig`]: the knobs of lease mode, their defaults, and the rules a configuration
//! loader checks them against.

use std::time::Duration;

use units::Nanos;

use crate::redis::LimitsRole;

/// Knobs of lease mode. Every field has a default.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Names this process in lease ids; must differ between instances sharing a Redis (a
    /// random suffix per start is added, so a restarted instance never resumes an old lease).
    pub instance_id: String,
    /// Amount asked of Redis per top-up; more is asked when the local headroom falls below half
    /// of it. Bigger chunks mean fewer Redis calls but more budget parked per instance (and more
    /// at stake per instance in a partition: see the `redis` module docs). A few seconds of the
    /// campaign's spend rate is a good start.
    pub lease_chunk: Nanos,
    /// Each grant or report extends the lease to now + this.
    pub lease_ttl: Duration,
    /// Local spending from a lease stops at its expiry minus this, by this instance's clock.
    /// Must exceed the clock skew between instances (another instance may run the sweep).
    pub safety_margin: Duration,
    /// How often the background task runs a full round: reports the spend of the leases whose
    /// spend changed, extends the leases nearing expiry, closes idle ones, runs the shared sweep.
    /// Top-ups do not wait for it: a reservation that needs budget wakes the task.
    pub report_interval: Duration,
    /// A lease whose campaign has not tried to reserve for this long is closed (once its open
    /// local reservations are resolved), handing its unspent part back to the shared budget.
    pub idle_close: Duration,
    /// How long the local book remembers resolved reservations (duplicate notices).
    pub tombstone_ttl: Duration,
    /// Whether this instance writes its campaigns' limits to Redis, and as whom (default: a
    /// writer named `gavel`). A follower never writes them: a campaign Redis does not hold gets
    /// no lease.
    pub limits: LimitsRole,
}

impl Default for LeaseConfig {
    fn default() -> LeaseConfig {
        LeaseConfig {
            instance_id: "gavel".to_owned(),
            lease_chunk: Nanos(1_000_000_000),
            lease_ttl: Duration::from_secs(10),
            safety_margin: Duration::from_secs(3),
            report_interval: Duration::from_millis(200),
            idle_close: Duration::from_secs(30),
            tombstone_ttl: Duration::from_secs(15 * 60),
            limits: LimitsRole::Writer("gavel".to_owned()),
        }
    }
}

impl LeaseConfig {
    /// Checks the knobs; for configuration loaders, so that a bad file is refused with the field
    /// named. [`LeasedLedger::start`](super::LeasedLedger::start) also repairs what this refuses (and logs it).
    pub fn validate(&self) -> Result<(), &'static str> {
        if !self.lease_chunk.is_positive() {
            return Err("lease_chunk must be positive");
        }
        if self.safety_margin >= self.lease_ttl {
            return Err("safety_margin must be shorter than lease_ttl (no time to spend a lease)");
        }
        if self.report_interval.is_zero()
            || self.report_interval >= self.lease_ttl - self.safety_margin
        {
            return Err(
                "report_interval must be positive and shorter than lease_ttl - safety_margin",
            );
        }
        if self.idle_close < self.report_interval {
            return Err("idle_close must be at least report_interval");
        }
        Ok(())
    }

    pub(super) fn repaired(mut self) -> LeaseConfig {
        if let Err(why) = self.validate() {
            tracing::warn!(why, "ledger: lease configuration repaired");
            self.lease_chunk = self.lease_chunk.max(Nanos(1));
            if self.safety_margin >= self.lease_ttl {
                self.safety_margin = self.lease_ttl / 4;
            }
            let window = self.lease_ttl - self.safety_margin;
            if self.report_interval.is_zero() || self.report_interval >= window {
                self.report_interval = (window / 4).max(Duration::from_millis(1));
            }
            if self.idle_close < self.report_interval {
                self.idle_close = (self.lease_ttl * 3).max(self.report_interval);
            }
        }
        self
    }

    /// A lease is reported (extended) when its expiry is this close, even without new spend:
    /// half the TTL, and early enough that the extension lands before the safety margin stops
    /// spending (two report intervals of slack).
    pub(super) fn extend_within(&self) -> Duration {
        (self.lease_ttl / 2)
            .max(self.safety_margin + self.report_interval * 2)
            .min(self.lease_ttl)
    }
}
