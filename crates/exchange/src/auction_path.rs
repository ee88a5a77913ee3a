//! The life of one bid request: decode, validate, fix the deadline, enrich and encode once, fan
//! out, settle, fetch missing markup, answer, then queue notices. See ARCHITECTURE.md for the
//! diagram.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::future::join_all;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use openrtb::BidRequest;

use admission::Missed;

use crate::enrich::enrich;
use crate::fanout;
use crate::metrics::{NoticeKind, NoticeOutcome, RequestOutcome};
use http_front::json_error;

use crate::notice_client::NoticeError;
use crate::notice_plan::{self, Firer};
use crate::roster::Roster;
use crate::sellers::Seller;
use crate::settle::{self, AuctionCtx, Won};
use crate::state::State;
use crate::validate::{auction_currency, validate};

/// OpenRTB no-bid reason 15, "Insufficient Auction Time".
const NBR_INSUFFICIENT_TIME: i32 = 15;

/// Markup fetched from a win notice URL may be this large.
const MAX_MARKUP_BYTES: usize = 256 * 1024;

fn no_bid() -> Response<Full<Bytes>> {
    http_front::no_content()
}

fn bad_request(state: &State, message: &str) -> Response<Full<Bytes>> {
    state.metrics.request(RequestOutcome::BadRequest);
    json_error(StatusCode::BAD_REQUEST, message)
}

/// Runs one auction over a request body read at `read_at`, counting an answer that is ready
/// only after the request's `tmax` has expired.
pub(crate) async fn run(
    state: &State,
    seller: &Seller,
    body: &[u8],
    read_at: Instant,
) -> Response<Full<Bytes>> {
    let mut expires_at = None;
    let response = auction(state, seller, body, read_at, &mut expires_at).await;
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
    seller: &Seller,
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
    let tmax = seller_tmax(
        request.tmax,
        seller.max_tmax_ms,
        state.config.config.deadline.default_tmax_ms,
    );
    let deadline = match state.policy.deadline(read_at, tmax) {
        Ok(d) => d,
        Err(e) => return bad_request(state, &format!("invalid bid request: tmax: {e}")),
    };
    *expires_at = Some(deadline.expires_at);

    // One roster for the whole auction: a reload meanwhile affects the next one.
    let roster = state.roster.load_full();
    let admission = state.door.admission();
    // The expected fan-out time: the configured floor, or how long the fastest bidder
    // typically takes to answer, whichever is longer.
    let needed = admission
        .config()
        .min_time_left()
        .max(Duration::from_millis(1))
        .max(roster.fastest_typical_answer());
    // Held until the answer is built: the work ahead of later requests (admission::starter).
    let _started = match admission.start(deadline.answer_by, needed).await {
        Ok(started) => started,
        Err(Missed::TooLittleTime) => {
            // No bidder can be expected to answer in the time left: answer now, and spend no
            // bidder's capacity on it.
            state
                .metrics
                .no_time_left
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            state.metrics.request(RequestOutcome::NoBid);
            return http_front::no_bid(admission.config().no_bid, body, NBR_INSUFFICIENT_TIME);
        }
        Err(Missed::WouldMiss) => {
            // The work ahead of it would have made it late, and no start in time came.
            state.metrics.request(RequestOutcome::Shed);
            return http_front::shed_answer(admission, body);
        }
    };
    let left = deadline.remaining(Instant::now());
    raise_floors(&mut request, seller);
    let auction_id = state.next_auction_id();
    let tmax_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
    let ids = enrich(
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

    let replies = fanout::fan_out(
        &roster.bidders,
        |b| seller.allows(&b.name),
        &outgoing,
        &auction_id,
        deadline.answer_by,
    )
    .await;

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
        markup_hosts: &roster.markup_hosts,
        price_keys: &roster.price_keys,
        price_token_ttl_s: n.price_token_ttl_s,
        now_ms,
    };
    let settlement = settle::settle(&ctx, &replies, &roster.table.metrics);
    drop(replies);
    let mut won = settlement.won;
    // Fetching markup is itself the win notice: mark which winners had theirs fired that way.
    let markup_by = deadline.answer_by + (deadline.expires_at - deadline.answer_by) / 2;
    let fetched_nurl = fetch_missing_markup(state, &roster, &mut won, markup_by).await;

    for (bidder, url) in settlement.loss_urls {
        if let Some(b) = roster.bidders.get(bidder as usize) {
            state.notifier.fire(NoticeKind::Loss, &url, &b.notices);
        }
    }
    if won.is_empty() {
        state.metrics.request(RequestOutcome::NoBid);
        return no_bid();
    }
    if let Some(cache) = &state.markup_cache {
        // Within the deadline's answer margin, after the markup fetch's half of it: what is
        // left after that is for encoding and sending the answer.
        let cache_by = deadline.answer_by + (deadline.expires_at - deadline.answer_by) * 3 / 4;
        cache.store(&mut won, cache_by, &state.metrics).await;
    }
    for (w, fetched) in won.iter_mut().zip(&fetched_nurl) {
        let Some(bidder) = roster.bidders.get(w.bidder as usize) else {
            continue;
        };
        bidder
            .metrics
            .wins
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cleared = w.bid.price.micros().max(0).unsigned_abs();
        bidder
            .metrics
            .cleared_micros
            .fetch_add(cleared, std::sync::atomic::Ordering::Relaxed);
        let plan = notice_plan::plan(seller, n.fire_nurl, *fetched);
        for (firer, url, kind) in [
            (plan.nurl, &mut w.bid.nurl, NoticeKind::Win),
            (plan.burl, &mut w.bid.burl, NoticeKind::Billing),
            (plan.lurl, &mut w.bid.lurl, NoticeKind::Loss),
        ] {
            match firer {
                Firer::Seller => {}
                Firer::Nobody => *url = None,
                Firer::Exchange => {
                    if let Some(url) = url.take() {
                        state.notifier.fire(kind, &url, &bidder.notices);
                    }
                }
            }
        }
    }
    let response = settle::seller_response(ids.request_id, &auction_id, &currency, won);
    let body = match response.to_vec() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "encoding the seller response failed");
            state.metrics.request(RequestOutcome::InternalError);
            return json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    };
    state.metrics.request(RequestOutcome::Bid);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-openrtb-version", "2.6")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// For winners without `adm` (only bidders with `fetch_markup` may send those: see
/// `settle`), GETs the (macro-replaced) `nurl`, checked against the bidder's notice hosts, and
/// uses its body as the markup, as OpenRTB allows. A winner whose markup cannot be had by `by`
/// is dropped: an ad without markup cannot be served. Returns, index-aligned with the
/// remaining winners, whether the `nurl` was already called.
async fn fetch_missing_markup(
    state: &State,
    roster: &Roster,
    won: &mut Vec<Won>,
    by: Instant,
) -> Vec<bool> {
    let needs = |w: &Won| w.bid.adm.is_none();
    if !won.iter().any(needs) {
        return vec![false; won.len()];
    }
    let timeout = by.saturating_duration_since(Instant::now());
    let fetches = won.iter().map(|w| async move {
        if !needs(w) {
            return None;
        }
        let route = &roster.bidders.get(w.bidder as usize)?.notices;
        let url = w.bid.nurl.as_deref().unwrap_or_default();
        let target = match route.hosts.check(url) {
            Ok(t) => t,
            Err(refusal) => return Some(Err(NoticeError::Refused(refusal))),
        };
        let get = state
            .notice_client
            .get(&target, route.tls.as_ref(), MAX_MARKUP_BYTES);
        let result = match tokio::time::timeout(timeout, get).await {
            Ok(r) => r,
            Err(_) => Err(NoticeError::Failed("timed out".to_owned())),
        };
        Some(match result {
            Ok(a) if a.status.is_success() && !a.body.is_empty() => {
                Ok(String::from_utf8_lossy(&a.body).into_owned())
            }
            Ok(a) => Err(NoticeError::Failed(format!("status {}", a.status))),
            Err(e) => Err(e),
        })
    });
    let results = join_all(fetches).await;
    let mut kept = Vec::with_capacity(won.len());
    let mut fired = Vec::with_capacity(won.len());
    for (mut w, result) in std::mem::take(won).into_iter().zip(results) {
        let outcome = match result {
            None if needs(&w) => {
                // The bidder left the roster meanwhile: no route, no markup.
                NoticeOutcome::Failed
            }
            None => {
                kept.push(w);
                fired.push(false);
                continue;
            }
            Some(Ok(markup)) => {
                w.bid.adm = Some(markup);
                let bidder = w.bidder;
                kept.push(w);
                fired.push(true);
                count_markup(state, roster, bidder, NoticeOutcome::Sent);
                continue;
            }
            Some(Err(NoticeError::Refused(refusal))) => {
                if let Some(b) = roster.bidders.get(w.bidder as usize) {
                    b.notices.refused("markup fetch", &refusal);
                }
                NoticeOutcome::Refused
            }
            Some(Err(NoticeError::Failed(e))) => {
                tracing::debug!(error = %e, "markup fetch failed; winner dropped");
                NoticeOutcome::Failed
            }
        };
        count_markup(state, roster, w.bidder, outcome);
    }
    *won = kept;
    fired
}

fn count_markup(state: &State, roster: &Roster, bidder: u32, outcome: NoticeOutcome) {
    state.metrics.notice(NoticeKind::Markup, outcome);
    if let Some(b) = roster.bidders.get(bidder as usize) {
        b.metrics.notices.inc(outcome as usize);
    }
}

/// The `tmax` the deadline is computed from: the request's (or the default), capped by the
/// seller's `max_tmax_ms`.
fn seller_tmax(request: Option<i32>, cap: Option<u32>, default_ms: u64) -> Option<i64> {
    match (request, cap) {
        (tmax, None) => tmax.map(i64::from),
        (Some(t), Some(c)) => Some(i64::from(t).min(i64::from(c))),
        (None, Some(c)) => Some(i64::try_from(default_ms.min(u64::from(c))).unwrap_or(i64::MAX)),
    }
}

/// Applies the seller's floor multiplier to every imp and deal floor, before bidders see them.
fn raise_floors(request: &mut BidRequest, seller: &Seller) {
    if seller.floor_permille == 1000 {
        return;
    }
    for imp in &mut request.imp {
        if let Some(f) = imp.bidfloor.as_mut() {
            *f = seller.floor(*f);
        }
        let deals = imp.pmp.as_mut().and_then(|p| p.deals.as_mut());
        for deal in deals.into_iter().flatten() {
            if let Some(f) = deal.bidfloor.as_mut() {
                *f = seller.floor(*f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seller_caps_tmax_given_or_defaulted() {
        assert_eq!(seller_tmax(Some(300), None, 100), Some(300));
        assert_eq!(seller_tmax(None, None, 100), None);
        assert_eq!(seller_tmax(Some(300), Some(120), 100), Some(120));
        assert_eq!(seller_tmax(Some(80), Some(120), 100), Some(80));
        assert_eq!(seller_tmax(None, Some(50), 100), Some(50));
        assert_eq!(seller_tmax(None, Some(500), 100), Some(100));
    }

    #[test]
    fn floors_of_imps_and_deals_are_raised() {
        let mut request = BidRequest::from_slice(
            br#"{"id":"r","imp":[{"id":"1","bidfloor":1.0,"banner":{"w":1,"h":1},
                "pmp":{"deals":[{"id":"d","bidfloor":2.0},{"id":"e"}]}}]}"#,
        )
        .unwrap();
        let mut seller = Seller::anonymous(false);
        seller.floor_permille = 1_500;
        raise_floors(&mut request, &seller);
        let imp = &request.imp[0];
        assert_eq!(imp.bidfloor, Some(openrtb::Price::from_micros(1_500_000)));
        let deals = imp.pmp.as_ref().unwrap().deals.as_ref().unwrap();
        assert_eq!(
            deals[0].bidfloor,
            Some(openrtb::Price::from_micros(3_000_000))
        );
        assert_eq!(deals[1].bidfloor, None, "no floor stays no floor");
    }
}
