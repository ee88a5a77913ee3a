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

impl NoticePlan {
    /// Who decides whether a winner with these URLs is charged, as its record says
    /// (`billing_by`): the firer of its billing notice when it has a `burl` (the seller, when
    /// billing is on render), else of its win notice (a bidder without `burl` charges on the
    /// win; a `nurl` called for the markup was called by the exchange); `None` with neither.
    pub fn billing_by(&self, has_nurl: bool, has_burl: bool) -> Option<&'static str> {
        let firer = match (has_burl, has_nurl) {
            (true, _) => self.burl,
            (false, true) => self.nurl,
            (false, false) => return None,
        };
        Some(match firer {
            Firer::Seller => "seller",
            Firer::Exchange | Firer::Nobody => "exchange",
        })
    }
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
    fn billing_is_by_whoever_fires_the_billing_notice() {
        // Billing on render: the exchange fires the win notice, the seller the billing one.
        let on_render = plan(&seller(false, false), true, false);
        assert_eq!(on_render.billing_by(true, true), Some("seller"));
        // Without a burl the win notice charges, and the exchange fires it.
        assert_eq!(on_render.billing_by(true, false), Some("exchange"));
        let on_win = plan(&seller(true, false), true, false);
        assert_eq!(on_win.billing_by(true, true), Some("exchange"));
        // The markup fetched from nurl: the exchange called the win notice.
        let fetched = plan(&seller(false, false), true, true);
        assert_eq!(fetched.billing_by(true, false), Some("exchange"));
        assert_eq!(on_win.billing_by(false, false), None);
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
