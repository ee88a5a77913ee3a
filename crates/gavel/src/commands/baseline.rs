//! `gavel baseline`: the same HTTP stack as the exchange (hyper HTTP/1.1, keep-alive, body read
//! in full) doing no work at all. Its capacity on one core is the ceiling the exchange's figures
//! are divided by in BENCHMARKS.md.

use std::convert::Infallible;

use anyhow::Context;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::cli::BaselineArgs;

const MAX_BODY: usize = 256 * 1024;

pub async fn run(args: BaselineArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    println!(
        "gavel baseline listening on http://{}/ (answers 204)",
        listener.local_addr()?
    );
    let serve = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<Incoming>| async move {
                    let status = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                        Ok(_) => StatusCode::NO_CONTENT,
                        Err(_) => StatusCode::PAYLOAD_TOO_LARGE,
                    };
                    let mut response = Response::new(Empty::<Bytes>::new());
                    *response.status_mut() = status;
                    Ok::<_, Infallible>(response)
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
