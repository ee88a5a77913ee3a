//! The one place an auction's outcome becomes metrics: each call, rejection, win and markup
//! fetch under its bidder, the request's outcome and time, the cache put. Nothing on the
//! auction path counts as it goes.

use crate::metrics::{BidderMetrics, Metrics};
use crate::outcome::NoticeKind;
use crate::outcome::{AuctionOutcome, BidderIx};
use crate::roster::Roster;

/// Counts `outcome`, an auction over `roster`; `late`: answered after its `tmax`.
pub(crate) fn auction(metrics: &Metrics, roster: &Roster, outcome: &AuctionOutcome, late: bool) {
    metrics.request(outcome.request);
    if late {
        metrics.late_answers.inc();
    }
    if outcome.no_time_left {
        metrics.no_time_left.inc();
    }
    if let Some(cache) = outcome.cache {
        metrics.cache.inc(cache);
    }
    let of = |ix: BidderIx| roster.get(ix).map(|b| (b, &*b.metrics));
    for call in &outcome.calls {
        let Some((bidder, m)) = of(call.bidder) else {
            continue;
        };
        match call.skip {
            Some(reason) => m.skips.inc(reason),
            None => m.requests.inc(),
        }
        m.outcomes.inc(call.outcome);
        m.bids.add(u64::from(call.bids));
        if let Some(took) = call.took {
            m.latency.observe(took);
        }
        mirror_bidder_state(bidder, m);
    }
    for r in &outcome.rejected {
        if let Some((_, m)) = of(r.bidder) {
            m.rejections.inc(r.reason);
        }
    }
    for w in &outcome.wins {
        if let Some((_, m)) = of(w.bidder) {
            m.wins.inc();
            m.cleared_micros
                .add(w.cleared.micros().max(0).unsigned_abs());
        }
    }
    for r in &outcome.repaired {
        metrics.repairs.inc(r);
    }
    metrics.imps_dropped.add(u64::from(outcome.imps_dropped));
    if outcome.upgraded {
        metrics.upgraded.inc();
    }
    for &(bidder, action) in &outcome.privacy {
        if let Some((_, m)) = of(bidder) {
            m.privacy.inc(action);
        }
    }
    for &(bidder, reason) in &outcome.not_called {
        if let Some((_, m)) = of(bidder) {
            m.not_called.inc(reason);
        }
    }
    for &(bidder, fetched) in &outcome.markup {
        metrics.notice(NoticeKind::Markup, fetched);
        if let Some((_, m)) = of(bidder) {
            m.notices.inc(fetched);
        }
    }
}

/// The gauge of a called bidder's typical answer time (the breaker's gauges are set where the
/// breaker changes, under its lock: fanout.rs).
fn mirror_bidder_state(bidder: &crate::roster::Bidder, m: &BidderMetrics) {
    m.typical_answer_us.set(bidder.typical.micros());
}
