//! The bidding brain: from a request (reduced to what a bidder looks at) and a profile to a
//! seeded decision. Pure: no I/O, no clock, no shared state.

use std::time::Duration;

use openrtb::{NoBidReason, Price};
use rand::RngExt;

use crate::dist::{Fnv, request_rng};
use crate::profile::{BidderProfile, Markup};

/// The parts of a bid request a simulated bidder uses.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestView {
    pub id: String,
    /// `BidRequest.cur`; empty = any (the spec's default is USD).
    pub cur: Vec<String>,
    pub imps: Vec<ImpView>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ImpView {
    pub id: String,
    /// `bidfloor`, zero when absent (negative floors are treated as zero).
    pub floor: Price,
    /// `bidfloorcur`; `None` = USD.
    pub floor_cur: Option<String>,
    pub media: Media,
    /// `pmp.private_auction == 1`: only deal bids are allowed.
    pub private_auction: bool,
    pub deals: Vec<DealView>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Media {
    Banner {
        w: Option<i32>,
        h: Option<i32>,
    },
    Video {
        w: Option<i32>,
        h: Option<i32>,
    },
    /// Neither banner nor video (native, audio, or nothing): the simulator does not bid.
    #[default]
    Unsupported,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct DealView {
    pub id: String,
    /// `Deal.bidfloor`; when absent the imp floor applies.
    pub floor: Option<Price>,
    /// `Deal.at == 3`: the floor is the fixed deal price.
    pub fixed_price: bool,
    /// `Deal.wseat`; empty = any seat.
    pub wseat: Vec<String>,
}

impl RequestView {
    /// The request's identity for seeding: its id and its imp ids, in order.
    pub fn identity_hash(&self) -> u64 {
        let mut h = Fnv::new();
        h.write(self.id.as_bytes());
        for imp in &self.imps {
            h.write(imp.id.as_bytes());
        }
        h.finish()
    }
}

/// What the bidder will do with one request, and after how long.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub latency: Duration,
    pub decision: Decision,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision {
    /// HTTP 500.
    Error,
    /// Hold the request, never answer.
    NoAnswer,
    /// 200 with the garbage body of this index into [`GARBAGE`].
    Garbage(usize),
    /// 204, or 200 with this `nbr`.
    NoBid(NoBidReason),
    /// At least one bid.
    Bids(Vec<PlannedBid>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlannedBid {
    pub imp_id: String,
    pub bid_id: String,
    pub price: Price,
    pub dealid: Option<String>,
    pub media: Media,
    /// Markup served on the win notice instead of in `adm`.
    pub on_win_notice: bool,
    /// Which of the bidder's creatives (1..=3).
    pub creative: u32,
}

/// Bodies answered with status 200 that are not a BidResponse: broken JSON, wrong shapes,
/// a proxy's HTML page, a typed-wrong price, binary noise.
pub(crate) const GARBAGE: &[&[u8]] = &[
    b"<html><body><h1>502 Bad Gateway</h1></body></html>",
    b"{\"id\": \"truncated",
    b"[1, 2, 3]",
    b"{\"seatbid\": 42}",
    b"{\"id\":\"x\",\"seatbid\":[{\"bid\":[{\"id\":\"1\",\"impid\":\"1\",\"price\":\"abc\"}]}]}",
    b"\x00\x01\x02\xffnot json",
];

/// Decides one request. Randomness comes only from the request RNG, drawn in a fixed order:
/// fault, latency, garbage variant, then per imp (bid?, price, deal?, which deal, markup,
/// creative). The same (seed, index, request) always gives the same plan.
///
/// Floors: the sampled price is the bidder's valuation. Open-auction bids below the imp floor
/// are dropped (no bid on that imp) unless `ignore_floor`; a bidder never bids above its
/// valuation there. A bid on a deal is raised to the deal floor if the valuation is below it
/// (the buyer agreed to the deal's price), and is exactly the floor for fixed-price deals.
pub(crate) fn decide(profile: &BidderProfile, seed: u64, index: usize, req: &RequestView) -> Plan {
    let hash = req.identity_hash();
    let mut rng = request_rng(seed, index, hash);
    let fault: f64 = rng.random();
    let latency = profile.latency.sample(&mut rng);
    let plan = |decision| Plan { latency, decision };

    // One uniform for the three faults, so the rates are exact shares of requests.
    let mut edge = profile.error_rate;
    if fault < edge {
        return plan(Decision::Error);
    }
    edge += profile.no_answer_rate;
    if fault < edge {
        return plan(Decision::NoAnswer);
    }
    edge += profile.garbage_rate;
    if fault < edge {
        return plan(Decision::Garbage(rng.random_range(0..GARBAGE.len())));
    }

    let usd = |c: &str| c.eq_ignore_ascii_case("USD");
    if !req.cur.is_empty() && !req.cur.iter().any(|c| usd(c)) {
        return plan(Decision::NoBid(NoBidReason::INVALID_REQUEST));
    }

    let seat = profile.seat_name();
    let mut bids = Vec::new();
    for (i, imp) in req.imps.iter().enumerate() {
        if imp.media == Media::Unsupported || imp.floor_cur.as_deref().is_some_and(|c| !usd(c)) {
            continue;
        }
        if rng.random::<f64>() >= profile.bid_probability {
            continue;
        }
        let value = profile.price.sample(&mut rng);
        let eligible: Vec<&DealView> = imp
            .deals
            .iter()
            .filter(|d| d.wseat.is_empty() || d.wseat.iter().any(|s| s == seat))
            .collect();
        let on_deal = !eligible.is_empty() && rng.random::<f64>() < profile.deal_rate;
        let (price, dealid) = if on_deal {
            let deal = eligible[rng.random_range(0..eligible.len())];
            let floor = deal.floor.unwrap_or(imp.floor);
            let price = match deal.floor {
                Some(f) if deal.fixed_price => f,
                _ => value.max(floor),
            };
            (price, Some(deal.id.clone()))
        } else {
            if imp.private_auction || (value < imp.floor && !profile.ignore_floor) {
                continue;
            }
            (value, None)
        };
        let on_win_notice = match profile.markup {
            Markup::Inline => false,
            Markup::OnWinNotice => true,
            Markup::Mix(share) => rng.random::<f64>() < share,
        };
        let creative = rng.random_range(1..=3);
        // A zero price is not a bid (a fixed 0 CPM profile, or a free deal).
        if !price.is_positive() {
            continue;
        }
        bids.push(PlannedBid {
            imp_id: imp.id.clone(),
            bid_id: format!("{}-{hash:016x}-{i}", profile.name),
            price,
            dealid,
            media: imp.media,
            on_win_notice,
            creative,
        });
    }
    if bids.is_empty() {
        plan(Decision::NoBid(NoBidReason::UNMATCHED_USER))
    } else {
        plan(Decision::Bids(bids))
    }
}

/// The creative id of a bid.
pub(crate) fn crid(profile_name: &str, creative: u32) -> String {
    format!("{profile_name}-cr{creative}")
}

/// Keeps `[A-Za-z0-9._-]`, replaces everything else: values echoed from notice URLs into
/// markup must not be able to inject HTML or XML.
fn sanitize(s: &str) -> String {
    s.chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Creative markup: an HTML snippet for banners, a minimal VAST 4.0 inline ad for video.
/// `bid_id` and `name` are sanitized, so values taken from a notice URL are safe to pass.
pub(crate) fn markup(name: &str, bid_id: &str, creative: u32, media: Media) -> String {
    let (name, bid_id) = (sanitize(name), sanitize(bid_id));
    let crid = crid(&name, creative);
    let dim = |v: Option<i32>, d: i32| v.filter(|x| *x > 0).unwrap_or(d);
    match media {
        Media::Video { w, h } => format!(
            "<VAST version=\"4.0\"><Ad id=\"{bid_id}\"><InLine><AdSystem>gavel-sim</AdSystem>\
             <AdTitle>{name}</AdTitle><Impression><![CDATA[https://ads.{name}.example/imp/{bid_id}]]>\
             </Impression><Creatives><Creative id=\"{crid}\"><Linear><Duration>00:00:15</Duration>\
             <MediaFiles><MediaFile delivery=\"progressive\" type=\"video/mp4\" width=\"{}\" \
             height=\"{}\"><![CDATA[https://ads.{name}.example/{crid}.mp4]]></MediaFile>\
             </MediaFiles></Linear></Creative></Creatives></InLine></Ad></VAST>",
            dim(w, 640),
            dim(h, 480),
        ),
        Media::Banner { .. } | Media::Unsupported => banner(&name, &bid_id, &crid, media),
    }
}

fn banner(name: &str, bid_id: &str, crid: &str, media: Media) -> String {
    let (w, h) = match media {
        Media::Banner { w, h } => (w, h),
        Media::Video { .. } | Media::Unsupported => (None, None),
    };
    let dim = |v: Option<i32>, d: i32| v.filter(|x| *x > 0).unwrap_or(d);
    format!(
        "<div class=\"gavel-sim-ad\" data-bidder=\"{name}\" data-bid=\"{bid_id}\">\
         <a href=\"https://{name}.example/\"><img src=\"https://ads.{name}.example/{crid}.png\" \
         width=\"{}\" height=\"{}\" alt=\"\"></a></div>",
        dim(w, 300),
        dim(h, 250),
    )
}

/// The `adm` query value that tells the win-notice handler which markup to serve:
/// `banner.300x250.2` / `video.640x480.1` (sizes 0 when unknown).
pub(crate) fn adm_token(media: Media, creative: u32) -> String {
    let (kind, w, h) = match media {
        Media::Video { w, h } => ("video", w, h),
        Media::Banner { w, h } => ("banner", w, h),
        Media::Unsupported => ("banner", None, None),
    };
    format!("{kind}.{}x{}.{creative}", w.unwrap_or(0), h.unwrap_or(0))
}

/// Inverse of [`adm_token`], lenient: anything unparsable yields a default banner.
pub(crate) fn parse_adm_token(token: &str) -> (Media, u32) {
    let mut parts = token.split('.');
    let kind = parts.next().unwrap_or("banner");
    let (w, h) = parts
        .next()
        .and_then(|wh| wh.split_once('x'))
        .map(|(w, h)| {
            (
                w.parse().ok().filter(|v| *v > 0),
                h.parse().ok().filter(|v| *v > 0),
            )
        })
        .unwrap_or((None, None));
    let creative = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
    let media = if kind == "video" {
        Media::Video { w, h }
    } else {
        Media::Banner { w, h }
    };
    (media, creative)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::PriceDist;

    fn req(imps: Vec<ImpView>) -> RequestView {
        RequestView {
            id: "r1".into(),
            cur: vec![],
            imps,
        }
    }

    fn banner_imp(id: &str, floor_micros: i64) -> ImpView {
        ImpView {
            id: id.into(),
            floor: Price::from_micros(floor_micros),
            media: Media::Banner {
                w: Some(300),
                h: Some(250),
            },
            ..Default::default()
        }
    }

    fn bids(plan: Plan) -> Vec<PlannedBid> {
        match plan.decision {
            Decision::Bids(b) => b,
            other => panic!("expected bids, got {other:?}"),
        }
    }

    #[test]
    fn below_floor_means_no_bid_unless_ignored() {
        let p = BidderProfile::instant("a", 1.0);
        let plan = decide(&p, 1, 0, &req(vec![banner_imp("1", 1_500_000)]));
        assert_eq!(plan.decision, Decision::NoBid(NoBidReason::UNMATCHED_USER));
        let at_floor = bids(decide(&p, 1, 0, &req(vec![banner_imp("1", 1_000_000)])));
        assert_eq!(at_floor[0].price, Price::from_micros(1_000_000));
        let rogue = BidderProfile {
            ignore_floor: true,
            ..p
        };
        let b = bids(decide(&rogue, 1, 0, &req(vec![banner_imp("1", 1_500_000)])));
        assert_eq!(b[0].price, Price::from_micros(1_000_000));
    }

    #[test]
    fn deals_respect_floor_wseat_and_private_auction() {
        let p = BidderProfile {
            deal_rate: 1.0,
            ..BidderProfile::instant("a", 1.0)
        };
        let deal = |id: &str, floor: i64, wseat: &[&str]| DealView {
            id: id.into(),
            floor: Some(Price::from_micros(floor)),
            fixed_price: false,
            wseat: wseat.iter().map(|s| s.to_string()).collect(),
        };
        let imp = ImpView {
            private_auction: true,
            deals: vec![
                deal("other", 9_000_000, &["b"]),
                deal("mine", 2_500_000, &["a"]),
            ],
            ..banner_imp("1", 30_000)
        };
        let b = bids(decide(&p, 1, 0, &req(vec![imp.clone()])));
        assert_eq!(b[0].dealid.as_deref(), Some("mine"));
        assert_eq!(b[0].price, Price::from_micros(2_500_000));

        // No deal for this seat in a private auction: no bid.
        let closed = ImpView {
            deals: vec![deal("other", 1, &["b"])],
            ..imp
        };
        assert!(matches!(
            decide(&p, 1, 0, &req(vec![closed])).decision,
            Decision::NoBid(_)
        ));
    }

    #[test]
    fn fixed_price_deal_bids_the_deal_price() {
        let p = BidderProfile {
            deal_rate: 1.0,
            ..BidderProfile::instant("a", 5.0)
        };
        let imp = ImpView {
            deals: vec![DealView {
                id: "d".into(),
                floor: Some(Price::from_micros(2_000_000)),
                fixed_price: true,
                wseat: vec![],
            }],
            ..banner_imp("1", 0)
        };
        let b = bids(decide(&p, 1, 0, &req(vec![imp])));
        assert_eq!(b[0].price, Price::from_micros(2_000_000));
    }

    #[test]
    fn same_inputs_same_plan_and_rates_roughly_hold() {
        let p = BidderProfile {
            bid_probability: 0.5,
            error_rate: 0.1,
            price: PriceDist::LogNormal {
                median: 1.0,
                p99: 5.0,
            },
            ..BidderProfile::instant("a", 1.0)
        };
        let mut errors = 0;
        let mut bids_n = 0;
        for i in 0..2000 {
            let r = RequestView {
                id: format!("req-{i}"),
                ..req(vec![banner_imp("1", 0)])
            };
            let plan = decide(&p, 9, 3, &r);
            assert_eq!(plan, decide(&p, 9, 3, &r));
            match plan.decision {
                Decision::Error => errors += 1,
                Decision::Bids(_) => bids_n += 1,
                _ => {}
            }
        }
        assert!((150..250).contains(&errors), "{errors}");
        assert!((800..1000).contains(&bids_n), "{bids_n}");
    }

    #[test]
    fn unsupported_media_and_foreign_currency_are_skipped() {
        let p = BidderProfile::instant("a", 1.0);
        let native = ImpView {
            media: Media::Unsupported,
            ..banner_imp("1", 0)
        };
        assert!(matches!(
            decide(&p, 1, 0, &req(vec![native])).decision,
            Decision::NoBid(_)
        ));
        let eur = ImpView {
            floor_cur: Some("EUR".into()),
            ..banner_imp("1", 0)
        };
        assert!(matches!(
            decide(&p, 1, 0, &req(vec![eur])).decision,
            Decision::NoBid(_)
        ));
        let r = RequestView {
            cur: vec!["EUR".into()],
            ..req(vec![banner_imp("1", 0)])
        };
        assert_eq!(
            decide(&p, 1, 0, &r).decision,
            Decision::NoBid(NoBidReason::INVALID_REQUEST)
        );
    }

    #[test]
    fn adm_tokens_round_trip_and_markup_is_sanitized() {
        let m = Media::Video {
            w: Some(640),
            h: Some(360),
        };
        assert_eq!(parse_adm_token(&adm_token(m, 2)), (m, 2));
        assert_eq!(
            parse_adm_token("junk"),
            (Media::Banner { w: None, h: None }, 1)
        );
        let html = markup("a", "<script>", 1, Media::Banner { w: None, h: None });
        assert!(!html.contains("<script>"));
        assert!(html.contains("width=\"300\""));
    }
}
