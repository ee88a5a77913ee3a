//! Per-bidder counters (lock-free atomics) and the bounded ring of recent notices.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use openrtb::Price;

/// How many notices `Fleet::notices` keeps (the oldest are dropped first).
pub const NOTICE_RING_CAPACITY: usize = 1024;

/// A snapshot of one bidder's counters.
///
/// Request outcomes are counted when the bidder decides, before the simulated latency; once no
/// request is in flight, `requests == bid_responses + no_bids + errors + no_answer + garbage +
/// rejected`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BidderStats {
    pub name: String,
    /// Bid requests received (any POST outside `/notice/`).
    pub requests: u64,
    /// Responses carrying at least one bid.
    pub bid_responses: u64,
    /// Bids (one per imp bid on) across all responses.
    pub bids: u64,
    /// Sum of the prices bid.
    pub bid_value: Price,
    /// No-bid answers (204, or 200 with `nbr`).
    pub no_bids: u64,
    /// Simulated HTTP 500s.
    pub errors: u64,
    /// Requests held and never answered.
    pub no_answer: u64,
    /// 200 answers whose body is not a BidResponse.
    pub garbage: u64,
    /// Requests refused as malformed (400) or too large (413).
    pub rejected: u64,
    /// Well-formed win notices, and the sum of the `${AUCTION_PRICE}` they carried.
    pub win_notices: u64,
    pub win_value: Price,
    /// Well-formed billing notices, and the sum of their prices.
    pub bill_notices: u64,
    pub bill_value: Price,
    /// Well-formed loss notices.
    pub loss_notices: u64,
    /// Notices with a missing or unparsable price (win/bill), or any unreplaced `${` macro.
    /// They are counted here only, not in the win/bill/loss counts.
    pub bad_notices: u64,
    /// Well-formed win/bill notices whose price exceeds the price this bidder bid (the
    /// `bid_price` the simulator puts in its own notice URLs): an exchange charging more than
    /// the bid. Also counted in win/bill.
    pub overpriced_notices: u64,
}

/// The live counters behind [`BidderStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub bid_responses: AtomicU64,
    pub bids: AtomicU64,
    pub bid_value: AtomicI64,
    pub no_bids: AtomicU64,
    pub errors: AtomicU64,
    pub no_answer: AtomicU64,
    pub garbage: AtomicU64,
    pub rejected: AtomicU64,
    pub win_notices: AtomicU64,
    pub win_value: AtomicI64,
    pub bill_notices: AtomicU64,
    pub bill_value: AtomicI64,
    pub loss_notices: AtomicU64,
    pub bad_notices: AtomicU64,
    pub overpriced_notices: AtomicU64,
}

/// Counting only: no ordering with other memory is needed.
const ORD: Ordering = Ordering::Relaxed;

pub(crate) fn incr(c: &AtomicU64) {
    c.fetch_add(1, ORD);
}

/// Adds micros, saturating rather than wrapping (a flood of absurd prices must not wrap a sum
/// into a negative number).
pub(crate) fn add_price(c: &AtomicI64, p: Price) {
    let _ = c.fetch_update(ORD, ORD, |v| Some(v.saturating_add(p.micros())));
}

impl Counters {
    pub fn snapshot(&self, name: &str) -> BidderStats {
        let n = |c: &AtomicU64| c.load(ORD);
        let p = |c: &AtomicI64| Price::from_micros(c.load(ORD));
        BidderStats {
            name: name.to_owned(),
            requests: n(&self.requests),
            bid_responses: n(&self.bid_responses),
            bids: n(&self.bids),
            bid_value: p(&self.bid_value),
            no_bids: n(&self.no_bids),
            errors: n(&self.errors),
            no_answer: n(&self.no_answer),
            garbage: n(&self.garbage),
            rejected: n(&self.rejected),
            win_notices: n(&self.win_notices),
            win_value: p(&self.win_value),
            bill_notices: n(&self.bill_notices),
            bill_value: p(&self.bill_value),
            loss_notices: n(&self.loss_notices),
            bad_notices: n(&self.bad_notices),
            overpriced_notices: n(&self.overpriced_notices),
        }
    }
}

/// Which notice URL was fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoticeKind {
    Win,
    Bill,
    Loss,
}

/// One notice as received, for tests and debugging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The bidder whose notice URL was fired.
    pub bidder: String,
    pub kind: NoticeKind,
    /// The raw query string, exactly as received (macros replaced or not).
    pub query: String,
    /// `price`, parsed; `None` when missing or unparsable.
    pub price: Option<Price>,
    /// `bid_price`: what this bidder bid (written by the simulator, not a macro).
    pub bid_price: Option<Price>,
    /// `auction`, `imp`, `bid`, `cur` (percent-decoded), as the exchange filled them in.
    pub auction: Option<String>,
    pub imp: Option<String>,
    pub bid: Option<String>,
    pub cur: Option<String>,
    /// `loss`, parsed (loss notices).
    pub loss: Option<i32>,
    /// Counted as `bad_notices`.
    pub bad: bool,
}

/// The last [`NOTICE_RING_CAPACITY`] notices across the fleet. A mutex, not atomics: it is
/// touched once per notice (rare next to bid requests) and read only by tests and tooling.
#[derive(Debug, Default)]
pub(crate) struct NoticeRing {
    ring: Mutex<VecDeque<Notice>>,
}

impl NoticeRing {
    pub fn push(&self, notice: Notice) {
        // A panic while holding this lock cannot leave the deque inconsistent, so a poisoned
        // lock is still usable.
        let mut ring = telemetry::locks::lock(&self.ring);
        if ring.len() == NOTICE_RING_CAPACITY {
            ring.pop_front();
        }
        ring.push_back(notice);
    }

    pub fn snapshot(&self) -> Vec<Notice> {
        let ring = telemetry::locks::lock(&self.ring);
        ring.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_sums_saturate() {
        let c = AtomicI64::new(i64::MAX - 1);
        add_price(&c, Price::from_micros(10));
        assert_eq!(c.load(ORD), i64::MAX);
    }

    #[test]
    fn ring_is_bounded() {
        let ring = NoticeRing::default();
        for i in 0..NOTICE_RING_CAPACITY + 5 {
            ring.push(Notice {
                bidder: "b".into(),
                kind: NoticeKind::Win,
                query: i.to_string(),
                price: None,
                bid_price: None,
                auction: None,
                imp: None,
                bid: None,
                cur: None,
                loss: None,
                bad: true,
            });
        }
        let snap = ring.snapshot();
        assert_eq!(snap.len(), NOTICE_RING_CAPACITY);
        assert_eq!(snap[0].query, "5");
    }
}
