//! How requests are made, over real loopback servers: GET and HEAD without a body, extra
//! headers, and `https` targets checked against a private CA (a simulated bidder fleet serving
//! TLS with certificates made by `openssl`).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::serve;
use http::{Response, StatusCode};
use http_body_util::Full;
use loadgen::{Corpus, HttpMethod, LoadError, LoadSpec, run};
use sim::{BidderProfile, FleetConfig};
use testkit::TempDir;

fn spec(url: String, rate: f64, secs: f64) -> LoadSpec {
    let mut s = LoadSpec::new(url, rate, Duration::from_secs_f64(secs));
    s.connections = 4;
    s
}

/// What a test server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    content_type: Option<String>,
    content_length: Option<String>,
    x_run: Option<String>,
    body_len: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_without_a_body_carries_the_given_headers() {
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let log = Arc::clone(&seen);
    let addr = serve(move |req| {
        let header = |name: &str| {
            req.head
                .headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        log.lock().unwrap().push(Seen {
            method: req.head.method.to_string(),
            content_type: header("content-type"),
            content_length: header("content-length"),
            x_run: header("x-run"),
            body_len: req.body.len(),
        });
        async { Response::new(Full::new(Bytes::from_static(b"asset bytes"))) }
    })
    .await;
    let mut s = spec(format!("http://{addr}/asset/a.png"), 200.0, 0.25);
    s.http.method = HttpMethod::Get;
    s.http.headers = vec![("X-Run".to_owned(), "ci 42".to_owned())];
    let corpus = Arc::new(Corpus::from_bodies(vec![Bytes::new()]));
    let r = run(&s, corpus).await.unwrap();
    assert_eq!(r.sent, 50);
    assert_eq!(r.status.ok_200, 50, "{:?}", r.status);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 50);
    for s in seen.iter() {
        assert_eq!(s.method, "GET");
        assert_eq!(s.content_type, None, "no body, no content type");
        assert!(
            s.content_length.as_deref().is_none_or(|l| l == "0"),
            "{s:?}"
        );
        assert_eq!(s.body_len, 0);
        assert_eq!(s.x_run.as_deref(), Some("ci 42"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_answers_are_read_without_a_body_and_a_post_keeps_its_own() {
    let methods = Arc::new(Mutex::new(Vec::<(String, usize, Option<String>)>::new()));
    let log = Arc::clone(&methods);
    let addr = serve(move |req| {
        let ct = req
            .head
            .headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let head = req.head.method == http::Method::HEAD;
        log.lock()
            .unwrap()
            .push((req.head.method.to_string(), req.body.len(), ct));
        async move {
            if head {
                // The length of the body a GET would get, which a HEAD answer never carries:
                // the client must not wait for it.
                let mut r = Response::new(Full::new(Bytes::from(vec![b'x'; 5000])));
                *r.status_mut() = StatusCode::OK;
                r
            } else {
                let mut r = Response::new(Full::new(Bytes::new()));
                *r.status_mut() = StatusCode::NO_CONTENT;
                r
            }
        }
    })
    .await;
    let mut s = spec(format!("http://{addr}/asset/a.png"), 200.0, 0.1);
    s.http.method = HttpMethod::Head;
    s.timeout = Duration::from_secs(1);
    let r = run(&s, Arc::new(Corpus::from_bodies(vec![Bytes::new()])))
        .await
        .unwrap();
    assert_eq!(r.status.ok_200, 20, "{:?}", r.status);
    assert_eq!(r.status.timeout, 0);

    // POST with a body of its own type: the given Content-Type replaces the default.
    methods.lock().unwrap().clear();
    let mut s = spec(format!("http://{addr}/cache"), 200.0, 0.05);
    s.http.headers = vec![("Content-Type".to_owned(), "text/plain".to_owned())];
    let r = run(
        &s,
        Arc::new(Corpus::from_bodies(vec![Bytes::from_static(b"hello")])),
    )
    .await
    .unwrap();
    assert_eq!(r.status.no_content_204, 10, "{:?}", r.status);
    let methods = methods.lock().unwrap();
    assert_eq!(methods.len(), 10);
    for (method, len, ct) in methods.iter() {
        assert_eq!((method.as_str(), *len), ("POST", 5));
        assert_eq!(ct.as_deref(), Some("text/plain"));
    }
}

/// A simulated bidder serving HTTPS with a certificate of its own CA.
async fn tls_bidder(dir: &TempDir) -> (sim::Fleet, testkit::tls::TlsFiles) {
    let certs = testkit::tls::generate(dir.path(), "load");
    let tls = Arc::new(http_front::ServerTls::load(&certs.cert, &certs.key).unwrap());
    let config = FleetConfig {
        tls: Some(tls),
        ..FleetConfig::local(3, vec![BidderProfile::instant("secure", 1.0)])
    };
    let fleet = sim::start(config, std::future::pending()).await.unwrap();
    (fleet, certs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_target_is_loaded_over_tls_checked_against_its_ca() {
    let dir = TempDir::new("load-tls");
    let (fleet, certs) = tls_bidder(&dir).await;
    let endpoint = fleet.bidders[0].endpoint.clone();
    assert!(endpoint.starts_with("https://127.0.0.1:"), "{endpoint}");

    let mut s = spec(endpoint.clone(), 100.0, 0.3);
    s.http.ca_file = Some(certs.ca.clone());
    let corpus = Arc::new(Corpus::generated(1, 50, 100));
    let r = run(&s, Arc::clone(&corpus)).await.unwrap();
    assert_eq!(r.sent, 30);
    assert_eq!(r.status.successes(), 30, "{:?}", r.status);
    // Every request reached the bidder, over TLS (the fleet serves nothing else).
    assert_eq!(fleet.stats_of("secure").unwrap().requests, 30);

    // Another CA: every handshake fails, and the run says so as connection errors.
    let other = testkit::tls::generate(dir.path(), "other");
    s.http.ca_file = Some(other.ca);
    let r = run(&s, Arc::clone(&corpus)).await.unwrap();
    assert_eq!(r.completed, 0);
    assert_eq!(r.status.connect_error, r.sent, "{:?}", r.status);
    assert_eq!(fleet.stats_of("secure").unwrap().requests, 30);

    // A CA file that cannot be read is refused before the run, naming it.
    s.http.ca_file = Some(dir.join("missing.pem"));
    match run(&s, corpus).await {
        Err(e @ LoadError::Tls { .. }) => assert!(e.to_string().contains("missing.pem"), "{e}"),
        other => panic!("expected a TLS error, got {other:?}"),
    }
}
