//! The OpenRTB edge: a decoded [`BidRequest`] reduced to what a bidder looks at, and planned
//! bids encoded as a [`BidResponse`]. Keeping the model types here leaves the decision logic
//! (`bidder`) independent of the wire format.

use openrtb::{
    AuctionType, Bid, BidRequest, BidResponse, Imp, MarkupType, NoBidReason, Price, SeatBid,
};

use crate::bidder::{DealView, ImpView, Media, RequestView};

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
pub(crate) fn decode_request(body: &[u8]) -> Result<RequestView, openrtb::DecodeError> {
    let req = BidRequest::from_slice(body)?;
    Ok(RequestView {
        cur: req.cur.unwrap_or_default(),
        imps: req.imp.iter().map(imp_view).collect(),
        id: req.id,
    })
}

fn imp_view(imp: &Imp) -> ImpView {
    let media = if let Some(b) = &imp.banner {
        // `w`/`h` when both are given, else the first format (the preferred size).
        let (w, h) = match (b.w, b.h) {
            (Some(w), Some(h)) => (Some(w), Some(h)),
            _ => b
                .format
                .as_ref()
                .and_then(|f| f.first())
                .map_or((b.w, b.h), |f| (f.w, f.h)),
        };
        Media::Banner { w, h }
    } else if let Some(v) = &imp.video {
        Media::Video { w: v.w, h: v.h }
    } else {
        Media::Unsupported
    };
    let pmp = imp.pmp.as_ref();
    let usd = |cur: &Option<String>| cur.as_deref().is_none_or(|c| c.eq_ignore_ascii_case("USD"));
    let deals = pmp
        .and_then(|p| p.deals.as_ref())
        .into_iter()
        .flatten()
        // A deal without an id cannot be referenced by `dealid`; a deal floor in another
        // currency cannot be compared (the simulator only bids USD).
        .filter(|d| d.id.as_deref().is_some_and(|id| !id.is_empty()) && usd(&d.bidfloorcur))
        .map(|d| DealView {
            id: d.id.clone().unwrap_or_default(),
            floor: d.bidfloor.map(|f| f.max(Price::ZERO)),
            fixed_price: d.at == Some(AuctionType::FIXED_PRICE),
            wseat: d.wseat.clone().unwrap_or_default(),
        })
        .collect();
    ImpView {
        id: imp.id.clone(),
        floor: imp.bidfloor.unwrap_or(Price::ZERO).max(Price::ZERO),
        floor_cur: imp.bidfloorcur.clone(),
        media,
        private_auction: pmp.and_then(|p| p.private_auction) == Some(1),
        deals,
    }
}

pub(crate) fn encode_response(
    id: &str,
    seat: &str,
    bids: &[BidOut],
) -> Result<Vec<u8>, serde_json::Error> {
    let non_empty = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    let bid = bids
        .iter()
        .map(|b| Bid {
            id: b.id.clone(),
            impid: b.impid.clone(),
            price: b.price,
            nurl: Some(b.nurl.clone()),
            burl: Some(b.burl.clone()),
            lurl: Some(b.lurl.clone()),
            adm: b.adm.clone(),
            adid: Some(b.adid.clone()),
            adomain: non_empty(&b.adomain),
            crid: Some(b.crid.clone()),
            cat: non_empty(&b.cat),
            dealid: b.dealid.clone(),
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
