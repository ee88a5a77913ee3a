//! What the exchange changes in a request before fanning it out: its own auction id, the time
//! bidders really have left as `tmax`, and its node appended to `source.schain`. Everything else,
//! unknown fields and `ext` included, goes out as it came in.

use openrtb::{BidRequest, Source, SupplyChain, SupplyChainNode};

use crate::config::SchainConfig;

/// The seller's values that enrichment replaced, needed to answer the seller.
#[derive(Debug)]
pub struct SellerIds {
    pub request_id: String,
}

/// Rewrites `request` in place for bidders and returns the seller's request id.
///
/// `tmax_ms` is the same for every bidder: the request is encoded once for the whole fan-out,
/// and all bidders are called at the same instant.
pub fn enrich(
    request: &mut BidRequest,
    auction_id: String,
    tmax_ms: i32,
    schain: &SchainConfig,
) -> SellerIds {
    let request_id = std::mem::replace(&mut request.id, auction_id);
    request.tmax = Some(tmax_ms);
    let node = SupplyChainNode {
        asi: Some(schain.asi.clone()),
        sid: Some(schain.sid.clone()),
        rid: Some(request_id.clone()),
        hp: Some(1),
        ..Default::default()
    };
    let source = request.source.get_or_insert_with(Source::default);
    let chain = source.schain.get_or_insert_with(|| SupplyChain {
        // The exchange cannot vouch for hops before the seller that called it.
        complete: Some(0),
        ver: Some("1.0".to_owned()),
        ..Default::default()
    });
    chain.nodes.get_or_insert_with(Vec::new).push(node);
    SellerIds { request_id }
}
