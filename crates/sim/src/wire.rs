//! The OpenRTB edge: a decoded [`BidRequest`] reduced to what a bidder looks at, and planned
//! bids encoded as a [`BidResponse`]. Keeping the model types here leaves the decision logic
//! (`bidder`) independent of the wire format.

use openrtb::{Bid, BidResponse, MarkupType, NoBidReason, Price, SeatBid};

use crate::bidder::RequestView;

/// One bid as the server wants it encoded.
#[derive(Clone, Debug)]
pub(crate) struct BidOut {
    pub id: String,
    pub impid: String,
    pub price: Price,
    pub adomain: Vec<String>,
    pub cat: Vec<String>,
    pub crid: String,
    pub adid: String,
    pub w: Option<i32>,
    pub h: Option<i32>,
    pub video: bool,
    pub dealid: Option<String>,
    pub nurl: String,
    pub burl: String,
    pub lurl: String,
    pub adm: Option<String>,
}

/// Decodes a bid request; the error (with its JSON path) is what the 400 answer says.
///
/// A bidder reads a handful of fields, so only those are decoded ([`lean`]) and serde skips the
/// rest without building it, as a production DSP would; it costs a fraction of the exchange's
/// lossless decode. `openrtb::decode` re-reads a refused request with path tracking, so the
/// error still names where the problem is.
pub(crate) fn decode_request(body: &[u8]) -> Result<RequestView, openrtb::DecodeError> {
    openrtb::decode::<lean::Request>(body).map(lean::Request::into_view)
}

/// The fields of a bid request the simulator reads; everything else is skipped unparsed.
mod lean {
    use openrtb::Price;
    use serde::Deserialize;

    use crate::bidder::{DealView, ImpView, Media, RequestView};

    #[derive(Deserialize)]
    pub(super) struct Request {
        id: String,
        #[serde(default)]
        cur: Option<Vec<String>>,
        imp: Vec<Imp>,
    }

    #[derive(Deserialize)]
    struct Imp {
        id: String,
        bidfloor: Option<Price>,
        bidfloorcur: Option<String>,
        banner: Option<Banner>,
        video: Option<Sized>,
        pmp: Option<Pmp>,
    }

    #[derive(Deserialize)]
    struct Banner {
        w: Option<i32>,
        h: Option<i32>,
        format: Option<Vec<Sized>>,
    }

    #[derive(Deserialize)]
    struct Sized {
        w: Option<i32>,
        h: Option<i32>,
    }

    #[derive(Deserialize)]
    struct Pmp {
        private_auction: Option<i32>,
        deals: Option<Vec<Deal>>,
    }

    #[derive(Deserialize)]
    struct Deal {
        id: Option<String>,
        bidfloor: Option<Price>,
        bidfloorcur: Option<String>,
        at: Option<i32>,
        wseat: Option<Vec<String>>,
    }

    impl Request {
        pub(super) fn into_view(self) -> RequestView {
            RequestView {
                id: self.id,
                cur: self.cur.unwrap_or_default(),
                imps: self.imp.into_iter().map(Imp::into_view).collect(),
            }
        }
    }

    impl Imp {
        fn into_view(self) -> ImpView {
            let media = if let Some(b) = self.banner {
                let (w, h) = match (b.w, b.h) {
                    (Some(w), Some(h)) => (Some(w), Some(h)),
                    _ => b
                        .format
                        .as_ref()
                        .and_then(|f| f.first())
                        .map_or((b.w, b.h), |f| (f.w, f.h)),
                };
                Media::Banner { w, h }
            } else if let Some(v) = self.video {
                Media::Video { w: v.w, h: v.h }
            } else {
                Media::Unsupported
            };
            let private_auction = self.pmp.as_ref().and_then(|p| p.private_auction) == Some(1);
            let usd =
                |cur: &Option<String>| cur.as_deref().is_none_or(|c| c.eq_ignore_ascii_case("USD"));
            let deals = self
                .pmp
                .and_then(|p| p.deals)
                .into_iter()
                .flatten()
                .filter(|d| d.id.as_deref().is_some_and(|id| !id.is_empty()) && usd(&d.bidfloorcur))
                .map(|d| DealView {
                    id: d.id.unwrap_or_default(),
                    floor: d.bidfloor.map(|f| f.max(Price::ZERO)),
                    fixed_price: d.at == Some(3),
                    wseat: d.wseat.unwrap_or_default(),
                })
                .collect();
            ImpView {
                id: self.id,
                floor: self.bidfloor.unwrap_or(Price::ZERO).max(Price::ZERO),
                floor_cur: self.bidfloorcur,
                media,
                private_auction,
                deals,
            }
        }
    }
}

pub(crate) fn encode_response(
    id: &str,
    seat: &str,
    bids: Vec<BidOut>,
) -> Result<Vec<u8>, serde_json::Error> {
    let non_empty = |v: Vec<String>| (!v.is_empty()).then_some(v);
    let bid = bids
        .into_iter()
        .map(|b| Bid {
            id: b.id,
            impid: b.impid,
            price: b.price,
            nurl: Some(b.nurl),
            burl: Some(b.burl),
            lurl: Some(b.lurl),
            adm: b.adm,
            adid: Some(b.adid),
            adomain: non_empty(b.adomain),
            crid: Some(b.crid),
            cat: non_empty(b.cat),
            dealid: b.dealid,
            w: b.w,
            h: b.h,
            mtype: Some(if b.video {
                MarkupType::VIDEO
            } else {
                MarkupType::BANNER
            }),
            ..Default::default()
        })
        .collect();
    BidResponse {
        id: id.to_owned(),
        seatbid: Some(vec![SeatBid {
            bid,
            seat: Some(seat.to_owned()),
            ..Default::default()
        }]),
        cur: Some("USD".to_owned()),
        ..Default::default()
    }
    .to_vec()
}

pub(crate) fn encode_no_bid(id: &str, nbr: NoBidReason) -> Vec<u8> {
    let resp = BidResponse {
        id: id.to_owned(),
        nbr: Some(nbr),
        ..Default::default()
    };
    // Encoding two strings and an integer cannot fail; an empty body would read as garbage.
    resp.to_vec().unwrap_or_default()
}
