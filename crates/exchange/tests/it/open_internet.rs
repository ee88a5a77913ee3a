//! The exchange as it must behave on the open internet, over real loopback sockets: sellers
//! need a key, a bidder cannot point the exchange at a host its configuration does not list
//! (nor at an internal address), and the seller's answer carries no notice URL the exchange
//! fires itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use exchange::metrics::{KeyRefusal, NoticeKind, NoticeOutcome, RequestOutcome};
use serde_json::json;
use support::*;
use testkit::TempDir;
use tokio::net::TcpListener;

const KEY_A: &str = "seller-a-key-0123456789abcdef";
const KEY_A_NEXT: &str = "seller-a-next-key-fedcba987654";
const KEY_B: &str = "seller-b-key-0123456789abcdef";

/// A listener that counts the connections made to it and answers nothing: what a bidder
/// might want the exchange to reach (an admin port, a metadata service).
async fn victim() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, SeqCst);
            drop(stream);
        }
    });
    (addr, count)
}

async fn auction_as(
    addr: std::net::SocketAddr,
    key: Option<&str>,
    body: &str,
) -> (u16, serde_json::Value) {
    let (status, body) =
        testkit::http::call_as(addr, "POST", exchange::AUCTION_PATH, key, body).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

fn priced(seat: &'static str, price: f64) -> impl Fn(&openrtb::BidRequest) -> Script + Send + Sync {
    move |r| {
        bids(
            r,
            seat,
            |imp| json!({"id": seat, "impid": imp, "price": price}),
        )
    }
}

#[tokio::test]
async fn sellers_need_a_known_key_and_get_their_own_settings() {
    let a = ScriptedBidder::start(priced("a", 1.0)).await;
    let b = ScriptedBidder::start(priced("b", 2.0)).await;
    let dir = TempDir::new("sellers");
    std::fs::write(dir.join("a.key"), format!("{KEY_A}\n")).unwrap();
    std::fs::write(dir.join("b.key"), KEY_B).unwrap();
    let config = |a_keys: &str| {
        std::fs::write(dir.join("a.key"), a_keys).unwrap();
        format!(
            "[deadline]\nmax_tmax_ms = 500\n\
             [[sellers]]\nname = \"pub-a\"\nkey_file = \"a.key\"\nbidders = [\"a\"]\n\
             floor_multiplier = 1.5\nmax_tmax_ms = 80\n\
             [[sellers]]\nname = \"pub-b\"\nkey_file = \"b.key\"\n\
             [[bidders]]\nname = \"a\"\nendpoint = \"{}\"\n\
             [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\n",
            a.endpoint(),
            b.endpoint()
        )
    };
    let path = dir.join("exchange.toml");
    std::fs::write(&path, config(KEY_A)).unwrap();
    let ex = exchange_from_file(&path).await;
    let request = json!({"id": "r", "tmax": 300, "imp": [{"id": "1", "bidfloor": 0.5, "banner": {"w": 300, "h": 250}}]})
        .to_string();

    // No key, an unknown key, and a key with garbage after it: 401 before the body is read
    // (the body here is not even JSON), counted, and no bidder hears of it.
    for (key, label) in [
        (None, KeyRefusal::Missing),
        (Some("not-a-key-of-anyone-000000"), KeyRefusal::Unknown),
        (Some("seller-a-key-0123456789abcdeX"), KeyRefusal::Unknown),
    ] {
        let before = ex.metrics.unauthorized_count(label);
        let (status, body) = auction_as(ex.addr, key, "{ not json").await;
        assert_eq!(status, 401, "{key:?}: {body}");
        assert_eq!(ex.metrics.unauthorized_count(label), before + 1);
    }
    assert_eq!(ex.metrics.request_count(RequestOutcome::Unauthorized), 3);
    assert!(a.requests.lock().unwrap().is_empty() && b.requests.lock().unwrap().is_empty());

    // pub-a: only bidder a, floors raised by half, tmax capped at 80 ms.
    let (status, body) = auction_as(ex.addr, Some(KEY_A), &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["seatbid"][0]["seat"], "a");
    assert!(
        b.requests.lock().unwrap().is_empty(),
        "pub-a may not reach b"
    );
    let seen = a.requests.lock().unwrap()[0].clone();
    assert_eq!(
        seen.imp[0].bidfloor,
        Some(openrtb::Price::from_micros(750_000))
    );
    assert!(seen.tmax.unwrap() <= 80, "tmax capped: {:?}", seen.tmax);
    // pub-b: every bidder, the floor as sent.
    let (status, body) = auction_as(ex.addr, Some(KEY_B), &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["seatbid"][0]["seat"], "b");
    assert_eq!(ex.metrics.seller_requests("pub-a"), Some(1));
    assert_eq!(ex.metrics.seller_requests("pub-b"), Some(1));

    // Rotation: the new key is added beside the old, then the old one removed; each step is a
    // reload, and a seller is never locked out.
    std::fs::write(&path, config(&format!("{KEY_A}\n{KEY_A_NEXT}\n"))).unwrap();
    ex.exchange.reload().await.unwrap();
    for key in [KEY_A, KEY_A_NEXT] {
        assert_eq!(auction_as(ex.addr, Some(key), &request).await.0, 200);
    }
    std::fs::write(&path, config(KEY_A_NEXT)).unwrap();
    ex.exchange.reload().await.unwrap();
    assert_eq!(auction_as(ex.addr, Some(KEY_A), &request).await.0, 401);
    assert_eq!(auction_as(ex.addr, Some(KEY_A_NEXT), &request).await.0, 200);
    assert_eq!(
        ex.metrics.seller_requests("pub-a"),
        Some(4),
        "counts survive reloads"
    );
    // A key file gone bad keeps the last good keys.
    std::fs::write(dir.join("a.key"), "short").unwrap();
    assert!(ex.exchange.reload().await.is_err());
    assert_eq!(auction_as(ex.addr, Some(KEY_A_NEXT), &request).await.0, 200);
}

#[tokio::test]
async fn notice_urls_reach_only_the_hosts_a_bidder_is_configured_with() {
    let (victim_addr, victim_hits) = victim().await;
    let port = victim_addr.port();
    // a's nurl points at another local port; b's at a name resolving to 127.0.0.1; c's markup
    // would come from the victim; d is an honest bidder that must win once the others are out.
    let point_at = |seat: &'static str, price: f64, url: String, adm: bool| {
        move |r: &openrtb::BidRequest| {
            bids(r, seat, |imp| {
                let mut bid = json!({"id": seat, "impid": imp, "price": price,
                                     "nurl": url.clone(), "burl": url.clone(), "lurl": url.clone()});
                if adm {
                    bid["adm"] = json!("<div/>");
                }
                bid
            })
        }
    };
    let a = ScriptedBidder::start(point_at(
        "a",
        5.0,
        format!("http://127.0.0.1:{port}/admin"),
        true,
    ))
    .await;
    let b = ScriptedBidder::start(point_at(
        "b",
        4.0,
        format!("http://localhost:{port}/x"),
        true,
    ))
    .await;
    let c = ScriptedBidder::start(point_at(
        "c",
        3.0,
        format!("http://127.0.0.1:{port}/m"),
        false,
    ))
    .await;
    let d = ScriptedBidder::start(priced("d", 1.0)).await;
    let ex = exchange_from_toml(&format!(
        "[notices]\nfire_burl = true\nfire_lurl = true\n\
         [[bidders]]\nname = \"a\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"c\"\nendpoint = \"{}\"\nfetch_markup = true\n\
         [[bidders]]\nname = \"d\"\nendpoint = \"{}\"\n",
        a.endpoint(),
        b.endpoint(),
        c.endpoint(),
        d.endpoint()
    ))
    .await;
    for _ in 0..3 {
        let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
        assert_eq!(status, 200);
        assert_eq!(body.unwrap()["seatbid"][0]["seat"], "a", "a wins on price");
    }
    let refused = |name: &str| {
        ex.metrics
            .bidder_named(name)
            .unwrap()
            .notices
            .get(NoticeOutcome::Refused)
    };
    testkit::time::wait_until(Duration::from_secs(5), "refusals counted", || {
        refused("a") >= 6 && refused("b") >= 3
    })
    .await;
    // Every notice the exchange queued has been concluded: none reached the victim.
    assert_eq!(ex.exchange.flush_notices(Duration::from_secs(10)).await, 0);
    assert_eq!(
        victim_hits.load(SeqCst),
        0,
        "no connection to an unlisted host"
    );
    assert!(
        ex.metrics
            .notice_count(NoticeKind::Win, NoticeOutcome::Refused)
            >= 3
    );
    assert_eq!(
        ex.metrics
            .notice_count(NoticeKind::Win, NoticeOutcome::Sent),
        0
    );
    drop(ex);

    // The markup case: c and d only. c's markup would have to come from the victim, so c's
    // bid cannot be served: it is out before the auction, and d, the next bidder, wins.
    let ex = exchange_from_toml(&format!(
        "[[bidders]]\nname = \"c\"\nendpoint = \"{}\"\nfetch_markup = true\n\
         [[bidders]]\nname = \"d\"\nendpoint = \"{}\"\n",
        c.endpoint(),
        d.endpoint()
    ))
    .await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200, "{body:?}");
    assert_eq!(body.unwrap()["seatbid"][0]["seat"], "d");
    let c_metrics = ex.metrics.bidder_named("c").unwrap();
    assert_eq!(c_metrics.rejections(), [("no_markup", 1)]);
    assert_eq!(
        victim_hits.load(SeqCst),
        0,
        "markup never fetched from an unlisted host"
    );
}

#[tokio::test]
async fn a_listed_host_that_resolves_to_an_internal_address_is_refused_without_a_connection() {
    let (victim_addr, victim_hits) = victim().await;
    let port = victim_addr.port();
    let a = ScriptedBidder::start(move |r| {
        bids(r, "a", |imp| {
            json!({"id": "a", "impid": imp, "price": 1.0, "adm": "<div/>",
                   "nurl": format!("http://localhost:{port}/win")})
        })
    })
    .await;
    // Listed by name, but the name is loopback and internal addresses are not allowed (the
    // bidder's own endpoint on loopback is the operator's choice, not the bidder's).
    let ex = exchange_from_toml(&format!(
        "[notices]\nallow_private_addresses = false\n\
         [[bidders]]\nname = \"a\"\nendpoint = \"{}\"\nnotice_hosts = [\"localhost:{port}\"]\n",
        a.endpoint()
    ))
    .await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    testkit::time::wait_until(Duration::from_secs(5), "the refusal counted", || {
        ex.metrics
            .notice_count(NoticeKind::Win, NoticeOutcome::Refused)
            == 1
    })
    .await;
    assert_eq!(victim_hits.load(SeqCst), 0);
    // Counted under the bidder, with the reason that names the setting.
    let a_metrics = ex.metrics.bidder_named("a").expect("bidder a");
    assert_eq!(
        a_metrics.notice_refusal_count(exchange::metrics::NoticeRefusal::Address),
        1
    );
    let (_, _, page) = send(ex.admin, "GET", "/metrics", "").await;
    let page = String::from_utf8_lossy(&page);
    assert!(
        page.contains(
            "gavel_exchange_bidder_notices_refused_total{bidder=\"a\",reason=\"address\"} 1"
        ),
        "{page}"
    );
}

#[tokio::test]
async fn the_answer_carries_only_the_notices_the_seller_fires() {
    let sink = ScriptedBidder::start(|_| no_bid()).await;
    let host = sink.addr;
    let a = ScriptedBidder::start(move |r| {
        bids(r, "a", |imp| {
            json!({"id": "a", "impid": imp, "price": 1.0, "adm": "<div/>",
                   "nurl": format!("http://{host}/win"), "burl": format!("http://{host}/bill"),
                   "lurl": format!("http://{host}/loss")})
        })
    })
    .await;
    let dir = TempDir::new("notice-plan");
    std::fs::write(dir.join("render.key"), KEY_A).unwrap();
    std::fs::write(dir.join("fires.key"), KEY_B).unwrap();
    let path = dir.join("exchange.toml");
    std::fs::write(
        &path,
        format!(
            "[[sellers]]\nname = \"on-render\"\nkey_file = \"render.key\"\n\
             [[sellers]]\nname = \"fires-all\"\nkey_file = \"fires.key\"\nfires_notices = true\n\
             [[bidders]]\nname = \"a\"\nendpoint = \"{}\"\nnotice_hosts = [\"{host}\"]\n",
            a.endpoint()
        ),
    )
    .unwrap();
    let ex = exchange_from_file(&path).await;
    let request = banner_request(0.1).to_string();

    // Billing on render (the default): the exchange fires the win notice; the seller gets burl.
    let (status, body) = auction_as(ex.addr, Some(KEY_A), &request).await;
    assert_eq!(status, 200);
    let bid = &body["seatbid"][0]["bid"][0];
    assert!(
        bid.get("nurl").is_none() && bid.get("lurl").is_none(),
        "{bid}"
    );
    assert_eq!(bid["burl"], format!("http://{host}/bill"));
    assert_eq!(sink.settled_notices(&ex).await, ["/win"]);

    // A seller that fires notices itself gets all three, and the exchange fires none.
    let (status, body) = auction_as(ex.addr, Some(KEY_B), &request).await;
    assert_eq!(status, 200);
    let bid = &body["seatbid"][0]["bid"][0];
    for url in ["nurl", "burl", "lurl"] {
        assert!(bid[url].is_string(), "{url} handed on: {bid}");
    }
    assert_eq!(
        sink.settled_notices(&ex).await.len(),
        1,
        "nothing more fired"
    );
}
