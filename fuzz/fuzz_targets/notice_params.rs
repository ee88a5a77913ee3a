//! Any UTF-8 query string, as a win, billing and loss notice: `notice::parse` never panics and
//! agrees with itself and with `openrtb::query`:
//! - only a query longer than `MAX_QUERY_BYTES` is `TooLong`, and every such query is;
//! - what parses carries the first `r` (1-128 of `A-Za-z0-9-_`), the first `c` (at most 128
//!   bytes) and, for win and billing, the first `price`: a price token kept as written (it
//!   starts `gp1.` and fits `price_token::MAX_TOKEN_CHARS`), or else read by `parse_cpm`:
//!   never negative, never above `Price::MAX_CPM`; a loss notice has no price;
//! - the kinds differ only in the price: the loss verdict is reached first, win and billing
//!   give the same verdict, and a win or billing refusal after an accepted loss is `Price`;
//! - the notice URLs built from a parsed notice (`notice_urls`, a plain price written back as
//!   an exact six-decimal CPM, a token as it was) parse back to the same reservation, auction,
//!   campaign and price, and a plain one passes its own check.
//!
//! The input is also read as a bare CPM: whatever `parse_cpm` accepts is in range and
//! survives the same exact round trip.
#![no_main]

use bidder::metrics::NoticeKind;
use bidder::notice::{self, BadNotice, Checks, MAX_QUERY_BYTES, Notice};
use bidder::prices::{NoticePrice, PriceKeys};
use bidder::token::{NoticeKey, NoticeKeys};
use libfuzzer_sys::fuzz_target;
use openrtb::Price;
use openrtb::query::{parse_cpm, query_pairs};

/// The largest micros any accepted CPM may have (`Price::MAX_CPM` currency units).
const MAX_MICROS: i64 = 1_000_000_000 * Price::MICROS_PER_UNIT;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    check_cpm(query);

    let loss = notice::parse(NoticeKind::Loss, query);
    let win = notice::parse(NoticeKind::Win, query);
    let bill = notice::parse(NoticeKind::Bill, query);

    let too_long = query.len() > MAX_QUERY_BYTES;
    for verdict in [&loss, &win, &bill] {
        assert_eq!(
            matches!(verdict, Err(BadNotice::TooLong)),
            too_long,
            "{} bytes: {verdict:?}",
            query.len()
        );
        if let Err(e) = verdict {
            assert!(!e.to_string().is_empty());
        }
    }

    // Win and billing read the same parameters.
    match (&win, &bill) {
        (Ok(w), Ok(b)) => assert_eq!(
            (&w.reservation, &w.campaign, &w.price),
            (&b.reservation, &b.campaign, &b.price)
        ),
        (Err(w), Err(b)) => assert_eq!(w, b),
        _ => panic!("win {win:?} but billing {bill:?} for {query:?}"),
    }
    // The loss notice needs a subset of what a win needs.
    match (&loss, &win) {
        (Err(l), Err(w)) => assert_eq!(l, w, "{query:?}"),
        (Err(l), Ok(_)) => panic!("loss refused ({l}) but win accepted: {query:?}"),
        (Ok(_), Err(w)) => assert_eq!(*w, BadNotice::Price, "{query:?}"),
        (Ok(l), Ok(w)) => assert_eq!((&l.reservation, &l.campaign), (&w.reservation, &w.campaign)),
    }

    if too_long {
        return;
    }
    let pairs = query_pairs(query);
    let first = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    for (verdict, kind) in [
        (&loss, NoticeKind::Loss),
        (&win, NoticeKind::Win),
        (&bill, NoticeKind::Bill),
    ] {
        let Ok(n) = verdict else { continue };
        assert_eq!(n.kind, kind);
        assert_eq!(Some(n.reservation.as_str()), first("r"));
        assert!(
            (1..=128).contains(&n.reservation.len())
                && n.reservation
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "reservation {:?}",
            n.reservation
        );
        assert_eq!(n.campaign.as_deref(), first("c"));
        assert!(n.campaign.as_ref().is_none_or(|c| c.len() <= 128));
        match kind {
            NoticeKind::Loss => assert_eq!(n.price, None),
            NoticeKind::Win | NoticeKind::Bill => {
                match n
                    .price
                    .as_ref()
                    .expect("an accepted win or billing notice has a price")
                {
                    NoticePrice::Plain(price) => {
                        assert_eq!(Some(*price), first("price").and_then(parse_cpm));
                        assert!((0..=MAX_MICROS).contains(&price.micros()), "{price:?}");
                    }
                    NoticePrice::Token(token) => {
                        assert_eq!(Some(token.as_str()), first("price"));
                        assert!(price_token::is_token(token));
                        assert!(token.len() <= price_token::MAX_TOKEN_CHARS);
                    }
                }
            }
        }
    }
    if let Ok(n) = &win {
        round_trip(n);
    }
});

/// A notice's own URLs, signed, with the price written back, parse to the same notice and pass
/// their own check.
fn round_trip(n: &Notice) {
    let campaign = n.campaign.as_deref().unwrap_or("");
    let imp = n.imp.as_deref().unwrap_or("1");
    let secret = settings::Secret::new(&[9; 32], "fuzz").expect("a 32-byte key");
    let keys = NoticeKeys::new(NoticeKey::new(&secret).expect("HMAC key"), None);
    let now = units::Timestamp(1_700_000_000_000);
    let plain = match &n.price {
        Some(NoticePrice::Plain(p)) => Some(*p),
        _ => None,
    };
    let auction = n.auction.as_deref().unwrap_or("a1");
    let bid = notice::BidNotice {
        base: "http://127.0.0.1:9100",
        reservation: &n.reservation,
        auction,
        campaign,
        imp,
        max_price: plain.unwrap_or(Price::from_micros(1)),
        expires_at_s: now.0 / 1000 + 60,
    };
    let urls = notice::notice_urls(Some(&keys), &bid);
    let price = match &n.price {
        Some(NoticePrice::Plain(p)) => exact(*p),
        Some(NoticePrice::Token(t)) => t.clone(),
        None => String::new(),
    };
    let checks = Checks {
        keys: Some(&keys),
        prices: &PriceKeys::PLAIN,
        currency: "USD",
    };
    let query_of = |url: &str| {
        url.split_once('?')
            .map(|(_, q)| q.to_owned())
            .unwrap_or_default()
    };
    for (url, kind) in [
        (&urls.nurl, NoticeKind::Win),
        (&urls.burl, NoticeKind::Bill),
    ] {
        let query = query_of(url).replace("${AUCTION_PRICE}", &price);
        match notice::parse(kind, &query) {
            Ok(back) => {
                assert_eq!(back.reservation, n.reservation, "{query:?}");
                assert_eq!(back.campaign.as_deref(), Some(campaign), "{query:?}");
                assert_eq!(back.imp.as_deref(), Some(imp), "{query:?}");
                assert_eq!(back.auction.as_deref(), Some(auction), "{query:?}");
                assert_eq!(back.price, n.price, "{query:?}");
                // A token cannot pass here (no price key); a plain price must.
                if plain.is_some()
                    && let Err(e) = notice::check(&checks, &back, now)
                {
                    panic!("own URL fails its check ({e}): {query:?}");
                }
            }
            Err(e) => panic!("own URL refused ({e}): {query:?} from {n:?}"),
        }
    }
    let loss = query_of(&urls.lurl);
    if let Err(e) = notice::parse(NoticeKind::Loss, &loss) {
        panic!("own loss URL refused ({e}): {loss:?} from {n:?}");
    }
}

/// A non-negative price as an exact decimal with six places.
fn exact(p: Price) -> String {
    let m = p.micros();
    format!(
        "{}.{:06}",
        m / Price::MICROS_PER_UNIT,
        m % Price::MICROS_PER_UNIT
    )
}

/// `parse_cpm` on the whole input: in range, and exact on its own six-decimal rendering.
fn check_cpm(text: &str) {
    if text.len() > 64 {
        return;
    }
    if let Some(p) = parse_cpm(text) {
        assert!((0..=MAX_MICROS).contains(&p.micros()), "{text:?} -> {p:?}");
        assert_eq!(parse_cpm(&exact(p)), Some(p), "{text:?} -> {p:?}");
    }
}
