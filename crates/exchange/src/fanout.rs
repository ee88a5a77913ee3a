//! Calls every enabled bidder at once with the same encoded request and turns whatever comes
//! back, or doesn't, into a [`Reply`]. A bidder's failure is an outcome, never an error of the
//! auction.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;
use openrtb::BidResponse;

use crate::metrics::{BidderMetrics, BidderOutcome};
use crate::pool::Call;
use crate::server::Bidder;

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
    /// Not called: every connection of its pool was busy.
    Skipped,
}

impl Reply {
    fn outcome(&self) -> BidderOutcome {
        match self {
            Reply::Bids(_) => BidderOutcome::Bid,
            Reply::NoBid(_) => BidderOutcome::NoBid,
            Reply::TimedOut => BidderOutcome::Timeout,
            Reply::Invalid(_) => BidderOutcome::Invalid,
            Reply::Failed(_) => BidderOutcome::Error,
            Reply::Skipped => BidderOutcome::Skipped,
        }
    }
}

/// One bidder of one auction.
struct Slot<'a> {
    bidder: &'a Bidder,
    metrics: &'a BidderMetrics,
    call: Option<Call>,
    reply: Option<Reply>,
}

/// Calls every enabled bidder at once with the same body and waits until all have answered or
/// `answer_by` has come, whichever is first. One task and one timer serve the whole fan-out;
/// calls still in flight at the deadline are detached to drain (see `pool`).
pub(crate) async fn fan_out(
    bidders: &[Bidder],
    metrics: &[BidderMetrics],
    body: &Bytes,
    auction_id: &str,
    answer_by: Instant,
) -> Vec<(u32, Reply)> {
    let started = Instant::now();
    let mut slots: Vec<Slot<'_>> = bidders
        .iter()
        .filter(|b| b.enabled)
        .filter_map(|bidder| {
            let metrics = metrics.get(bidder.index as usize)?;
            metrics.requests.fetch_add(1, Relaxed);
            let (call, reply) = match bidder.pool.start(body.clone()) {
                Ok(call) => (Some(call), None),
                Err(_) => (None, Some(Reply::Skipped)),
            };
            Some(Slot {
                bidder,
                metrics,
                call,
                reply,
            })
        })
        .collect();

    let deadline = tokio::time::sleep_until(answer_by.into());
    tokio::pin!(deadline);
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in &mut slots {
            let Some(call) = &mut slot.call else { continue };
            match Pin::new(call).poll(cx) {
                Poll::Ready(result) => {
                    slot.call = None;
                    slot.reply = Some(match result {
                        Ok(answer) => {
                            slot.metrics.latency.observe(started.elapsed());
                            interpret(answer.status, &answer.body, auction_id)
                        }
                        Err(e) => {
                            tracing::debug!(bidder = %slot.bidder.pool.endpoint().authority, error = %e, "bidder call failed");
                            Reply::Failed(e.label())
                        }
                    });
                }
                Poll::Pending => pending = true,
            }
        }
        if !pending || deadline.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;

    slots
        .into_iter()
        .map(|slot| {
            let reply = match (slot.reply, slot.call) {
                (Some(reply), _) => reply,
                (None, Some(call)) => {
                    call.detach(answer_by);
                    Reply::TimedOut
                }
                (None, None) => Reply::Failed("lost"),
            };
            slot.metrics.outcome(reply.outcome());
            (slot.bidder.index, reply)
        })
        .collect()
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
