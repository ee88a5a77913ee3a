//! One bidder's hyper server: full HTTP/1.1, over TLS or not. The answers come from
//! `handlers`; `lean` is the cheaper server for benchmarks; `accept` hands each connection to one
//! of them.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use crate::ctx::{BidderCtx, shutdown_signalled};
use crate::handlers::{self, Hangup, MAX_BODY_BYTES, Reply, Route};
use crate::stats::incr;

type Body = Full<Bytes>;

pub(crate) async fn serve_connection<S>(stream: S, peer: SocketAddr, ctx: Arc<BidderCtx>)
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

/// Writes a handler's answer as a hyper response.
fn to_response(reply: Reply) -> Response<Body> {
    let mut resp = Response::new(Full::new(reply.body));
    *resp.status_mut() = reply.status;
    let headers = resp.headers_mut();
    if let Some(ct) = reply.content_type {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    if let Some(allow) = reply.allow {
        headers.insert(ALLOW, HeaderValue::from_static(allow));
    }
    if reply.openrtb {
        headers.insert("x-openrtb-version", HeaderValue::from_static("2.6"));
    }
    resp
}

/// Returning [`Hangup`] makes hyper drop the connection without writing a response, which is
/// what a peer that never answers looks like to the client.
async fn handle(ctx: Arc<BidderCtx>, req: Request<Incoming>) -> Result<Response<Body>, Hangup> {
    let reply = match handlers::route(req.method(), req.uri().path()) {
        Route::Notice(kind) => handlers::answer_notice(&ctx, kind, req.uri().query().unwrap_or("")),
        Route::Now(status, msg, allow) => handlers::answer_now(status, msg, allow),
        Route::BidRequest => read_bid_request(&ctx, req).await?,
    };
    Ok(to_response(reply))
}

async fn read_bid_request(ctx: &BidderCtx, req: Request<Incoming>) -> Result<Reply, Hangup> {
    handlers::count_bid_request(ctx);
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Ok(Reply::too_large(ctx));
    }
    let body: Bytes = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Ok(Reply::too_large(ctx));
        }
        Err(e) => {
            incr(&ctx.counters.rejected);
            return Ok(Reply::text(
                StatusCode::BAD_REQUEST,
                format!("could not read body: {e}"),
            ));
        }
    };
    handlers::answer_bid_request(ctx, &body).await
}
