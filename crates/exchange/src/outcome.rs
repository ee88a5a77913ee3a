//! The exchange's outcomes, as values: [`AuctionOutcome`] (how the request ended, what each
//! bidder did, which bids were rejected and why, who won at what price, what became of the
//! markup fetches and the cache put), and the bounded enums that name what a notice, a cache
//! put or a reload did. The auction path returns an `AuctionOutcome`; `count.rs` turns it into
//! metrics in one place, and an auction record is this value serialized.
//!
//! A leaf: it imports no other module of the crate, so that every producer (the auction path,
//! the notices, the cache, the reload) and the metrics can all name these types without a
//! cycle between files. Pure: no I/O, no clock.

use std::time::Duration;

use openrtb::Price;
use telemetry::labelled_counters;

/// A bidder's place in the roster one auction read. Replies, winners and notices name their
/// bidder by it; it means nothing in another roster (a reload builds a new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BidderIx(u32);

impl BidderIx {
    /// The `i`th bidder of a roster (none past `u32::MAX`: a roster is far smaller).
    pub fn nth(i: usize) -> Option<BidderIx> {
        u32::try_from(i).ok().map(BidderIx)
    }

    /// Its position, to index the roster it came from.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// As `auction::Candidate` carries it, and back.
    pub fn raw(self) -> u32 {
        self.0
    }
    pub(crate) fn from_raw(raw: u32) -> BidderIx {
        BidderIx(raw)
    }
}

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
    /// Notice kinds the exchange fires.
    NoticeKind {
        Win => "win",
        Billing => "billing",
        Loss => "loss",
        Markup => "markup_fetch",
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

labelled_counters! {
    /// How a configuration reload ended: applied, or why the last good one stays.
    ReloadOutcome {
        Applied => "applied",
        Unreadable => "unreadable",
        Invalid => "invalid",
    }
}

/// What one bidder did in one auction.
#[derive(Clone, Debug, PartialEq)]
pub struct CallOutcome {
    pub bidder: BidderIx,
    pub outcome: BidderOutcome,
    /// Why it was not called, when it was skipped.
    pub skip: Option<SkipReason>,
    /// The finer reason of a no-bid, an invalid answer or a failure (`no_content`,
    /// `bad_json`, `refused`, ...).
    pub detail: Option<&'static str>,
    /// From the start of the fan-out to its complete answer, when it answered.
    pub took: Option<Duration>,
    /// Bids it sent (each bid of each seatbid).
    pub bids: u32,
}

/// A bid dropped before or by the auction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub bidder: BidderIx,
    /// `auction::Rejection`'s label, or `no_markup`.
    pub reason: &'static str,
}

/// A winning bid, as the seller got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WinOutcome {
    pub bidder: BidderIx,
    pub cleared: Price,
}

/// Everything one auction did, in the order it happened.
#[derive(Clone, Debug, PartialEq)]
pub struct AuctionOutcome {
    pub request: RequestOutcome,
    /// Answered at once: less time was left than the fastest bidder typically needs.
    pub no_time_left: bool,
    pub calls: Vec<CallOutcome>,
    pub rejected: Vec<Rejected>,
    pub wins: Vec<WinOutcome>,
    /// Markup fetched from winners' `nurl`s, per winner that needed it.
    pub markup: Vec<(BidderIx, NoticeOutcome)>,
    /// The winners' markup put to the `[cache]` store, when there was one to make.
    pub cache: Option<CacheOutcome>,
}

impl AuctionOutcome {
    /// An auction that ended before any bidder was asked.
    pub fn ended(request: RequestOutcome) -> AuctionOutcome {
        AuctionOutcome {
            request,
            no_time_left: false,
            calls: Vec::new(),
            rejected: Vec::new(),
            wins: Vec::new(),
            markup: Vec::new(),
            cache: None,
        }
    }
}
