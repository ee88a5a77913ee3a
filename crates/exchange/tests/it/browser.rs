//! Issue 47, browser transport: a page's Prebid.js calls the exchange cross-origin, with
//! credentials, a `text/plain` body and, compressed, `?gzip=1`. Before, the preflight got 405
//! and no answer carried CORS headers, so the browser kept every bid from the page.

use crate::support;

use http::StatusCode;
use serde_json::json;
use support::*;

fn a_bid(seat: &'static str) -> impl Fn(&openrtb::BidRequest) -> Script + Send + Sync + 'static {
    move |r| {
        bids(
            r,
            seat,
            |imp| json!({"id": "b1", "impid": imp, "price": 1.5, "adomain": ["a.example"]}),
        )
    }
}

async fn post_from(
    ex: &RunningExchange,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<bytes::Bytes>,
) -> testkit::http::Answer {
    testkit::http::send_with(ex.addr, "POST", path, headers, body)
        .await
        .unwrap()
}

async fn requests_metric(ex: &RunningExchange, outcome: &str) -> String {
    let (_, _, body) = send(ex.admin, "GET", "/metrics", "").await;
    let text = String::from_utf8_lossy(&body).into_owned();
    let line = format!("gavel_exchange_requests_total{{outcome=\"{outcome}\"}}");
    text.lines()
        .find(|l| l.starts_with(&line))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_page_gets_its_answer_with_cors_headers_and_a_text_plain_body_is_read() {
    let a = ScriptedBidder::start(a_bid("a")).await;
    let ex = exchange("", &[("a", a.endpoint())]).await;
    let origin = "https://news.example";
    let answer = post_from(
        &ex,
        exchange::AUCTION_PATH,
        &[
            ("origin", origin),
            ("content-type", "text/plain;charset=utf-8"),
        ],
        banner_request(0.1).to_string(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let h = &answer.headers;
    assert_eq!(h["access-control-allow-origin"], origin, "echoed, never *");
    assert_eq!(h["access-control-allow-credentials"], "true");
    assert_eq!(h["vary"], "Origin");

    // A server-to-server caller sends no Origin and gets no CORS headers.
    let plain = post_from(
        &ex,
        exchange::AUCTION_PATH,
        &[("content-type", "application/json")],
        banner_request(0.1).to_string(),
    )
    .await;
    assert_eq!(plain.status, StatusCode::OK);
    assert!(plain.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn the_preflight_is_answered_and_a_foreign_page_is_refused_before_any_bidder_is_called() {
    let a = ScriptedBidder::start(a_bid("a")).await;
    let ex = exchange(
        "[cors]\nallowed_origins = [\"https://news.example\"]\nmax_age_s = 120\n",
        &[("a", a.endpoint())],
    )
    .await;
    let preflight = testkit::http::send_with(
        ex.addr,
        "OPTIONS",
        exchange::AUCTION_PATH,
        &[
            ("origin", "https://news.example"),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ],
        "",
    )
    .await
    .unwrap();
    assert_eq!(preflight.status, StatusCode::NO_CONTENT);
    let h = &preflight.headers;
    assert_eq!(h["access-control-allow-origin"], "https://news.example");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    assert!(
        h["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("Content-Type")
    );
    assert_eq!(h["access-control-max-age"], "120");

    let stranger = testkit::http::send_with(
        ex.addr,
        "OPTIONS",
        exchange::AUCTION_PATH,
        &[
            ("origin", "https://evil.example"),
            ("access-control-request-method", "POST"),
        ],
        "",
    )
    .await
    .unwrap();
    assert_eq!(stranger.status, StatusCode::FORBIDDEN);
    // Without a preflight (a text/plain POST needs none), the foreign page is still refused,
    // and no bidder hears of it.
    for origin in ["https://evil.example", "https://news.example.evil", "null"] {
        let answer = post_from(
            &ex,
            exchange::AUCTION_PATH,
            &[("origin", origin), ("content-type", "text/plain")],
            banner_request(0.1).to_string(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{origin}");
        assert!(answer.headers.get("access-control-allow-origin").is_none());
    }
    assert!(
        a.requests.lock().unwrap().is_empty(),
        "no bidder was called"
    );
    assert_eq!(
        requests_metric(&ex, "origin_refused").await,
        "gavel_exchange_requests_total{outcome=\"origin_refused\"} 4"
    );
    let allowed = post_from(
        &ex,
        exchange::AUCTION_PATH,
        &[("origin", "https://news.example")],
        banner_request(0.1).to_string(),
    )
    .await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(a.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn prebids_gzip_mark_inflates_the_body_within_the_limit() {
    let a = ScriptedBidder::start(a_bid("a")).await;
    let ex = exchange("", &[("a", a.endpoint())]).await;
    let path = format!("{}?gzip=1", exchange::AUCTION_PATH);
    let body = upstream::gzip::compress(banner_request(0.1).to_string().as_bytes()).unwrap();
    let answer = post_from(
        &ex,
        &path,
        &[
            ("origin", "https://news.example"),
            ("content-type", "text/plain"),
        ],
        body,
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    // A bomb marked the same way inflates past the body limit: 413, counted, nothing called.
    let bomb = upstream::gzip::compress(&vec![b' '; 8 * 1024 * 1024]).unwrap();
    let before = a.requests.lock().unwrap().len();
    let refused = post_from(&ex, &path, &[("content-type", "text/plain")], bomb).await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(a.requests.lock().unwrap().len(), before);
    // Plain JSON marked gzip is not gzip: 400, not an auction of garbage.
    let fake = post_from(
        &ex,
        &path,
        &[("content-type", "text/plain")],
        banner_request(0.1).to_string(),
    )
    .await;
    assert_eq!(fake.status, StatusCode::BAD_REQUEST);
}
