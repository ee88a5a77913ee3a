//! Synthetic campaigns and bid requests for benches and tests: seeded, deterministic, with
//! targeting shaped like a real DSP's book (most campaigns geo-targeted, popular IAB sizes,
//! some device, domain, segment, hour and deal targeting; a few campaigns out of flight).
//!
//! Campaigns are generated as [`CampaignSpec`]s and validated like a file would be, so every
//! generated campaign is one a file could hold.

use openrtb::{
    App, AuctionType, BidRequest, Data, Deal, Device, DeviceType, Format, Geo, Imp, Pmp, Price,
    Protocol, Publisher, Segment, Site, User, Video,
};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use units::Timestamp;

use campaigns::{
    BidSpec, BudgetSpec, Campaign, CampaignSpec, CreativeSpec, FlightSpec, PacingModeConfig,
    TargetingSpec, TimestampText, VideoSpec,
};

/// The decision time synthetic flights are laid out around: 2025-03-01T12:00:00Z.
pub const NOW: Timestamp = Timestamp(1_740_830_400_000);

const COUNTRIES: &[&str] = &[
    "USA", "GBR", "DEU", "FRA", "CAN", "ESP", "ITA", "JPN", "BRA", "MEX", "AUS", "IND", "NLD",
    "POL", "SWE", "KOR", "TUR", "ARG", "BEL", "CHE",
];
const REGIONS: &[&str] = &["CA", "NY", "TX", "FL", "WA", "IDF", "BY", "ON", "QC", "NSW"];
/// IAB common ad units, most used first.
const SIZES: &[(i32, i32)] = &[
    (300, 250),
    (728, 90),
    (320, 50),
    (300, 600),
    (160, 600),
    (970, 250),
    (320, 100),
    (336, 280),
    (468, 60),
    (970, 90),
    (300, 50),
    (250, 250),
];
const OS: &[&str] = &["ios", "android", "windows", "macos", "linux"];
const REQUEST_OS: &[&str] = &["iOS", "Android", "Windows", "macOS", "Linux", "tvOS"];
const MIMES: &[&str] = &["video/mp4", "video/webm", "application/javascript"];
const DURATIONS: &[i64] = &[6, 15, 30, 60];
const PROTOCOLS: &[i32] = &[2, 3, 5, 6, 7, 8];
const STARTS: &[&str] = &[
    "2025-01-01T00:00:00Z",
    "2025-02-15T08:00:00Z",
    "2025-03-01T00:00:00Z",
    "2025-03-02T00:00:00Z",
];
const ENDS: &[&str] = &[
    "2025-03-01T06:00:00Z",
    "2025-03-31T23:59:59Z",
    "2025-06-30T00:00:00Z",
    "2026-01-01T00:00:00Z",
];

/// How large the value pools are: large for realistic selectivity, small (`dense`) so that
/// random campaigns and requests collide often in tests.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    domains: usize,
    publishers: usize,
    segments: usize,
    deals: usize,
    countries: usize,
    /// Scales the chance that a campaign restricts each dimension other than country (1.0:
    /// the realistic mix).
    targeted: f64,
}

impl Profile {
    pub const REALISTIC: Profile = Profile {
        domains: 5_000,
        publishers: 500,
        segments: 2_000,
        deals: 500,
        countries: COUNTRIES.len(),
        targeted: 1.0,
    };
    /// Broadly targeted campaigns in few countries: a typical impression matches about 7% of
    /// them, the case where ranking, not matching, dominates a decision.
    pub const BROAD: Profile = Profile {
        domains: 5_000,
        publishers: 500,
        segments: 2_000,
        deals: 500,
        countries: 3,
        targeted: 0.3,
    };
    pub const DENSE: Profile = Profile {
        domains: 12,
        publishers: 6,
        segments: 10,
        deals: 5,
        countries: 4,
        targeted: 1.0,
    };
}

/// `n` valid campaigns (ids `c0`, `c1`...) from `seed`; same arguments, same campaigns.
pub fn synthetic(n: usize, seed: u64) -> Vec<Campaign> {
    synthetic_with(n, seed, Profile::REALISTIC)
}

/// `n` bid requests from `seed` drawing on the same value pools as [`synthetic`].
pub fn synthetic_requests(n: usize, seed: u64) -> Vec<BidRequest> {
    synthetic_requests_with(n, seed, Profile::REALISTIC)
}

/// `n` broadly targeted campaigns from `seed` ([`Profile::BROAD`]): few countries, little
/// other targeting, so that about 7% of them match an impression of
/// [`synthetic_requests_broad`].
pub fn synthetic_broad(n: usize, seed: u64) -> Vec<Campaign> {
    synthetic_with(n, seed, Profile::BROAD)
}

/// `n` bid requests from `seed` for [`synthetic_broad`] campaigns.
pub fn synthetic_requests_broad(n: usize, seed: u64) -> Vec<BidRequest> {
    synthetic_requests_with(n, seed, Profile::BROAD)
}

pub fn synthetic_with(n: usize, seed: u64, profile: Profile) -> Vec<Campaign> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .filter_map(|i| Campaign::from_spec(campaign_spec(&mut rng, i, &profile), i).ok())
        .collect()
}

pub fn synthetic_requests_with(n: usize, seed: u64, profile: Profile) -> Vec<BidRequest> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    (0..n).map(|i| request(&mut rng, i, &profile)).collect()
}

/// An index in `0..n` skewed toward 0 (popular values first).
fn skewed(rng: &mut SmallRng, n: usize) -> usize {
    let u: f64 = rng.random();
    // u^2 in [0, 1), so the product is in [0, n).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = (u * u * n as f64) as usize;
    i.min(n.saturating_sub(1))
}

fn chance(rng: &mut SmallRng, p: f64) -> bool {
    rng.random_bool(p.clamp(0.0, 1.0))
}

fn some_of<T>(rng: &mut SmallRng, count: usize, mut one: impl FnMut(&mut SmallRng) -> T) -> Vec<T> {
    (0..count.max(1)).map(|_| one(rng)).collect()
}

fn domain(k: usize) -> String {
    format!("site{k}.example")
}

fn campaign_spec(rng: &mut SmallRng, i: usize, p: &Profile) -> CampaignSpec {
    let countries = chance(rng, 0.95).then(|| {
        let count = rng.random_range(1..=2);
        some_of(rng, count, |r| COUNTRIES[skewed(r, p.countries)].to_owned())
    });
    let regions = chance(rng, 0.05 * p.targeted).then(|| {
        let count = rng.random_range(1..=3);
        some_of(rng, count, |r| REGIONS[skewed(r, REGIONS.len())].to_owned())
    });
    let device_types = chance(rng, 0.7 * p.targeted).then(|| {
        let count = rng.random_range(1..=2);
        some_of(rng, count, |r| r.random_range(1..=7))
    });
    let os = chance(rng, 0.25 * p.targeted).then(|| {
        let count = rng.random_range(1..=2);
        some_of(rng, count, |r| OS[skewed(r, OS.len())].to_owned())
    });
    let domains = chance(rng, 0.2 * p.targeted).then(|| {
        let count = rng.random_range(1..=(p.domains / 100).clamp(2, 50));
        some_of(rng, count, |r| domain(skewed(r, p.domains)))
    });
    let block_domains = chance(rng, 0.2 * p.targeted).then(|| {
        let count = rng.random_range(1..=(p.domains / 250).clamp(2, 20));
        some_of(rng, count, |r| domain(r.random_range(0..p.domains)))
    });
    let publishers = chance(rng, 0.08 * p.targeted).then(|| {
        let count = rng.random_range(1..=3);
        some_of(rng, count, |r| format!("pub-{}", skewed(r, p.publishers)))
    });
    let categories = chance(rng, 0.15 * p.targeted).then(|| {
        let count = rng.random_range(1..=3);
        some_of(rng, count, |r| format!("IAB{}", r.random_range(1..=26)))
    });
    let sizes = chance(rng, 0.05 * p.targeted).then(|| {
        let count = rng.random_range(1..=4);
        some_of(rng, count, |r| {
            let (w, h) = SIZES[skewed(r, SIZES.len())];
            format!("{w}x{h}")
        })
    });
    let deals = chance(rng, 0.1 * p.targeted).then(|| {
        let count = rng.random_range(1..=2);
        some_of(rng, count, |r| format!("deal-{}", skewed(r, p.deals)))
    });
    let hours = chance(rng, 0.3 * p.targeted).then(|| {
        let from: i64 = rng.random_range(0..24);
        let len: i64 = rng.random_range(4..=16);
        (0..len).map(|k| (from + k) % 24).collect()
    });
    let segments = chance(rng, 0.4 * p.targeted).then(|| {
        let count = rng.random_range(1..=5);
        some_of(rng, count, |r| format!("seg-{}", skewed(r, p.segments)))
    });

    let brand = format!("brand{}.example", rng.random_range(0..1000));
    let n_creatives = rng.random_range(1..=3);
    let creatives = (0..n_creatives)
        .map(|j| {
            let video = chance(rng, 0.15).then(|| VideoSpec {
                mimes: vec![MIMES[skewed(rng, MIMES.len())].to_owned()],
                duration: *DURATIONS.choose(rng).unwrap_or(&15),
                protocols: if chance(rng, 0.7) {
                    let count = rng.random_range(1..=3);
                    some_of(rng, count, |r| *PROTOCOLS.choose(r).unwrap_or(&3))
                } else {
                    Vec::new()
                },
            });
            let (w, h) = if video.is_some() {
                (None, None)
            } else {
                let (w, h) = SIZES[skewed(rng, SIZES.len())];
                (Some(i64::from(w)), Some(i64::from(h)))
            };
            let cat = (0..rng.random_range(0..=2))
                .map(|_| format!("IAB{}-{}", rng.random_range(1..=26), rng.random_range(1..=5)))
                .collect();
            CreativeSpec {
                id: format!("c{i}-cr{j}"),
                w,
                h,
                video,
                adm: format!("<a href=\"https://{brand}/\"><img src=\"https://cdn.{brand}/{i}-{j}.png\"></a><img src=\"https://t.{brand}/imp?p=${{AUCTION_PRICE}}\">"),
                cat,
                adomain: None,
            }
        })
        .collect();

    let cpm = f64::from(rng.random_range(50u32..=1_000)) / 100.0;
    let total = f64::from(rng.random_range(100u32..=10_000));
    let flight = if chance(rng, 0.9) {
        FlightSpec {
            start: chance(rng, 0.8)
                .then(|| TimestampText(STARTS[rng.random_range(0..3)].to_owned())),
            end: chance(rng, 0.8).then(|| TimestampText(ENDS[rng.random_range(1..4)].to_owned())),
        }
    } else if chance(rng, 0.5) {
        // Ended before NOW.
        FlightSpec {
            start: Some(TimestampText(STARTS[0].to_owned())),
            end: Some(TimestampText(ENDS[0].to_owned())),
        }
    } else {
        // Starts after NOW.
        FlightSpec {
            start: Some(TimestampText(STARTS[3].to_owned())),
            end: Some(TimestampText(ENDS[2].to_owned())),
        }
    };
    CampaignSpec {
        id: format!("c{i}"),
        adomain: vec![brand],
        creatives,
        targeting: TargetingSpec {
            countries,
            regions,
            device_types,
            os,
            domains,
            block_domains,
            publishers,
            categories,
            sizes,
            deals,
            hours,
            segments,
        },
        bid: BidSpec {
            cpm,
            max_cpm: chance(rng, 0.2).then_some(cpm * 1.5),
            shading: chance(rng, 0.3).then(|| f64::from(rng.random_range(50u32..=95)) / 100.0),
        },
        budget: BudgetSpec {
            total,
            daily: chance(rng, 0.3).then(|| total / 10.0),
        },
        flight,
        pacing: if chance(rng, 0.5) {
            PacingModeConfig::Even
        } else {
            PacingModeConfig::Asap
        },
    }
}

fn price(micros: i64) -> Option<Price> {
    Some(Price::from_micros(micros))
}

fn request(rng: &mut SmallRng, i: usize, p: &Profile) -> BidRequest {
    let n_imps = if chance(rng, 0.7) { 1 } else { 2 };
    let imp = (0..n_imps).map(|k| impression(rng, k, p)).collect();
    let publisher = Some(Publisher {
        id: Some(format!("pub-{}", skewed(rng, p.publishers))),
        ..Default::default()
    });
    let cats = chance(rng, 0.6).then(|| {
        let count = rng.random_range(1..=3);
        some_of(rng, count, |r| format!("IAB{}", r.random_range(1..=26)))
    });
    let (site, app) = if chance(rng, 0.7) {
        let k = skewed(rng, p.domains);
        let host = match rng.random_range(0..3) {
            0 => domain(k),
            1 => format!("www.{}", domain(k)),
            _ => format!("News.{}", domain(k)),
        };
        let site = Site {
            domain: chance(rng, 0.9).then(|| host.clone()),
            page: Some(format!("https://{host}/article/{i}")),
            cat: cats,
            publisher,
            ..Default::default()
        };
        (Some(site), None)
    } else {
        let k = skewed(rng, p.domains);
        let app = App {
            bundle: Some(format!("com.example.app{k}")),
            domain: chance(rng, 0.5).then(|| domain(k)),
            cat: cats,
            publisher,
            ..Default::default()
        };
        (None, Some(app))
    };
    let geo = chance(rng, 0.95).then(|| Geo {
        country: Some(COUNTRIES[skewed(rng, p.countries)].to_owned()),
        region: chance(rng, 0.6).then(|| REGIONS[skewed(rng, REGIONS.len())].to_owned()),
        utcoffset: chance(rng, 0.7).then(|| rng.random_range(-16..=18) * 30),
        ..Default::default()
    });
    let device = Some(Device {
        geo,
        devicetype: chance(rng, 0.9).then(|| DeviceType(rng.random_range(1..=7))),
        os: chance(rng, 0.9).then(|| REQUEST_OS[skewed(rng, REQUEST_OS.len())].to_owned()),
        ..Default::default()
    });
    let segments: Vec<Segment> = (0..rng.random_range(0..=6))
        .map(|_| Segment {
            id: Some(format!("seg-{}", skewed(rng, p.segments))),
            ..Default::default()
        })
        .collect();
    let user = Some(User {
        data: (!segments.is_empty()).then(|| {
            vec![Data {
                id: Some("dmp".to_owned()),
                segment: Some(segments),
                ..Default::default()
            }]
        }),
        ..Default::default()
    });
    BidRequest {
        id: format!("req-{i}"),
        imp,
        site,
        app,
        device,
        user,
        at: Some(if chance(rng, 0.5) {
            AuctionType::FIRST_PRICE
        } else {
            AuctionType::SECOND_PRICE_PLUS
        }),
        bcat: chance(rng, 0.3).then(|| vec![format!("IAB{}", rng.random_range(1..=26))]),
        badv: chance(rng, 0.2).then(|| vec![format!("brand{}.example", rng.random_range(0..1000))]),
        ..Default::default()
    }
}

fn impression(rng: &mut SmallRng, k: usize, p: &Profile) -> Imp {
    let mut imp = Imp {
        id: (k + 1).to_string(),
        bidfloor: chance(rng, 0.8)
            .then(|| rng.random_range(0..3_000_000))
            .and_then(price),
        ..Default::default()
    };
    if chance(rng, 0.8) {
        let n = rng.random_range(1..=3);
        let format = some_of(rng, n, |r| {
            let (w, h) = SIZES[skewed(r, SIZES.len())];
            Format {
                w: Some(w),
                h: Some(h),
                ..Default::default()
            }
        });
        imp.banner = Some(openrtb::Banner {
            format: Some(format),
            ..Default::default()
        });
    } else {
        imp.video = Some(Video {
            mimes: Some(vec!["video/mp4".to_owned(), "video/webm".to_owned()]),
            minduration: Some(5),
            maxduration: Some(if chance(rng, 0.5) { 30 } else { 60 }),
            protocols: chance(rng, 0.8).then(|| vec![Protocol(2), Protocol(3), Protocol(7)]),
            w: Some(640),
            h: Some(480),
            ..Default::default()
        });
    }
    if chance(rng, 0.15) {
        let n = rng.random_range(1..=2);
        let mut deals = some_of(rng, n, |r| Deal {
            id: Some(format!("deal-{}", skewed(r, p.deals))),
            bidfloor: price(r.random_range(500_000..5_000_000)),
            at: chance(r, 0.3).then_some(AuctionType::FIXED_PRICE),
            ..Default::default()
        });
        // Deal ids are unique within an imp (OpenRTB 2.6, 3.2.12); a repeat draw is dropped.
        let mut seen = std::collections::HashSet::new();
        deals.retain(|d| seen.insert(d.id.clone()));
        imp.pmp = Some(Pmp {
            private_auction: Some(i32::from(chance(rng, 0.5))),
            deals: Some(deals),
            ..Default::default()
        });
    }
    imp
}
