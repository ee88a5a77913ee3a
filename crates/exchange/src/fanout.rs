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

use crate::breaker::{BreakerState, Health, pass_gates};
use crate::metrics::{BidderOutcome, SkipReason};
use crate::pool::Call;
use crate::roster::Bidder;

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
    fn outcome(&self) -> BidderOutcome {
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
    fn health(&self) -> Option<Health> {
        match self {
            Reply::Bids(_) | Reply::NoBid(_) => Some(Health::Good),
            Reply::TimedOut | Reply::Invalid(_) | Reply::Failed(_) => Some(Health::Bad),
            Reply::Skipped(_) => None,
        }
    }
}

/// Starts a call to `bidder` unless its host has not resolved, its pool is full, its rate cap
/// is reached or its breaker is open. The breaker is asked last, so that a call it allows (perhaps a half-open probe) is
/// surely made and its outcome recorded.
fn start_call(bidder: &Bidder, body: &Bytes, now: Instant) -> Result<Call, SkipReason> {
    if bidder.pool.addr().is_none() {
        return Err(SkipReason::Unresolved);
    }
    let call = bidder
        .pool
        .start(body.clone())
        .map_err(|_| SkipReason::PoolFull)?;
    pass_gates(bidder.rate_cap.as_deref(), &bidder.breaker, now)?;
    Ok(call)
}

/// Tells the bidder's breaker how its call went, and mirrors the breaker into the metrics.
fn record_health(bidder: &Bidder, health: Health, now: Instant) {
    let Ok(mut breaker) = bidder.breaker.lock() else {
        return;
    };
    breaker.record(health, now);
    let code = match breaker.state() {
        BreakerState::Closed => 0,
        BreakerState::Open => 1,
        BreakerState::HalfOpen => 2,
    };
    bidder.metrics.breaker_state.store(code, Relaxed);
    bidder.metrics.breaker_trips.store(breaker.trips(), Relaxed);
}

/// One bidder of one auction.
struct Slot<'a> {
    bidder: &'a Bidder,
    /// Position in the roster, which the replies are keyed by.
    index: u32,
    call: Option<Call>,
    reply: Option<Reply>,
}

/// Calls every enabled bidder the seller allows at once with the same body and waits until all have answered or
/// `answer_by` has come, whichever is first. One task and one timer serve the whole fan-out;
/// calls still in flight at the deadline are detached to drain (see `pool`).
pub(crate) async fn fan_out(
    bidders: &[Bidder],
    allowed: impl Fn(&Bidder) -> bool,
    body: &Bytes,
    auction_id: &str,
    answer_by: Instant,
) -> Vec<(u32, Reply)> {
    let started = Instant::now();
    let mut slots: Vec<Slot<'_>> = bidders
        .iter()
        .zip(0u32..)
        .filter(|(b, _)| b.serving() && allowed(b))
        .map(|(bidder, index)| {
            let metrics = &*bidder.metrics;
            let (call, reply) = match start_call(bidder, body, started) {
                Ok(call) => {
                    metrics.requests.fetch_add(1, Relaxed);
                    (Some(call), None)
                }
                Err(reason) => {
                    metrics.skips.inc(reason as usize);
                    (None, Some(Reply::Skipped(reason)))
                }
            };
            Slot {
                bidder,
                index,
                call,
                reply,
            }
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
                            let now = Instant::now();
                            slot.bidder.metrics.answered_after(
                                now.saturating_duration_since(started),
                                crate::metrics::clock_ms_at(now),
                            );
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

    let ended = Instant::now();
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
            slot.bidder.metrics.outcome(reply.outcome());
            if let Some(health) = reply.health() {
                record_health(slot.bidder, health, ended);
            }
            (slot.index, reply)
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
