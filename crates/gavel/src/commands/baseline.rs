//! `gavel baseline`: the same HTTP stack as the exchange (hyper HTTP/1.1, keep-alive, body read
//! in full) doing no work at all. Its capacity on one core is the ceiling the exchange's figures
//! are divided by in BENCHMARKS.md.
//!
//! With `--bidders FILE` it is the floor of the exchange's design instead: each request is read,
//! a small pre-encoded bid request goes to every bidder of the file over the exchange's own
//! per-bidder pools (`exchange::pool`), every answer is read, and the request is answered 204.
//! No decode, no auction, no notices: what an auction costs beyond this is the exchange's own
//! work (issue 18).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use exchange::pool::BidderPool;
use futures_util::future::join_all;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::cli::BaselineArgs;

const MAX_BODY: usize = 256 * 1024;

/// How long the fan-out waits for its bidders without --bidder-timeout, in milliseconds.
const DEFAULT_BIDDER_TIMEOUT_MS: u64 = 100;

/// What every bidder is sent: the least a bidder (and `gavel sim`) accepts as a bid request.
const FAN_OUT_REQUEST: &[u8] =
    br#"{"id":"floor","imp":[{"id":"1","banner":{"w":300,"h":250}}],"tmax":100}"#;

/// The bidders of a `--bidders` file, each behind a pool like the exchange's.
struct FanOut {
    pools: Vec<Arc<BidderPool>>,
    timeout: Duration,
}

impl FanOut {
    fn load(path: &std::path::Path, timeout: Duration) -> anyhow::Result<FanOut> {
        let config = exchange::Config::load(path)
            .with_context(|| format!("cannot use {} as --bidders", path.display()))?;
        let upstream = &config.config.upstream;
        let pools = config
            .bidders
            .iter()
            .map(|bidder| {
                Arc::new(BidderPool::new(
                    bidder.endpoint.clone(),
                    upstream.pool_limits(bidder.config.max_connections),
                    Arc::default(),
                ))
            })
            .collect();
        Ok(FanOut { pools, timeout })
    }

    /// One request to every bidder at once, every answer read (or the timeout). Whether every
    /// bidder was called and answered 2xx in time: a floor that skipped or lost calls would
    /// measure less than the exchange's work, so such a request is answered 502 and the load
    /// generator counts it as failed.
    async fn call_all(&self) -> bool {
        let body = Bytes::from_static(FAN_OUT_REQUEST);
        let calls: Vec<_> = self
            .pools
            .iter()
            .filter_map(|p| p.start(body.clone()).ok())
            .collect();
        let all_started = calls.len() == self.pools.len();
        match tokio::time::timeout(self.timeout, join_all(calls)).await {
            Ok(answers) => {
                all_started
                    && answers
                        .iter()
                        .all(|a| a.as_ref().is_ok_and(|a| a.status.is_success()))
            }
            Err(_) => false,
        }
    }
}

pub async fn run(args: BaselineArgs) -> anyhow::Result<()> {
    let fan_out = match &args.bidders {
        Some(path) => Some(Arc::new(FanOut::load(
            path,
            Duration::from_millis(args.bidder_timeout.unwrap_or(DEFAULT_BIDDER_TIMEOUT_MS)),
        )?)),
        None => None,
    };
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let what = fan_out.as_ref().map_or_else(
        || "answers 204".to_owned(),
        |f| format!("fans out to {} bidders, then answers 204", f.pools.len()),
    );
    println!(
        "gavel baseline listening on http://{}/ ({what})",
        listener.local_addr()?
    );
    let serve = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let fan_out = fan_out.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let fan_out = fan_out.clone();
                    async move {
                        let mut status =
                            match Limited::new(req.into_body(), MAX_BODY).collect().await {
                                Ok(_) => StatusCode::NO_CONTENT,
                                Err(_) => StatusCode::PAYLOAD_TOO_LARGE,
                            };
                        if let Some(f) = fan_out.filter(|_| status == StatusCode::NO_CONTENT)
                            && !f.call_all().await
                        {
                            status = StatusCode::BAD_GATEWAY;
                        }
                        let mut response = Response::new(Empty::<Bytes>::new());
                        *response.status_mut() = status;
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    };
    tokio::select! {
        () = serve => {}
        () = super::shutdown_signal() => {}
    }
    Ok(())
}
