//! Every metric the bidder exports, in one place, rendered in the Prometheus text format. Label
//! sets are bounded: outcomes and reasons are fixed enums.

use telemetry::{Counter, Counters, Counters2, Gauge, Latency, Render, labelled_counters, single};

labelled_counters! {
    /// How one bid request ended.
    RequestOutcome {
        Bid => "bid",
        NoBid => "no_bid",
        Shed => "shed",
        BadRequest => "bad_request",
        TooLarge => "too_large",
        MethodNotAllowed => "method_not_allowed",
        NotFound => "not_found",
    }
}

labelled_counters! {
    /// Why a matching campaign did not bid on an imp (counted once per candidate).
    SkipReason {
        BelowFloor => "below_floor",
        Blocked => "blocked_by_request",
        Paced => "paced",
        Exhausted => "budget_exhausted",
        Refused => "ledger_refused",
        LedgerUnavailable => "ledger_unavailable",
        LedgerTimeout => "ledger_timeout",
        Deadline => "deadline",
    }
}

labelled_counters! {
    /// Notices the bidder receives.
    NoticeKind {
        Win => "win",
        Bill => "bill",
        Loss => "loss",
    }
}

labelled_counters! {
    /// What a notice did to the ledger.
    NoticeOutcome {
        Charged => "charged",
        ChargedAfterRelease => "charged_after_release",
        Duplicate => "duplicate",
        Conflict => "conflict",
        Released => "released",
        Recorded => "recorded",
        LossAfterWin => "loss_after_win",
        Unknown => "unknown_reservation",
        AbovePrice => "above_reservation",
        Refused => "refused",
        Invalid => "invalid",
        LedgerError => "ledger_error",
    }
}

labelled_counters! {
    /// Why a notice was refused with 403 before the ledger saw it.
    NoticeRefusal {
        MissingToken => "missing_token",
        MalformedToken => "malformed_token",
        BadSignature => "bad_signature",
        Expired => "expired",
        AboveBid => "above_bid",
        CleartextPrice => "cleartext_price",
        PriceTokenMalformed => "price_token_malformed",
        PriceTokenForged => "price_token_forged",
        PriceTokenExpired => "price_token_expired",
        PriceTokenUnkeyed => "price_token_unkeyed",
    }
}

labelled_counters! {
    /// How a campaign reload ended.
    ReloadOutcome {
        Applied => "applied",
        Failed => "failed",
    }
}

labelled_counters! {
    /// Why a campaign reload was refused (`CampaignError::kind`, or `stopped` when the loading
    /// thread did not finish).
    ReloadFailure {
        Io => "io",
        Format => "format",
        TooLarge => "too_large",
        Parse => "parse",
        Invalid => "invalid",
        Stopped => "stopped",
    }
}

impl ReloadFailure {
    pub fn of_kind(kind: &str) -> ReloadFailure {
        ReloadFailure::ALL
            .iter()
            .copied()
            .find(|r| r.label() == kind)
            .unwrap_or(ReloadFailure::Stopped)
    }
}

/// Appends whether Redis holds no ledger for this instance (it lost its data): alert on 1.
pub fn render_ledger_missing(out: &mut String, missing: bool) {
    single(
        out,
        "gavel_bidder_ledger_missing",
        "gauge",
        "1 when Redis holds no ledger for this instance (data lost, or never created): no bids until POST /admin/ledger/open.",
        u8::from(missing),
    );
}

/// Appends how many notices are being handled now (their gate: `max_notices_in_flight`).
pub fn render_notices_in_flight(out: &mut String, n: usize) {
    single(
        out,
        "gavel_bidder_notices_in_flight",
        "gauge",
        "Notices being handled now.",
        n,
    );
}

/// Appends the lease task's counters and whether its last Redis call succeeded (lease mode
/// only: `status` is `None` otherwise).
pub fn render_leases(out: &mut String, status: Option<(ledger::LeaseStats, bool)>) {
    let Some((s, redis_up)) = status else {
        return;
    };
    let counters: [(&str, &str, u64); 9] = [
        (
            "gavel_bidder_lease_grants_total",
            "Leases granted or grown by Redis.",
            s.grants,
        ),
        (
            "gavel_bidder_leases_lost_total",
            "Leases Redis reclaimed or lost before this instance closed them.",
            s.leases_lost,
        ),
        (
            "gavel_bidder_lease_idle_closes_total",
            "Leases handed back because their campaign stopped bidding.",
            s.idle_closes,
        ),
        (
            "gavel_bidder_lease_redis_calls_total",
            "Script calls sent to Redis by the lease task.",
            s.redis_calls,
        ),
        (
            "gavel_bidder_lease_round_trips_total",
            "Round trips those calls took.",
            s.round_trips,
        ),
        (
            "gavel_bidder_lease_redis_errors_total",
            "Failed round trips to Redis.",
            s.redis_errors,
        ),
        (
            "gavel_bidder_lease_uncharged_nanos_total",
            "Spend reported too late to be charged (spent, not billed), in nanos.",
            u64::try_from(s.uncharged.get()).unwrap_or(0),
        ),
        (
            "gavel_bidder_lease_settled_elsewhere_total",
            "Reservations of this instance whose notice another instance settled.",
            s.settled_elsewhere,
        ),
        (
            "gavel_bidder_lease_unclaimed_outcomes_total",
            "Notices settled here while Redis was away and never claimed there (queue full).",
            s.marks_dropped,
        ),
    ];
    for (name, help, value) in counters {
        single(out, name, "counter", help, value);
    }
    single(
        out,
        "gavel_bidder_open_leases",
        "gauge",
        "Leases this instance holds.",
        s.open_leases,
    );
    single(
        out,
        "gavel_bidder_ledger_up",
        "gauge",
        "1 when the last Redis call of the lease task succeeded.",
        u8::from(redis_up),
    );
}

/// The bidder's metrics, each declared once (name, help, label key) as a `telemetry` family.
/// What a bid request did is counted from its [`Decision`](crate::decision::Decision) in
/// `count.rs`; notices, reloads and the sweep count their typed results where they end.
#[derive(Debug)]
pub struct Metrics {
    pub requests: Counters<RequestOutcome>,
    /// Bids made (one per imp answered).
    pub bids: Counter,
    pub skips: Counters<SkipReason>,
    pub notices: Counters2<NoticeKind, NoticeOutcome>,
    /// Notices refused before the ledger (403), by reason.
    pub notice_refusals: Counters<NoticeRefusal>,
    /// Reservations released by the expiry sweep: no notice came within TTL plus grace.
    pub reservations_expired: Counter,
    /// Requests not bid on because they do not allow the budgets' currency.
    pub other_currency: Counter,
    /// Notices answered 503 because `max_notices_in_flight` were being handled.
    pub notices_shed: Counter,
    pub reloads: Counters<ReloadOutcome>,
    /// Refused reloads by reason (their sum is the `failed` reloads).
    pub reload_failures: Counters<ReloadFailure>,
    /// Reloads of the price key file, by outcome.
    pub price_key_reloads: Counters<ReloadOutcome>,
    /// Campaigns serving now.
    pub campaigns: Gauge,
    /// Campaigns whose limits in the ledger differ from the campaign file's (the ledger's
    /// stand: another writer changed them, or this instance follows).
    pub limit_conflicts: Gauge,
    /// Campaigns of the file the ledger does not hold: no budget of record, not bid on.
    pub limits_missing: Gauge,
    pub decision_latency: Latency,
    /// Which campaign set serves (the file, or the fleet bucket's revision): what the reload
    /// path records and `config_version` shows at scrape time.
    pub served: std::sync::Arc<fleet::Served>,
    /// `gavel_bidder_config_version{source}`, set from `served` when rendered.
    config_version: Gauge,
    /// Revisions of the fleet bucket's key refused, by reason (the set in force kept serving).
    pub config_push_refused: Counters<fleet::PushRefused>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            requests: Counters::new(
                "gavel_bidder_requests_total",
                "Bid requests by outcome.",
                "outcome",
            ),
            bids: Counter::new(
                "gavel_bidder_bids_total",
                "Bids made (one per imp answered).",
            ),
            skips: Counters::new(
                "gavel_bidder_candidate_skips_total",
                "Matching campaigns that did not bid, by reason.",
                "reason",
            ),
            notices: Counters2::new(
                "gavel_bidder_notices_total",
                "Notices received, by kind and what they did.",
                ("kind", "outcome"),
            ),
            notice_refusals: Counters::new(
                "gavel_bidder_notices_refused_total",
                "Notices refused with 403 before the ledger saw them, by reason.",
                "reason",
            ),
            reservations_expired: Counter::new(
                "gavel_bidder_reservations_expired_total",
                "Reservations released because no notice came within their TTL and grace.",
            ),
            other_currency: Counter::new(
                "gavel_bidder_no_bids_other_currency_total",
                "Requests not bid on because they do not allow the currency of the budgets.",
            ),
            notices_shed: Counter::new(
                "gavel_bidder_notices_shed_total",
                "Notices answered 503 because max_notices_in_flight were being handled.",
            ),
            reloads: Counters::new(
                "gavel_bidder_campaign_reloads_total",
                "Campaign file reloads, by outcome.",
                "outcome",
            ),
            reload_failures: Counters::new(
                "gavel_bidder_campaign_reload_failures_total",
                "Refused campaign file reloads, by reason; the last good campaigns keep serving.",
                "reason",
            ),
            price_key_reloads: Counters::new(
                "gavel_bidder_price_key_reloads_total",
                "Price key file reloads, by outcome; a refused one keeps the keys in force.",
                "outcome",
            ),
            campaigns: Gauge::new("gavel_bidder_campaigns", "Campaigns serving now."),
            limit_conflicts: Gauge::new(
                "gavel_bidder_ledger_limit_conflicts",
                "Campaigns whose limits in the ledger differ from the campaign file's; the ledger's stand.",
            ),
            limits_missing: Gauge::new(
                "gavel_bidder_ledger_campaigns_missing",
                "Campaigns of the file the ledger does not hold: no budget of record, not bid on.",
            ),
            decision_latency: Latency::new(
                "gavel_bidder_decision_seconds",
                "Time from reading a request to its answer.",
            ),
            served: std::sync::Arc::new(fleet::Served::from_file(units::Timestamp::now())),
            config_version: Gauge::new(
                "gavel_bidder_config_version",
                "The campaign set version served: the fleet bucket's revision (source=\"nats\"), or how many times the file was applied (source=\"file\").",
            ),
            config_push_refused: Counters::new(
                "gavel_bidder_config_push_refused_total",
                "Revisions of the fleet bucket's key refused (unsigned, forged, older, a deletion, invalid): the set in force kept serving.",
                "reason",
            ),
        }
    }
}

impl Metrics {
    pub fn request(&self, o: RequestOutcome) {
        self.requests.inc(o);
    }

    pub fn request_count(&self, o: RequestOutcome) -> u64 {
        self.requests.get(o)
    }

    pub fn skip(&self, r: SkipReason) {
        self.skips.inc(r);
    }

    /// Counts what one impression's ranking passed over.
    pub fn skips_of(&self, skips: campaigns::Skips) {
        for (reason, n) in [
            (SkipReason::BelowFloor, skips.below_floor),
            (SkipReason::Exhausted, skips.exhausted),
            (SkipReason::Paced, skips.paced),
        ] {
            self.skips.add(reason, u64::from(n));
        }
    }

    pub fn skip_count(&self, r: SkipReason) -> u64 {
        self.skips.get(r)
    }

    pub fn notice(&self, kind: NoticeKind, o: NoticeOutcome) {
        self.notices.inc(kind, o);
    }

    pub fn notice_count(&self, kind: NoticeKind, o: NoticeOutcome) -> u64 {
        self.notices.get(kind, o)
    }

    /// Counts a notice refused before the ledger (403).
    pub fn notice_refused(&self, kind: NoticeKind, why: NoticeRefusal) {
        self.notice(kind, NoticeOutcome::Refused);
        self.notice_refusals.inc(why);
    }

    pub fn notice_refusal_count(&self, why: NoticeRefusal) -> u64 {
        self.notice_refusals.get(why)
    }

    pub fn reload(&self, o: ReloadOutcome) {
        self.reloads.inc(o);
    }

    pub fn reload_count(&self, o: ReloadOutcome) -> u64 {
        self.reloads.get(o)
    }

    /// Counts a refused reload and why.
    pub fn reload_failed(&self, why: ReloadFailure) {
        self.reload(ReloadOutcome::Failed);
        self.reload_failures.inc(why);
    }

    pub fn reload_failure_count(&self, why: ReloadFailure) -> u64 {
        self.reload_failures.get(why)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(4096);
        for metric in [
            &self.requests as &dyn Render,
            &self.bids,
            &self.skips,
            &self.notices,
            &self.notice_refusals,
            &self.reservations_expired,
            &self.other_currency,
            &self.notices_shed,
            &self.reloads,
            &self.reload_failures,
            &self.price_key_reloads,
            &self.campaigns,
            &self.limit_conflicts,
            &self.limits_missing,
            &self.decision_latency,
        ] {
            metric.render(&mut o);
        }
        let version = self.served.version();
        self.config_version.set(version.revision);
        self.config_version.header(&mut o);
        self.config_version
            .samples(&mut o, &[("source", version.source.label())]);
        self.config_push_refused.render(&mut o);
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_rendered_once_with_its_labels() {
        let m = Metrics::default();
        m.notice(NoticeKind::Bill, NoticeOutcome::Duplicate);
        m.price_key_reloads.inc(ReloadOutcome::Failed);
        m.campaigns.set(3);
        let text = m.render();
        assert!(
            text.contains("gavel_bidder_notices_total{kind=\"bill\",outcome=\"duplicate\"} 1\n")
        );
        assert!(text.contains("gavel_bidder_price_key_reloads_total{outcome=\"failed\"} 1\n"));
        assert!(text.contains("gavel_bidder_campaigns 3\n"));
        assert!(text.contains("gavel_bidder_decision_seconds_count{} 0\n"));
        for name in ["gavel_bidder_requests_total", "gavel_bidder_bids_total"] {
            assert_eq!(
                text.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{name}"
            );
        }
    }
}
