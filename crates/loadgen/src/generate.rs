//! A seeded generator of varied, realistic OpenRTB 2.6 bid requests.
//!
//! Shares (per request unless said otherwise): about 60 % site / 40 % app traffic; one
//! impression 80 %, two 15 %, three 5 %; per impression banner 70 % (multi-size `format`
//! lists of common sizes), video 20 %, native 10 %; floors log-uniform over 0.05–5.00 USD
//! (median near 0.50; video and native higher); a PMP with 1–2 deals on 15 %; GDPR consent
//! in the EU and the UK, US privacy / GPP strings in the US; a supply chain of 1–2 nodes on
//! every request; `eids` on 40 %; `bcat` 30 %, `badv` 20 %. Serialized requests are mostly
//! 1–3 KB.
//!
//! Everything, including the request id, comes from the caller's RNG and `seq`: the same RNG
//! state gives the same request. Names, domains and identifiers are made up.

use rand::RngExt;
use serde_json::{Map, Value, json};

/// One bid request. `seq` makes the `id` unique within a run (its low 48 bits are the last
/// group of the UUID-shaped id); `tmax_ms` is copied to `tmax`.
pub fn request(rng: &mut impl RngExt, seq: u64, tmax_ms: u32) -> Value {
    let id = format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        rng.random::<u32>(),
        rng.random::<u16>(),
        rng.random::<u16>() & 0xfff,
        0x8000 | (rng.random::<u16>() & 0x3fff),
        seq & 0xffff_ffff_ffff
    );
    let place = *weighted(rng, PLACES);
    let is_app = rng.random_bool(0.4);

    let mut req = Map::new();
    req.insert("id".into(), Value::String(id.clone()));

    // Inventory first: an app fixes the platform, a site picks any device.
    let (inventory, device_kind) = if is_app {
        let app = pick(rng, APPS);
        let kind = if rng.random_bool(0.8) {
            Kind::Phone
        } else {
            Kind::Tablet
        };
        (app_object(rng, app), (kind, Some(app.platform)))
    } else {
        let kind = *weighted(
            rng,
            &[(Kind::Desktop, 45), (Kind::Phone, 45), (Kind::Tablet, 10)],
        );
        let site = pick(rng, SITES);
        (site_object(rng, site, kind), (kind, None))
    };
    let device = pick_device(rng, device_kind.0, device_kind.1);

    let n_imp = *weighted(rng, &[(1usize, 80), (2, 15), (3, 5)]);
    let with_pmp = rng.random_bool(0.15);
    let imps: Vec<Value> = (0..n_imp)
        .map(|i| imp(rng, i, device_kind.0, is_app, with_pmp && i == 0))
        .collect();
    req.insert("imp".into(), Value::Array(imps));
    req.insert((if is_app { "app" } else { "site" }).into(), inventory);
    req.insert("device".into(), device_object(rng, device, place, is_app));

    let consent = place.gdpr.then(|| crate::consent::pick(rng));
    req.insert("user".into(), user_object(rng, consent));
    req.insert("regs".into(), regs_object(rng, place, consent));
    req.insert("source".into(), source_object(rng));
    req.insert("tmax".into(), json!(tmax_ms));
    req.insert("cur".into(), json!(["USD"]));
    req.insert(
        "at".into(),
        json!(if rng.random_bool(0.85) { 2 } else { 1 }),
    );
    if rng.random_bool(0.3) {
        let n = rng.random_range(2..=5);
        req.insert("bcat".into(), json!(sample(rng, BLOCKED_CATS, n)));
    }
    if rng.random_bool(0.2) {
        let n = rng.random_range(1..=3);
        req.insert("badv".into(), json!(sample(rng, BLOCKED_ADV, n)));
    }
    Value::Object(req)
}

/// A fixed, rich request of about 2.5 KB (a site page with a banner and a video
/// impression, a deal, full device and geo, consent, extended ids and a 2-node supply chain),
/// for benchmarks that want one representative body.
pub fn realistic_2_5k() -> Vec<u8> {
    let req = json!({
        "id": "7f3c2a10-5b8e-4d21-9a6f-00000000002a",
        "imp": [
            {
                "id": "1",
                "tagid": "article-top-leaderboard",
                "secure": 1,
                "bidfloor": 0.85,
                "bidfloorcur": "USD",
                "exp": 300,
                "banner": {
                    "format": [{"w": 728, "h": 90}, {"w": 970, "h": 250}, {"w": 970, "h": 90}],
                    "w": 728,
                    "h": 90,
                    "pos": 1,
                    "battr": [1, 3, 8, 9, 10, 14],
                    "api": [3, 5, 6]
                },
                "pmp": {
                    "private_auction": 0,
                    "deals": [
                        {"id": "DL-AUTO-Q3-00417", "bidfloor": 2.4, "bidfloorcur": "USD", "at": 1,
                         "wseat": ["seat-4471", "seat-9021"]},
                        {"id": "DL-PG-FIXED-0098", "bidfloor": 6.5, "bidfloorcur": "USD", "at": 3}
                    ]
                }
            },
            {
                "id": "2",
                "tagid": "article-inline-video",
                "secure": 1,
                "bidfloor": 3.1,
                "bidfloorcur": "USD",
                "video": {
                    "mimes": ["video/mp4", "video/webm", "application/javascript"],
                    "minduration": 5,
                    "maxduration": 30,
                    "protocols": [2, 3, 5, 6, 7, 8],
                    "w": 640,
                    "h": 360,
                    "startdelay": 0,
                    "plcmt": 2,
                    "linearity": 1,
                    "skip": 1,
                    "skipafter": 5,
                    "playbackmethod": [6],
                    "api": [2, 7],
                    "pos": 1
                }
            }
        ],
        "site": {
            "id": "site-20417",
            "name": "Daily Harbor",
            "domain": "dailyharbor.com",
            "cat": ["IAB12", "IAB12-2"],
            "page": "https://dailyharbor.com/business/markets/quarterly-earnings-preview-2291",
            "ref": "https://www.google.com/",
            "privacypolicy": 1,
            "mobile": 0,
            "keywords": "markets,earnings,stocks,economy",
            "publisher": {"id": "pub-8821", "name": "Harbor Media Group", "domain": "harbormedia.com"}
        },
        "device": {
            "ua": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
            "sua": {
                "browsers": [
                    {"brand": "Not/A)Brand", "version": ["8"]},
                    {"brand": "Chromium", "version": ["126"]},
                    {"brand": "Google Chrome", "version": ["126"]}
                ],
                "platform": {"brand": "Windows", "version": ["10", "0", "0"]},
                "mobile": 0,
                "source": 2
            },
            "ip": "73.158.42.17",
            "devicetype": 2,
            "os": "Windows",
            "osv": "10",
            "h": 1080,
            "w": 1920,
            "js": 1,
            "language": "en",
            "connectiontype": 2,
            "geo": {
                "country": "USA",
                "region": "NY",
                "city": "New York",
                "zip": "10013",
                "lat": 40.7209,
                "lon": -74.0048,
                "type": 2,
                "ipservice": 3,
                "utcoffset": -300
            }
        },
        "user": {
            "id": "3f9d5c1e8a7b4e02b6c4d9a1f0e2c7b8",
            "buyeruid": "u-5d1f0a9c3e7b42d8",
            "eids": [
                {"source": "id5-sync.com", "uids": [{"id": "ID5*Vb3Xo0dK9mQ2sT7uY1zR4wP8nL6cF5gH", "atype": 1}]},
                {"source": "uidapi.com", "uids": [{"id": "A4AAAAx9Lq2hV7pN3kR8tW1yZ6cB0dF5gJ", "atype": 3}]}
            ]
        },
        "regs": {"gdpr": 0, "us_privacy": "1YNN", "gpp": "DBABLA~BVQqAAAAAgA.QA", "gpp_sid": [7]},
        "source": {
            "tid": "b2e8f6d4-1c3a-4f5e-8d7b-9a0c2e4f6a8b",
            "schain": {
                "complete": 1,
                "ver": "1.0",
                "nodes": [
                    {"asi": "harbormedia.com", "sid": "pub-8821", "hp": 1},
                    {"asi": "exchange-one.com", "sid": "7731", "hp": 1, "rid": "7f3c2a10-5b8e-4d21"}
                ]
            }
        },
        "tmax": 120,
        "cur": ["USD"],
        "at": 2,
        "bcat": ["IAB25", "IAB26", "IAB7-39", "IAB8-18"],
        "badv": ["rival-brand.com", "blocked-advertiser.net"]
    });
    serde_json::to_vec(&req).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Helpers

fn pick<'a, T>(rng: &mut impl RngExt, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn weighted<'a, T>(rng: &mut impl RngExt, items: &'a [(T, u32)]) -> &'a T {
    let total: u32 = items.iter().map(|(_, w)| w).sum();
    let mut x = rng.random_range(0..total);
    for (item, w) in items {
        if x < *w {
            return item;
        }
        x -= w;
    }
    &items[items.len() - 1].0
}

/// `n` distinct items (fewer if the slice is shorter), in slice order.
fn sample<T: Copy>(rng: &mut impl RngExt, items: &[T], n: usize) -> Vec<T> {
    let n = n.min(items.len());
    let mut chosen = vec![false; items.len()];
    let mut left = n;
    while left > 0 {
        let i = rng.random_range(0..items.len());
        if !chosen[i] {
            chosen[i] = true;
            left -= 1;
        }
    }
    items
        .iter()
        .zip(chosen)
        .filter_map(|(t, c)| c.then_some(*t))
        .collect()
}

fn hex(rng: &mut impl RngExt, len: usize) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    (0..len)
        .map(|_| DIGITS[rng.random_range(0..16)] as char)
        .collect()
}

fn b64url(rng: &mut impl RngExt, len: usize) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..len)
        .map(|_| DIGITS[rng.random_range(0..64)] as char)
        .collect()
}

fn uuid(rng: &mut impl RngExt) -> String {
    format!(
        "{}-{}-4{}-{:x}{}-{}",
        hex(rng, 8),
        hex(rng, 4),
        hex(rng, 3),
        rng.random_range(8..12u8),
        hex(rng, 3),
        hex(rng, 12)
    )
}

/// `x` moved by up to ±0.08°, 4 decimals.
fn jitter(rng: &mut impl RngExt, x: f64) -> f64 {
    ((x + rng.random_range(-0.08..0.08)) * 10_000.0).round() / 10_000.0
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Log-uniform over `lo..hi`: many cheap floors, a long tail of expensive ones.
fn log_uniform(rng: &mut impl RngExt, lo: f64, hi: f64) -> f64 {
    (rng.random_range(lo.ln()..hi.ln())).exp()
}

// ---------------------------------------------------------------------------------------
// Inventory

struct Site {
    id: &'static str,
    domain: &'static str,
    name: &'static str,
    cat: &'static [&'static str],
    sections: &'static [&'static str],
    publisher: (&'static str, &'static str),
}

const SITES: &[Site] = &[
    Site {
        id: "site-20417",
        domain: "dailyharbor.com",
        name: "Daily Harbor",
        cat: &["IAB12"],
        sections: &["world", "politics", "business/markets", "local"],
        publisher: ("pub-8821", "Harbor Media Group"),
    },
    Site {
        id: "site-31022",
        domain: "kitchenfolio.com",
        name: "Kitchen Folio",
        cat: &["IAB8", "IAB8-5"],
        sections: &["recipes", "baking", "weeknight-dinners"],
        publisher: ("pub-1307", "Folio Publishing"),
    },
    Site {
        id: "site-18873",
        domain: "gridironwire.com",
        name: "Gridiron Wire",
        cat: &["IAB17", "IAB17-12"],
        sections: &["nfl", "college", "fantasy"],
        publisher: ("pub-5520", "Wire Sports Network"),
    },
    Site {
        id: "site-40561",
        domain: "pixelpatch.net",
        name: "Pixel Patch",
        cat: &["IAB19"],
        sections: &["reviews", "how-to", "news"],
        publisher: ("pub-0934", "Patch Digital"),
    },
    Site {
        id: "site-27705",
        domain: "wanderlogjournal.com",
        name: "Wanderlog Journal",
        cat: &["IAB20"],
        sections: &["destinations", "tips", "deals"],
        publisher: ("pub-4411", "Journal Travel Media"),
    },
    Site {
        id: "site-12290",
        domain: "marketsledger.com",
        name: "Markets Ledger",
        cat: &["IAB13", "IAB13-7"],
        sections: &["stocks", "crypto", "personal-finance"],
        publisher: ("pub-2290", "Ledger Financial Press"),
    },
    Site {
        id: "site-35518",
        domain: "stylecanvas.co",
        name: "Style Canvas",
        cat: &["IAB18"],
        sections: &["trends", "beauty", "shopping"],
        publisher: ("pub-7765", "Canvas Lifestyle"),
    },
    Site {
        id: "site-22931",
        domain: "autotorque.com",
        name: "Auto Torque",
        cat: &["IAB2"],
        sections: &["reviews", "ev", "buying-guide"],
        publisher: ("pub-3318", "Torque Media"),
    },
    Site {
        id: "site-16602",
        domain: "homeandhearth.com",
        name: "Home & Hearth",
        cat: &["IAB10"],
        sections: &["diy", "garden", "decor"],
        publisher: ("pub-6602", "Hearth Living"),
    },
    Site {
        id: "site-49143",
        domain: "playtrail.gg",
        name: "PlayTrail",
        cat: &["IAB9-30"],
        sections: &["guides", "esports", "patch-notes"],
        publisher: ("pub-9143", "Trail Gaming"),
    },
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Platform {
    Android,
    Ios,
}

struct App {
    id: &'static str,
    bundle: &'static str,
    name: &'static str,
    cat: &'static [&'static str],
    platform: Platform,
    publisher: (&'static str, &'static str),
}

const APPS: &[App] = &[
    App {
        id: "app-7101",
        bundle: "com.puzzlecraft.blocks",
        name: "Block Puzzle Craft",
        cat: &["IAB9-30"],
        platform: Platform::Android,
        publisher: ("pub-app-221", "PuzzleCraft Studio"),
    },
    App {
        id: "app-7102",
        bundle: "1482312345",
        name: "Weather Radar Daily",
        cat: &["IAB15", "IAB15-10"],
        platform: Platform::Ios,
        publisher: ("pub-app-118", "Skyline Apps"),
    },
    App {
        id: "app-7103",
        bundle: "com.stridefit.tracker",
        name: "Stride Fitness Tracker",
        cat: &["IAB7"],
        platform: Platform::Android,
        publisher: ("pub-app-305", "Stride Labs"),
    },
    App {
        id: "app-7104",
        bundle: "com.newsloop.reader",
        name: "NewsLoop",
        cat: &["IAB12"],
        platform: Platform::Android,
        publisher: ("pub-app-412", "Loop Media"),
    },
    App {
        id: "app-7105",
        bundle: "1590012345",
        name: "Solitaire Cove",
        cat: &["IAB9-30", "IAB9-7"],
        platform: Platform::Ios,
        publisher: ("pub-app-507", "Cove Games"),
    },
    App {
        id: "app-7106",
        bundle: "com.snapchef.recipes",
        name: "SnapChef Recipes",
        cat: &["IAB8"],
        platform: Platform::Android,
        publisher: ("pub-app-633", "SnapChef"),
    },
    App {
        id: "app-7107",
        bundle: "1377054321",
        name: "Metro Transit Live",
        cat: &["IAB20", "IAB20-3"],
        platform: Platform::Ios,
        publisher: ("pub-app-744", "Transit Tools"),
    },
];

const SLUG_WORDS: &[&str] = &[
    "best", "guide", "review", "new", "how", "why", "update", "season", "top", "city", "price",
    "week", "inside", "first", "look", "report", "tips", "plan",
];

fn site_object(rng: &mut impl RngExt, site: &Site, kind: Kind) -> Value {
    let section = pick(rng, site.sections);
    let slug: Vec<&str> = (0..rng.random_range(3..=6))
        .map(|_| *pick(rng, SLUG_WORDS))
        .collect();
    let page = format!(
        "https://{}/{section}/{}-{}",
        site.domain,
        slug.join("-"),
        rng.random_range(1000..99_999)
    );
    let mut o = json!({
        "id": site.id,
        "name": site.name,
        "domain": site.domain,
        "cat": site.cat,
        "page": page,
        "privacypolicy": 1,
        "mobile": u8::from(kind != Kind::Desktop),
        "publisher": {
            "id": site.publisher.0,
            "name": site.publisher.1,
            "domain": site.domain,
        },
    });
    if rng.random_bool(0.5) {
        let r = *pick(
            rng,
            &[
                "https://www.google.com/",
                "https://www.bing.com/",
                "https://news.example-aggregator.com/",
                "https://t.co/",
            ],
        );
        o["ref"] = json!(r);
    }
    if rng.random_bool(0.3) {
        o["keywords"] = json!(sample(rng, SLUG_WORDS, 3).join(","));
    }
    o
}

fn app_object(rng: &mut impl RngExt, app: &App) -> Value {
    let storeurl = match app.platform {
        Platform::Ios => format!("https://apps.apple.com/app/id{}", app.bundle),
        Platform::Android => format!(
            "https://play.google.com/store/apps/details?id={}",
            app.bundle
        ),
    };
    json!({
        "id": app.id,
        "name": app.name,
        "bundle": app.bundle,
        "storeurl": storeurl,
        "ver": format!("{}.{}.{}", rng.random_range(1..9), rng.random_range(0..20), rng.random_range(0..10)),
        "cat": app.cat,
        "paid": 0,
        "privacypolicy": 1,
        "publisher": {"id": app.publisher.0, "name": app.publisher.1},
    })
}

// ---------------------------------------------------------------------------------------
// Impressions

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Desktop,
    Phone,
    Tablet,
}

const DESKTOP_SIZES: &[(&[(u32, u32)], u32)] = &[
    (&[(300, 250)], 25),
    (&[(300, 250), (300, 600)], 15),
    (&[(728, 90)], 15),
    (&[(728, 90), (970, 250)], 15),
    (&[(970, 250)], 5),
    (&[(160, 600), (300, 600)], 10),
    (&[(300, 600), (300, 250), (160, 600)], 15),
];
const PHONE_SIZES: &[(&[(u32, u32)], u32)] = &[
    (&[(320, 50)], 40),
    (&[(300, 250)], 25),
    (&[(320, 50), (300, 250)], 20),
    (&[(320, 480)], 15),
];
const TABLET_SIZES: &[(&[(u32, u32)], u32)] = &[
    (&[(728, 90)], 35),
    (&[(300, 250)], 35),
    (&[(320, 480)], 15),
    (&[(300, 250), (728, 90)], 15),
];

fn imp(rng: &mut impl RngExt, index: usize, kind: Kind, is_app: bool, with_pmp: bool) -> Value {
    let format = *weighted(rng, &[(0u8, 70), (1, 20), (2, 10)]);
    let mut floor = log_uniform(rng, 0.05, 5.0);
    let mut o = Map::new();
    o.insert("id".into(), json!((index + 1).to_string()));
    match format {
        0 => {
            let table = match kind {
                Kind::Desktop => DESKTOP_SIZES,
                Kind::Phone => PHONE_SIZES,
                Kind::Tablet => TABLET_SIZES,
            };
            let sizes = *weighted(rng, table);
            let (w, h) = sizes[0];
            let instl = (w, h) == (320, 480);
            o.insert(
                "tagid".into(),
                json!(format!(
                    "{}-{w}x{h}-{}",
                    if instl { "interstitial" } else { "display" },
                    index + 1
                )),
            );
            let mut banner = json!({
                "format": sizes.iter().map(|&(w, h)| json!({"w": w, "h": h})).collect::<Vec<_>>(),
                "w": w,
                "h": h,
                "pos": *weighted(rng, &[(1u8, 50), (3, 25), (0, 25)]),
            });
            if is_app {
                banner["api"] = json!([3, 5, 7]);
            }
            if rng.random_bool(0.4) {
                banner["battr"] = json!(sample(rng, &[1u8, 2, 3, 6, 8, 9, 10, 14], 3));
            }
            o.insert("banner".into(), banner);
            if instl {
                o.insert("instl".into(), json!(1));
            }
        }
        1 => {
            floor = (floor * 3.0).min(5.0);
            let (w, h) = *pick(
                rng,
                &[(640u32, 360u32), (1280, 720), (1920, 1080), (400, 300)],
            );
            let maxduration = *pick(rng, &[15u32, 30, 30, 60]);
            let plcmt = if is_app {
                *pick(rng, &[3u8, 4])
            } else {
                *pick(rng, &[1u8, 2, 2, 4])
            };
            let mut video = json!({
                "mimes": if rng.random_bool(0.5) {
                    json!(["video/mp4", "video/webm", "application/javascript"])
                } else {
                    json!(["video/mp4"])
                },
                "minduration": *pick(rng, &[0u32, 5, 6]),
                "maxduration": maxduration,
                "protocols": [2, 3, 5, 6, 7, 8],
                "w": w,
                "h": h,
                "startdelay": if plcmt == 1 { *pick(rng, &[0i32, -1, -2]) } else { 0 },
                "plcmt": plcmt,
                "linearity": 1,
                "playbackmethod": [*pick(rng, &[1u8, 2, 6])],
                "api": [2, 7],
                "pos": *pick(rng, &[1u8, 7, 0]),
            });
            if rng.random_bool(0.5) {
                video["skip"] = json!(1);
                video["skipafter"] = json!(5);
            }
            o.insert("tagid".into(), json!(format!("video-{}", index + 1)));
            o.insert("video".into(), video);
            if is_app && rng.random_bool(0.25) {
                o.insert("rwdd".into(), json!(1));
            }
        }
        _ => {
            floor = (floor * 1.5).min(5.0);
            let request = pick(rng, NATIVE_REQUESTS);
            o.insert("tagid".into(), json!(format!("native-feed-{}", index + 1)));
            o.insert(
                "native".into(),
                json!({"request": request, "ver": "1.2", "api": [3, 5]}),
            );
        }
    }
    let floor = cents(floor).max(0.05);
    o.insert("bidfloor".into(), json!(floor));
    o.insert("bidfloorcur".into(), json!("USD"));
    o.insert("secure".into(), json!(u8::from(rng.random_bool(0.95))));
    if is_app {
        let (dm, v) = *pick(
            rng,
            &[
                ("GoogleMobileAds", "23.2.0"),
                ("AppLovin", "12.6.1"),
                ("ironSource", "8.2.0"),
            ],
        );
        o.insert("displaymanager".into(), json!(dm));
        o.insert("displaymanagerver".into(), json!(v));
    }
    if rng.random_bool(0.3) {
        o.insert("exp".into(), json!(300));
    }
    if with_pmp {
        o.insert("pmp".into(), pmp(rng, floor));
    }
    Value::Object(o)
}

const NATIVE_REQUESTS: &[&str] = &[
    r#"{"ver":"1.2","context":1,"contextsubtype":10,"plcmttype":1,"plcmtcnt":1,"assets":[{"id":1,"required":1,"title":{"len":90}},{"id":2,"required":1,"img":{"type":3,"wmin":600,"hmin":314}},{"id":3,"img":{"type":1,"w":80,"h":80}},{"id":4,"required":1,"data":{"type":1,"len":25}},{"id":5,"data":{"type":2,"len":140}}],"eventtrackers":[{"event":1,"methods":[1,2]}],"privacy":1}"#,
    r#"{"ver":"1.2","context":2,"plcmttype":4,"assets":[{"id":1,"required":1,"title":{"len":50}},{"id":2,"required":1,"img":{"type":3,"w":1200,"h":627}},{"id":3,"required":1,"data":{"type":12,"len":15}}],"eventtrackers":[{"event":1,"methods":[1]}]}"#,
    r#"{"ver":"1.2","context":1,"plcmttype":2,"assets":[{"id":1,"required":1,"title":{"len":70}},{"id":2,"img":{"type":3,"wmin":300,"hmin":250}},{"id":3,"data":{"type":2,"len":120}},{"id":4,"data":{"type":3}}]}"#,
];

fn pmp(rng: &mut impl RngExt, imp_floor: f64) -> Value {
    let n = *weighted(rng, &[(1usize, 70), (2, 30)]);
    let deals: Vec<Value> = (0..n)
        .map(|_| {
            let mut d = json!({
                "id": format!("DL-{}-{:05}", pick(rng, &["AUTO", "RETAIL", "FIN", "TRAVEL", "PG", "CPG"]), rng.random_range(0..100_000)),
                "bidfloor": cents(imp_floor * rng.random_range(1.2..3.0)),
                "bidfloorcur": "USD",
            });
            match *weighted(rng, &[(0u8, 60), (1, 25), (3, 15)]) {
                0 => {}
                at => d["at"] = json!(at),
            }
            if rng.random_bool(0.4) {
                d["wseat"] = json!([format!("seat-{}", rng.random_range(1000..9999))]);
            }
            d
        })
        .collect();
    json!({
        "private_auction": u8::from(rng.random_bool(0.35)),
        "deals": deals,
    })
}

// ---------------------------------------------------------------------------------------
// Device and geography

#[derive(Clone, Copy)]
struct Place {
    country: &'static str,
    region: &'static str,
    city: &'static str,
    lat: f64,
    lon: f64,
    utcoffset: i32,
    language: &'static str,
    gdpr: bool,
    us: bool,
}

const fn place(
    country: &'static str,
    region: &'static str,
    city: &'static str,
    lat: f64,
    lon: f64,
    utcoffset: i32,
    language: &'static str,
) -> Place {
    let gdpr = matches!(
        country.as_bytes(),
        b"GBR" | b"DEU" | b"FRA" | b"ESP" | b"ITA" | b"NLD"
    );
    let us = matches!(country.as_bytes(), b"USA");
    Place {
        country,
        region,
        city,
        lat,
        lon,
        utcoffset,
        language,
        gdpr,
        us,
    }
}

const PLACES: &[(Place, u32)] = &[
    (place("USA", "NY", "New York", 40.71, -74.01, -300, "en"), 9),
    (
        place("USA", "CA", "Los Angeles", 34.05, -118.24, -480, "en"),
        8,
    ),
    (place("USA", "IL", "Chicago", 41.88, -87.63, -360, "en"), 6),
    (place("USA", "TX", "Houston", 29.76, -95.37, -360, "en"), 6),
    (place("USA", "WA", "Seattle", 47.61, -122.33, -480, "en"), 4),
    (place("USA", "FL", "Miami", 25.76, -80.19, -300, "en"), 4),
    (place("USA", "GA", "Atlanta", 33.75, -84.39, -300, "en"), 4),
    (place("CAN", "ON", "Toronto", 43.65, -79.38, -300, "en"), 4),
    (place("CAN", "QC", "Montreal", 45.50, -73.57, -300, "fr"), 2),
    (place("GBR", "ENG", "London", 51.51, -0.13, 0, "en"), 7),
    (place("GBR", "ENG", "Manchester", 53.48, -2.24, 0, "en"), 3),
    (place("DEU", "BE", "Berlin", 52.52, 13.40, 60, "de"), 4),
    (place("DEU", "BY", "Munich", 48.14, 11.58, 60, "de"), 3),
    (place("FRA", "IDF", "Paris", 48.86, 2.35, 60, "fr"), 5),
    (place("ESP", "MD", "Madrid", 40.42, -3.70, 60, "es"), 3),
    (place("ITA", "25", "Milan", 45.46, 9.19, 60, "it"), 3),
    (place("NLD", "NH", "Amsterdam", 52.37, 4.90, 60, "nl"), 2),
    (
        place("BRA", "SP", "Sao Paulo", -23.55, -46.63, -180, "pt"),
        4,
    ),
    (
        place("MEX", "CMX", "Mexico City", 19.43, -99.13, -360, "es"),
        3,
    ),
    (place("JPN", "13", "Tokyo", 35.68, 139.69, 540, "ja"), 4),
    (place("IND", "MH", "Mumbai", 19.08, 72.88, 330, "en"), 3),
    (place("AUS", "NSW", "Sydney", -33.87, 151.21, 600, "en"), 3),
];

#[derive(Clone, Copy)]
struct DeviceProfile {
    kind: Kind,
    platform: Option<Platform>,
    make: Option<&'static str>,
    model: Option<&'static str>,
    os: &'static str,
    osv: &'static str,
    /// `{v}` is replaced by a Chrome major version.
    ua: &'static str,
    chromium: bool,
    w: u32,
    h: u32,
    pxratio: f64,
}

const DEVICES: &[DeviceProfile] = &[
    DeviceProfile {
        kind: Kind::Desktop,
        platform: None,
        make: None,
        model: None,
        os: "Windows",
        osv: "10",
        ua: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36",
        chromium: true,
        w: 1920,
        h: 1080,
        pxratio: 1.0,
    },
    DeviceProfile {
        kind: Kind::Desktop,
        platform: None,
        make: None,
        model: None,
        os: "Windows",
        osv: "10",
        ua: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36 Edg/{v}.0.0.0",
        chromium: true,
        w: 1536,
        h: 864,
        pxratio: 1.25,
    },
    DeviceProfile {
        kind: Kind::Desktop,
        platform: None,
        make: Some("Apple"),
        model: Some("Macintosh"),
        os: "macOS",
        osv: "14.5",
        ua: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
        chromium: false,
        w: 1440,
        h: 900,
        pxratio: 2.0,
    },
    DeviceProfile {
        kind: Kind::Desktop,
        platform: None,
        make: None,
        model: None,
        os: "Linux",
        osv: "",
        ua: "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        chromium: false,
        w: 1920,
        h: 1080,
        pxratio: 1.0,
    },
    DeviceProfile {
        kind: Kind::Phone,
        platform: Some(Platform::Ios),
        make: Some("Apple"),
        model: Some("iPhone"),
        os: "iOS",
        osv: "17.5",
        ua: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
        chromium: false,
        w: 390,
        h: 844,
        pxratio: 3.0,
    },
    DeviceProfile {
        kind: Kind::Phone,
        platform: Some(Platform::Ios),
        make: Some("Apple"),
        model: Some("iPhone"),
        os: "iOS",
        osv: "18.1",
        ua: "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
        chromium: false,
        w: 393,
        h: 852,
        pxratio: 3.0,
    },
    DeviceProfile {
        kind: Kind::Phone,
        platform: Some(Platform::Android),
        make: Some("Samsung"),
        model: Some("SM-S911B"),
        os: "Android",
        osv: "14",
        ua: "Mozilla/5.0 (Linux; Android 14; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Mobile Safari/537.36",
        chromium: true,
        w: 360,
        h: 780,
        pxratio: 3.0,
    },
    DeviceProfile {
        kind: Kind::Phone,
        platform: Some(Platform::Android),
        make: Some("Google"),
        model: Some("Pixel 8"),
        os: "Android",
        osv: "15",
        ua: "Mozilla/5.0 (Linux; Android 15; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Mobile Safari/537.36",
        chromium: true,
        w: 412,
        h: 915,
        pxratio: 2.625,
    },
    DeviceProfile {
        kind: Kind::Phone,
        platform: Some(Platform::Android),
        make: Some("Xiaomi"),
        model: Some("23021RAAEG"),
        os: "Android",
        osv: "13",
        ua: "Mozilla/5.0 (Linux; Android 13; 23021RAAEG) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Mobile Safari/537.36",
        chromium: true,
        w: 393,
        h: 873,
        pxratio: 2.75,
    },
    DeviceProfile {
        kind: Kind::Tablet,
        platform: Some(Platform::Ios),
        make: Some("Apple"),
        model: Some("iPad"),
        os: "iOS",
        osv: "17.5",
        ua: "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
        chromium: false,
        w: 820,
        h: 1180,
        pxratio: 2.0,
    },
    DeviceProfile {
        kind: Kind::Tablet,
        platform: Some(Platform::Android),
        make: Some("Samsung"),
        model: Some("SM-X710"),
        os: "Android",
        osv: "14",
        ua: "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36",
        chromium: true,
        w: 800,
        h: 1280,
        pxratio: 2.0,
    },
];

fn pick_device(
    rng: &mut impl RngExt,
    kind: Kind,
    platform: Option<Platform>,
) -> &'static DeviceProfile {
    let n = DEVICES
        .iter()
        .filter(|d| d.kind == kind && (platform.is_none() || d.platform == platform))
        .count();
    let i = rng.random_range(0..n.max(1));
    DEVICES
        .iter()
        .filter(|d| d.kind == kind && (platform.is_none() || d.platform == platform))
        .nth(i)
        .unwrap_or(&DEVICES[0])
}

/// First octets of public IPv4 ranges (no private, loopback or multicast space).
const IP_FIRST_OCTETS: &[u8] = &[
    24, 31, 37, 46, 50, 62, 66, 68, 71, 73, 76, 81, 86, 92, 98, 104, 109, 151, 174, 185, 201,
];

fn device_object(rng: &mut impl RngExt, d: &DeviceProfile, place: Place, is_app: bool) -> Value {
    let chrome = rng.random_range(122..=131u32).to_string();
    let ua = d.ua.replace("{v}", &chrome);
    let ip = format!(
        "{}.{}.{}.{}",
        pick(rng, IP_FIRST_OCTETS),
        rng.random_range(0..=255u8),
        rng.random_range(0..=255u8),
        rng.random_range(1..=254u8)
    );
    let devicetype = match d.kind {
        Kind::Desktop => 2,
        Kind::Phone => 4,
        Kind::Tablet => 5,
    };
    let mut o = Map::new();
    o.insert("ua".into(), json!(ua));
    if d.chromium {
        let mobile = u8::from(d.kind != Kind::Desktop);
        let (pbrand, pver) = match d.os {
            "Android" => ("Android", json!([d.osv, "0", "0"])),
            _ => ("Windows", json!(["10", "0", "0"])),
        };
        o.insert(
            "sua".into(),
            json!({
                "browsers": [
                    {"brand": "Not/A)Brand", "version": ["8"]},
                    {"brand": "Chromium", "version": [chrome]},
                    {"brand": "Google Chrome", "version": [chrome]}
                ],
                "platform": {"brand": pbrand, "version": pver},
                "mobile": mobile,
                "source": 2
            }),
        );
    }
    o.insert("ip".into(), json!(ip));
    o.insert("devicetype".into(), json!(devicetype));
    if let Some(make) = d.make {
        o.insert("make".into(), json!(make));
    }
    if let Some(model) = d.model {
        o.insert("model".into(), json!(model));
    }
    o.insert("os".into(), json!(d.os));
    if !d.osv.is_empty() {
        o.insert("osv".into(), json!(d.osv));
    }
    o.insert("w".into(), json!(d.w));
    o.insert("h".into(), json!(d.h));
    o.insert("pxratio".into(), json!(d.pxratio));
    o.insert("js".into(), json!(1));
    o.insert("language".into(), json!(place.language));
    let conn = match d.kind {
        Kind::Desktop => *weighted(rng, &[(1u8, 40), (2, 60)]),
        _ => *weighted(rng, &[(2u8, 55), (6, 30), (7, 15)]),
    };
    o.insert("connectiontype".into(), json!(conn));
    if is_app {
        let lmt = d.platform == Some(Platform::Ios) && rng.random_bool(0.3);
        let ifa = if lmt {
            "00000000-0000-0000-0000-000000000000".to_owned()
        } else {
            uuid(rng)
        };
        o.insert("ifa".into(), json!(ifa));
        o.insert("lmt".into(), json!(u8::from(lmt)));
    }
    let gps = is_app && rng.random_bool(0.2);
    let mut geo = json!({
        "country": place.country,
        "region": place.region,
        "city": place.city,
        "lat": jitter(rng, place.lat),
        "lon": jitter(rng, place.lon),
        "type": if gps { 1 } else { 2 },
        "utcoffset": place.utcoffset,
    });
    if gps {
        geo["accuracy"] = json!(rng.random_range(5..60));
    } else {
        geo["ipservice"] = json!(3);
    }
    o.insert("geo".into(), geo);
    Value::Object(o)
}

// ---------------------------------------------------------------------------------------
// User, privacy, supply chain

const EID_SOURCES: &[(&str, u8)] = &[
    ("id5-sync.com", 1),
    ("liveramp.com", 3),
    ("uidapi.com", 3),
    ("criteo.com", 1),
    ("pubcid.org", 1),
];

fn user_object(rng: &mut impl RngExt, consent: Option<&str>) -> Value {
    let mut o = json!({ "id": hex(rng, 32) });
    if rng.random_bool(0.35) {
        o["buyeruid"] = json!(format!("u-{}", hex(rng, 16)));
    }
    if let Some(consent) = consent {
        o["consent"] = json!(consent);
    }
    if rng.random_bool(0.4) {
        let n = rng.random_range(1..=3);
        let eids: Vec<Value> = sample(rng, EID_SOURCES, n)
            .into_iter()
            .map(|(source, atype)| {
                json!({"source": source, "uids": [{"id": b64url(rng, 32), "atype": atype}]})
            })
            .collect();
        o["eids"] = json!(eids);
    }
    o
}

fn regs_object(rng: &mut impl RngExt, place: Place, consent: Option<&str>) -> Value {
    let mut o = json!({ "gdpr": u8::from(place.gdpr) });
    if let Some(consent) = consent
        && rng.random_bool(0.4)
    {
        // GPP's header for one section, TCF EU v2 (2), then the same consent string.
        o["gpp"] = json!(format!("DBABMA~{consent}"));
        o["gpp_sid"] = json!([2]);
    }
    if place.us {
        o["us_privacy"] = json!(*pick(rng, &["1YNN", "1YNN", "1YYN", "1---"]));
        if rng.random_bool(0.5) {
            o["gpp"] = json!(format!("DBABLA~B{}.QA", b64url(rng, 14)));
            o["gpp_sid"] = json!([*pick(rng, &[7u8, 8])]);
        }
    }
    o
}

const SSPS: &[&str] = &[
    "exchange-one.com",
    "openyield.net",
    "adstream-ssp.com",
    "bidlane.io",
];

fn source_object(rng: &mut impl RngExt) -> Value {
    let n = *weighted(rng, &[(1usize, 60), (2, 40)]);
    let nodes: Vec<Value> = (0..n)
        .map(|i| {
            let mut node = json!({
                "asi": *pick(rng, SSPS),
                "sid": format!("{}", rng.random_range(1000..99_999)),
                "hp": 1,
            });
            if i == n - 1 && rng.random_bool(0.5) {
                node["rid"] = json!(hex(rng, 16));
            }
            node
        })
        .collect();
    let mut o = json!({
        "tid": uuid(rng),
        "schain": {"complete": 1, "ver": "1.0", "nodes": nodes},
    });
    if rng.random_bool(0.3) {
        o["fd"] = json!(1);
    }
    o
}

const BLOCKED_CATS: &[&str] = &[
    "IAB25", "IAB26", "IAB7-39", "IAB8-18", "IAB8-5", "IAB9-9", "IAB14-1", "IAB23",
];
const BLOCKED_ADV: &[&str] = &[
    "rival-brand.com",
    "blocked-advertiser.net",
    "cheapdeals-spam.com",
    "casino-example.com",
];

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn fixed_request_is_about_2_5_kb() {
        let body = realistic_2_5k();
        assert!((2300..=2800).contains(&body.len()), "{} bytes", body.len());
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        assert_eq!(v["imp"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn shares_are_roughly_as_documented() {
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 4000;
        let (mut apps, mut video, mut native, mut pmp, mut imps) = (0, 0, 0, 0, 0);
        for seq in 0..n {
            let r = request(&mut rng, seq, 100);
            apps += usize::from(r.get("app").is_some());
            pmp += usize::from(r["imp"][0].get("pmp").is_some());
            for imp in r["imp"].as_array().into_iter().flatten() {
                imps += 1;
                video += usize::from(imp.get("video").is_some());
                native += usize::from(imp.get("native").is_some());
            }
        }
        let share = |x: usize, of: usize| x as f64 / of as f64;
        assert!(
            (0.36..0.44).contains(&share(apps, n as usize)),
            "apps {apps}"
        );
        assert!((0.12..0.18).contains(&share(pmp, n as usize)), "pmp {pmp}");
        assert!(
            (0.17..0.23).contains(&share(video, imps)),
            "video {video}/{imps}"
        );
        assert!(
            (0.08..0.12).contains(&share(native, imps)),
            "native {native}/{imps}"
        );
        assert!(
            (1.2..1.35).contains(&share(imps, n as usize)),
            "imps {imps}"
        );
    }

    #[test]
    fn app_platform_matches_device() {
        let mut rng = SmallRng::seed_from_u64(11);
        for seq in 0..500 {
            let r = request(&mut rng, seq, 100);
            if let Some(bundle) = r["app"]["bundle"].as_str() {
                let ios = bundle.bytes().all(|b| b.is_ascii_digit());
                assert_eq!(r["device"]["os"] == "iOS", ios, "{r}");
            }
        }
    }
}
