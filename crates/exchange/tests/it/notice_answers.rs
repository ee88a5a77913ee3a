//! What the exchange does with each answer a notice host gives: 2xx is sent; 404 and 410 are
//! final (a retry would not change them); 503 is retried up to `max_attempts`, and a notice that
//! succeeds on a retry counts once as sent. A win notice that hangs while fetching markup costs
//! that bid, never the answer. Exact counts at the host and in the exchange's metrics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use exchange::metrics::{NoticeKind, NoticeOutcome};
use serde_json::json;
use support::*;

/// The bidder's `nurl` for a request is `http://{host}/{imp tagid with '-' as '/'}/win`, so
/// each auction below picks how the notice host answers (see `support::notice_status`).
async fn bidder_with_nurl_by_request_id(host: std::net::SocketAddr) -> ScriptedBidder {
    ScriptedBidder::start(move |r| {
        let path = r.imp[0].tagid.clone().unwrap_or_default().replace('-', "/");
        bids(r, "b", |imp| {
            json!({"id": "x", "impid": imp, "price": 1.0, "adm": "<div/>",
                   "nurl": format!("http://{host}/{path}/win")})
        })
    })
    .await
}

#[tokio::test]
async fn final_answers_are_not_retried_and_transient_ones_are_until_they_pass() {
    let host = ScriptedBidder::start(|_| no_bid()).await;
    let b = bidder_with_nurl_by_request_id(host.addr).await;
    let ex = exchange_from_toml(&format!(
        "[notices]\nmax_attempts = 3\nretry_base_ms = 1\n\
         [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\nnotice_hosts = [\"{}\"]\n",
        b.endpoint(),
        host.addr
    ))
    .await;
    for id in ["status-404", "status-410", "status-503", "fail-2", "ok"] {
        let mut req = banner_request(0.1);
        req["imp"][0]["tagid"] = json!(id);
        assert_eq!(auction(ex.addr, &req).await.0, 200, "{id}");
    }
    let mut hits = host.settled_notices(&ex).await;
    hits.sort();
    let path = |p: &str| format!("{p}/win");
    assert_eq!(
        hits,
        [
            vec![path("/fail/2"); 3],
            vec![path("/ok")],
            vec![path("/status/404")],
            vec![path("/status/410")],
            vec![path("/status/503"); 3],
        ]
        .concat()
    );
    let count = |o| ex.metrics.notice_count(NoticeKind::Win, o);
    // Sent: `/fail/2` on its third attempt and `/ok`. Failed: 404, 410, and 503 three times.
    assert_eq!(count(NoticeOutcome::Sent), 2);
    assert_eq!(count(NoticeOutcome::Failed), 3);
    assert_eq!(count(NoticeOutcome::Dropped), 0);
    assert_eq!(
        ex.metrics.notice_retries.get(NoticeKind::Win),
        4,
        "two retries each for /status/503 and /fail/2"
    );
    assert_eq!(ex.exchange.report().win_notices_lost, 3);
}

/// A bid without markup whose `nurl` host accepts the connection and never answers: the
/// exchange gives up on the markup at its deadline, drops that bid and answers no-bid; the
/// failed fetch is counted once and nothing is queued for it.
#[tokio::test]
async fn a_hanging_markup_fetch_costs_its_bid_not_the_answer() {
    let hole = black_hole().await;
    let b = ScriptedBidder::start(move |r| {
        bids(r, "b", |imp| {
            json!({"id": "x", "impid": imp, "price": 1.0,
                   "nurl": format!("http://{hole}/win?p=${{AUCTION_PRICE}}")})
        })
    })
    .await;
    let ex = exchange_from_toml(&format!(
        "[notices]\ntimeout_ms = 30000\n\
         [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\nfetch_markup = true\nnotice_hosts = [\"{hole}\"]\n",
        b.endpoint()
    ))
    .await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204);
    assert_eq!(
        ex.metrics
            .notice_count(NoticeKind::Markup, NoticeOutcome::Failed),
        1
    );
    let report = ex.exchange.report();
    assert_eq!((report.sold, report.markup_failed), (0, 1));
    assert_eq!(
        ex.exchange.flush_notices(std::time::Duration::ZERO).await,
        0
    );
}
