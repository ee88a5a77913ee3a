//! Every metric the exchange exports, in one place, as lock-free atomics rendered in the
//! Prometheus text format. Label sets are bounded: outcomes and reasons are fixed enums, bidder
//! names come from the configuration.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use arc_swap::ArcSwap;
pub use telemetry::{ByLabel, Histogram};
use telemetry::{family, labelled_counters, sample, single};

labelled_counters! {
    /// How one inbound request ended.
    RequestOutcome {
        Bid => "bid",
        NoBid => "no_bid",
        Shed => "shed",
        BadRequest => "bad_request",
        TooLarge => "too_large",
        MethodNotAllowed => "method_not_allowed",
        NotFound => "not_found",
        InternalError => "internal_error",
        Unauthorized => "unauthorized",
    }
}

labelled_counters! {
    /// How one bidder call ended.
    BidderOutcome {
        Bid => "bid",
        NoBid => "no_bid",
        Timeout => "timeout",
        Error => "error",
        Invalid => "invalid_response",
        Skipped => "skipped",
    }
}

labelled_counters! {
    /// Why a bidder was not called for an auction.
    SkipReason {
        PoolFull => "pool_full",
        BreakerOpen => "breaker_open",
        QpsCap => "qps_cap",
        Unresolved => "unresolved",
    }
}

labelled_counters! {
    /// Why the exchange did not call a bidder's notice or markup URL (`outbound::Refusal`).
    NoticeRefusal {
        BadUrl => "bad_url",
        HostNotAllowed => "host_not_allowed",
        Address => "address",
        NoAddress => "no_address",
    }
}

labelled_counters! {
    /// How a configuration reload ended: applied, or why the last good one stays.
    ReloadOutcome {
        Applied => "applied",
        Unreadable => "unreadable",
        Invalid => "invalid",
    }
}

labelled_counters! {
    /// Notice kinds the exchange fires.
    NoticeKind {
        Win => "win",
        Billing => "billing",
        Loss => "loss",
        Markup => "markup_fetch",
    }
}

labelled_counters! {
    /// Why a request's seller key was refused.
    KeyRefusalLabel {
        Missing => "missing_key",
        Unknown => "unknown_key",
    }
}

labelled_counters! {
    /// What happened to a notice.
    NoticeOutcome {
        Sent => "sent",
        Failed => "failed",
        Dropped => "dropped",
        Refused => "refused",
    }
}

labelled_counters! {
    /// What became of an auction's markup puts to the `[cache]` store.
    CacheOutcome {
        Stored => "stored",
        Timeout => "timeout",
        Failed => "failed",
        Refused => "refused",
        PoolFull => "pool_full",
    }
}

/// How long a bidder's typical answer time stays in use without a new answer.
pub const TYPICAL_FRESH_MS: u64 = 1_000;

/// Milliseconds since the process first asked: a monotonic clock cheap to keep in an atomic.
pub fn clock_ms() -> u64 {
    clock_ms_at(std::time::Instant::now())
}

/// [`clock_ms`] at an instant already read.
pub fn clock_ms_at(at: std::time::Instant) -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| at);
    u64::try_from(at.saturating_duration_since(epoch).as_millis()).unwrap_or(u64::MAX)
}

/// Per-bidder figures.
#[derive(Debug, Default)]
pub struct BidderMetrics {
    pub requests: AtomicU64,
    pub outcomes: ByLabel<{ BidderOutcome::COUNT }>,
    /// Auctions that skipped this bidder, by reason (their sum is the `skipped` outcome).
    pub skips: ByLabel<{ SkipReason::COUNT }>,
    /// Its notice and markup URLs the exchange refused to call, by reason.
    pub notice_refusals: ByLabel<{ NoticeRefusal::COUNT }>,
    /// Times its circuit breaker opened.
    pub breaker_trips: AtomicU64,
    /// Its breaker's state now: 0 closed, 1 open, 2 half-open.
    pub breaker_state: AtomicU64,
    pub latency: Histogram,
    /// Typical time to a complete answer, in microseconds: a moving average (weight 1/16) over
    /// answered calls, 0 until the first. An auction with less time left than the fastest
    /// bidder's typical answer is answered at once.
    pub typical_answer_us: AtomicU64,
    /// When it was last updated, in milliseconds of [`clock_ms`] plus one (0: never).
    typical_at_ms: AtomicU64,
    /// Bids received (each bid of each seatbid).
    pub bids: AtomicU64,
    /// Bids dropped before the auction, by `auction::Rejection` label.
    pub rejections: std::sync::Mutex<Vec<(&'static str, u64)>>,
    pub wins: AtomicU64,
    /// Sum of clearing prices of won imps, CPM micros.
    pub cleared_micros: AtomicU64,
    /// This bidder's notices (markup fetches included) by outcome.
    pub notices: ByLabel<{ NoticeOutcome::COUNT }>,
    /// Calls holding one of its pool's connections now, late answers still draining included:
    /// at `max_connections`, the next auction skips it (`pool_full`).
    pub connections_busy: Arc<AtomicU64>,
}

impl BidderMetrics {
    pub fn outcome(&self, o: BidderOutcome) {
        self.outcomes.inc(o as usize);
    }

    /// Records a complete answer, seen at `now_ms` ([`clock_ms`]), that took `took` from the
    /// start of the fan-out.
    pub fn answered_after(&self, took: std::time::Duration, now_ms: u64) {
        self.typical_at_ms.store(now_ms.saturating_add(1), Relaxed);
        self.latency.observe(took);
        let sample = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        let old = self.typical_answer_us.load(Relaxed);
        // One writer at a time in practice (a fan-out polls its calls on one task); a lost
        // update under a race only delays the average by one sample.
        let new = if old == 0 {
            sample
        } else {
            (old - old / 16).saturating_add(sample / 16).max(1)
        };
        self.typical_answer_us.store(new, Relaxed);
    }

    /// The typical answer time, if an answer came within the last [`TYPICAL_FRESH_MS`]. An
    /// older figure is not used: a bidder no auction had time for (because of that figure)
    /// gets no chance to show it has become faster, so the figure must expire by itself.
    pub fn typical_answer(&self, now_ms: u64) -> Option<std::time::Duration> {
        let at = self.typical_at_ms.load(Relaxed);
        let us = self.typical_answer_us.load(Relaxed);
        (at > 0 && us > 0 && now_ms.saturating_add(1).saturating_sub(at) <= TYPICAL_FRESH_MS)
            .then(|| std::time::Duration::from_micros(us))
    }

    pub fn outcome_count(&self, o: BidderOutcome) -> u64 {
        self.outcomes.get(o as usize)
    }

    pub fn skip_count(&self, r: SkipReason) -> u64 {
        self.skips.get(r as usize)
    }

    /// Counts a refused notice or markup URL by its reason.
    pub fn notice_refused(&self, refusal: &crate::outbound::Refusal) {
        use crate::outbound::Refusal as R;
        let reason = match refusal {
            R::BadUrl => NoticeRefusal::BadUrl,
            R::HostNotAllowed(_) => NoticeRefusal::HostNotAllowed,
            R::Address(_) => NoticeRefusal::Address,
            R::NoAddress(_) => NoticeRefusal::NoAddress,
        };
        self.notice_refusals.inc(reason as usize);
    }

    pub fn notice_refusal_count(&self, r: NoticeRefusal) -> u64 {
        self.notice_refusals.get(r as usize)
    }

    /// Counts a rejected bid. Rejections are rare next to bids, and the list holds one entry per
    /// distinct reason, so a short lock here is cheaper than a counter per (bidder, reason).
    pub fn rejected(&self, label: &'static str) {
        let Ok(mut list) = self.rejections.lock() else {
            return;
        };
        match list.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => list.push((label, 1)),
        }
    }

    pub fn rejections(&self) -> Vec<(&'static str, u64)> {
        self.rejections
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }
}

/// All exchange metrics.
#[derive(Debug)]
pub struct Metrics {
    pub requests: ByLabel<{ RequestOutcome::COUNT }>,
    pub auction_latency: Histogram,
    /// Auctions answered after their deadline (should stay 0).
    pub late_answers: AtomicU64,
    /// Requests answered at once because less than `admission.min_time_left_ms` was left for
    /// bidders; none of them reaches a bidder.
    pub no_time_left: AtomicU64,
    pub notices: [ByLabel<{ NoticeOutcome::COUNT }>; NoticeKind::COUNT],
    /// Notice attempts that failed and were queued again, by kind.
    pub notice_retries: ByLabel<{ NoticeKind::COUNT }>,
    /// Requests refused for a missing or unknown seller key, by reason.
    pub unauthorized: ByLabel<{ KeyRefusalLabel::COUNT }>,
    /// The sellers configured now (name, requests taken); replaced whole by a reload.
    sellers: ArcSwap<crate::sellers::Sellers>,
    /// Configuration reloads by outcome (the reason, when refused).
    pub config_reloads: ByLabel<{ ReloadOutcome::COUNT }>,
    /// The bidders configured now; replaced whole by a reload.
    bidders: ArcSwap<BidderTable>,
    /// Auctions' markup puts to the `[cache]` store, by outcome.
    pub cache: ByLabel<{ CacheOutcome::COUNT }>,
    /// Lookups of bidder hosts that failed while serving (the address in use was kept).
    pub dns_failures: AtomicU64,
}

/// Per-bidder metrics of the bidders configured now, index-aligned with their names.
#[derive(Debug, Default, Clone)]
pub struct BidderTable {
    pub names: Vec<String>,
    pub metrics: Vec<Arc<BidderMetrics>>,
}

impl BidderTable {
    /// Fresh metrics for `names`.
    pub fn new(names: Vec<String>) -> BidderTable {
        BidderTable {
            metrics: names.iter().map(|_| Arc::default()).collect(),
            names,
        }
    }

    /// Name and metrics of each bidder, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &BidderMetrics)> {
        self.names
            .iter()
            .map(String::as_str)
            .zip(self.metrics.iter().map(|m| &**m))
    }
}

impl Metrics {
    pub fn new(bidder_names: Vec<String>) -> Self {
        Metrics {
            requests: ByLabel::default(),
            auction_latency: Histogram::default(),
            late_answers: AtomicU64::new(0),
            dns_failures: AtomicU64::new(0),
            no_time_left: AtomicU64::new(0),
            notices: std::array::from_fn(|_| ByLabel::default()),
            notice_retries: ByLabel::default(),
            unauthorized: ByLabel::default(),
            sellers: ArcSwap::from_pointee(crate::sellers::Sellers::empty()),
            config_reloads: ByLabel::default(),
            bidders: ArcSwap::from_pointee(BidderTable::new(bidder_names)),
            cache: ByLabel::default(),
        }
    }

    /// The bidders configured now (a snapshot: a later reload does not change it).
    pub fn bidders(&self) -> Arc<BidderTable> {
        self.bidders.load_full()
    }

    /// Metrics of the `i`th bidder configured now.
    pub fn bidder(&self, i: usize) -> Option<Arc<BidderMetrics>> {
        self.bidders.load().metrics.get(i).cloned()
    }

    /// Metrics of the bidder configured now under `name`.
    pub fn bidder_named(&self, name: &str) -> Option<Arc<BidderMetrics>> {
        let table = self.bidders.load();
        let i = table.names.iter().position(|n| n == name)?;
        table.metrics.get(i).cloned()
    }

    pub(crate) fn set_bidders(&self, table: Arc<BidderTable>) {
        self.bidders.store(table);
    }

    pub fn config_reload_count(&self, o: ReloadOutcome) -> u64 {
        self.config_reloads.get(o as usize)
    }

    pub fn request(&self, o: RequestOutcome) {
        self.requests.inc(o as usize);
    }

    pub fn request_count(&self, o: RequestOutcome) -> u64 {
        self.requests.get(o as usize)
    }

    pub fn notice(&self, kind: NoticeKind, o: NoticeOutcome) {
        self.notices[kind as usize].inc(o as usize);
    }

    pub(crate) fn set_sellers(&self, sellers: Arc<crate::sellers::Sellers>) {
        self.sellers.store(sellers);
    }

    pub fn notice_retried(&self, kind: NoticeKind) {
        self.notice_retries.inc(kind as usize);
    }

    pub fn unauthorized_count(&self, why: KeyRefusalLabel) -> u64 {
        self.unauthorized.get(why as usize)
    }

    /// Requests taken from the seller named `name` (`-`: anonymous).
    pub fn seller_requests(&self, name: &str) -> Option<u64> {
        let sellers = self.sellers.load();
        let seller = match name {
            "-" => sellers.anonymous(),
            _ => sellers.named(name),
        }?;
        Some(seller.requests.load(Relaxed))
    }

    /// Counts one auction's markup put.
    pub fn cache(&self, o: CacheOutcome) {
        self.cache.inc(o as usize);
    }

    pub fn cache_count(&self, o: CacheOutcome) -> u64 {
        self.cache.get(o as usize)
    }

    pub fn notice_count(&self, kind: NoticeKind, o: NoticeOutcome) -> u64 {
        self.notices[kind as usize].get(o as usize)
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let o = &mut out;
        let requests = "gavel_exchange_requests_total";
        family(
            o,
            requests,
            "counter",
            "Inbound auction requests by outcome.",
        );
        for r in RequestOutcome::ALL {
            sample(
                o,
                requests,
                &[("outcome", r.label())],
                self.request_count(*r),
            );
        }
        let latency = "gavel_exchange_auction_duration_seconds";
        family(o, latency, "histogram", "Time from request read to answer.");
        self.auction_latency.render(o, latency, "");
        single(
            o,
            "gavel_exchange_late_answers_total",
            "counter",
            "Answers written after the deadline.",
            self.late_answers.load(Relaxed),
        );
        single(
            o,
            "gavel_exchange_bidder_lookup_failures_total",
            "counter",
            "Lookups of bidder hosts that failed while serving; the address in use was kept.",
            self.dns_failures.load(Relaxed),
        );
        single(
            o,
            "gavel_exchange_no_time_left_total",
            "counter",
            "Requests answered without fan-out because their deadline left too little time.",
            self.no_time_left.load(Relaxed),
        );
        let cache = "gavel_exchange_markup_cache_total";
        family(
            o,
            cache,
            "counter",
            "Auctions' markup puts to the [cache] store by outcome; a failure never fails the auction.",
        );
        for c in CacheOutcome::ALL {
            sample(o, cache, &[("outcome", c.label())], self.cache_count(*c));
        }
        let notices = "gavel_exchange_notices_total";
        family(o, notices, "counter", "Notices fired by kind and outcome.");
        for k in NoticeKind::ALL {
            for n in NoticeOutcome::ALL {
                let labels = [("kind", k.label()), ("outcome", n.label())];
                sample(o, notices, &labels, self.notice_count(*k, *n));
            }
        }
        let retries = "gavel_exchange_notice_retries_total";
        family(
            o,
            retries,
            "counter",
            "Notice attempts that failed and were queued again.",
        );
        for k in NoticeKind::ALL {
            sample(
                o,
                retries,
                &[("kind", k.label())],
                self.notice_retries.get(*k as usize),
            );
        }
        let unauthorized = "gavel_exchange_unauthorized_total";
        family(
            o,
            unauthorized,
            "counter",
            "Auction requests refused (401) for a missing or unknown seller key.",
        );
        for r in KeyRefusalLabel::ALL {
            sample(
                o,
                unauthorized,
                &[("reason", r.label())],
                self.unauthorized_count(*r),
            );
        }
        let sellers = "gavel_exchange_seller_requests_total";
        family(
            o,
            sellers,
            "counter",
            "Auction requests taken per seller (\"-\": without a key, open_to_all_sellers).",
        );
        let table = self.sellers.load();
        for seller in table.iter().chain(table.anonymous()) {
            sample(
                o,
                sellers,
                &[("seller", seller.name.as_str())],
                seller.requests.load(Relaxed),
            );
        }
        let reloads = "gavel_exchange_config_reloads_total";
        family(
            o,
            reloads,
            "counter",
            "Configuration reloads: applied, or refused (the last good configuration stays) and why.",
        );
        for r in ReloadOutcome::ALL {
            sample(
                o,
                reloads,
                &[("outcome", r.label())],
                self.config_reload_count(*r),
            );
        }
        self.render_bidders(o);
        out
    }

    fn render_bidders(&self, o: &mut String) {
        let table = self.bidders.load();
        // One sample per bidder of a per-bidder value.
        let per_bidder = |o: &mut String,
                          name: &str,
                          kind: &str,
                          help: &str,
                          value: &dyn Fn(&BidderMetrics) -> String| {
            family(o, name, kind, help);
            for (bidder, b) in table.iter() {
                sample(o, name, &[("bidder", bidder)], value(b));
            }
        };
        per_bidder(
            o,
            "gavel_exchange_bidder_requests_total",
            "counter",
            "Bid requests sent per bidder.",
            &|b| b.requests.load(Relaxed).to_string(),
        );
        let responses = "gavel_exchange_bidder_responses_total";
        family(
            o,
            responses,
            "counter",
            "Bidder calls by outcome (timeouts and no-bids included).",
        );
        for (bidder, b) in table.iter() {
            for r in BidderOutcome::ALL {
                let labels = [("bidder", bidder), ("outcome", r.label())];
                sample(o, responses, &labels, b.outcome_count(*r));
            }
        }
        let skips = "gavel_exchange_bidder_skips_total";
        family(
            o,
            skips,
            "counter",
            "Auctions that did not call a bidder, by reason.",
        );
        for (bidder, b) in table.iter() {
            for r in SkipReason::ALL {
                let labels = [("bidder", bidder), ("reason", r.label())];
                sample(o, skips, &labels, b.skip_count(*r));
            }
        }
        per_bidder(
            o,
            "gavel_exchange_bidder_breaker_state",
            "gauge",
            "Circuit breaker state per bidder: 0 closed, 1 open, 2 half-open.",
            &|b| b.breaker_state.load(Relaxed).to_string(),
        );
        per_bidder(
            o,
            "gavel_exchange_bidder_connections_busy",
            "gauge",
            "Calls holding one of a bidder's pooled connections now (late answers draining included).",
            &|b| b.connections_busy.load(Relaxed).to_string(),
        );
        per_bidder(
            o,
            "gavel_exchange_bidder_typical_answer_seconds",
            "gauge",
            "Moving average of a bidder's complete answer times (0 before the first).",
            #[allow(clippy::cast_precision_loss)] // microseconds
            &|b| (b.typical_answer_us.load(Relaxed) as f64 / 1e6).to_string(),
        );
        per_bidder(
            o,
            "gavel_exchange_bidder_breaker_trips_total",
            "counter",
            "Times a bidder's circuit breaker opened.",
            &|b| b.breaker_trips.load(Relaxed).to_string(),
        );
        let latency = "gavel_exchange_bidder_latency_seconds";
        family(
            o,
            latency,
            "histogram",
            "Bidder answer time (answered calls).",
        );
        for (bidder, b) in table.iter() {
            b.latency
                .render(o, latency, &format!("bidder=\"{bidder}\""));
        }
        per_bidder(
            o,
            "gavel_exchange_bids_total",
            "counter",
            "Bids received per bidder.",
            &|b| b.bids.load(Relaxed).to_string(),
        );
        let rejections = "gavel_exchange_bid_rejections_total";
        family(
            o,
            rejections,
            "counter",
            "Bids dropped before the auction, by reason.",
        );
        for (bidder, b) in table.iter() {
            for (reason, n) in b.rejections() {
                sample(o, rejections, &[("bidder", bidder), ("reason", reason)], n);
            }
        }
        per_bidder(
            o,
            "gavel_exchange_wins_total",
            "counter",
            "Imps won per bidder.",
            &|b| b.wins.load(Relaxed).to_string(),
        );
        let notices = "gavel_exchange_bidder_notices_total";
        family(
            o,
            notices,
            "counter",
            "Each bidder's notices (markup fetches included) by outcome.",
        );
        for (bidder, b) in table.iter() {
            for n in NoticeOutcome::ALL {
                let labels = [("bidder", bidder), ("outcome", n.label())];
                sample(o, notices, &labels, b.notices.get(*n as usize));
            }
        }
        let refused = "gavel_exchange_bidder_notices_refused_total";
        family(
            o,
            refused,
            "counter",
            "Each bidder's notice and markup URLs the exchange refused to call, by reason (address: a private, loopback or other internal address, see notices.allow_private_addresses).",
        );
        for (bidder, b) in table.iter() {
            for r in NoticeRefusal::ALL {
                let labels = [("bidder", bidder), ("reason", r.label())];
                sample(o, refused, &labels, b.notice_refusals.get(*r as usize));
            }
        }
        per_bidder(
            o,
            "gavel_exchange_cleared_cpm_micros_total",
            "counter",
            "Sum of clearing prices (CPM micros) per bidder.",
            &|b| b.cleared_micros.load(Relaxed).to_string(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bidders_typical_answer_follows_its_answers_and_expires() {
        let m = BidderMetrics::default();
        assert_eq!(m.typical_answer(clock_ms()), None, "no answer yet");
        m.answered_after(Duration::from_millis(32), clock_ms());
        assert_eq!(
            m.typical_answer(clock_ms()),
            Some(Duration::from_millis(32))
        );
        // Each answer moves it a sixteenth of the way.
        m.answered_after(Duration::from_millis(16), clock_ms());
        assert_eq!(m.typical_answer_us.load(Relaxed), 32_000 - 2_000 + 1_000);
        for _ in 0..200 {
            m.answered_after(Duration::from_millis(2), clock_ms());
        }
        let typical = m.typical_answer(clock_ms()).unwrap();
        assert!(typical < Duration::from_micros(2_100), "{typical:?}");
        // Without a fresh answer the figure is not used (and cannot lock a bidder out).
        assert_eq!(m.typical_answer(clock_ms() + TYPICAL_FRESH_MS + 1), None);
    }
    use std::time::Duration;

    #[test]
    fn render_names_every_bidder_and_outcome() {
        let m = Metrics::new(vec!["a".into(), "b".into()]);
        m.request(RequestOutcome::Bid);
        let b = m.bidder(1).unwrap();
        b.outcome(BidderOutcome::Timeout);
        b.rejected("below_floor");
        b.rejected("below_floor");
        let text = m.render();
        assert!(text.contains("gavel_exchange_requests_total{outcome=\"bid\"} 1"));
        assert!(
            text.contains(
                "gavel_exchange_bidder_responses_total{bidder=\"b\",outcome=\"timeout\"} 1"
            )
        );
        assert!(text.contains(
            "gavel_exchange_bid_rejections_total{bidder=\"b\",reason=\"below_floor\"} 2"
        ));
        assert!(text.contains("gavel_exchange_bidder_latency_seconds_count{bidder=\"a\"} 0"));
    }
}
