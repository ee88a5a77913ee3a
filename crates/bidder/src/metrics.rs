//! Every metric the bidder exports, in one place, rendered in the Prometheus text format. Label
//! sets are bounded: outcomes and reasons are fixed enums.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use telemetry::{ByLabel, Histogram, family, labelled_counters, sample, single};

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

/// The bidder's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    pub requests: ByLabel<{ RequestOutcome::COUNT }>,
    pub skips: ByLabel<{ SkipReason::COUNT }>,
    pub notices: [ByLabel<{ NoticeOutcome::COUNT }>; NoticeKind::COUNT],
    pub reloads: ByLabel<{ ReloadOutcome::COUNT }>,
    /// Reloads of the price key file, by outcome.
    pub price_key_reloads: ByLabel<{ ReloadOutcome::COUNT }>,
    /// Refused reloads by reason (their sum is the `failed` reloads).
    pub reload_failures: ByLabel<{ ReloadFailure::COUNT }>,
    pub bids: AtomicU64,
    /// Notices refused before the ledger (403), by reason.
    pub notice_refusals: ByLabel<{ NoticeRefusal::COUNT }>,
    /// Reservations released by the expiry sweep: no notice came within TTL plus grace.
    pub reservations_expired: AtomicU64,
    /// Requests not bid on because they do not allow the budgets' currency.
    pub other_currency: AtomicU64,
    /// Notices answered 503 because `max_notices_in_flight` were being handled.
    pub notices_shed: AtomicU64,
    pub decision_latency: Histogram,
    /// Campaigns serving now.
    pub campaigns: AtomicU64,
}

impl Metrics {
    pub fn request(&self, o: RequestOutcome) {
        self.requests.inc(o as usize);
    }

    pub fn request_count(&self, o: RequestOutcome) -> u64 {
        self.requests.get(o as usize)
    }

    pub fn skip(&self, r: SkipReason) {
        self.skips.inc(r as usize);
    }

    /// Counts what one impression's ranking passed over.
    pub fn skips_of(&self, skips: campaigns::Skips) {
        for (reason, n) in [
            (SkipReason::BelowFloor, skips.below_floor),
            (SkipReason::Exhausted, skips.exhausted),
            (SkipReason::Paced, skips.paced),
        ] {
            self.skips.add(reason as usize, u64::from(n));
        }
    }

    pub fn skip_count(&self, r: SkipReason) -> u64 {
        self.skips.get(r as usize)
    }

    pub fn notice(&self, kind: NoticeKind, o: NoticeOutcome) {
        if let Some(n) = self.notices.get(kind as usize) {
            n.inc(o as usize);
        }
    }

    pub fn notice_count(&self, kind: NoticeKind, o: NoticeOutcome) -> u64 {
        self.notices
            .get(kind as usize)
            .map_or(0, |n| n.get(o as usize))
    }

    /// Counts a notice refused before the ledger (403).
    pub fn notice_refused(&self, kind: NoticeKind, why: NoticeRefusal) {
        self.notice(kind, NoticeOutcome::Refused);
        self.notice_refusals.inc(why as usize);
    }

    pub fn notice_refusal_count(&self, why: NoticeRefusal) -> u64 {
        self.notice_refusals.get(why as usize)
    }

    pub fn reload(&self, o: ReloadOutcome) {
        self.reloads.inc(o as usize);
    }

    pub fn reload_count(&self, o: ReloadOutcome) -> u64 {
        self.reloads.get(o as usize)
    }

    /// Counts a refused reload and why.
    pub fn reload_failed(&self, why: ReloadFailure) {
        self.reload(ReloadOutcome::Failed);
        self.reload_failures.inc(why as usize);
    }

    pub fn reload_failure_count(&self, why: ReloadFailure) -> u64 {
        self.reload_failures.get(why as usize)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(4096);
        let requests = "gavel_bidder_requests_total";
        family(&mut o, requests, "counter", "Bid requests by outcome.");
        for r in RequestOutcome::ALL {
            sample(
                &mut o,
                requests,
                &[("outcome", r.label())],
                self.request_count(*r),
            );
        }
        let bids = "gavel_bidder_bids_total";
        family(&mut o, bids, "counter", "Bids made (one per imp answered).");
        sample(&mut o, bids, &[], self.bids.load(Relaxed));
        let skips = "gavel_bidder_candidate_skips_total";
        family(
            &mut o,
            skips,
            "counter",
            "Matching campaigns that did not bid, by reason.",
        );
        for r in SkipReason::ALL {
            sample(&mut o, skips, &[("reason", r.label())], self.skip_count(*r));
        }
        let notices = "gavel_bidder_notices_total";
        family(
            &mut o,
            notices,
            "counter",
            "Notices received, by kind and what they did.",
        );
        for k in NoticeKind::ALL {
            for n in NoticeOutcome::ALL {
                let labels = [("kind", k.label()), ("outcome", n.label())];
                sample(&mut o, notices, &labels, self.notice_count(*k, *n));
            }
        }
        let refused = "gavel_bidder_notices_refused_total";
        family(
            &mut o,
            refused,
            "counter",
            "Notices refused with 403 before the ledger saw them, by reason.",
        );
        for r in NoticeRefusal::ALL {
            sample(
                &mut o,
                refused,
                &[("reason", r.label())],
                self.notice_refusal_count(*r),
            );
        }
        let expired = "gavel_bidder_reservations_expired_total";
        family(
            &mut o,
            expired,
            "counter",
            "Reservations released because no notice came within their TTL and grace.",
        );
        sample(
            &mut o,
            expired,
            &[],
            self.reservations_expired.load(Relaxed),
        );
        single(
            &mut o,
            "gavel_bidder_no_bids_other_currency_total",
            "counter",
            "Requests not bid on because they do not allow the currency of the budgets.",
            self.other_currency.load(Relaxed),
        );
        single(
            &mut o,
            "gavel_bidder_notices_shed_total",
            "counter",
            "Notices answered 503 because max_notices_in_flight were being handled.",
            self.notices_shed.load(Relaxed),
        );
        let reloads = "gavel_bidder_campaign_reloads_total";
        family(
            &mut o,
            reloads,
            "counter",
            "Campaign file reloads, by outcome.",
        );
        for r in ReloadOutcome::ALL {
            sample(
                &mut o,
                reloads,
                &[("outcome", r.label())],
                self.reload_count(*r),
            );
        }
        let failures = "gavel_bidder_campaign_reload_failures_total";
        family(
            &mut o,
            failures,
            "counter",
            "Refused campaign file reloads, by reason; the last good campaigns keep serving.",
        );
        for r in ReloadFailure::ALL {
            sample(
                &mut o,
                failures,
                &[("reason", r.label())],
                self.reload_failure_count(*r),
            );
        }
        let campaigns = "gavel_bidder_campaigns";
        family(&mut o, campaigns, "gauge", "Campaigns serving now.");
        sample(&mut o, campaigns, &[], self.campaigns.load(Relaxed));
        let latency = "gavel_bidder_decision_seconds";
        family(
            &mut o,
            latency,
            "histogram",
            "Time from reading a request to its answer.",
        );
        self.decision_latency.render(&mut o, latency, "");
        o
    }
}
