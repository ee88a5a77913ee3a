//! Who fires each of a winner's notice URLs: the exchange, or the seller from the answer. One
//! decision per URL, so a notice is never both fired by the exchange and handed to the seller
//! (which would bill twice, or release a reservation that was won). Pure.

use crate::sellers::Seller;

/// Who fires one notice URL of a winning bid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firer {
    /// The exchange fires it; the answer does not carry it.
    Exchange,
    /// The answer carries it; the exchange does not fire it.
    Seller,
    /// Nobody: already called (markup fetched from `nurl`) or meaningless downstream (the
    /// winner's `lurl` for a seller that does not report losses). The answer does not carry it.
    Nobody,
}

/// The decision for a winner's `nurl`, `burl` and `lurl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoticePlan {
    pub nurl: Firer,
    pub burl: Firer,
    pub lurl: Firer,
}

/// `fire_nurl` is `notices.fire_nurl`; `markup_fetched`: the exchange already called `nurl`
/// to get the markup, which is the win notice.
pub fn plan(seller: &Seller, fire_nurl: bool, markup_fetched: bool) -> NoticePlan {
    let nurl = if markup_fetched {
        Firer::Nobody
    } else if seller.fires_notices || !fire_nurl {
        Firer::Seller
    } else {
        Firer::Exchange
    };
    let burl = if seller.bill_on_win && !seller.fires_notices {
        Firer::Exchange
    } else {
        // Billing on render: only the seller knows when the ad rendered.
        Firer::Seller
    };
    let lurl = if seller.fires_notices {
        // An upstream auction the seller runs may still lose this bid.
        Firer::Seller
    } else {
        Firer::Nobody
    };
    NoticePlan { nurl, burl, lurl }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Firer::{Exchange, Nobody, Seller as Downstream};

    fn seller(bill_on_win: bool, fires_notices: bool) -> Seller {
        let mut s = Seller::anonymous(bill_on_win);
        s.fires_notices = fires_notices;
        s
    }

    #[test]
    fn every_url_has_exactly_one_firer() {
        // (bill_on_win, fires_notices, fire_nurl, fetched) -> (nurl, burl, lurl)
        let table = [
            ((false, false, true, false), (Exchange, Downstream, Nobody)),
            ((true, false, true, false), (Exchange, Exchange, Nobody)),
            ((false, false, true, true), (Nobody, Downstream, Nobody)),
            ((true, false, false, false), (Downstream, Exchange, Nobody)),
            (
                (false, true, true, false),
                (Downstream, Downstream, Downstream),
            ),
            ((false, true, true, true), (Nobody, Downstream, Downstream)),
            // Config refuses bill_on_win with fires_notices; the plan still never doubles.
            (
                (true, true, true, false),
                (Downstream, Downstream, Downstream),
            ),
        ];
        for ((bill, fires, fire_nurl, fetched), (nurl, burl, lurl)) in table {
            let p = plan(&seller(bill, fires), fire_nurl, fetched);
            assert_eq!(
                p,
                NoticePlan { nurl, burl, lurl },
                "bill_on_win={bill} fires_notices={fires} fire_nurl={fire_nurl} fetched={fetched}"
            );
        }
    }
}
