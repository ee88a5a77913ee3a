//! The life of one bid request: decode, validate, fix the deadline, enrich and encode once, fan
//! out, settle, fetch missing markup, answer, then queue notices. See ARCHITECTURE.md for the
//! diagram.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::future::join_all;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use openrtb::BidRequest;

use crate::enrich::enrich;
use crate::fanout;
use crate::metrics::{NoticeKind, NoticeOutcome, RequestOutcome};
use edge::json_error;

use crate::settle::{self, AuctionCtx, Won};
use crate::state::State;
use crate::validate::{auction_currency, validate};

/// Markup fetched from a win notice URL may be this large.
const MAX_MARKUP_BYTES: usize = 256 * 1024;

fn no_bid() -> Response<Full<Bytes>> {
    edge::no_content()
}

fn bad_request(state: &State, message: &str) -> Response<Full<Bytes>> {
    state.metrics.request(RequestOutcome::BadRequest);
    json_error(StatusCode::BAD_REQUEST, message)
}

/// Runs one auction over a request body read at `read_at`, counting an answer that is ready
/// only after the request's `tmax` has expired.
pub(crate) async fn run(state: &State, body: &[u8], read_at: Instant) -> Response<Full<Bytes>> {
    let mut expires_at = None;
    let response = auction(state, body, read_at, &mut expires_at).await;
    if expires_at.is_some_and(|at| Instant::now() > at) {
        state
            .metrics
            .late_answers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    response
}

async fn auction(
    state: &State,
    body: &[u8],
    read_at: Instant,
    expires_at: &mut Option<Instant>,
) -> Response<Full<Bytes>> {
    let mut request = match BidRequest::from_slice(body) {
        Ok(r) => r,
        Err(e) => return bad_request(state, &format!("invalid bid request: {e}")),
    };
    let currency =
        auction_currency(&request, &state.config.config.auction.default_currency).to_owned();
    if let Err(e) = validate(&request, &currency) {
        return bad_request(state, &format!("invalid bid request: {e}"));
    }
    let deadline = match state.policy.deadline(read_at, request.tmax.map(i64::from)) {
        Ok(d) => d,
        Err(e) => return bad_request(state, &format!("invalid bid request: tmax: {e}")),
    };
    *expires_at = Some(deadline.expires_at);

    // One roster for the whole auction: a reload meanwhile affects the next one.
    let roster = state.roster.load_full();
    let left = deadline.remaining(Instant::now());
    let admission = state.door.admission();
    // The expected fan-out time: the configured floor, or how long the fastest bidder
    // typically takes to answer, whichever is longer.
    let needed = admission
        .config()
        .min_time_left()
        .max(Duration::from_millis(1))
        .max(roster.fastest_typical_answer());
    if left < needed {
        // No bidder can be expected to answer in the time left: answer now, and spend no
        // bidder's capacity on it.
        state
            .metrics
            .no_time_left
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        state.metrics.request(RequestOutcome::NoBid);
        return edge::too_late_answer(admission, body);
    }
    let auction_id = state.next_auction_id();
    let tmax_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
    let seller = enrich(
        &mut request,
        auction_id.clone(),
        tmax_ms,
        &state.config.config.schain,
    );
    let outgoing = match request.to_vec() {
        Ok(v) => Bytes::from(v),
        Err(e) => {
            tracing::error!(error = %e, "encoding an enriched request failed");
            state.metrics.request(RequestOutcome::InternalError);
            return json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    };

    let replies =
        fanout::fan_out(&roster.bidders, &outgoing, &auction_id, deadline.answer_by).await;

    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let n = &state.config.config.notices;
    let ctx = AuctionCtx {
        request: &request,
        auction_id: &auction_id,
        currency: &currency,
        config: &state.auction,
        bidder_names: &roster.table.names,
        loss_notices: n.fire_lurl,
        now_ms,
    };
    let settlement = settle::settle(&ctx, &replies, &roster.table.metrics);
    drop(replies);
    let mut won = settlement.won;
    // Fetching markup is itself the win notice: mark which winners had theirs fired that way.
    let markup_by = deadline.answer_by + (deadline.expires_at - deadline.answer_by) / 2;
    let fetched_nurl = fetch_missing_markup(state, &mut won, markup_by).await;

    for url in settlement.loss_urls {
        state.notifier.fire(NoticeKind::Loss, url);
    }
    if won.is_empty() {
        state.metrics.request(RequestOutcome::NoBid);
        return no_bid();
    }
    for (w, fetched) in won.iter().zip(&fetched_nurl) {
        if let Some(m) = roster.table.metrics.get(w.bidder as usize) {
            m.wins.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let cleared = w.bid.price.micros().max(0).unsigned_abs();
            m.cleared_micros
                .fetch_add(cleared, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(url) = w.bid.nurl.as_ref().filter(|_| n.fire_nurl && !fetched) {
            state.notifier.fire(NoticeKind::Win, url.clone());
        }
        if let Some(url) = w.bid.burl.as_ref().filter(|_| n.fire_burl) {
            state.notifier.fire(NoticeKind::Billing, url.clone());
        }
    }
    let response = settle::seller_response(seller.request_id, &auction_id, &currency, won);
    let body = match response.to_vec() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "encoding the seller response failed");
            state.metrics.request(RequestOutcome::InternalError);
            return json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    };
    if Instant::now() > deadline.expires_at {
        state
            .metrics
            .late_answers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    state.metrics.request(RequestOutcome::Bid);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-openrtb-version", "2.6")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// For winners without `adm`, GETs the (macro-replaced) `nurl` and uses its body as the markup,
/// as OpenRTB allows. A winner whose markup cannot be had by `by` is dropped: an ad without
/// markup cannot be served. Returns, index-aligned with the remaining winners, whether the
/// `nurl` was already called.
async fn fetch_missing_markup(state: &State, won: &mut Vec<Won>, by: Instant) -> Vec<bool> {
    let needs = |w: &Won| w.bid.adm.is_none() && w.bid.nurl.is_some();
    if !won.iter().any(needs) {
        return vec![false; won.len()];
    }
    let timeout = by.saturating_duration_since(Instant::now());
    let fetches = won.iter().map(|w| async move {
        if !needs(w) {
            return None;
        }
        let url = w.bid.nurl.as_deref().unwrap_or_default();
        let result =
            match tokio::time::timeout(timeout, state.notice_client.get(url, MAX_MARKUP_BYTES))
                .await
            {
                Ok(r) => r,
                Err(_) => Err("timed out".to_owned()),
            };
        Some(match result {
            Ok(a) if a.status.is_success() && !a.body.is_empty() => {
                Ok(String::from_utf8_lossy(&a.body).into_owned())
            }
            Ok(a) => Err(format!("status {}", a.status)),
            Err(e) => Err(e),
        })
    });
    let results = join_all(fetches).await;
    let mut kept = Vec::with_capacity(won.len());
    let mut fired = Vec::with_capacity(won.len());
    for (mut w, result) in std::mem::take(won).into_iter().zip(results) {
        match result {
            None => {
                kept.push(w);
                fired.push(false);
            }
            Some(Ok(markup)) => {
                state
                    .metrics
                    .notice(NoticeKind::Markup, NoticeOutcome::Sent);
                w.bid.adm = Some(markup);
                kept.push(w);
                fired.push(true);
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, "markup fetch failed; winner dropped");
                state
                    .metrics
                    .notice(NoticeKind::Markup, NoticeOutcome::Failed);
            }
        }
    }
    *won = kept;
    fired
}
