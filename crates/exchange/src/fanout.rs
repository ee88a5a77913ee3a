//! Calls every enabled bidder at once with its encoded request (`outgoing`) and turns whatever
//! comes back, or doesn't, into a [`Reply`]. A bidder's failure is an outcome, never an error of the
//! auction.
// A request or notice path: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::breaker::{BreakerState, Health, Transition, pass_gates};
use crate::outcome::{BidderIx, SkipReason};
use crate::outgoing::{Outgoing, Route};
use crate::reply::{Called, Reply, interpret};
use crate::roster::{Bidder, Roster};
use crate::typical::clock_ms_at;
use upstream::pool::Call;

/// Starts a call to `bidder` unless its host has not resolved, its pool is full, its rate cap
/// is reached or its breaker is open. The breaker is asked last, so that a call it allows (perhaps a half-open probe) is
/// surely made and its outcome recorded.
fn start_call(
    bidder: &Bidder,
    (body, gzipped): (Bytes, bool),
    now: Instant,
) -> Result<Call, SkipReason> {
    if bidder.pool.addr().is_none() {
        return Err(SkipReason::Unresolved);
    }
    let call = if gzipped {
        bidder.pool.start_gzipped(body)
    } else {
        bidder.pool.start(body)
    }
    .map_err(|_| SkipReason::PoolFull)?;
    pass_gates(bidder.rate_cap.as_deref(), &bidder.breaker, now)?;
    Ok(call)
}

/// Tells the bidder's breaker how its call went, and its gauges what the breaker is now: under
/// the one lock the call takes anyway (count.rs counts the call, not the breaker). A change of
/// state is seen by exactly one call (the one that made it, under the lock), which logs it
/// after letting go of the lock.
fn record_health(bidder: &Bidder, health: Health, now: Instant) {
    let mut breaker = telemetry::locks::lock(&bidder.breaker);
    let before = breaker.state();
    breaker.record(health, now);
    bidder.metrics.breaker_state.set(match breaker.state() {
        BreakerState::Closed => 0,
        BreakerState::Open => 1,
        BreakerState::HalfOpen => 2,
    });
    bidder.metrics.breaker_trips.set(breaker.trips());
    let Some(transition) = Transition::between(before, breaker.state()) else {
        return;
    };
    let (failures, calls) = breaker.window();
    let open_ms = u64::try_from(breaker.open_for().as_millis()).unwrap_or(u64::MAX);
    drop(breaker);
    let bidder = &bidder.name;
    match transition {
        Transition::Opened => tracing::warn!(
            bidder = %bidder,
            failures,
            calls,
            open_ms,
            "bidder circuit breaker opened: the bidder is skipped until its probes succeed"
        ),
        // Not news: the breaker has been open since the warning above, and says so when it
        // closes. At most one a `max_open_ms` per bidder.
        Transition::Reopened => tracing::debug!(
            bidder = %bidder,
            open_ms,
            "bidder circuit breaker probe failed; it stays open"
        ),
        Transition::Closed => tracing::info!(
            bidder = %bidder,
            "bidder circuit breaker closed: its probes succeeded, it is called again"
        ),
    }
}

/// A failed call, at debug: a failing bidder fails on every auction, so at most a few lines a
/// second for all of them (its breaker opening is the warning an operator acts on).
fn log_failed_call(bidder: &Bidder, error: &dyn std::fmt::Display) {
    static LIMIT: http_front::log_limit::LogLimit = http_front::log_limit::LogLimit::new(5);
    if tracing::enabled!(tracing::Level::DEBUG)
        && let Some(suppressed) = LIMIT.admit_now()
    {
        tracing::debug!(
            bidder = %bidder.name,
            address = %bidder.pool.endpoint().authority,
            error = %error,
            suppressed,
            "bidder call failed"
        );
    }
}

/// One bidder of one auction.
struct Slot<'a> {
    bidder: &'a Bidder,
    index: BidderIx,
    call: Option<Call>,
    reply: Option<Reply>,
    took: Option<Duration>,
}

/// Calls every bidder `outgoing` routes a body to, at once, and waits until all have answered
/// or `answer_by` has come, whichever is first. One task and one timer serve the whole fan-out;
/// calls still in flight at the deadline are detached to drain (see `pool`).
pub(crate) async fn fan_out(
    roster: &Roster,
    outgoing: &Outgoing,
    auction_id: &str,
    answer_by: Instant,
) -> Vec<Called> {
    let started = Instant::now();
    let mut slots = start_calls(roster, outgoing, started);
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
                            let took = now.saturating_duration_since(started);
                            // Read by the next auction's admission: kept now, not counted later.
                            slot.bidder.typical.answered_after(took, clock_ms_at(now));
                            slot.took = Some(took);
                            interpret(answer.status, &answer.body, auction_id)
                        }
                        Err(e) => {
                            log_failed_call(slot.bidder, &e);
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

    finish(slots, answer_by)
}

/// A slot per bidder `outgoing` routes: its call started, or why not.
fn start_calls<'r>(roster: &'r Roster, outgoing: &Outgoing, started: Instant) -> Vec<Slot<'r>> {
    roster
        .iter()
        .filter_map(|(index, bidder)| Some((index, bidder, outgoing.route(index)?)))
        .map(|(index, bidder, route)| {
            let started_call = match route {
                Route::Skip(reason) => Err(reason),
                Route::Send(_) => outgoing
                    .body_for(index, bidder.wants.gzip)
                    .ok_or(SkipReason::Unconvertible)
                    .and_then(|body| start_call(bidder, body, started)),
            };
            let (call, reply) = match started_call {
                Ok(call) => (Some(call), None),
                Err(reason) => (None, Some(Reply::Skipped(reason))),
            };
            Slot {
                bidder,
                index,
                call,
                reply,
                took: None,
            }
        })
        .collect()
}

/// Each slot's reply: a call still in flight at the deadline is detached to drain and timed
/// out; each called bidder's breaker hears how its call went.
fn finish(slots: Vec<Slot<'_>>, answer_by: Instant) -> Vec<Called> {
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
            if let Some(health) = reply.health() {
                record_health(slot.bidder, health, ended);
            }
            Called {
                bidder: slot.index,
                reply,
                took: slot.took,
            }
        })
        .collect()
}
