//! [`ExchangeReport`]: what an exchange has done so far, read at one moment, as a value. For
//! reports (`gavel demo`) and tests, which then need no metric atomics; the bidder offers the
//! same for its campaigns (`bidder::CampaignReport`).

use openrtb::Price;

use crate::metrics::{
    BidderMetrics, BidderOutcome, Metrics, NoticeKind, NoticeOutcome, PrivacyAction,
    RequestOutcome, SkipReason,
};
use crate::state::Exchange;

/// The exchange's figures since it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeReport {
    /// Auctions answered with at least one winning bid.
    pub sold: u64,
    /// Auctions answered with a no-bid after running (no winner, or too little time left).
    pub no_bid: u64,
    /// Requests the admission gate refused at once (an immediate no-bid; no bidder called).
    pub shed: u64,
    /// Requests answered at once because too little time was left for any bidder.
    pub no_time_left: u64,
    /// Seller requests refused as bad input (400, 413).
    pub refused: u64,
    /// Answers that were ready only after their deadline (should stay 0).
    pub late_answers: u64,
    /// Win notices sent by the exchange, and those dropped (queue full) or failed.
    pub win_notices_sent: u64,
    pub win_notices_lost: u64,
    /// Winners whose markup came from their `nurl` (the fetch is their win notice), and the
    /// fetches that failed or missed the deadline (those winners were dropped).
    pub markup_fetched: u64,
    pub markup_failed: u64,
    /// The bidders configured now, in configuration order.
    pub bidders: Vec<BidderReport>,
}

/// One bidder's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BidderReport {
    pub name: String,
    /// Bid requests sent to it.
    pub requests: u64,
    /// Bids received from it.
    pub bids: u64,
    /// Impressions it won.
    pub wins: u64,
    /// Calls with no complete answer by the deadline.
    pub timeouts: u64,
    /// Calls that failed or answered something unusable.
    pub errors: u64,
    /// Auctions that did not call it because its pool was full, its breaker open, or its
    /// qps cap reached.
    pub skipped_pool_full: u64,
    pub skipped_breaker_open: u64,
    pub skipped_qps_cap: u64,
    /// Sum of its clearing prices (CPM): a thousandth of it is what it spent.
    pub cleared: Price,
    /// Auctions privacy law left it out of, and copies it got without user ids or with coarse
    /// geo (docs/privacy.md).
    pub privacy_not_called: u64,
    pub privacy_ids_removed: u64,
    pub privacy_geo_coarsened: u64,
}

impl ExchangeReport {
    /// Reads every figure of `metrics` now.
    pub fn of(metrics: &Metrics) -> ExchangeReport {
        let notice = |k, o| metrics.notice_count(k, o);
        ExchangeReport {
            sold: metrics.request_count(RequestOutcome::Bid),
            no_bid: metrics.request_count(RequestOutcome::NoBid),
            shed: metrics.request_count(RequestOutcome::Shed),
            no_time_left: metrics.no_time_left.get(),
            refused: metrics.request_count(RequestOutcome::BadRequest)
                + metrics.request_count(RequestOutcome::TooLarge),
            late_answers: metrics.late_answers.get(),
            win_notices_sent: notice(NoticeKind::Win, NoticeOutcome::Sent),
            win_notices_lost: notice(NoticeKind::Win, NoticeOutcome::Dropped)
                + notice(NoticeKind::Win, NoticeOutcome::Failed),
            markup_fetched: notice(NoticeKind::Markup, NoticeOutcome::Sent),
            markup_failed: notice(NoticeKind::Markup, NoticeOutcome::Failed),
            bidders: metrics
                .bidders()
                .iter()
                .map(|(name, b)| BidderReport::of(name, b))
                .collect(),
        }
    }

    /// Impressions won, over all bidders.
    pub fn wins(&self) -> u64 {
        self.bidders.iter().map(|b| b.wins).sum()
    }

    /// Sum of all clearing prices (CPM).
    pub fn cleared(&self) -> Price {
        Price::from_micros(self.bidders.iter().map(|b| b.cleared.micros()).sum())
    }
}

impl BidderReport {
    fn of(name: &str, b: &BidderMetrics) -> BidderReport {
        BidderReport {
            name: name.to_owned(),
            requests: b.requests.get(),
            bids: b.bids.get(),
            wins: b.wins.get(),
            timeouts: b.outcome_count(BidderOutcome::Timeout),
            errors: b.outcome_count(BidderOutcome::Error) + b.outcome_count(BidderOutcome::Invalid),
            skipped_pool_full: b.skip_count(SkipReason::PoolFull),
            skipped_breaker_open: b.skip_count(SkipReason::BreakerOpen),
            skipped_qps_cap: b.skip_count(SkipReason::QpsCap),
            cleared: Price::from_micros(i64::try_from(b.cleared_micros.get()).unwrap_or(i64::MAX)),
            privacy_not_called: b.privacy.get(PrivacyAction::NotCalled),
            privacy_ids_removed: b.privacy.get(PrivacyAction::IdsRemoved),
            privacy_geo_coarsened: b.privacy.get(PrivacyAction::GeoCoarsened),
        }
    }
}

impl Exchange {
    /// What the exchange has done so far.
    pub fn report(&self) -> ExchangeReport {
        ExchangeReport::of(&self.state.metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_every_counter_it_names() {
        let m = Metrics::new(vec!["a".into(), "b".into()]);
        m.request(RequestOutcome::Bid);
        m.request(RequestOutcome::NoBid);
        m.request(RequestOutcome::NoBid);
        m.request(RequestOutcome::Shed);
        m.request(RequestOutcome::TooLarge);
        m.late_answers.inc();
        m.notice(NoticeKind::Win, NoticeOutcome::Sent);
        m.notice(NoticeKind::Win, NoticeOutcome::Dropped);
        m.notice(NoticeKind::Markup, NoticeOutcome::Failed);
        let b = m.bidder(1).expect("bidder b");
        b.wins.add(2);
        b.cleared_micros.add(3_500_000);
        b.outcomes.inc(BidderOutcome::Timeout);
        b.outcomes.inc(BidderOutcome::Invalid);
        b.skips.inc(SkipReason::QpsCap);
        let r = ExchangeReport::of(&m);
        assert_eq!((r.sold, r.no_bid, r.shed, r.refused), (1, 2, 1, 1));
        assert_eq!(
            (r.late_answers, r.win_notices_sent, r.win_notices_lost),
            (1, 1, 1)
        );
        assert_eq!((r.markup_fetched, r.markup_failed), (0, 1));
        assert_eq!(r.bidders[0].name, "a");
        let b = &r.bidders[1];
        assert_eq!(
            (b.wins, b.timeouts, b.errors, b.skipped_qps_cap),
            (2, 1, 1, 1)
        );
        assert_eq!(r.wins(), 2);
        assert_eq!(r.cleared(), Price::from_micros(3_500_000));
    }
}
