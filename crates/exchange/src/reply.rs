//! What a bidder's answer to one auction comes to: a [`Reply`] read from its HTTP answer as
//! OpenRTB 2.6 defines it ([`interpret`]), and [`Called`], its part in the fan-out, which
//! settlement reads and the auction's outcome keeps. Pure.

use std::time::Duration;

use http::StatusCode;
use openrtb::BidResponse;

use crate::breaker::Health;
use crate::outcome::{BidderIx, BidderOutcome, CallOutcome, SkipReason};

/// What one bidder contributed to one auction.
#[derive(Debug)]
pub enum Reply {
    Bids(BidResponse),
    /// Answered without a bid; the label says how (204, `nbr`, empty seatbid).
    NoBid(&'static str),
    /// No complete answer before the deadline.
    TimedOut,
    /// Answered something unusable (bad status, bad JSON, wrong auction id).
    Invalid(&'static str),
    /// Transport failure (refused connection, reset, body too large).
    Failed(&'static str),
    /// Not called: its pool was full, its breaker open or its rate cap reached.
    Skipped(SkipReason),
}

impl Reply {
    pub fn outcome(&self) -> BidderOutcome {
        match self {
            Reply::Bids(_) => BidderOutcome::Bid,
            Reply::NoBid(_) => BidderOutcome::NoBid,
            Reply::TimedOut => BidderOutcome::Timeout,
            Reply::Invalid(_) => BidderOutcome::Invalid,
            Reply::Failed(_) => BidderOutcome::Error,
            Reply::Skipped(_) => BidderOutcome::Skipped,
        }
    }

    /// What the answer says about the bidder's health, for its breaker (`None`: not called).
    pub(crate) fn health(&self) -> Option<Health> {
        match self {
            Reply::Bids(_) | Reply::NoBid(_) => Some(Health::Good),
            Reply::TimedOut | Reply::Invalid(_) | Reply::Failed(_) => Some(Health::Bad),
            Reply::Skipped(_) => None,
        }
    }

    /// The finer reason of a no-bid, an invalid answer or a failure.
    fn detail(&self) -> Option<&'static str> {
        match self {
            Reply::NoBid(d) | Reply::Invalid(d) | Reply::Failed(d) => Some(d),
            Reply::Bids(_) | Reply::TimedOut | Reply::Skipped(_) => None,
        }
    }
}

/// One bidder's part in one fan-out.
#[derive(Debug)]
pub struct Called {
    pub bidder: BidderIx,
    pub reply: Reply,
    /// From the start of the fan-out to its complete answer, when it answered.
    pub took: Option<Duration>,
}

impl Called {
    /// What the auction record and the metrics keep of it.
    pub fn outcome(&self) -> CallOutcome {
        let bids = match &self.reply {
            Reply::Bids(r) => r
                .seatbid
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|s| u32::try_from(s.bid.len()).unwrap_or(u32::MAX))
                .fold(0u32, u32::saturating_add),
            _ => 0,
        };
        CallOutcome {
            bidder: self.bidder,
            outcome: self.reply.outcome(),
            skip: match self.reply {
                Reply::Skipped(r) => Some(r),
                _ => None,
            },
            detail: self.reply.detail(),
            took: self.took,
            bids,
        }
    }
}

/// Reads a bidder's HTTP answer as the OpenRTB 2.6 spec defines it.
pub fn interpret(status: StatusCode, body: &[u8], auction_id: &str) -> Reply {
    match status {
        StatusCode::NO_CONTENT => return Reply::NoBid("no_content"),
        StatusCode::OK => {}
        s if s.is_server_error() => return Reply::Invalid("status_5xx"),
        s if s.is_client_error() => return Reply::Invalid("status_4xx"),
        _ => return Reply::Invalid("status_other"),
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Reply::NoBid("empty_body");
    }
    let response = match BidResponse::from_slice(body) {
        Ok(r) => r,
        Err(_) => return Reply::Invalid("bad_json"),
    };
    if response.id != auction_id {
        return Reply::Invalid("wrong_auction_id");
    }
    let has_bids = response
        .seatbid
        .as_ref()
        .is_some_and(|s| s.iter().any(|sb| !sb.bid.is_empty()));
    if !has_bids {
        return Reply::NoBid(if response.nbr.is_some() {
            "nbr"
        } else {
            "empty_seatbid"
        });
    }
    Reply::Bids(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_answers_map_to_replies() {
        assert!(matches!(
            interpret(StatusCode::NO_CONTENT, b"", "a"),
            Reply::NoBid("no_content")
        ));
        assert!(matches!(
            interpret(StatusCode::OK, b"  ", "a"),
            Reply::NoBid("empty_body")
        ));
        assert!(matches!(
            interpret(StatusCode::INTERNAL_SERVER_ERROR, b"", "a"),
            Reply::Invalid("status_5xx")
        ));
        assert!(matches!(
            interpret(StatusCode::OK, b"<html>", "a"),
            Reply::Invalid("bad_json")
        ));
        assert!(matches!(
            interpret(StatusCode::OK, br#"{"id":"b"}"#, "a"),
            Reply::Invalid("wrong_auction_id")
        ));
        assert!(matches!(
            interpret(StatusCode::OK, br#"{"id":"a","nbr":2}"#, "a"),
            Reply::NoBid("nbr")
        ));
        assert!(matches!(
            interpret(StatusCode::OK, br#"{"id":"a","seatbid":[]}"#, "a"),
            Reply::NoBid("empty_seatbid")
        ));
        let bids = br#"{"id":"a","seatbid":[{"bid":[{"id":"1","impid":"1","price":1.5}]}]}"#;
        assert!(matches!(
            interpret(StatusCode::OK, bids, "a"),
            Reply::Bids(_)
        ));
    }
}
