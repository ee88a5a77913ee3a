//! What a simulated bidder answers, independent of the HTTP server that reads the request and
//! writes the answer: routing, bid answers and notice counting. `server` (hyper) and `lean`
//! (a minimal HTTP/1.1 loop) both serve these.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};

use crate::bidder::{self, Decision, GARBAGE, PlannedBid};
use crate::ctx::{BidderCtx, shutdown_signalled};
use crate::notice::parse_notice;
use crate::stats::{NoticeKind, add_price, incr};
use crate::wire::{self, BidOut};

/// Largest bid request body accepted; larger ones are answered 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// One answer, for whichever server writes it.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: Option<&'static str>,
    /// The methods a 405 names.
    pub allow: Option<&'static str>,
    /// Whether `x-openrtb-version: 2.6` goes with it (answers to bid requests).
    pub openrtb: bool,
    pub body: Bytes,
}

impl Reply {
    fn new(status: StatusCode, content_type: Option<&'static str>, body: Bytes) -> Reply {
        Reply {
            status,
            content_type,
            allow: None,
            openrtb: false,
            body,
        }
    }

    pub(crate) fn text(status: StatusCode, msg: impl Into<String>) -> Reply {
        Reply::new(status, Some(TEXT), Bytes::from(msg.into()))
    }

    /// 413, counted as a refused bid request.
    pub(crate) fn too_large(ctx: &BidderCtx) -> Reply {
        incr(&ctx.counters.rejected);
        Reply::text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")
    }
}

/// The answer of a simulated peer that never answers: the server closes the connection
/// without writing a response.
#[derive(Debug, thiserror::Error)]
#[error("simulated no-answer: connection closed without a response")]
pub(crate) struct Hangup;

/// Where a request goes, from its method and path alone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Notice(NoticeKind),
    /// A POST outside `/notice/`: its body is a bid request.
    BidRequest,
    /// Anything else, answered at once.
    Now(StatusCode, &'static str, Option<&'static str>),
}

pub(crate) fn route(method: &Method, path: &str) -> Route {
    let notice = path.strip_prefix("/notice/");
    match (method, notice) {
        (&Method::GET, Some("win")) => Route::Notice(NoticeKind::Win),
        (&Method::GET, Some("bill")) => Route::Notice(NoticeKind::Bill),
        (&Method::GET, Some("loss")) => Route::Notice(NoticeKind::Loss),
        (&Method::GET, Some(_)) => Route::Now(StatusCode::NOT_FOUND, "unknown notice", None),
        (&Method::POST, None) => Route::BidRequest,
        (&Method::GET, None) if path == "/" || path == "/health" => {
            Route::Now(StatusCode::OK, "ok", None)
        }
        (&Method::GET, None) => Route::Now(StatusCode::NOT_FOUND, "not found", None),
        (_, notice) => {
            let allow = if notice.is_some() { "GET" } else { "POST" };
            Route::Now(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
                Some(allow),
            )
        }
    }
}

/// The answer to a route that needs no body.
pub(crate) fn answer_now(
    status: StatusCode,
    msg: &'static str,
    allow: Option<&'static str>,
) -> Reply {
    let mut reply = Reply::new(status, Some(TEXT), Bytes::from_static(msg.as_bytes()));
    reply.allow = allow;
    reply
}

pub(crate) fn answer_notice(ctx: &BidderCtx, kind: NoticeKind, query: &str) -> Reply {
    let c = &ctx.counters;
    let n = parse_notice(&ctx.profile.name, kind, query);
    if n.bad {
        incr(&c.bad_notices);
    } else {
        match kind {
            NoticeKind::Win => incr(&c.win_notices),
            NoticeKind::Bill => incr(&c.bill_notices),
            NoticeKind::Loss => incr(&c.loss_notices),
        }
        if let Some(price) = n.price {
            match kind {
                NoticeKind::Win => add_price(&c.win_value, price),
                NoticeKind::Bill => add_price(&c.bill_value, price),
                NoticeKind::Loss => {}
            }
            if kind != NoticeKind::Loss && n.bid_price.is_some_and(|bid| price > bid) {
                incr(&c.overpriced_notices);
            }
        }
    }
    // The markup of an on-win-notice bid is served even on a bad notice: a real ad server
    // would not know the exchange got its macros wrong.
    let adm = (kind == NoticeKind::Win)
        .then(|| openrtb::query::query_pairs(query))
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "adm").map(|(_, v)| v));
    let body = adm.map(|token| {
        let (media, creative) = bidder::parse_adm_token(&token);
        let bid_id = n.bid.as_deref().unwrap_or("unknown");
        bidder::markup(&ctx.profile.name, bid_id, creative, media)
    });
    ctx.notices.push(n);
    match body {
        Some(markup) => Reply::new(
            StatusCode::OK,
            Some("text/html; charset=utf-8"),
            markup.into(),
        ),
        None => Reply::new(StatusCode::OK, None, Bytes::new()),
    }
}

/// Counts a bid request that arrived; the server calls this before reading its body, so that
/// one refused for its size is counted too.
pub(crate) fn count_bid_request(ctx: &BidderCtx) {
    incr(&ctx.counters.requests);
}

/// Decodes a bid request body, decides, waits the sampled latency (cut short by shutdown) and
/// answers, or hangs up for a no-answer decision after holding the request `hang_ms`.
pub(crate) async fn answer_bid_request(ctx: &BidderCtx, body: &[u8]) -> Result<Reply, Hangup> {
    let c = &ctx.counters;
    let view = match wire::decode_request(body) {
        Ok(view) => view,
        Err(e) => {
            incr(&c.rejected);
            return Ok(Reply::text(
                StatusCode::BAD_REQUEST,
                format!("invalid bid request: {e}"),
            ));
        }
    };
    let plan = bidder::decide(&ctx.profile, ctx.seed, ctx.index, &view);
    match &plan.decision {
        Decision::Error => incr(&c.errors),
        Decision::NoAnswer => incr(&c.no_answer),
        Decision::Garbage(_) => incr(&c.garbage),
        Decision::NoBid(_) => incr(&c.no_bids),
        Decision::Bids(bids) => {
            incr(&c.bid_responses);
            for b in bids {
                incr(&c.bids);
                add_price(&c.bid_value, b.price);
            }
        }
    }

    if plan.decision == Decision::NoAnswer {
        hold(ctx, Duration::from_millis(ctx.profile.hang_ms)).await;
        return Err(Hangup);
    }
    hold(ctx, plan.latency).await;

    let mut reply = match plan.decision {
        Decision::Error => Reply::text(StatusCode::INTERNAL_SERVER_ERROR, "simulated bidder error"),
        Decision::Garbage(i) => {
            let body = GARBAGE.get(i).copied().unwrap_or(b"garbage");
            Reply::new(StatusCode::OK, Some(JSON), Bytes::from_static(body))
        }
        Decision::NoBid(nbr) if ctx.profile.nbr_on_no_bid => Reply::new(
            StatusCode::OK,
            Some(JSON),
            wire::encode_no_bid(&view.id, nbr).into(),
        ),
        Decision::NoBid(_) => Reply::new(StatusCode::NO_CONTENT, None, Bytes::new()),
        Decision::Bids(planned) => {
            let bids: Vec<BidOut> = planned.iter().map(|b| bid_out(ctx, b)).collect();
            match wire::encode_response(&view.id, ctx.profile.seat_name(), bids) {
                Ok(body) => Reply::new(StatusCode::OK, Some(JSON), body.into()),
                Err(e) => {
                    tracing::error!(bidder = %ctx.profile.name, error = %e, "encode failed");
                    Reply::text(StatusCode::INTERNAL_SERVER_ERROR, "encode failed")
                }
            }
        }
        // Handled above; kept for exhaustiveness.
        Decision::NoAnswer => return Err(Hangup),
    };
    reply.openrtb = true;
    Ok(reply)
}

/// Waits `d`, or less if the fleet is shutting down. A zero wait (an instant bidder) costs no
/// timer.
async fn hold(ctx: &BidderCtx, d: Duration) {
    if d.is_zero() {
        return;
    }
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        () = shutdown_signalled(ctx.shutdown.clone()) => {}
    }
}

/// A notice URL for one bid. The `${...}` macros are for the exchange to fill in; `bid_price`
/// is the simulator's own record of what it bid, and `adm` (win notice of an on-win-notice
/// bid) tells the notice handler which markup to serve.
fn notice_url(base: &str, kind: &str, bid: &PlannedBid) -> String {
    let mut url = format!(
        "{base}/notice/{kind}?auction=${{AUCTION_ID}}&imp=${{AUCTION_IMP_ID}}\
         &bid=${{AUCTION_BID_ID}}&price=${{AUCTION_PRICE}}&cur=${{AUCTION_CURRENCY}}\
         &bid_price={}",
        bid.price
    );
    if kind == "loss" {
        url.push_str("&loss=${AUCTION_LOSS}");
    }
    if kind == "win" && bid.on_win_notice {
        url.push_str("&adm=");
        url.push_str(&bidder::adm_token(bid.media, bid.creative));
    }
    url
}

fn bid_out(ctx: &BidderCtx, b: &PlannedBid) -> BidOut {
    let p = &ctx.profile;
    let (w, h, video) = match b.media {
        bidder::Media::Banner { w, h } => (w, h, false),
        bidder::Media::Video { w, h } => (w, h, true),
        bidder::Media::Unsupported => (None, None, false),
    };
    BidOut {
        id: b.bid_id.clone(),
        impid: b.imp_id.clone(),
        price: b.price,
        adomain: p.adomain.clone(),
        cat: p.cat.clone(),
        crid: bidder::crid(&p.name, b.creative),
        adid: format!("{}-ad{}", p.name, b.creative),
        w,
        h,
        video,
        dealid: b.dealid.clone(),
        nurl: notice_url(&ctx.base_url, "win", b),
        burl: notice_url(&ctx.base_url, "bill", b),
        lurl: notice_url(&ctx.base_url, "loss", b),
        adm: (!b.on_win_notice).then(|| bidder::markup(&p.name, &b.bid_id, b.creative, b.media)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_method_and_path() {
        assert_eq!(
            route(&Method::GET, "/notice/win"),
            Route::Notice(NoticeKind::Win)
        );
        assert_eq!(
            route(&Method::GET, "/notice/loss"),
            Route::Notice(NoticeKind::Loss)
        );
        assert_eq!(route(&Method::POST, "/openrtb2"), Route::BidRequest);
        assert_eq!(
            route(&Method::GET, "/notice/lose"),
            Route::Now(StatusCode::NOT_FOUND, "unknown notice", None)
        );
        assert_eq!(
            route(&Method::POST, "/notice/win"),
            Route::Now(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
                Some("GET")
            )
        );
        assert_eq!(
            route(&Method::PUT, "/openrtb2"),
            Route::Now(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
                Some("POST")
            )
        );
        assert_eq!(
            route(&Method::GET, "/health"),
            Route::Now(StatusCode::OK, "ok", None)
        );
    }
}
