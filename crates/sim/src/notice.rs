//! Win / billing / loss notice parsing and macro detection (query strings and prices: `openrtb::query`).

use openrtb::query::{parse_cpm, query_pairs};

use crate::stats::{Notice, NoticeKind};

fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Parses one notice. `bad` is set when any value still holds a `${` macro (raw or
/// percent-encoded), when a win or bill notice has no parsable `price`, or when a present
/// `price` or `loss` does not parse.
pub fn parse_notice(bidder: &str, kind: NoticeKind, query: &str) -> Notice {
    let pairs = query_pairs(query);
    let unreplaced = query.contains("${")
        || pairs
            .iter()
            .any(|(k, v)| k.contains("${") || v.contains("${"));
    // A loss notice's price is empty when the exchange does not tell losers the clearing
    // price: OpenRTB 2.6 section 4.4 removes a macro whose value is not available.
    let price_text = param(&pairs, "price").filter(|t| !(t.is_empty() && kind == NoticeKind::Loss));
    let price = price_text.and_then(parse_cpm);
    let loss_text = param(&pairs, "loss");
    let loss = loss_text.and_then(|l| l.trim().parse::<i32>().ok());
    let price_bad = match (price_text, price) {
        (Some(_), None) => true,
        (None, _) => kind != NoticeKind::Loss,
        (Some(_), Some(_)) => false,
    };
    let loss_bad = loss_text.is_some() && loss.is_none();
    let owned = |key| param(&pairs, key).map(str::to_owned);
    Notice {
        bidder: bidder.to_owned(),
        kind,
        query: query.to_owned(),
        price,
        bid_price: param(&pairs, "bid_price").and_then(parse_cpm),
        auction: owned("auction"),
        imp: owned("imp"),
        bid: owned("bid"),
        cur: owned("cur"),
        loss,
        bad: unreplaced || price_bad || loss_bad,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openrtb::Price;

    #[test]
    fn notices() {
        let n = parse_notice(
            "b",
            NoticeKind::Win,
            "auction=a1&imp=1&bid=x&price=1.23&cur=USD",
        );
        assert!(!n.bad);
        assert_eq!(n.price, Some(Price::from_micros(1_230_000)));
        assert_eq!(n.auction.as_deref(), Some("a1"));

        assert!(parse_notice("b", NoticeKind::Win, "price=${AUCTION_PRICE}").bad);
        assert!(parse_notice("b", NoticeKind::Win, "price=1&auction=%24%7BAUCTION_ID%7D").bad);
        assert!(parse_notice("b", NoticeKind::Bill, "auction=1").bad);
        assert!(parse_notice("b", NoticeKind::Bill, "price=x").bad);
        assert!(!parse_notice("b", NoticeKind::Loss, "auction=1&loss=102").bad);
        assert!(parse_notice("b", NoticeKind::Loss, "loss=${AUCTION_LOSS}").bad);
        assert!(parse_notice("b", NoticeKind::Loss, "loss=x").bad);
        assert!(parse_notice("b", NoticeKind::Win, "").bad);
        // Undisclosed (removed) price: fine on a loss notice, not on a win or billing one.
        let undisclosed = parse_notice("b", NoticeKind::Loss, "auction=1&price=&loss=102");
        assert!(!undisclosed.bad);
        assert_eq!(undisclosed.price, None);
        assert!(parse_notice("b", NoticeKind::Win, "auction=1&price=").bad);
        assert!(parse_notice("b", NoticeKind::Bill, "price=").bad);
    }
}
