//! An auction's record (`records::AuctionRecord`), built from what the auction path already
//! has: the request as the seller sent it (before the seller's floor multiplier), the
//! settlement's bids and winners, and the typed [`AuctionOutcome`]. Nothing is rebuilt from
//! metrics. Pure: the caller passes the wall clock.
//!
//! No personal data: of the request only the inventory (site domain, app bundle, publisher),
//! the country and the device's network (its address masked as privacy enforcement masks it)
//! are kept; no user, device or buyer ids.

use openrtb::BidRequest;
use records::{AuctionRecord, Blocks, Call, DealSummary, ImpSummary, Inventory};

use crate::outcome::{AuctionOutcome, BidderIx};
use crate::privacy::scrub::network_of;

/// The part of the record the request gives, taken before the seller's multiplier raises its
/// floors (a replay applies the multiplier of its own configuration).
pub(crate) fn draft(
    request: &BidRequest,
    seller: &str,
    floor_permille: u32,
    currency: &str,
    tmax_ms: Option<i64>,
) -> AuctionRecord {
    AuctionRecord {
        v: records::VERSION,
        request_id: request.id.clone(),
        seller: seller.to_owned(),
        outcome: "no_bid".into(),
        test: request.test == Some(1),
        currency: currency.to_owned(),
        at: request.at.map(|a| a.0),
        tmax_ms: tmax_ms.and_then(|t| u32::try_from(t).ok()),
        floor_permille,
        inventory: inventory(request),
        blocks: Blocks {
            bcat: request.bcat.clone().unwrap_or_default(),
            badv: request.badv.clone().unwrap_or_default(),
            wseat: request.wseat.clone().unwrap_or_default(),
            bseat: request.bseat.clone().unwrap_or_default(),
        },
        imps: request.imp.iter().map(imp_summary).collect(),
        ..AuctionRecord::default()
    }
}

fn inventory(request: &BidRequest) -> Inventory {
    let site = request.site.as_ref();
    let app = request.app.as_ref();
    let publisher = site
        .and_then(|s| s.publisher.as_ref())
        .or_else(|| app.and_then(|a| a.publisher.as_ref()));
    let device = request.device.as_ref();
    Inventory {
        site_domain: site.and_then(|s| s.domain.clone()),
        app_bundle: app.and_then(|a| a.bundle.clone()),
        publisher_id: publisher.and_then(|p| p.id.clone()),
        country: device
            .and_then(|d| d.geo.as_ref())
            .and_then(|g| g.country.clone()),
        ip_network: device.and_then(|d| {
            let ip = d.ip.as_deref().or(d.ipv6.as_deref())?;
            network_of(ip)
        }),
    }
}

fn imp_summary(imp: &openrtb::Imp) -> ImpSummary {
    let media = if imp.banner.is_some() {
        Some("banner")
    } else if imp.video.is_some() {
        Some("video")
    } else if imp.audio.is_some() {
        Some("audio")
    } else if imp.native.is_some() {
        Some("native")
    } else {
        None
    };
    let pmp = imp.pmp.as_ref();
    ImpSummary {
        id: imp.id.clone(),
        media: media.map(Into::into),
        floor_micros: imp.bidfloor.map_or(0, |f| f.micros()),
        private_auction: pmp.and_then(|p| p.private_auction) == Some(1),
        deals: pmp
            .and_then(|p| p.deals.as_deref())
            .unwrap_or(&[])
            .iter()
            .map(|d| DealSummary {
                id: d.id.clone().unwrap_or_default(),
                floor_micros: d.bidfloor.map_or(0, |f| f.micros()),
                at: d.at.map(|a| a.0),
                wseat: d.wseat.clone().unwrap_or_default(),
                wadomain: d.wadomain.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// Fills in what the auction did: the calls of every bidder (by name), privacy actions, the
/// request's outcome and its flags. `name` gives a bidder's name in this auction's roster.
pub(crate) fn complete<'a>(
    record: &mut AuctionRecord,
    outcome: &AuctionOutcome,
    name: impl Fn(BidderIx) -> &'a str,
) {
    record.outcome = outcome.request.label().into();
    record.calls = outcome
        .calls
        .iter()
        .map(|c| Call {
            bidder: name(c.bidder).to_owned(),
            outcome: c.outcome.label().into(),
            skip: c.skip.map(|s| s.label().into()),
            detail: c.detail.map(Into::into),
            took_us: c
                .took
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            privacy: outcome
                .privacy
                .iter()
                .filter(|(b, _)| *b == c.bidder)
                .map(|(_, a)| a.label().into())
                .collect(),
            not_called: outcome
                .not_called
                .iter()
                .find(|(b, _)| *b == c.bidder)
                .map(|(_, r)| r.label().into()),
        })
        .collect();
    record.repaired = outcome.repaired.iter().map(|&r| r.into()).collect();
    record.imps_dropped = outcome.imps_dropped;
    record.upgraded = outcome.upgraded;
    record.no_time_left = outcome.no_time_left;
    record.cache = outcome.cache.map(|c| c.label().into());
}
