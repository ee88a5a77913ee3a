//! Real traffic over loopback: each bidder spoken to in its own OpenRTB version and encoding,
//! bids and floors in other currencies, and sloppy requests repaired or refused as the seller's
//! mode says. Golden files under `tests/fixtures/protocol/` hold what a 2.5 and a 2.6 bidder
//! receive for one request, byte for byte (`GAVEL_BLESS=1` rewrites them after a deliberate
//! change; review the diff).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use openrtb::BidRequest;
use serde_json::{Value, json};
use support::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/protocol")
        .join(name)
}

/// A bidder that bids `price` in `cur` (absent: no `cur`) on every imp, its win notices to
/// `sink` when given.
async fn bidder_in(seat: &'static str, price: f64, cur: Option<&'static str>) -> ScriptedBidder {
    bidder_notifying(seat, price, cur, None).await
}

async fn bidder_notifying(
    seat: &'static str,
    price: f64,
    cur: Option<&'static str>,
    sink: Option<std::net::SocketAddr>,
) -> ScriptedBidder {
    ScriptedBidder::start(move |r| {
        let mut script = bids(r, seat, |imp| {
            let mut bid = json!({"id": format!("{seat}-{imp}"), "impid": imp, "price": price,
                                 "adm": "<div>ad</div>"});
            if let Some(sink) = sink {
                bid["nurl"] = json!(format!(
                    "http://{sink}/win?p=${{AUCTION_PRICE}}&c=${{AUCTION_CURRENCY}}"
                ));
            }
            bid
        });
        if let Some(cur) = cur {
            let mut body: Value = serde_json::from_str(&script.body).unwrap();
            body["cur"] = json!(cur);
            script.body = body.to_string();
        }
        script
    })
    .await
}

/// Every key 2.6 added at the top of an object a 2.5 bidder reads: a strict 2.5 bidder refuses
/// a request carrying any of them.
fn has_2_6_only_fields(r: &BidRequest) -> Option<&'static str> {
    let regs = r.regs.as_ref();
    let user = r.user.as_ref();
    let checks = [
        ("regs.gdpr", regs.is_some_and(|g| g.gdpr.is_some())),
        (
            "regs.us_privacy",
            regs.is_some_and(|g| g.us_privacy.is_some()),
        ),
        ("regs.gpp", regs.is_some_and(|g| g.gpp.is_some())),
        ("user.consent", user.is_some_and(|u| u.consent.is_some())),
        ("user.eids", user.is_some_and(|u| u.eids.is_some())),
        (
            "source.schain",
            r.source.as_ref().is_some_and(|s| s.schain.is_some()),
        ),
        (
            "device.sua",
            r.device.as_ref().is_some_and(|d| d.sua.is_some()),
        ),
        ("imp.rwdd", r.imp.iter().any(|i| i.rwdd.is_some())),
        ("imp.qty", r.imp.iter().any(|i| i.qty.is_some())),
    ];
    checks
        .into_iter()
        .find(|(_, present)| *present)
        .map(|(name, _)| name)
}

/// A request with every field that moves between 2.5 and 2.6, and some only 2.6 has.
fn rich_request() -> Value {
    json!({
        "id": "req-1", "tmax": 200,
        "imp": [{"id": "1", "bidfloor": 0.5, "banner": {"w": 300, "h": 250}, "rwdd": 1,
                 "qty": {"multiplier": 1.0}}],
        "site": {"domain": "news.example", "page": "https://news.example/a"},
        "device": {"ua": "UA", "ip": "192.0.2.1", "sua": {"mobile": 0}},
        "user": {"buyeruid": "b-1", "consent": "CONSENT",
                 "eids": [{"source": "id.example", "uids": [{"id": "e-1"}]}]},
        "regs": {"gdpr": 0, "us_privacy": "1NNN", "gpp": "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA",
                 "gpp_sid": [2]},
        "source": {"tid": "t-1"}
    })
}

/// The body as a bidder got it, with what changes per auction (its id, `tmax` left, the
/// schain node's `rid`) replaced by fixed words.
fn normalized(wire: &WireRequest) -> String {
    let request: Value = serde_json::from_slice(&wire.json).unwrap();
    let id = request["id"].as_str().unwrap().to_owned();
    let tmax = request["tmax"].as_i64().unwrap();
    String::from_utf8(wire.json.to_vec())
        .unwrap()
        .replace(&id, "AUCTION_ID")
        .replace(&format!("\"tmax\":{tmax}"), "\"tmax\":TMAX")
}

fn ex_metrics_text(ex: &RunningExchange) -> String {
    ex.metrics.render()
}

fn golden(name: &str, actual: &str) {
    let path = fixture(name);
    if std::env::var_os("GAVEL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{actual}\n")).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (GAVEL_BLESS=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected.trim_end(),
        "{name} differs from its golden file"
    );
}

#[tokio::test]
async fn a_2_5_and_a_2_6_bidder_each_receive_their_own_version_byte_for_byte() {
    let new = bidder_in("new", 1.0, None).await;
    let strict_old = ScriptedBidder::start(|r| match has_2_6_only_fields(r) {
        Some(_) => support::Script {
            delay: Duration::ZERO,
            status: 400,
            body: String::new(),
        },
        None => bids(
            r,
            "old",
            |imp| json!({"id": "o", "impid": imp, "price": 2.0}),
        ),
    })
    .await;
    let ex = exchange_from_toml(&format!(
        "[[bidders]]\nname = \"new\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"old\"\nendpoint = \"{}\"\nopenrtb_version = \"2.5\"\n",
        new.endpoint(),
        strict_old.endpoint()
    ))
    .await;
    let (status, body) = auction(ex.addr, &rich_request()).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    assert_eq!(
        body["seatbid"][0]["seat"], "old",
        "the strict 2.5 bidder found nothing to refuse and won"
    );
    let got_new = new.wire.lock().unwrap()[0].clone();
    let got_old = strict_old.wire.lock().unwrap()[0].clone();
    golden("as-2.6.json", &normalized(&got_new));
    golden("as-2.5.json", &normalized(&got_old));
    let old: Value = serde_json::from_slice(&got_old.json).unwrap();
    assert_eq!(old["regs"]["ext"]["gdpr"], 0);
    assert_eq!(old["regs"]["ext"]["us_privacy"], "1NNN");
    assert_eq!(old["user"]["ext"]["consent"], "CONSENT");
    assert_eq!(old["user"]["ext"]["eids"][0]["source"], "id.example");
    assert!(old["source"]["ext"]["schain"]["nodes"].is_array());
}

#[tokio::test]
async fn a_request_in_2_5_shape_is_converted_up_before_the_auction() {
    let b = bidder_in("b", 1.0, None).await;
    let ex = exchange("", &[("b", b.endpoint())]).await;
    let mut request = banner_request(0.1);
    request["regs"] = json!({"ext": {"gdpr": 1, "us_privacy": "1YNN"}});
    request["user"] = json!({"ext": {"consent": "CONSENT", "eids": [{"source": "s.example"}]}});
    request["source"] = json!({"ext": {"schain": {"complete": 1, "ver": "1.0", "nodes": []}}});
    let (status, _) = auction(ex.addr, &request).await;
    assert_eq!(status, 200);
    let got = b.requests.lock().unwrap()[0].clone();
    let regs = got.regs.unwrap();
    assert_eq!(regs.gdpr, Some(1));
    assert_eq!(regs.us_privacy.as_deref(), Some("1YNN"));
    assert_eq!(regs.ext, None, "an ext left empty is dropped");
    let user = got.user.unwrap();
    assert_eq!(user.consent.as_deref(), Some("CONSENT"));
    assert_eq!(user.eids.unwrap()[0].source.as_deref(), Some("s.example"));
    assert_eq!(
        got.source.unwrap().schain.unwrap().complete,
        Some(1),
        "the seller's chain, with the exchange's node appended"
    );
    assert!(
        ex_metrics_text(&ex).contains("gavel_exchange_requests_upgraded_total 1"),
        "counted"
    );
}

#[tokio::test]
async fn a_gzip_bidder_gets_the_same_request_compressed_and_answers_compressed() {
    let plain = bidder_in("plain", 1.0, None).await;
    let zipped = bidder_in("zipped", 2.0, None).await;
    let ex = exchange_from_toml(&format!(
        "[[bidders]]\nname = \"plain\"\nendpoint = \"{}\"\n\
         [[bidders]]\nname = \"zipped\"\nendpoint = \"{}\"\ngzip = true\n",
        plain.endpoint(),
        zipped.endpoint()
    ))
    .await;
    let (status, body) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    assert_eq!(
        body.unwrap()["seatbid"][0]["seat"],
        "zipped",
        "its compressed answer was read"
    );
    let p = plain.wire.lock().unwrap()[0].clone();
    let z = zipped.wire.lock().unwrap()[0].clone();
    assert_eq!(p.content_encoding, None);
    assert_eq!(p.accept_encoding, None);
    assert_eq!(z.content_encoding.as_deref(), Some("gzip"));
    assert_eq!(z.accept_encoding.as_deref(), Some("gzip"));
    assert_ne!(z.body, z.json, "sent compressed");
    assert_eq!(
        z.json, p.json,
        "the same request, byte for byte, once inflated"
    );
}

const RATES: &str = r#"{"dataAsOf":"2099-01-01","conversions":{"USD":{"EUR":0.5,"JPY":150}}}"#;

fn with_rates(dir: &std::path::Path, extra: &str) -> String {
    std::fs::write(dir.join("rates.json"), RATES).unwrap();
    format!(
        "[currency]\nrates_file = \"{}\"\n{extra}",
        dir.join("rates.json").display()
    )
}

#[tokio::test]
async fn bids_and_floors_in_other_currencies_are_converted_and_the_notice_is_in_the_bids() {
    let dir = testkit::TempDir::new("currency");
    // 1 USD = 0.5 EUR. The EUR bidder bids 1.50 EUR = 3.00 USD; the USD bidder 2.00 USD.
    let sink = ScriptedBidder::start(|_| no_bid()).await;
    let eur = bidder_notifying("eur", 1.5, Some("EUR"), Some(sink.addr)).await;
    let usd = bidder_in("usd", 2.0, None).await;
    let ex = exchange_from_toml(&with_rates(
        dir.path(),
        &format!(
            "[[bidders]]\nname = \"eur\"\nendpoint = \"{}\"\ncurrency = \"EUR\"\nnotice_hosts = [\"{}\"]\n\
             [[bidders]]\nname = \"usd\"\nendpoint = \"{}\"\n",
            eur.endpoint(),
            sink.addr,
            usd.endpoint()
        ),
    ))
    .await;
    let (status, body) = auction(ex.addr, &banner_request(1.0)).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    let bid = &body["seatbid"][0]["bid"][0];
    assert_eq!(
        body["seatbid"][0]["seat"],
        "eur",
        "{}",
        ex_metrics_text(&ex)
    );
    assert_eq!(body["cur"], "USD");
    // Second price: 2.00 + 0.01 USD, in the auction currency for the seller.
    assert_eq!(bid["price"], 2.01);
    assert_eq!(bid["ext"]["origbidprice"], 1.5);
    assert_eq!(bid["ext"]["origbidcur"], "EUR");
    // The EUR bidder saw its floor in EUR (1.00 USD = 0.50 EUR) and only EUR as bid currency.
    let seen = eur.requests.lock().unwrap()[0].clone();
    assert_eq!(
        seen.imp[0].bidfloor,
        Some(openrtb::Price::from_micros(500_000))
    );
    assert_eq!(seen.imp[0].bidfloorcur.as_deref(), Some("EUR"));
    assert_eq!(seen.cur, Some(vec!["EUR".to_owned()]));
    let usd_seen = usd.requests.lock().unwrap()[0].clone();
    assert_eq!(
        usd_seen.imp[0].bidfloor,
        Some(openrtb::Price::from_micros(1_000_000))
    );
    // Its win notice (fired by the exchange) carries 2.01 USD = 1.005 EUR, in EUR.
    assert_eq!(
        sink.settled_notices(&ex).await,
        ["/win?p=1.005&c=EUR"],
        "charged in its own currency"
    );
}

#[tokio::test]
async fn a_bid_in_a_currency_without_a_rate_is_rejected_with_its_reason() {
    let yen = bidder_in("yen", 500.0, Some("KRW")).await;
    let ex = exchange("", &[("yen", yen.endpoint())]).await;
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 204);
    let text = ex_metrics_text(&ex);
    assert!(
        text.contains(r#"gavel_exchange_bid_rejections_total{bidder="yen",reason="no_rate"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_floor_in_another_currency_is_converted_or_refused_naming_the_imp() {
    let dir = testkit::TempDir::new("floors");
    let b = bidder_in("b", 5.0, None).await;
    let with = exchange_from_toml(&with_rates(
        dir.path(),
        &format!(
            "[[bidders]]\nname = \"b\"\nendpoint = \"{}\"\n",
            b.endpoint()
        ),
    ))
    .await;
    let mut request = banner_request(0.0);
    request["imp"][0]["bidfloor"] = json!(1.0);
    request["imp"][0]["bidfloorcur"] = json!("EUR");
    let (status, _) = auction(with.addr, &request).await;
    assert_eq!(status, 200);
    let seen = b.requests.lock().unwrap()[0].clone();
    // 1.00 EUR = 2.00 USD (1 USD = 0.5 EUR).
    assert_eq!(
        seen.imp[0].bidfloor,
        Some(openrtb::Price::from_micros(2_000_000))
    );
    assert_eq!(seen.imp[0].bidfloorcur.as_deref(), Some("USD"));

    let without = exchange("", &[("b", b.endpoint())]).await;
    let (status, body) = auction(without.addr, &request).await;
    assert_eq!(status, 400);
    let message = body.unwrap()["error"].as_str().unwrap().to_owned();
    assert!(message.contains("imp[0].bidfloorcur"), "{message}");
}

fn native_without_asset_ids() -> Value {
    let native = json!({"ver": "1.2", "assets": [
        {"required": 1, "title": {"len": 90}},
        {"required": 1, "img": {"type": 3, "w": 300, "h": 250}}
    ]});
    json!({"id": "req-n", "tmax": 200,
           "imp": [{"id": "1", "native": {"request": native.to_string(), "ver": "1.2"}}],
           "site": {"domain": "news.example"},
           "device": {"ua": "UA", "geo": {"lat": 200.0, "lon": 2.35}}})
}

#[tokio::test]
async fn repair_mode_fixes_what_it_can_and_names_it_strict_mode_refuses() {
    let b = bidder_in("b", 1.0, None).await;
    let keys = testkit::TempDir::new("sellers");
    std::fs::write(keys.path().join("r.keys"), "repair-seller-key-0123456789\n").unwrap();
    std::fs::write(keys.path().join("s.keys"), "strict-seller-key-0123456789\n").unwrap();
    let ex = exchange_from_toml(&format!(
        "[[sellers]]\nname = \"r\"\nkey_file = \"{}\"\n\
         [[sellers]]\nname = \"s\"\nkey_file = \"{}\"\nvalidation = \"strict\"\n\
         [[bidders]]\nname = \"b\"\nendpoint = \"{}\"\n",
        keys.path().join("r.keys").display(),
        keys.path().join("s.keys").display(),
        b.endpoint()
    ))
    .await;
    let request = native_without_asset_ids().to_string();
    let send_as = |key: &'static str| {
        let wire = format!(
            "POST {} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{request}",
            exchange::AUCTION_PATH,
            request.len()
        );
        async move {
            let (text, _) =
                testkit::http::raw(ex.addr, wire.as_bytes(), Duration::from_secs(5)).await;
            text
        }
    };
    let repaired = send_as("repair-seller-key-0123456789").await;
    assert!(repaired.starts_with("HTTP/1.1 200"), "{repaired}");
    let named = repaired
        .lines()
        .find_map(|l| l.strip_prefix("x-gavel-repaired: "))
        .unwrap_or_else(|| panic!("no x-gavel-repaired header: {repaired}"))
        .to_owned();
    assert!(named.contains("device.geo"), "{named}");
    assert!(named.contains("imp[0].native.request"), "{named}");
    let seen = b.requests.lock().unwrap()[0].clone();
    let geo = seen.device.unwrap().geo.unwrap();
    assert_eq!(
        (geo.lat, geo.lon),
        (None, None),
        "an impossible position is dropped"
    );
    let native: Value = serde_json::from_str(
        seen.imp[0]
            .native
            .as_ref()
            .unwrap()
            .request
            .as_ref()
            .unwrap(),
    )
    .unwrap();
    let ids: Vec<&Value> = native["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert!(
        ids.iter().all(|id| id.is_u64()),
        "every asset has an id: {ids:?}"
    );
    assert_ne!(ids[0], ids[1]);

    let strict = send_as("strict-seller-key-0123456789").await;
    assert!(strict.starts_with("HTTP/1.1 400"), "{strict}");
    assert_eq!(
        b.requests.lock().unwrap().len(),
        1,
        "a refused request reaches no bidder"
    );
    let text = ex_metrics_text(&ex);
    assert!(
        text.contains("gavel_exchange_request_repairs_total{field="),
        "{text}"
    );
}

#[tokio::test]
async fn imps_past_the_cap_are_dropped_or_refused_as_configured() {
    let b = bidder_in("b", 1.0, None).await;
    let mut request = banner_request(0.1);
    request["imp"] = json!([
        {"id": "1", "banner": {"w": 300, "h": 250}},
        {"id": "2", "banner": {"w": 300, "h": 250}},
        {"id": "3", "banner": {"w": 300, "h": 250}}
    ]);
    let drop = exchange("[auction]\nmax_imps = 2\n", &[("b", b.endpoint())]).await;
    let (status, _) = auction(drop.addr, &request).await;
    assert_eq!(status, 200);
    let seen = b.requests.lock().unwrap()[0].clone();
    assert_eq!(
        seen.imp.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["1", "2"]
    );
    assert!(ex_metrics_text(&drop).contains("gavel_exchange_imps_dropped_total 1"));

    let refuse = exchange(
        "[auction]\nmax_imps = 2\nimp_overflow = \"refuse\"\n",
        &[("b", b.endpoint())],
    )
    .await;
    let (status, body) = auction(refuse.addr, &request).await;
    assert_eq!(status, 400);
    assert!(
        body.unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("limit of 2")
    );
}

/// A trusted seller's own rates convert its auctions' bids; an untrusted seller's are ignored.
#[tokio::test]
async fn a_trusted_sellers_own_rates_are_honoured_and_nobody_elses() {
    let eur = bidder_in("eur", 1.5, Some("EUR")).await;
    let keys = testkit::TempDir::new("rates-sellers");
    std::fs::write(
        keys.path().join("t.keys"),
        "trusted-seller-key-0123456789\n",
    )
    .unwrap();
    std::fs::write(
        keys.path().join("u.keys"),
        "untrusted-seller-key-012345678\n",
    )
    .unwrap();
    let ex = exchange_from_toml(&format!(
        "[[sellers]]\nname = \"t\"\nkey_file = \"{}\"\ntrusted_rates = true\n\
         [[sellers]]\nname = \"u\"\nkey_file = \"{}\"\n\
         [[bidders]]\nname = \"eur\"\nendpoint = \"{}\"\n",
        keys.path().join("t.keys").display(),
        keys.path().join("u.keys").display(),
        eur.endpoint()
    ))
    .await;
    let mut request = banner_request(0.0);
    request["ext"] = json!({"prebid": {"currency": {"rates": {"USD": {"EUR": 0.5}}}}});
    let body = request.to_string();
    let (status, answer) = testkit::http::call_as(
        ex.addr,
        "POST",
        exchange::AUCTION_PATH,
        Some("trusted-seller-key-0123456789"),
        &body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    // 1.50 EUR at 1 USD = 0.5 EUR is 3.00 USD; a first-price bid alone pays the floor plus
    // the increment, so read the original instead.
    assert_eq!(answer["seatbid"][0]["bid"][0]["ext"]["origbidcur"], "EUR");
    let (status, _) = testkit::http::call_as(
        ex.addr,
        "POST",
        exchange::AUCTION_PATH,
        Some("untrusted-seller-key-012345678"),
        &body,
    )
    .await;
    assert_eq!(
        status, 204,
        "an untrusted seller cannot set the value of bids"
    );
    let text = ex_metrics_text(&ex);
    assert!(
        text.contains(r#"gavel_exchange_bid_rejections_total{bidder="eur",reason="no_rate"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn rates_older_than_their_maximum_age_stop_converting_and_say_so() {
    let dir = testkit::TempDir::new("stale-rates");
    std::fs::write(
        dir.path().join("rates.json"),
        r#"{"dataAsOf":"2000-01-01","conversions":{"USD":{"EUR":0.5}}}"#,
    )
    .unwrap();
    let eur = bidder_in("eur", 1.5, Some("EUR")).await;
    let ex = exchange_from_toml(&format!(
        "[currency]\nrates_file = \"{}\"\nmax_age_s = 86400\n\
         [[bidders]]\nname = \"eur\"\nendpoint = \"{}\"\n",
        dir.path().join("rates.json").display(),
        eur.endpoint()
    ))
    .await;
    let (status, _) = auction(ex.addr, &banner_request(0.0)).await;
    assert_eq!(status, 204);
    let text = ex_metrics_text(&ex);
    assert!(
        text.contains(
            r#"gavel_exchange_bid_rejections_total{bidder="eur",reason="stale_rates"} 1"#
        ),
        "{text}"
    );
}

/// A server answering every GET with `body`, counting them.
async fn rates_server(
    body: &'static str,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gets = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = gets.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = stream.read(&mut buf).await;
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, gets)
}

#[tokio::test]
async fn rates_from_a_url_are_fetched_and_used() {
    let (addr, gets) = rates_server(r#"{"conversions":{"USD":{"EUR":0.5}}}"#).await;
    let eur = bidder_in("eur", 1.5, Some("EUR")).await;
    let ex = exchange_from_toml(&format!(
        "[currency]\nrates_url = \"http://{addr}/rates.json\"\n\
         [[bidders]]\nname = \"eur\"\nendpoint = \"{}\"\n",
        eur.endpoint()
    ))
    .await;
    // The first fetch starts with the exchange; wait for it (bounded), then auction.
    for _ in 0..200 {
        if gets.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut sold = false;
    for _ in 0..50 {
        let (status, _) = auction(ex.addr, &banner_request(0.0)).await;
        if status == 200 {
            sold = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        sold,
        "the EUR bid was converted with the fetched rates: {}",
        ex_metrics_text(&ex)
    );
}

/// `[currency]` is live: a reload that moves `rates_url` fetches the new one at once, drops the
/// old one's table and names nothing as waiting for a restart.
#[tokio::test]
async fn a_reload_moves_the_rates_feed() {
    let (first, first_gets) = rates_server(r#"{"conversions":{"USD":{"EUR":0.5}}}"#).await;
    let (second, second_gets) = rates_server(r#"{"conversions":{"USD":{"EUR":0.5}}}"#).await;
    let dir = testkit::TempDir::new("rates-feed");
    let path = dir.join("exchange.toml");
    let text = |addr| {
        format!(
            "open_to_all_sellers = true\n[currency]\nrates_url = \"http://{addr}/rates.json\"\nrefresh_s = 3600\n"
        )
    };
    std::fs::write(&path, text(first)).unwrap();
    let ex = exchange_from_file(&path).await;
    let fetched = |gets: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
        gets.load(std::sync::atomic::Ordering::SeqCst)
    };
    for _ in 0..200 {
        if fetched(&first_gets) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fetched(&first_gets), 1, "fetched once at start");
    std::fs::write(&path, loopback_test_config(&text(second))).unwrap();
    let report = ex.exchange.reload_from(&path).await.unwrap();
    assert!(
        report.restart_needed.is_empty(),
        "{:?}",
        report.restart_needed
    );
    for _ in 0..200 {
        if fetched(&second_gets) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fetched(&second_gets), 1, "the new URL is fetched at once");
    assert_eq!(fetched(&first_gets), 1, "and the old one no more");
}
