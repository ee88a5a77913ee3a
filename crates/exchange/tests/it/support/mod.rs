//! Test support: a scripted bidder (a real HTTP server on loopback whose answers a test
//! chooses), an exchange started on port 0, and a minimal HTTP client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use exchange::{Config, Exchange, Metrics};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use openrtb::BidRequest;
use tokio::net::TcpListener;

/// What a scripted bidder answers to one bid request.
pub struct Script {
    pub delay: Duration,
    pub status: u16,
    pub body: String,
}

type Answer = dyn Fn(&BidRequest) -> Script + Send + Sync;

/// How a scripted bidder answers a notice (a GET to `path_and_query`), given the ones it
/// received before: `/status/{code}/...` always answers `code`; `/fail/{n}/...` answers 503 to
/// the first `n` GETs of that same path and 200 after; anything else 200.
fn notice_status(before: &[String], path_and_query: &str) -> StatusCode {
    let path = path_and_query.split('?').next().unwrap_or_default();
    let mut parts = path.trim_start_matches('/').split('/');
    match (
        parts.next(),
        parts.next().and_then(|n| n.parse::<u16>().ok()),
    ) {
        (Some("status"), Some(code)) => StatusCode::from_u16(code).unwrap(),
        (Some("fail"), Some(n)) => {
            let seen = before
                .iter()
                .filter(|b| b.split('?').next() == Some(path))
                .count();
            if seen < usize::from(n) {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::OK
            }
        }
        _ => StatusCode::OK,
    }
}

/// One bid request as the bidder's socket received it.
#[derive(Debug, Clone)]
pub struct WireRequest {
    pub content_encoding: Option<String>,
    pub accept_encoding: Option<String>,
    /// The body as sent (compressed when `content_encoding` says so).
    pub body: Bytes,
    /// The body inflated (the same as `body` when it was not compressed).
    pub json: Bytes,
}

fn header(req: &Request<Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn gunzip(body: &[u8]) -> Bytes {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .unwrap();
    Bytes::from(out)
}

fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(body).unwrap();
    Bytes::from(z.finish().unwrap())
}

/// A real HTTP bidder whose answers come from a closure. A request with
/// `Content-Encoding: gzip` is inflated, and one with `Accept-Encoding: gzip` answered
/// compressed, as a bidder that speaks gzip does. GETs (notices) are recorded and
/// answered as [`notice_status`] says.
#[derive(Clone)]
pub struct ScriptedBidder {
    pub addr: SocketAddr,
    pub notices: Arc<Mutex<Vec<String>>>,
    pub requests: Arc<Mutex<Vec<BidRequest>>>,
    /// Every bid request as it came over the wire, in arrival order.
    pub wire: Arc<Mutex<Vec<WireRequest>>>,
    /// TCP connections accepted so far.
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    /// While true, bid requests are recorded and then held unanswered ([`ScriptedBidder::hold`]).
    holding: Arc<tokio::sync::watch::Sender<bool>>,
}

impl ScriptedBidder {
    pub async fn start(answer: impl Fn(&BidRequest) -> Script + Send + Sync + 'static) -> Self {
        Self::start_with(None, answer).await
    }

    /// [`ScriptedBidder::start`], serving HTTPS with `tls`'s certificate.
    pub async fn start_tls(
        tls: Arc<http_front::ServerTls>,
        answer: impl Fn(&BidRequest) -> Script + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(Some(tls), answer).await
    }

    async fn start_with(
        tls: Option<Arc<http_front::ServerTls>>,
        answer: impl Fn(&BidRequest) -> Script + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answer: Arc<Answer> = Arc::new(answer);
        let notices = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let wire = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let holding = Arc::new(tokio::sync::watch::Sender::new(false));
        let me = ScriptedBidder {
            addr,
            notices: notices.clone(),
            requests: requests.clone(),
            wire: wire.clone(),
            connections: connections.clone(),
            holding: holding.clone(),
        };
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                connections.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (answer, notices, requests, holding, wire) = (
                    answer.clone(),
                    notices.clone(),
                    requests.clone(),
                    holding.clone(),
                    wire.clone(),
                );
                let acceptor = tls.as_ref().map(|t| t.acceptor());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (answer, notices, requests, wire) = (
                            answer.clone(),
                            notices.clone(),
                            requests.clone(),
                            wire.clone(),
                        );
                        let mut held = holding.subscribe();
                        async move {
                            if req.method() == http::Method::GET {
                                let pq = req
                                    .uri()
                                    .path_and_query()
                                    .map(|p| p.to_string())
                                    .unwrap_or_default();
                                let status = notice_status(&notices.lock().unwrap(), &pq);
                                notices.lock().unwrap().push(pq);
                                let mut r = Response::new(Full::new(Bytes::from_static(
                                    b"<div>markup from nurl</div>",
                                )));
                                *r.status_mut() = status;
                                return Ok::<_, Infallible>(r);
                            }
                            let content_encoding = header(&req, "content-encoding");
                            let accept_encoding = header(&req, "accept-encoding");
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let json = match content_encoding.as_deref() {
                                Some("gzip") => gunzip(&body),
                                _ => body.clone(),
                            };
                            let answer_gzip = accept_encoding.as_deref() == Some("gzip");
                            wire.lock().unwrap().push(WireRequest {
                                content_encoding,
                                accept_encoding,
                                body,
                                json: json.clone(),
                            });
                            let request = BidRequest::from_slice(&json).unwrap();
                            let script = answer(&request);
                            requests.lock().unwrap().push(request);
                            let _ = held.wait_for(|holding| !*holding).await;
                            tokio::time::sleep(script.delay).await;
                            let mut r = if answer_gzip && !script.body.is_empty() {
                                let mut r = Response::new(Full::new(gzip(script.body.as_bytes())));
                                r.headers_mut().insert(
                                    http::header::CONTENT_ENCODING,
                                    http::HeaderValue::from_static("gzip"),
                                );
                                r
                            } else {
                                Response::new(Full::new(Bytes::from(script.body)))
                            };
                            *r.status_mut() = StatusCode::from_u16(script.status).unwrap();
                            Ok(r)
                        }
                    });
                    match acceptor {
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        }
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else {
                                return;
                            };
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        }
                    }
                });
            }
        });
        me
    }

    /// From now on, bid requests are recorded and left unanswered until [`ScriptedBidder::release`]:
    /// a test then knows what is in flight at the bidder instead of betting on a delay.
    pub fn hold(&self) {
        self.holding.send_replace(true);
    }

    /// Answers the held bid requests, and the next ones at once.
    pub fn release(&self) {
        self.holding.send_replace(false);
    }

    /// Waits (10 s at most) until `n` bid requests have reached this bidder.
    pub async fn wait_requests(&self, n: usize) {
        testkit::time::wait_until(
            Duration::from_secs(10),
            "bid requests at the bidder",
            || self.requests.lock().unwrap().len() >= n,
        )
        .await;
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}/bid", self.addr)
    }

    /// The notices this host has received, read once `ex` has no notice queued, in flight or
    /// waiting for a retry (10 s at most): every notice the exchange fired has been answered
    /// by then, so a duplicate would be here too.
    pub async fn settled_notices(&self, ex: &RunningExchange) -> Vec<String> {
        let pending = ex.exchange.flush_notices(Duration::from_secs(10)).await;
        assert_eq!(pending, 0, "notices still pending after 10 s");
        self.notices.lock().unwrap().clone()
    }
}

/// Answers with one bid per imp of the request, each built by `bid(imp_id)` as a JSON object.
/// A bid with neither `adm` nor `nurl` gets a small `adm`: a bid must carry its markup.
pub fn bids(request: &BidRequest, seat: &str, bid: impl Fn(&str) -> serde_json::Value) -> Script {
    let bids: Vec<_> = request
        .imp
        .iter()
        .map(|imp| {
            let mut b = bid(&imp.id);
            if b.get("adm").is_none() && b.get("nurl").is_none() {
                b["adm"] = serde_json::Value::from("<div>ad</div>");
            }
            b
        })
        .collect();
    let body = serde_json::json!({ "id": request.id, "seatbid": [{ "seat": seat, "bid": bids }] });
    Script {
        delay: Duration::ZERO,
        status: 200,
        body: body.to_string(),
    }
}

pub fn no_bid() -> Script {
    Script {
        delay: Duration::ZERO,
        status: 204,
        body: String::new(),
    }
}

/// Accepts connections and holds them open without reading or answering.
pub async fn black_hole() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    addr
}

/// A running exchange on 127.0.0.1:0.
pub struct RunningExchange {
    pub addr: SocketAddr,
    /// The admin listener (`/admin/*`, `/metrics`).
    pub admin: SocketAddr,
    pub metrics: Arc<Metrics>,
    pub exchange: Exchange,
}

/// Starts an exchange whose config is `extra` followed by one [[bidders]] block per endpoint.
pub async fn exchange(extra: &str, bidders: &[(&str, String)]) -> RunningExchange {
    exchange_with_cap(extra, bidders, 16).await
}

/// Like [`exchange`], with `max_connections` for every bidder.
pub async fn exchange_with_cap(
    extra: &str,
    bidders: &[(&str, String)],
    cap: u32,
) -> RunningExchange {
    let mut text = String::from(extra);
    for (name, endpoint) in bidders {
        text.push_str(&format!(
            "\n[[bidders]]\nname = \"{name}\"\nendpoint = \"{endpoint}\"\nmax_connections = {cap}\n"
        ));
    }
    exchange_from_toml(&text).await
}

/// Starts an exchange from a whole configuration text, open to every caller and allowed to
/// send notices to loopback (where every test bidder lives), unless the text says otherwise.
pub async fn exchange_from_toml(text: &str) -> RunningExchange {
    start(Config::from_toml(&loopback_test_config(text)).unwrap()).await
}

/// `text` with `open_to_all_sellers = true` when it configures no seller, and
/// `notices.allow_private_addresses = true` when it does not set it.
pub fn loopback_test_config(text: &str) -> String {
    let mut text = text.to_owned();
    if !text.contains("allow_private_addresses") {
        text = if text.contains("[notices]\n") {
            text.replacen(
                "[notices]\n",
                "[notices]\nallow_private_addresses = true\n",
                1,
            )
        } else {
            format!("{text}\n[notices]\nallow_private_addresses = true\n")
        };
    }
    if !text.contains("[[sellers]]") && !text.contains("open_to_all_sellers") {
        text = format!("open_to_all_sellers = true\n{text}");
    }
    text
}

/// Starts an exchange from the configuration file at `path` (so that it can follow it).
/// The file is first rewritten through [`loopback_test_config`].
pub async fn exchange_from_file(path: &std::path::Path) -> RunningExchange {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, loopback_test_config(&text)).unwrap();
    start(Config::load(path).unwrap()).await
}

async fn start(config: exchange::Validated) -> RunningExchange {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let exchange = Exchange::new(config);
    let metrics = exchange.metrics();
    let serving = exchange.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = admin_listener.local_addr().unwrap();
    let door = exchange.admin().unwrap();
    tokio::spawn(async move { door.serve(admin_listener, std::future::pending()).await });
    RunningExchange {
        addr,
        admin,
        metrics,
        exchange,
    }
}

/// One HTTP/1.1 request on a fresh connection; returns status, headers and body.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: impl Into<Bytes>,
) -> (StatusCode, http::HeaderMap, Bytes) {
    let a = testkit::http::send(addr, method, path, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    (a.status, a.headers, a.body)
}

pub async fn auction(
    addr: SocketAddr,
    request: &serde_json::Value,
) -> (StatusCode, Option<serde_json::Value>) {
    let (status, _, body) = send(addr, "POST", exchange::AUCTION_PATH, request.to_string()).await;
    let json = if body.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&body).unwrap())
    };
    (status, json)
}

/// A one-imp banner request.
pub fn banner_request(floor: f64) -> serde_json::Value {
    serde_json::json!({
        "id": "req-1",
        "tmax": 100,
        "imp": [{ "id": "1", "bidfloor": floor, "banner": { "w": 300, "h": 250 } }],
        "site": { "domain": "news.example" },
        "ext": { "seller": { "kept": true } }
    })
}
