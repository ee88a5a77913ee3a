//! What the edge's socket tests share: a real origin server on loopback whose objects, failures
//! and pace the test controls, the edge started on a free port, and HTTP clients.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use creative_edge::{Clock, Config, Edge};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

/// An object the origin serves.
#[derive(Clone, Debug)]
pub struct Obj {
    pub status: u16,
    pub body: Bytes,
    pub headers: Vec<(&'static str, String)>,
    /// Send this many bytes, then wait for [`TestOrigin::release`] before the rest.
    pub hold_after: Option<usize>,
}

impl Obj {
    /// A 200 with a content type and `Cache-Control`.
    pub fn ok(body: impl Into<Bytes>, content_type: &str, cache_control: &str) -> Obj {
        Obj {
            status: 200,
            body: body.into(),
            headers: vec![
                ("content-type", content_type.to_owned()),
                ("cache-control", cache_control.to_owned()),
            ],
            hold_after: None,
        }
    }

    pub fn with(mut self, name: &'static str, value: &str) -> Obj {
        self.headers.push((name, value.to_owned()));
        self
    }

    pub fn status(status: u16) -> Obj {
        Obj {
            status,
            body: Bytes::from_static(b"origin says no"),
            headers: vec![("content-type", "text/plain".to_owned())],
            hold_after: None,
        }
    }
}

/// A loopback origin counting the requests it gets, by path.
pub struct TestOrigin {
    pub addr: SocketAddr,
    objects: Arc<Mutex<HashMap<String, Obj>>>,
    requests: Arc<Mutex<Vec<(String, HeaderMap)>>>,
    release: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl TestOrigin {
    pub async fn start() -> TestOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
        TestOrigin::on(listener)
    }

    /// Serves on a listener (a restarted origin keeps its port).
    pub fn on(listener: TcpListener) -> TestOrigin {
        let addr = listener.local_addr().expect("origin addr");
        let objects: Arc<Mutex<HashMap<String, Obj>>> = Arc::default();
        let requests: Arc<Mutex<Vec<(String, HeaderMap)>>> = Arc::default();
        let (release, released) = watch::channel(false);
        let (objs, reqs) = (objects.clone(), requests.clone());
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (objs, reqs, released) = (objs.clone(), reqs.clone(), released.clone());
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (objs, reqs, released) = (objs.clone(), reqs.clone(), released.clone());
                        async move { Ok::<_, Infallible>(answer(req, &objs, &reqs, released)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        TestOrigin {
            addr,
            objects,
            requests,
            release,
            task,
        }
    }

    pub fn put(&self, path: &str, obj: Obj) {
        self.objects
            .lock()
            .expect("objects")
            .insert(path.to_owned(), obj);
    }

    /// Requests received for `path`.
    pub fn requests(&self, path: &str) -> usize {
        self.requests
            .lock()
            .expect("requests")
            .iter()
            .filter(|(p, _)| p == path)
            .count()
    }

    /// The headers of the last request for `path`.
    pub fn last_headers(&self, path: &str) -> Option<HeaderMap> {
        let reqs = self.requests.lock().expect("requests");
        reqs.iter()
            .rev()
            .find(|(p, _)| p == path)
            .map(|(_, h)| h.clone())
    }

    /// Lets held bodies finish.
    pub fn release(&self) {
        let _ = self.release.send(true);
    }

    /// Stops listening and closes every connection: the origin is down.
    pub fn stop(&self) {
        self.task.abort();
    }
}

fn answer(
    req: Request<Incoming>,
    objects: &Mutex<HashMap<String, Obj>>,
    requests: &Mutex<Vec<(String, HeaderMap)>>,
    mut released: watch::Receiver<bool>,
) -> Response<Channel> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    requests
        .lock()
        .expect("requests")
        .push((path.clone(), req.headers().clone()));
    let obj = objects
        .lock()
        .expect("objects")
        .get(&path)
        .cloned()
        .unwrap_or_else(|| Obj::status(404));
    let etag = obj
        .headers
        .iter()
        .find(|(n, _)| *n == "etag")
        .map(|(_, v)| v.clone());
    let inm = req
        .headers()
        .get("if-none-match")
        .and_then(|v| v.to_str().ok());
    let mut builder = Response::builder();
    if etag.is_some() && etag.as_deref() == inm {
        builder = builder.status(304);
        for (n, v) in &obj.headers {
            builder = builder.header(*n, v);
        }
        let (_, rx) = mpsc::channel(1);
        return builder.body(Channel(rx)).expect("304");
    }
    builder = builder
        .status(obj.status)
        .header("content-length", obj.body.len());
    for (n, v) in &obj.headers {
        builder = builder.header(*n, v);
    }
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        match obj.hold_after {
            Some(n) => {
                let _ = tx.send(obj.body.slice(..n)).await;
                let _ = released.wait_for(|r| *r).await;
                let _ = tx.send(obj.body.slice(n..)).await;
            }
            None => {
                let _ = tx.send(obj.body.clone()).await;
            }
        }
    });
    builder.body(Channel(rx)).expect("answer")
}

/// A body fed through a channel, so the origin can pause mid-body.
pub struct Channel(mpsc::Receiver<Bytes>);

impl Body for Channel {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
    }
}

/// The edge, serving on a free loopback port.
pub struct Running {
    pub edge: Edge,
    pub addr: SocketAddr,
    /// The admin listener: `/metrics`.
    pub admin: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// `toml` with `{origin}` replaced by the origin's address.
pub fn config(toml: &str, origin: SocketAddr) -> Config {
    let text = toml.replace("{origin}", &origin.to_string());
    Config::parse(&text)
        .and_then(|c| c.validate_in(None))
        .expect("test config")
}

/// [`config`], with relative files (key files) under `dir`.
pub fn config_in(toml: &str, origin: SocketAddr, dir: &std::path::Path) -> Config {
    let text = toml.replace("{origin}", &origin.to_string());
    Config::parse(&text)
        .and_then(|c| c.validate_in(Some(dir)))
        .expect("test config")
}

/// A `POST` of `body` with extra headers through hyper's client, on a fresh connection.
pub async fn post_with(addr: SocketAddr, path: &str, body: &str, headers: &[(&str, &str)]) -> Got {
    let stream = TcpStream::connect(addr).await.expect("connect edge");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method("POST")
        .uri(path)
        .header("host", "edge.test")
        .header("content-type", "application/json");
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let resp = sender
        .send_request(
            req.body(http_body_util::Full::new(Bytes::from(body.to_owned())))
                .expect("request"),
        )
        .await
        .expect("answer");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Got {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn start_edge(config: &Config, clock: Arc<dyn Clock>) -> Running {
    let edge = Edge::new(config, clock).expect("edge starts");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind edge");
    let addr = listener.local_addr().expect("edge addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = edge.clone();
    let task = tokio::spawn(async move {
        serving
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind admin");
    let admin = admin_listener.local_addr().expect("admin addr");
    let serving = edge.clone();
    tokio::spawn(async move {
        serving
            .serve_admin(admin_listener, std::future::pending())
            .await
    });
    Running {
        edge,
        addr,
        admin,
        stop: Some(stop),
        task,
    }
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// An answer, whole.
#[derive(Debug)]
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One request with extra headers through hyper's client, on a fresh connection.
pub async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Got {
    let stream = TcpStream::connect(addr).await.expect("connect edge");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "edge.test");
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).expect("request"))
        .await
        .expect("answer");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Got {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Got {
    request(addr, "GET", path, &[]).await
}

/// A GET on a raw connection that reports when the first body byte arrived (through
/// `first_byte`), then reads the answer to its end. Returns the body.
pub async fn get_streaming(addr: SocketAddr, path: &str, first_byte: oneshot::Sender<()>) -> Bytes {
    let mut stream = TcpStream::connect(addr).await.expect("connect edge");
    let head = format!("GET {path} HTTP/1.1\r\nHost: edge.test\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut seen = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut first_byte = Some(first_byte);
    loop {
        let n = stream.read(&mut buf).await.expect("read");
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(end) = find(&seen, b"\r\n\r\n")
            && seen.len() > end + 4
            && let Some(tx) = first_byte.take()
        {
            let _ = tx.send(());
        }
    }
    let end = find(&seen, b"\r\n\r\n").expect("an answer head");
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen[..end])
    );
    Bytes::from(seen.split_off(end + 4))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Bytes of a seeded pattern, so bodies differ by object and a mixed-up byte shows.
pub fn pattern(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>(),
    )
}

/// Raises this process's soft limit on open files to its hard limit (at least `want`), for
/// tests that hold thousands of loopback sockets: the crate's other tests share the process
/// and its limit, so `want` alone would leave them none.
pub fn open_files(want: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    let Some(current) = now.current else {
        return; // unlimited
    };
    let raised = now.maximum.unwrap_or(want.max(current));
    assert!(
        raised >= want,
        "this test needs {want} open files; the hard limit is {raised} (raise it with ulimit -Hn)"
    );
    if raised == current {
        return;
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(raised),
            maximum: now.maximum,
        },
    )
    .expect("raise the open-file limit");
}

/// Reads one sample of `/metrics` from the admin listener `addr`: the value of the line
/// starting with `series`.
pub async fn metric(addr: SocketAddr, series: &str) -> u64 {
    let text = get(addr, "/metrics").await.body;
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("{series} not in /metrics"))
}
