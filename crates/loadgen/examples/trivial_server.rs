//! A trivial HTTP/1.1 server for measuring the load generator: reads the body, answers 204.
//! Single-threaded runtime, so pinning the process pins the server to one core.
//!
//! `taskset -c 1 cargo run -p loadgen --release --example trivial_server -- [PORT]`

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn answer(req: Request<Incoming>) -> Result<Response<Empty<Bytes>>, Infallible> {
    let _ = req.into_body().collect().await;
    let mut resp = Response::new(Empty::new());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    Ok(resp)
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(8089);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        eprintln!("trivial_server listening on {}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}
