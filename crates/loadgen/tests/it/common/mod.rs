//! A real HTTP/1.1 server on 127.0.0.1:0 for the tests, built on hyper.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What a handler gets: the request head and its whole body.
pub struct Req {
    pub head: http::request::Parts,
    pub body: Bytes,
}

/// Serves `handler` on a fresh port of 127.0.0.1 until the runtime ends.
pub async fn serve<F, Fut>(handler: F) -> SocketAddr
where
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    serve_counted(handler).await.0
}

/// [`serve`], also counting the connections it accepts.
pub async fn serve_counted<F, Fut>(handler: F) -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>)
where
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let w = serve_watched(handler).await;
    (w.addr, w.accepted)
}

/// A test server and what it saw of its connections.
pub struct Watched {
    pub addr: SocketAddr,
    pub accepted: Arc<std::sync::atomic::AtomicU64>,
    /// When each connection ended (the client closed it, or it failed).
    pub closed: Arc<std::sync::Mutex<Vec<std::time::Instant>>>,
}

/// [`serve`], also counting the connections it accepts and noting when each ends.
pub async fn serve_watched<F, Fut>(handler: F) -> Watched
where
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = Arc::new(handler);
    let accepted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let closed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (counter, closes) = (Arc::clone(&accepted), Arc::clone(&closed));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            stream.set_nodelay(true).unwrap();
            let handler = Arc::clone(&handler);
            let closes = Arc::clone(&closes);
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let handler = Arc::clone(&handler);
                    async move {
                        let (head, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|c| c.to_bytes())
                            .unwrap_or_default();
                        Ok::<_, Infallible>(handler(Req { head, body }).await)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
                closes.lock().unwrap().push(std::time::Instant::now());
            });
        }
    });
    Watched {
        addr,
        accepted,
        closed,
    }
}

pub fn status(code: u16) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap();
    r
}

pub fn ok_json() -> Response<Full<Bytes>> {
    Response::new(Full::new(Bytes::from_static(
        b"{\"id\":\"1\",\"seatbid\":[]}",
    )))
}
