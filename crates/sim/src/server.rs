//! One bidder's accept loop, and its hyper server: full HTTP/1.1 and TLS. The answers come from
//! `handlers`; `lean` is the cheaper server for benchmarks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::Transport;
use crate::handlers::{self, Hangup, MAX_BODY_BYTES, Reply, Route};
use crate::profile::BidderProfile;
use crate::stats::{Counters, NoticeRing, incr};

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

/// Resolves once fleet shutdown is signalled (or the signal can no longer come).
pub(crate) async fn shutdown_signalled(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

pub(crate) async fn accept_loop(
    listener: TcpListener,
    transport: Transport,
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
                    None if transport == Transport::Lean => {
                        tokio::spawn(crate::lean::serve(stream, peer, ctx.clone()));
                    }
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
