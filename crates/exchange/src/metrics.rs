//! Every metric the exchange exports, each declared once (name, help, label key) as a
//! `telemetry` family and rendered generically. Label sets are bounded: outcomes and reasons are
//! the enums of the code that produces them, bidder and seller names come from the
//! configuration. What is counted comes from typed outcomes: an auction's through `count.rs`,
//! notices' through [`NoticeTally`], a reload's from its result.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use arc_swap::ArcSwap;
use telemetry::{
    Counter, Counters, Counters2, Gauge, Latency, Render, Tally, family, render_each, sample,
};

pub use crate::notices::NoticeTally;
pub use crate::outcome::{
    BidderOutcome, CacheOutcome, NotCalled, NoticeKind, NoticeOutcome, PrivacyAction,
    ReloadOutcome, RequestOutcome, SkipReason,
};
pub use crate::sellers::KeyRefusal;
pub use telemetry::Histogram;
pub use upstream::outbound::NoticeRefusal;

/// Per-bidder figures; one family each over every bidder, labelled `bidder`.
#[derive(Debug)]
pub struct BidderMetrics {
    pub requests: Counter,
    pub outcomes: Counters<BidderOutcome>,
    /// Auctions that skipped this bidder, by reason (their sum is the `skipped` outcome).
    pub skips: Counters<SkipReason>,
    /// Its breaker's state after its last call: 0 closed, 1 open, 2 half-open.
    pub breaker_state: Gauge,
    /// Calls holding one of its pool's connections now, late answers still draining included:
    /// at `max_connections`, the next auction skips it (`pool_full`). The pool moves it.
    pub connections_busy: Gauge,
    /// Its typical answer time in microseconds, as the admission reads it (`typical.rs`).
    pub typical_answer_us: Gauge,
    /// Times its circuit breaker opened.
    pub breaker_trips: Counter,
    pub latency: Latency,
    /// Bids received (each bid of each seatbid).
    pub bids: Counter,
    /// Bids dropped before the auction, by `auction::Rejection` label (or `no_markup`).
    pub rejections: Tally,
    pub wins: Counter,
    /// This bidder's notices (markup fetches included) by outcome.
    pub notices: Counters<NoticeOutcome>,
    /// Its notice and markup URLs the exchange refused to call, by reason.
    pub notice_refusals: Counters<NoticeRefusal>,
    /// Sum of clearing prices of won imps, CPM micros.
    pub cleared_micros: Counter,
    /// What privacy enforcement did to its copies of requests, by action.
    pub privacy: Counters<PrivacyAction>,
    /// Auctions privacy law left it out of, by reason.
    pub not_called: Counters<NotCalled>,
}

impl Default for BidderMetrics {
    fn default() -> Self {
        BidderMetrics {
            requests: Counter::new(
                "gavel_exchange_bidder_requests_total",
                "Bid requests sent per bidder.",
            ),
            outcomes: Counters::new(
                "gavel_exchange_bidder_responses_total",
                "Bidder calls by outcome (timeouts and no-bids included).",
                "outcome",
            ),
            skips: Counters::new(
                "gavel_exchange_bidder_skips_total",
                "Auctions that did not call a bidder, by reason.",
                "reason",
            ),
            breaker_state: Gauge::new(
                "gavel_exchange_bidder_breaker_state",
                "Circuit breaker state per bidder: 0 closed, 1 open, 2 half-open.",
            ),
            connections_busy: Gauge::new(
                "gavel_exchange_bidder_connections_busy",
                "Calls holding one of a bidder's pooled connections now (late answers draining included).",
            ),
            typical_answer_us: Gauge::scaled(
                "gavel_exchange_bidder_typical_answer_seconds",
                "Moving average of a bidder's complete answer times (0 before the first).",
                1e6,
            ),
            breaker_trips: Counter::new(
                "gavel_exchange_bidder_breaker_trips_total",
                "Times a bidder's circuit breaker opened.",
            ),
            latency: Latency::new(
                "gavel_exchange_bidder_latency_seconds",
                "Bidder answer time (answered calls).",
            ),
            bids: Counter::new("gavel_exchange_bids_total", "Bids received per bidder."),
            rejections: Tally::new(
                "gavel_exchange_bid_rejections_total",
                "Bids dropped before the auction, by reason.",
                "reason",
            ),
            wins: Counter::new("gavel_exchange_wins_total", "Imps won per bidder."),
            notices: Counters::new(
                "gavel_exchange_bidder_notices_total",
                "Each bidder's notices (markup fetches included) by outcome.",
                "outcome",
            ),
            notice_refusals: Counters::new(
                "gavel_exchange_bidder_notices_refused_total",
                "Each bidder's notice and markup URLs the exchange refused to call, by reason (address: a private, loopback or other internal address, see notices.allow_private_addresses).",
                "reason",
            ),
            cleared_micros: Counter::new(
                "gavel_exchange_cleared_cpm_micros_total",
                "Sum of clearing prices (CPM micros) per bidder.",
            ),
            privacy: Counters::new(
                "gavel_exchange_privacy_actions_total",
                "What privacy enforcement did to a bidder's copy of a request (docs/privacy.md), by action.",
                "action",
            ),
            not_called: Counters::new(
                "gavel_exchange_privacy_not_called_total",
                "Auctions privacy law left a bidder out of, by reason.",
                "reason",
            ),
        }
    }
}

impl BidderMetrics {
    /// The families, in the order `/metrics` shows them.
    const FAMILIES: [fn(&BidderMetrics) -> &dyn Render; 16] = [
        |b| &b.requests,
        |b| &b.outcomes,
        |b| &b.skips,
        |b| &b.breaker_state,
        |b| &b.connections_busy,
        |b| &b.typical_answer_us,
        |b| &b.breaker_trips,
        |b| &b.latency,
        |b| &b.bids,
        |b| &b.rejections,
        |b| &b.wins,
        |b| &b.notices,
        |b| &b.notice_refusals,
        |b| &b.cleared_micros,
        |b| &b.privacy,
        |b| &b.not_called,
    ];

    pub fn outcome_count(&self, o: BidderOutcome) -> u64 {
        self.outcomes.get(o)
    }

    pub fn skip_count(&self, r: SkipReason) -> u64 {
        self.skips.get(r)
    }

    pub fn notice_refusal_count(&self, r: NoticeRefusal) -> u64 {
        self.notice_refusals.get(r)
    }

    pub fn rejections(&self) -> Vec<(&'static str, u64)> {
        self.rejections.counts()
    }
}

/// All exchange metrics.
#[derive(Debug)]
pub struct Metrics {
    pub requests: Counters<RequestOutcome>,
    pub auction_latency: Latency,
    /// Auctions answered after their deadline (should stay 0).
    pub late_answers: Counter,
    /// Lookups of bidder hosts that failed while serving (the address in use was kept).
    pub dns_failures: Counter,
    /// Requests answered at once because less than `admission.min_time_left_ms` was left for
    /// bidders; none of them reaches a bidder.
    pub no_time_left: Counter,
    /// Auctions' markup puts to the `[cache]` store, by outcome.
    pub cache: Counters<CacheOutcome>,
    pub notices: Counters2<NoticeKind, NoticeOutcome>,
    /// Notice attempts that failed and were queued again, by kind.
    pub notice_retries: Counters<NoticeKind>,
    /// Requests refused for a missing or unknown seller key, by reason.
    pub unauthorized: Counters<KeyRefusal>,
    /// Configuration reloads by outcome (the reason, when refused).
    pub config_reloads: Counters<ReloadOutcome>,
    /// Which configuration serves (the file, or the fleet bucket's revision): what the
    /// reload path records and `config_version` shows at scrape time.
    pub served: Arc<fleet::Served>,
    /// `gavel_exchange_config_version{source}`, set from `served` when rendered.
    config_version: Gauge,
    /// Pushed documents refused (the configuration in force kept serving).
    pub config_push_refused: Counters<fleet::PushRefused>,
    /// Request fields repaired before validation, by field (`validate::repair`'s labels).
    pub repairs: Tally,
    /// Imps dropped past `auction.max_imps`.
    pub imps_dropped: Counter,
    /// Requests that arrived in OpenRTB 2.5 shape and were converted up.
    pub upgraded: Counter,
    /// The sellers configured now (name, requests taken); replaced whole by a reload.
    sellers: ArcSwap<crate::sellers::Sellers>,
    /// The bidders configured now; replaced whole by a reload.
    bidders: ArcSwap<BidderTable>,
}

/// Per-bidder metrics of the bidders configured now, by name, in configuration order.
#[derive(Debug, Default, Clone)]
pub struct BidderTable {
    pub bidders: Vec<(String, Arc<BidderMetrics>)>,
}

impl BidderTable {
    /// Fresh metrics for `names`.
    pub fn new(names: Vec<String>) -> BidderTable {
        BidderTable {
            bidders: names.into_iter().map(|n| (n, Arc::default())).collect(),
        }
    }

    /// The bidders' names, in configuration order.
    pub fn names(&self) -> Vec<&str> {
        self.bidders.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Name and metrics of each bidder, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &BidderMetrics)> + Clone {
        self.bidders.iter().map(|(n, m)| (n.as_str(), &**m))
    }
}

impl Metrics {
    pub fn new(bidder_names: Vec<String>) -> Self {
        Metrics {
            requests: Counters::new(
                "gavel_exchange_requests_total",
                "Inbound auction requests by outcome.",
                "outcome",
            ),
            auction_latency: Latency::new(
                "gavel_exchange_auction_duration_seconds",
                "Time from request read to answer.",
            ),
            late_answers: Counter::new(
                "gavel_exchange_late_answers_total",
                "Answers written after the deadline.",
            ),
            dns_failures: Counter::new(
                "gavel_exchange_bidder_lookup_failures_total",
                "Lookups of bidder hosts that failed while serving; the address in use was kept.",
            ),
            no_time_left: Counter::new(
                "gavel_exchange_no_time_left_total",
                "Requests answered without fan-out because their deadline left too little time.",
            ),
            cache: Counters::new(
                "gavel_exchange_markup_cache_total",
                "Auctions' markup puts to the [cache] store by outcome; a failure never fails the auction.",
                "outcome",
            ),
            notices: Counters2::new(
                "gavel_exchange_notices_total",
                "Notices fired by kind and outcome.",
                ("kind", "outcome"),
            ),
            notice_retries: Counters::new(
                "gavel_exchange_notice_retries_total",
                "Notice attempts that failed and were queued again.",
                "kind",
            ),
            unauthorized: Counters::new(
                "gavel_exchange_unauthorized_total",
                "Auction requests refused (401) for a missing or unknown seller key.",
                "reason",
            ),
            config_reloads: Counters::new(
                "gavel_exchange_config_reloads_total",
                "Configuration reloads: applied, or refused (the last good configuration stays) and why.",
                "outcome",
            ),
            served: Arc::new(fleet::Served::from_file(units::Timestamp::now())),
            config_version: Gauge::new(
                "gavel_exchange_config_version",
                "The configuration version served: the fleet bucket's revision (source=\"nats\"), or how many times the file was applied (source=\"file\").",
            ),
            config_push_refused: Counters::new(
                "gavel_exchange_config_push_refused_total",
                "Revisions of the fleet bucket's key refused (unsigned, forged, older, a deletion, invalid): the configuration in force kept serving.",
                "reason",
            ),
            repairs: Tally::new(
                "gavel_exchange_request_repairs_total",
                "Request fields repaired before validation (sellers with validation = \"repair\"), by field.",
                "field",
            ),
            imps_dropped: Counter::new(
                "gavel_exchange_imps_dropped_total",
                "Imps dropped from requests past auction.max_imps.",
            ),
            upgraded: Counter::new(
                "gavel_exchange_requests_upgraded_total",
                "Requests that arrived in OpenRTB 2.5 shape and were converted to 2.6.",
            ),
            sellers: ArcSwap::from_pointee(crate::sellers::Sellers::empty()),
            bidders: ArcSwap::from_pointee(BidderTable::new(bidder_names)),
        }
    }

    /// The bidders configured now (a snapshot: a later reload does not change it).
    pub fn bidders(&self) -> Arc<BidderTable> {
        self.bidders.load_full()
    }

    /// Metrics of the `i`th bidder configured now.
    pub fn bidder(&self, i: usize) -> Option<Arc<BidderMetrics>> {
        self.bidders.load().bidders.get(i).map(|(_, m)| m.clone())
    }

    /// Metrics of the bidder configured now under `name`.
    pub fn bidder_named(&self, name: &str) -> Option<Arc<BidderMetrics>> {
        let table = self.bidders.load();
        table
            .bidders
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| m.clone())
    }

    pub(crate) fn set_bidders(&self, table: Arc<BidderTable>) {
        self.bidders.store(table);
    }

    pub(crate) fn set_sellers(&self, sellers: Arc<crate::sellers::Sellers>) {
        self.sellers.store(sellers);
    }

    pub fn config_reload_count(&self, o: ReloadOutcome) -> u64 {
        self.config_reloads.get(o)
    }

    pub fn request(&self, o: RequestOutcome) {
        self.requests.inc(o);
    }

    pub fn request_count(&self, o: RequestOutcome) -> u64 {
        self.requests.get(o)
    }

    pub fn notice(&self, kind: NoticeKind, o: NoticeOutcome) {
        self.notices.inc(kind, o);
    }

    pub fn notice_count(&self, kind: NoticeKind, o: NoticeOutcome) -> u64 {
        self.notices.get(kind, o)
    }

    pub fn unauthorized_count(&self, why: KeyRefusal) -> u64 {
        self.unauthorized.get(why)
    }

    pub fn cache_count(&self, o: CacheOutcome) -> u64 {
        self.cache.get(o)
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

    /// The notice tally of one bidder: its own counters and the exchange's by kind.
    pub fn notice_tally(self: &Arc<Self>, bidder: Arc<BidderMetrics>) -> Arc<dyn NoticeTally> {
        Arc::new(BidderNotices {
            all: self.clone(),
            bidder,
        })
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let o = &mut out;
        for metric in [
            &self.requests as &dyn Render,
            &self.auction_latency,
            &self.late_answers,
            &self.dns_failures,
            &self.no_time_left,
            &self.cache,
            &self.notices,
            &self.notice_retries,
            &self.unauthorized,
            &self.repairs,
            &self.imps_dropped,
            &self.upgraded,
        ] {
            metric.render(o);
        }
        self.render_sellers(o);
        self.config_reloads.render(o);
        let version = self.served.version();
        self.config_version.set(version.revision);
        self.config_version.header(o);
        self.config_version
            .samples(o, &[("source", version.source.label())]);
        self.config_push_refused.render(o);
        let table = self.bidders.load();
        render_each(
            o,
            "bidder",
            &BidderMetrics::default(),
            table.iter(),
            &BidderMetrics::FAMILIES,
        );
        out
    }

    /// Sellers come from the configuration, so their family is written by hand.
    fn render_sellers(&self, o: &mut String) {
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
    }
}

/// One bidder's notices, counted for it and for the exchange.
#[derive(Debug)]
struct BidderNotices {
    all: Arc<Metrics>,
    bidder: Arc<BidderMetrics>,
}

impl NoticeTally for BidderNotices {
    fn notice(&self, kind: NoticeKind, outcome: NoticeOutcome) {
        self.all.notice(kind, outcome);
        self.bidder.notices.inc(outcome);
    }

    fn retried(&self, kind: NoticeKind) {
        self.all.notice_retries.inc(kind);
    }

    fn refused(&self, reason: NoticeRefusal) {
        self.bidder.notice_refusals.inc(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_names_every_bidder_and_outcome() {
        let m = Metrics::new(vec!["a".into(), "b".into()]);
        m.request(RequestOutcome::Bid);
        let b = m.bidder(1).unwrap();
        b.outcomes.inc(BidderOutcome::Timeout);
        b.rejections.inc("below_floor");
        b.rejections.inc("below_floor");
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
        // Each family declared once, with or without bidders.
        assert_eq!(
            text.matches("# TYPE gavel_exchange_bidder_requests_total ")
                .count(),
            1
        );
        let empty = Metrics::new(Vec::new()).render();
        assert!(empty.contains("# TYPE gavel_exchange_wins_total counter"));
    }
}
