//! The exchange's outcomes, as values: [`AuctionOutcome`] (how the request ended, what each
//! bidder did, which bids were rejected and why, who won at what price, what became of the
//! markup fetches and the cache put), and the bounded enums that name what a notice, a cache
//! put or a reload did. The auction path returns an `AuctionOutcome`; `count.rs` turns it into
//! metrics in one place, and `auction_record.rs` into the auction's record (with the bidders'
//! names, the request's floors and every bid, which only the auction path has).
//!
//! A leaf: it imports no other module of the crate, so that every producer (the auction path,
//! the notices, the cache, the reload) and the metrics can all name these types without a
//! cycle between files. Pure: no I/O, no clock.

use std::time::Duration;

use openrtb::Price;
use serde::{Serialize, Serializer};
use telemetry::labelled_counters;

/// A bidder's place in the roster one auction read. Replies, winners and notices name their
/// bidder by it; it means nothing in another roster (a reload builds a new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
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

    /// As `auction::Candidate` carries it.
    pub fn raw(self) -> u32 {
        self.0
    }
}

fn micros<S: Serializer>(took: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match took {
        Some(d) => s.serialize_some(&u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
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
        OriginRefused => "origin_refused",
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
    /// Why a bidder was not called for an auction: its pool was full, its breaker open, its
    /// rate cap reached, its host unresolved; privacy law left it out (the reason is counted
    /// apart, `NotCalled`); its floors had no rate into its currency; its copy could not be
    /// converted to its OpenRTB version.
    SkipReason {
        PoolFull => "pool_full",
        BreakerOpen => "breaker_open",
        QpsCap => "qps_cap",
        Unresolved => "unresolved",
        Privacy => "privacy",
        NoRate => "no_rate",
        Unconvertible => "unconvertible",
    }
}

labelled_counters! {
    /// What privacy enforcement did to one bidder's copy of a request (`privacy`).
    PrivacyAction {
        NotCalled => "not_called",
        IdsRemoved => "ids_removed",
        EidsRemoved => "eids_removed",
        DemographicsRemoved => "demographics_removed",
        GeoCoarsened => "geo_coarsened",
        IpMasked => "ip_masked",
    }
}

labelled_counters! {
    /// Why privacy enforcement left a bidder out of an auction: where GDPR applies and TCF is
    /// enforced, it has no `gvl_vendor_id`; the consent string is missing or does not decode;
    /// its vendor is not in the Global Vendor List or is deleted; it has no legal basis for
    /// purpose 2 (basic advertising).
    NotCalled {
        NoVendorId => "no_vendor_id",
        NoConsent => "no_consent",
        UnknownVendor => "unknown_vendor",
        NoBasis => "no_basis",
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallOutcome {
    pub bidder: BidderIx,
    pub outcome: BidderOutcome,
    /// Why it was not called, when it was skipped.
    pub skip: Option<SkipReason>,
    /// The finer reason of a no-bid, an invalid answer or a failure (`no_content`,
    /// `bad_json`, `refused`, ...).
    pub detail: Option<&'static str>,
    /// From the start of the fan-out to its complete answer, when it answered (a record holds
    /// it in microseconds, `took_us`).
    #[serde(rename = "took_us", serialize_with = "micros")]
    pub took: Option<Duration>,
    /// Bids it sent (each bid of each seatbid).
    pub bids: u32,
}

/// A bid dropped before or by the auction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub bidder: BidderIx,
    /// `auction::Rejection`'s label, or `no_markup`.
    pub reason: &'static str,
}

/// A winning bid, as the seller got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WinOutcome {
    pub bidder: BidderIx,
    pub cleared: Price,
}

/// Everything one auction did, in the order it happened. Serialized (the label enums as their
/// labels, prices as CPM decimals), it is a compact summary for tests and logs; the auction's
/// record (`records::AuctionRecord`) is built from it by `auction_record.rs`.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// What privacy enforcement did, per bidder and action.
    pub privacy: Vec<(BidderIx, PrivacyAction)>,
    /// Bidders privacy law left out, and why.
    pub not_called: Vec<(BidderIx, NotCalled)>,
    /// Fields of the request repaired before validation (`validate::repair`'s labels).
    pub repaired: Vec<&'static str>,
    /// Imps past `auction.max_imps`, dropped.
    pub imps_dropped: u32,
    /// The request came in OpenRTB 2.5 shape and was converted up.
    pub upgraded: bool,
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
            privacy: Vec::new(),
            not_called: Vec::new(),
            repaired: Vec::new(),
            imps_dropped: 0,
            upgraded: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An auction's record is its outcome serialized: labels as the metrics show them, prices
    /// as CPM decimals, times in microseconds, bidders by their place in the roster.
    #[test]
    fn an_outcome_serializes_as_its_record() {
        let (a, b) = (BidderIx(0), BidderIx(1));
        let outcome = AuctionOutcome {
            request: RequestOutcome::Bid,
            no_time_left: false,
            calls: vec![
                CallOutcome {
                    bidder: a,
                    outcome: BidderOutcome::Bid,
                    skip: None,
                    detail: None,
                    took: Some(Duration::from_micros(1_250)),
                    bids: 2,
                },
                CallOutcome {
                    bidder: b,
                    outcome: BidderOutcome::Skipped,
                    skip: Some(SkipReason::BreakerOpen),
                    detail: None,
                    took: None,
                    bids: 0,
                },
            ],
            rejected: vec![Rejected {
                bidder: a,
                reason: "below_floor",
            }],
            wins: vec![WinOutcome {
                bidder: a,
                cleared: Price::from_micros(2_345_678),
            }],
            markup: vec![(a, NoticeOutcome::Sent)],
            cache: Some(CacheOutcome::Stored),
            privacy: vec![(b, PrivacyAction::IdsRemoved)],
            not_called: vec![(b, NotCalled::NoConsent)],
            repaired: vec!["device.geo.lat"],
            imps_dropped: 1,
            upgraded: true,
        };
        let record = serde_json::to_string(&outcome).unwrap_or_default();
        assert_eq!(
            record,
            concat!(
                r#"{"request":"bid","no_time_left":false,"calls":["#,
                r#"{"bidder":0,"outcome":"bid","skip":null,"detail":null,"took_us":1250,"bids":2},"#,
                r#"{"bidder":1,"outcome":"skipped","skip":"breaker_open","detail":null,"took_us":null,"bids":0}],"#,
                r#""rejected":[{"bidder":0,"reason":"below_floor"}],"#,
                r#""wins":[{"bidder":0,"cleared":2.345678}],"#,
                r#""markup":[[0,"sent"]],"cache":"stored","#,
                r#""privacy":[[1,"ids_removed"]],"not_called":[[1,"no_consent"]],"#,
                r#""repaired":["device.geo.lat"],"imps_dropped":1,"upgraded":true}"#
            )
        );
    }
}
