//! A seller that holds a keyed bidder's billing URL moves no money with it: an exchange and a
//! real bidder that share a price key, over loopback. The seller bills on render, so the
//! exchange's answer hands it the winner's `burl`, and the bidder charges on that notice
//! (`charge_on = "bill"`) and requires the exchange's price token.
//!
//! - The replay storm: every `burl` fired at once at plain prices (0, the bid, the clearing
//!   price), with its token's price changed, with another bid's token, and five times as
//!   given. Only one firing per bid charges; the bidder's books equal the exchange's to the
//!   micro, and every refusal is counted under its own label.
//! - Rotation without a restart on either side: the bidder's key file gains the new key, the
//!   exchange's key file is replaced (its watcher reloads), new tokens charge, and once the
//!   bidder drops the old key a token made with it is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use exchange::Exchange;
use openrtb::Price;
use serde_json::Value;
use testkit::TempDir;
use testkit::http::{call, call_as};
use testkit::secrets::{ADMIN_TOKEN, write_private};
use tokio::net::TcpListener;

const SELLER_KEY: &str = "price-token-seller-key-0123456789abcdef";
const KEY_A: &str = "price-key-a-0123456789abcdef0123456789abcdef0123456789";
const KEY_B: &str = "price-key-b-fedcba9876543210fedcba9876543210fedcba9876";
const AUCTIONS: usize = 12;

struct Setup {
    dir: TempDir,
    exchange: Exchange,
    auction: SocketAddr,
    bidder: bidder::Bidder,
    bidder_admin: SocketAddr,
}

/// A bidder that charges on billing notices and requires price tokens made with the keys in
/// `bidder_keys`, behind an exchange whose key file for it holds `exchange_key`.
async fn setup(bidder_keys: &[&str], exchange_key: &str) -> Setup {
    let dir = TempDir::new("price-tokens");
    dir.file(
        "campaigns.json",
        r#"[{"id": "shoes", "budget": {"total": 5}, "bid": {"cpm": 2.5}, "pacing": "asap",
            "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "<div>shoes</div>",
                           "adomain": ["shoes.example"]}]}]"#,
    );
    write_private(&dir.join("bidder-price.keys"), &bidder_keys.join("\n"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bidder_addr = listener.local_addr().unwrap();
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bidder_admin = admin_listener.local_addr().unwrap();
    let text = format!(
        "listen = \"{bidder_addr}\"\nadmin_listen = \"{bidder_admin}\"\ncampaigns = \"campaigns.json\"\n{}\
         security.price_key_file = \"bidder-price.keys\"\nsecurity.require_price_token = true\n\
         [ledger]\ncharge_on = \"bill\"\n",
        testkit::secrets::security_toml(dir.path())
    );
    let config_path = dir.file("bidder.toml", &text);
    let config = bidder::BidderConfig::load(&config_path).unwrap();
    let bidder = bidder::Bidder::start(config).await.unwrap();
    bidder.watch();
    let (serving, admin) = (bidder.clone(), bidder.clone());
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    tokio::spawn(async move {
        admin
            .serve_admin(admin_listener, std::future::pending())
            .await
    });

    write_private(&dir.join("seller.key"), SELLER_KEY);
    write_private(&dir.join("exchange-price.key"), exchange_key);
    let exchange_config = dir.file(
        "exchange.toml",
        &format!(
            "[notices]\nallow_private_addresses = true\n\
             [[sellers]]\nname = \"pub\"\nkey_file = \"seller.key\"\n\
             [[bidders]]\nname = \"gavel-bidder\"\nendpoint = \"http://{bidder_addr}{}\"\n\
             price_key_file = \"exchange-price.key\"\n",
            bidder::BID_PATH
        ),
    );
    let exchange = Exchange::new(exchange::Config::load(&exchange_config).unwrap());
    exchange.watch();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let auction = listener.local_addr().unwrap();
    let serving = exchange.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    Setup {
        dir,
        exchange,
        auction,
        bidder,
        bidder_admin,
    }
}

/// One auction; the winner's `burl` as the seller receives it.
async fn won_burl(auction: SocketAddr, n: usize) -> String {
    let request = format!(
        r#"{{"id": "req-{n}", "tmax": 500, "cur": ["USD"],
  "imp": [{{"id": "1", "banner": {{"w": 300, "h": 250}}, "bidfloor": 0.4, "bidfloorcur": "USD"}}],
  "site": {{"id": "s1", "domain": "news.example", "publisher": {{"id": "p1"}}}},
  "device": {{"devicetype": 2, "os": "iOS", "geo": {{"country": "USA"}}}}}}"#
    );
    let (status, body) = call_as(
        auction,
        "POST",
        exchange::AUCTION_PATH,
        Some(SELLER_KEY),
        &request,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let bid = &answer["seatbid"][0]["bid"][0];
    let burl = bid["burl"]
        .as_str()
        .expect("billing on render: the seller has the burl");
    assert!(!burl.contains("${"), "every macro was replaced: {burl}");
    burl.to_owned()
}

/// The `price` parameter of a notice URL.
fn price_of(url: &str) -> &str {
    url.rsplit_once("price=").map_or("", |(_, p)| p)
}

fn with_price(url: &str, price: &str) -> String {
    let (head, _) = url.rsplit_once("price=").unwrap();
    format!("{head}price={price}")
}

async fn fire(url: &str) -> u16 {
    let (addr, target) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
        .unwrap();
    testkit::http::notice(addr.parse().unwrap(), &format!("/{target}"))
        .await
        .0
}

fn metric(page: &str, name_and_labels: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name_and_labels}"))
}

async fn campaign(admin: SocketAddr) -> Value {
    let (status, body) =
        testkit::http::call_retrying(admin, "GET", "/admin/campaigns", Some(ADMIN_TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["campaigns"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seller_refiring_its_burls_at_any_other_price_moves_nothing() {
    let s = setup(&[KEY_A], KEY_A).await;
    let mut burls = Vec::new();
    for n in 0..AUCTIONS {
        burls.push(won_burl(s.auction, n).await);
    }
    for burl in &burls {
        assert!(price_token::is_token(price_of(burl)), "{burl}");
    }
    // The storm: every variant of every burl, all at once.
    let mut storm = Vec::new();
    for (n, burl) in burls.iter().enumerate() {
        let token = price_of(burl);
        let (micros, _) = token
            .strip_prefix("gp1.")
            .and_then(|t| t.split_once('.'))
            .unwrap();
        let clearing = Price::from_micros(micros.parse().unwrap());
        let plain = ["0", "2.5", &clearing.to_string()].map(|p| (with_price(burl, p), 403));
        let cheaper = with_price(burl, &token.replacen(&format!(".{micros}."), ".1.", 1));
        let other = price_of(&burls[(n + 1) % burls.len()]).to_owned();
        let forged = [(cheaper, 403), (with_price(burl, &other), 403)];
        let genuine = std::iter::repeat_n((burl.clone(), 204), 5);
        storm.extend(plain.into_iter().chain(forged).chain(genuine));
    }
    let answers = futures_util::future::join_all(storm.iter().map(|(url, _)| fire(url))).await;
    for ((url, expected), got) in storm.iter().zip(&answers) {
        assert_eq!(got, expected, "{url}");
    }
    assert_eq!(s.exchange.flush_notices(Duration::from_secs(30)).await, 0);

    // The books: what the exchange cleared for the bidder is what the bidder charged, to the
    // micro (one impression at CPM p micros costs p nanos).
    let books = s.exchange.report();
    let booked = books
        .bidders
        .iter()
        .find(|b| b.name == "gavel-bidder")
        .unwrap();
    assert_eq!(booked.wins, AUCTIONS as u64);
    let c = campaign(s.bidder_admin).await;
    assert_eq!(
        (c["wins"].as_u64(), c["nanos"]["charged_here"].as_i64()),
        (Some(booked.wins), Some(booked.cleared.micros())),
        "{c}"
    );
    assert_eq!(c["nanos"]["spent"].as_i64(), Some(booked.cleared.micros()));
    let (_, page) = call(s.bidder_admin, "GET", "/metrics", "").await;
    let n = AUCTIONS as u64;
    let refused = |why: &str| {
        metric(
            &page,
            &format!("gavel_bidder_notices_refused_total{{reason=\"{why}\"}}"),
        )
    };
    assert_eq!(refused("cleartext_price"), 3 * n);
    assert_eq!(refused("price_token_forged"), 2 * n);
    let bill = |outcome: &str| {
        metric(
            &page,
            &format!("gavel_bidder_notices_total{{kind=\"bill\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(
        (bill("charged"), bill("duplicate"), bill("conflict")),
        (n, 4 * n, 0)
    );
    // The exchange's own win notices carried tokens too: recorded, none refused.
    let win = metric(
        &page,
        "gavel_bidder_notices_total{kind=\"win\",outcome=\"recorded\"}",
    );
    assert_eq!(win, n);
    drop(s.bidder);
}

/// `POST /admin/reload` on the bidder (campaigns and price keys).
async fn reload_bidder(s: &Setup) -> (u16, String) {
    call_as(
        s.bidder_admin,
        "POST",
        "/admin/reload",
        Some(ADMIN_TOKEN),
        "",
    )
    .await
}

/// The id a key file's key goes by.
fn id_of(key: &str) -> String {
    price_token::PriceKey::new(key.as_bytes()).id()
}

fn replace_file(path: &Path, text: &str) {
    let aside = path.with_extension("new");
    write_private(&aside, text);
    std::fs::rename(&aside, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn price_keys_rotate_on_both_sides_without_a_restart() {
    let s = setup(&[KEY_A], KEY_A).await;
    let old_burl = won_burl(s.auction, 0).await;

    // 1. The bidder accepts the new key beside the old one (its watcher reads the file).
    replace_file(
        &s.dir.join("bidder-price.keys"),
        &format!("{KEY_A}\n{KEY_B}\n"),
    );
    let (status, body) = reload_bidder(&s).await;
    assert_eq!(status, 200, "{body}");
    let reloaded: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reloaded["price_keys"],
        serde_json::json!([id_of(KEY_A), id_of(KEY_B)])
    );

    // 2. The exchange signs with the new key once its key file changes: no restart, no call.
    replace_file(&s.dir.join("exchange-price.key"), KEY_B);
    let key_b = [price_token::PriceKey::new(KEY_B.as_bytes())];
    let started = std::time::Instant::now();
    let mut n = 1;
    let new_burl = loop {
        let burl = won_burl(s.auction, n).await;
        if sealed_with(&key_b, &burl) {
            break burl;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the exchange still signs with key A"
        );
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(fire(&new_burl).await, 204, "a key-B token charges");

    // 3. The bidder drops the old key: a token made with it no longer charges.
    replace_file(&s.dir.join("bidder-price.keys"), KEY_B);
    assert_eq!(reload_bidder(&s).await.0, 200);
    assert_eq!(
        fire(&old_burl).await,
        403,
        "a key-A token after key A was dropped"
    );
    let (_, page) = call(s.bidder_admin, "GET", "/metrics", "").await;
    assert_eq!(
        metric(
            &page,
            "gavel_bidder_notices_refused_total{reason=\"price_token_forged\"}"
        ),
        1
    );
}

/// Whether `burl`'s price token verifies with `keys` (the binding read from the URL itself).
fn sealed_with(keys: &[price_token::PriceKey], burl: &str) -> bool {
    let param = |name: &str| {
        burl.split(['?', '&'])
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or("")
            .to_owned()
    };
    let bound = price_token::Binding {
        auction: &param("a"),
        imp: &param("i"),
        bid: &param("r"),
        currency: "USD",
    };
    price_token::open(keys, price_of(burl), &bound, 0).is_ok()
}
