//! One bidder's HTTP server: accept loop, connection tasks, request routing, bid answers and
//! notice counting.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::bidder::{self, Decision, GARBAGE, PlannedBid};
use crate::notice::parse_notice;
use crate::profile::BidderProfile;
use crate::stats::{Counters, NoticeKind, NoticeRing, add_price, incr};
use crate::wire::{self, BidOut};

/// Largest bid request body accepted; larger ones are answered 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Everything one bidder's handlers share.
#[derive(Debug)]
pub(crate) struct BidderCtx {
    pub index: usize,
    pub seed: u64,
    pub profile: BidderProfile,
    /// `http://127.0.0.1:PORT`, the prefix of the notice URLs put in bids.
    pub base_url: String,
    pub counters: Counters,
    pub notices: Arc<NoticeRing>,
    pub shutdown: watch::Receiver<bool>,
}

type Body = Full<Bytes>;

/// Returned by the service for a "no answer" request: hyper then drops the connection without
/// writing a response, which is what a peer that never answers looks like to the client.
#[derive(Debug, thiserror::Error)]
#[error("simulated no-answer: connection closed without a response")]
struct Hangup;

/// Resolves once fleet shutdown is signalled (or the signal can no longer come).
pub(crate) async fn shutdown_signalled(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

pub(crate) async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<edge::ServerTls>>,
    ctx: Arc<BidderCtx>,
) {
    let stop = shutdown_signalled(ctx.shutdown.clone());
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Small request/response exchanges: Nagle would add delay for nothing.
                let _ = stream.set_nodelay(true);
                match tls.as_ref().and_then(|t| t.acceptor()) {
                    None => {
                        tokio::spawn(serve_connection(stream, peer, ctx.clone()));
                    }
                    Some(acceptor) => {
                        let ctx = ctx.clone();
                        tokio::spawn(async move {
                            match acceptor.accept(stream).await {
                                Ok(stream) => serve_connection(stream, peer, ctx).await,
                                Err(e) => {
                                    tracing::debug!(%peer, error = %e, "TLS handshake failed")
                                }
                            }
                        });
                    }
                }
            }
            Err(e) => {
                // E.g. EMFILE: back off instead of spinning; the listener stays usable.
                tracing::warn!(bidder = %ctx.profile.name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    tracing::debug!(bidder = %ctx.profile.name, "listener closed");
}

async fn serve_connection<S>(stream: S, peer: SocketAddr, ctx: Arc<BidderCtx>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc_ctx = ctx.clone();
    let service = service_fn(move |req| handle(svc_ctx.clone(), req));
    let conn = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown_signalled(ctx.shutdown.clone()) => {
            // Finish the request in flight (handlers cut their sleeps short), then close.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(bidder = %ctx.profile.name, %peer, error = %e, "connection ended");
    }
}

fn respond(status: StatusCode, content_type: Option<&'static str>, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    if let Some(ct) = content_type {
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    resp
}

fn text(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    respond(
        status,
        Some("text/plain; charset=utf-8"),
        Bytes::from(msg.into()),
    )
}

const JSON: &str = "application/json";

async fn handle(ctx: Arc<BidderCtx>, req: Request<Incoming>) -> Result<Response<Body>, Hangup> {
    let path = req.uri().path();
    let notice = path.strip_prefix("/notice/");
    match (req.method(), notice) {
        (&Method::GET, Some(kind)) => {
            let kind = match kind {
                "win" => NoticeKind::Win,
                "bill" => NoticeKind::Bill,
                "loss" => NoticeKind::Loss,
                _ => return Ok(text(StatusCode::NOT_FOUND, "unknown notice")),
            };
            let query = req.uri().query().unwrap_or("").to_owned();
            Ok(handle_notice(&ctx, kind, &query))
        }
        (&Method::POST, None) => handle_bid_request(ctx, req).await,
        (&Method::GET, None) if path == "/" || path == "/health" => Ok(text(StatusCode::OK, "ok")),
        (&Method::GET, None) => Ok(text(StatusCode::NOT_FOUND, "not found")),
        (_, notice) => {
            let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            let allow = if notice.is_some() { "GET" } else { "POST" };
            resp.headers_mut()
                .insert(ALLOW, HeaderValue::from_static(allow));
            Ok(resp)
        }
    }
}

fn handle_notice(ctx: &BidderCtx, kind: NoticeKind, query: &str) -> Response<Body> {
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
        Some(markup) => respond(
            StatusCode::OK,
            Some("text/html; charset=utf-8"),
            markup.into(),
        ),
        None => respond(StatusCode::OK, None, Bytes::new()),
    }
}

async fn handle_bid_request(
    ctx: Arc<BidderCtx>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Hangup> {
    let c = &ctx.counters;
    incr(&c.requests);
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        incr(&c.rejected);
        return Ok(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large",
        ));
    }
    let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            incr(&c.rejected);
            if e.downcast_ref::<LengthLimitError>().is_some() {
                return Ok(text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request body too large",
                ));
            }
            return Ok(text(
                StatusCode::BAD_REQUEST,
                format!("could not read body: {e}"),
            ));
        }
    };
    let view = match wire::decode_request(&body) {
        Ok(view) => view,
        Err(e) => {
            incr(&c.rejected);
            return Ok(text(
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

    let stop = shutdown_signalled(ctx.shutdown.clone());
    if plan.decision == Decision::NoAnswer {
        let hang = Duration::from_millis(ctx.profile.hang_ms);
        tokio::select! {
            () = tokio::time::sleep(hang) => {}
            () = stop => {}
        }
        return Err(Hangup);
    }
    tokio::select! {
        () = tokio::time::sleep(plan.latency) => {}
        () = stop => {}
    }

    let mut resp = match plan.decision {
        Decision::Error => text(StatusCode::INTERNAL_SERVER_ERROR, "simulated bidder error"),
        Decision::Garbage(i) => {
            let body = GARBAGE.get(i).copied().unwrap_or(b"garbage");
            respond(StatusCode::OK, Some(JSON), Bytes::from_static(body))
        }
        Decision::NoBid(nbr) if ctx.profile.nbr_on_no_bid => respond(
            StatusCode::OK,
            Some(JSON),
            wire::encode_no_bid(&view.id, nbr).into(),
        ),
        Decision::NoBid(_) => respond(StatusCode::NO_CONTENT, None, Bytes::new()),
        Decision::Bids(planned) => {
            let bids: Vec<BidOut> = planned.iter().map(|b| bid_out(&ctx, b)).collect();
            match wire::encode_response(&view.id, ctx.profile.seat_name(), &bids) {
                Ok(body) => respond(StatusCode::OK, Some(JSON), body.into()),
                Err(e) => {
                    tracing::error!(bidder = %ctx.profile.name, error = %e, "encode failed");
                    text(StatusCode::INTERNAL_SERVER_ERROR, "encode failed")
                }
            }
        }
        // Handled above; kept for exhaustiveness.
        Decision::NoAnswer => return Err(Hangup),
    };
    resp.headers_mut()
        .insert("x-openrtb-version", HeaderValue::from_static("2.6"));
    Ok(resp)
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
