//! Bidder profiles: what a simulated DSP does, how to load them from TOML, how they are checked,
//! and the demo fleet.

use serde::{Deserialize, Serialize};

use crate::SimError;
use crate::dist::{LatencyDist, PriceDist};

/// Default for [`BidderProfile::hang_ms`]: how long a "no answer" request is held open.
pub const DEFAULT_HANG_MS: u64 = 10_000;
/// Upper bound on [`BidderProfile::hang_ms`], so that every test and every shutdown ends.
pub const MAX_HANG_MS: u64 = 60_000;
/// Longest accepted bidder name (names appear in URLs, bid ids and generated TOML).
pub const MAX_NAME_LEN: usize = 64;

/// Where a bid's creative markup travels.
///
/// TOML: `markup = "inline"`, `markup = "on_win_notice"`, or `markup = { mix = 0.3 }` (30 % of
/// bids served on the win notice, the rest inline).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Markup {
    /// `adm` is in the bid.
    #[default]
    Inline,
    /// No `adm`; the markup is the body of the response to the win notice (`nurl`).
    OnWinNotice,
    /// Per bid: with this probability (0..=1) the markup is served on the win notice,
    /// otherwise inline.
    Mix(f64),
}

/// One simulated DSP.
///
/// Only `name` and `price` are required in TOML; everything else has the default shown on the
/// field (see [`BidderProfile::new`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BidderProfile {
    /// Unique, non-empty, ASCII letters, digits, `-`, `_`, `.`; at most [`MAX_NAME_LEN`].
    pub name: String,
    /// `seatbid.seat`; defaults to `name`. Also matched against a deal's `wseat`.
    #[serde(default)]
    pub seat: Option<String>,
    /// Probability of bidding on each eligible imp. Default 1.
    #[serde(default = "one")]
    pub bid_probability: f64,
    /// The bidder's valuation (CPM, USD). See the crate docs for how floors apply.
    pub price: PriceDist,
    /// Time before answering (bids, no-bids, errors and garbage alike). Default fixed 0.
    #[serde(default = "zero_latency")]
    pub latency: LatencyDist,
    /// Share of requests answered HTTP 500. Default 0.
    #[serde(default)]
    pub error_rate: f64,
    /// Share of requests accepted and never answered: held for `hang_ms`, then the connection
    /// is closed without a response. Default 0.
    #[serde(default)]
    pub no_answer_rate: f64,
    /// Share of requests answered 200 with a body that is not a BidResponse. Default 0.
    #[serde(default)]
    pub garbage_rate: f64,
    /// When an imp offers deals this bidder may buy (its seat is in `wseat`, or `wseat` is
    /// empty), the share of its bids placed on one of them. Default 0.
    #[serde(default)]
    pub deal_rate: f64,
    /// `bid.adomain`; omitted from bids when empty.
    #[serde(default)]
    pub adomain: Vec<String>,
    /// `bid.cat`; omitted from bids when empty.
    #[serde(default)]
    pub cat: Vec<String>,
    /// Inline or on the win notice. Default inline.
    #[serde(default)]
    pub markup: Markup,
    /// Answer a no-bid with `200 {"id":..,"nbr":N}` instead of `204`. Default false.
    #[serde(default)]
    pub nbr_on_no_bid: bool,
    /// How long a no-answer request is held, in ms. Default [`DEFAULT_HANG_MS`], at most
    /// [`MAX_HANG_MS`]; cut short by fleet shutdown.
    #[serde(default = "default_hang")]
    pub hang_ms: u64,
    /// Misbehave on purpose: bid the sampled price even below the imp floor (deal floors are
    /// still met). For testing that an exchange enforces floors. Default false.
    #[serde(default)]
    pub ignore_floor: bool,
}

fn one() -> f64 {
    1.0
}

fn zero_latency() -> LatencyDist {
    LatencyDist::Fixed { ms: 0 }
}

fn default_hang() -> u64 {
    DEFAULT_HANG_MS
}

impl BidderProfile {
    /// A well-behaved bidder with every optional field at its TOML default: bids on every imp
    /// at a price drawn from `price`, answers at once, no faults, no deals, no adomain.
    pub fn new(name: &str, price: PriceDist) -> Self {
        BidderProfile {
            name: name.to_owned(),
            seat: None,
            bid_probability: 1.0,
            price,
            latency: zero_latency(),
            error_rate: 0.0,
            no_answer_rate: 0.0,
            garbage_rate: 0.0,
            deal_rate: 0.0,
            adomain: Vec::new(),
            cat: Vec::new(),
            markup: Markup::Inline,
            nbr_on_no_bid: false,
            hang_ms: DEFAULT_HANG_MS,
            ignore_floor: false,
        }
    }

    /// For tests: always bids exactly `cpm` on every imp whose floor is at most `cpm`, answers
    /// with no latency and never fails. `adomain` is `["<name>.example"]`.
    pub fn instant(name: &str, cpm: f64) -> Self {
        BidderProfile {
            adomain: vec![format!("{name}.example")],
            ..Self::new(name, PriceDist::Fixed { cpm })
        }
    }

    /// The seat the bidder bids as: `seat`, else `name`.
    pub fn seat_name(&self) -> &str {
        self.seat.as_deref().unwrap_or(&self.name)
    }

    /// Checks one profile; the error names the bidder and the field.
    pub fn validate(&self) -> Result<(), SimError> {
        let err = |field: &str, message: String| SimError::Profile {
            bidder: self.name.clone(),
            field: field.to_owned(),
            message,
        };
        if self.name.is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        if self.name.len() > MAX_NAME_LEN
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(err(
                "name",
                format!("must be 1..={MAX_NAME_LEN} ASCII letters, digits, '-', '_' or '.'"),
            ));
        }
        if let Some(seat) = &self.seat
            && seat.is_empty()
        {
            return Err(err("seat", "must not be empty when given".into()));
        }
        for (field, p) in [
            ("bid_probability", self.bid_probability),
            ("error_rate", self.error_rate),
            ("no_answer_rate", self.no_answer_rate),
            ("garbage_rate", self.garbage_rate),
            ("deal_rate", self.deal_rate),
        ] {
            probability(p).map_err(|m| err(field, m))?;
        }
        // The three faults are drawn from one uniform (see `bidder::decide`), so they must fit in it.
        let faults = self.error_rate + self.no_answer_rate + self.garbage_rate;
        if faults > 1.0 + 1e-9 {
            return Err(err(
                "error_rate",
                format!("error_rate + no_answer_rate + garbage_rate = {faults}, must be <= 1"),
            ));
        }
        if let Markup::Mix(share) = self.markup {
            probability(share).map_err(|m| err("markup.mix", m))?;
        }
        if self.hang_ms > MAX_HANG_MS {
            return Err(err("hang_ms", format!("must be <= {MAX_HANG_MS}")));
        }
        let max_ms = crate::dist::MAX_LATENCY.as_millis() as u64;
        match self.latency {
            LatencyDist::Fixed { ms } if ms > max_ms => {
                return Err(err("latency.ms", format!("must be <= {max_ms}")));
            }
            LatencyDist::Uniform { min_ms, max_ms: hi } => {
                if min_ms > hi {
                    return Err(err("latency.min_ms", "must be <= latency.max_ms".into()));
                }
                if hi > max_ms {
                    return Err(err("latency.max_ms", format!("must be <= {max_ms}")));
                }
            }
            LatencyDist::LogNormal { p50_ms, p99_ms } => {
                if !(p50_ms.is_finite() && p50_ms > 0.0) {
                    return Err(err("latency.p50_ms", "must be a number > 0".into()));
                }
                if !(p99_ms.is_finite() && p99_ms >= p50_ms) {
                    return Err(err("latency.p99_ms", "must be a number >= p50_ms".into()));
                }
                if p99_ms > max_ms as f64 {
                    return Err(err("latency.p99_ms", format!("must be <= {max_ms}")));
                }
            }
            LatencyDist::Fixed { .. } => {}
        }
        let cpm_ok = |x: f64| x.is_finite() && (0.0..=openrtb::Price::MAX_CPM).contains(&x);
        let range = format!("must be a number in 0..={}", openrtb::Price::MAX_CPM);
        match self.price {
            PriceDist::Fixed { cpm } => {
                if !cpm_ok(cpm) {
                    return Err(err("price.cpm", range));
                }
            }
            PriceDist::Uniform { min, max } => {
                if !cpm_ok(min) {
                    return Err(err("price.min", range));
                }
                if !cpm_ok(max) {
                    return Err(err("price.max", range));
                }
                if min > max {
                    return Err(err("price.min", "must be <= price.max".into()));
                }
            }
            PriceDist::LogNormal { median, p99 } => {
                if !(cpm_ok(median) && median > 0.0) {
                    return Err(err("price.median", "must be a number > 0".into()));
                }
                if !(cpm_ok(p99) && p99 >= median) {
                    return Err(err("price.p99", "must be a number >= price.median".into()));
                }
            }
        }
        Ok(())
    }
}

fn probability(p: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(format!("must be a probability in 0..=1, got {p}"))
    }
}

/// Validates a fleet: every profile, plus names unique.
pub fn validate_profiles(profiles: &[BidderProfile]) -> Result<(), SimError> {
    let mut seen = std::collections::HashSet::new();
    for p in profiles {
        p.validate()?;
        if !seen.insert(p.name.as_str()) {
            return Err(SimError::Profile {
                bidder: p.name.clone(),
                field: "name".into(),
                message: "duplicate bidder name".into(),
            });
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfilesFile {
    #[serde(default)]
    bidders: Vec<BidderProfile>,
    /// The table's old name, kept only to say what it is called now.
    #[serde(default)]
    bidder: Option<serde::de::IgnoredAny>,
}

/// Parses `[[bidders]]` tables from TOML (the name the exchange's configuration uses for its
/// bidders) and validates them (see [`BidderProfile::validate`]). At least one bidder is
/// required.
///
/// ```toml
/// [[bidders]]
/// name = "atlas"
/// bid_probability = 0.7
/// price = { kind = "lognormal", median = 1.2, p99 = 6.0 }
/// latency = { kind = "lognormal", p50_ms = 12, p99_ms = 45 }
/// markup = { mix = 0.25 }
/// ```
pub fn load_profiles(toml_text: &str) -> Result<Vec<BidderProfile>, SimError> {
    let file: ProfilesFile =
        toml::from_str(toml_text).map_err(|e| SimError::Toml(e.to_string()))?;
    if file.bidder.is_some() {
        return Err(SimError::Toml(
            "[[bidder]] is now [[bidders]], as in the exchange's configuration: rename the tables"
                .into(),
        ));
    }
    if file.bidders.is_empty() {
        return Err(SimError::Toml("no [[bidders]] tables".into()));
    }
    validate_profiles(&file.bidders)?;
    Ok(file.bidders)
}

/// A realistic, varied fleet of `n` bidders, the same every call.
///
/// The first ten are distinct archetypes; beyond ten the list repeats with a numeric suffix
/// (`atlas-2`, ...) and slightly shifted latency so that copies are not identical.
///
/// | name    | latency p50/p99 ms | price (CPM)        | bids | faults / quirks                        |
/// |---------|--------------------|--------------------|------|----------------------------------------|
/// | atlas   | 12 / 45            | lognormal 1.2 / 6  | 70 % |                                        |
/// | beacon  | 8 / 40             | uniform 0.5..3     | 60 % | buys deals (50 %)                      |
/// | cobalt  | 20 / 70            | lognormal 2 / 9    | 50 % | 2 % HTTP 500                           |
/// | drift   | 25 / 90            | lognormal 1 / 4    | 80 % | 1 % garbage; markup on win notice      |
/// | ember   | 5 / 40             | lognormal 0.8 / 3  | 90 % | no-bids as 200 + nbr                   |
/// | fjord   | 60 / 180 (slow)    | lognormal 2.5 / 10 | 70 % | p99 > tmax 100 ms                      |
/// | glacier | 45 / 140 (slow)    | lognormal 1.8 / 7  | 60 % | half its markup on win notice          |
/// | harbor  | 15 / 60            | lognormal 1.4 / 5  | 70 % | 20 % never answered (hang 1 s)         |
/// | ion     | 10 / 50            | lognormal 1.5 / 5  | 65 % | buys deals (30 %), mixed markup        |
/// | juniper | 18 / 85            | uniform 0.2..1.5   | 40 % | cheap; no-bids as 200 + nbr            |
pub fn demo_profiles(n: usize) -> Vec<BidderProfile> {
    (0..n)
        .map(|i| {
            let round = i / 10;
            let mut p = archetype(i % 10);
            if round > 0 {
                p.name = format!("{}-{}", p.name, round + 1);
                p.adomain = vec![format!("{}.example", p.name)];
                if let LatencyDist::LogNormal { p50_ms, p99_ms } = &mut p.latency {
                    let k = 1.0 + 0.1 * (round % 3) as f64;
                    *p50_ms *= k;
                    *p99_ms *= k;
                }
            }
            p
        })
        .collect()
}

fn archetype(i: usize) -> BidderProfile {
    let logn = |median: f64, p99: f64| PriceDist::LogNormal { median, p99 };
    let lat = |p50_ms: f64, p99_ms: f64| LatencyDist::LogNormal { p50_ms, p99_ms };
    let base =
        |name: &str, bid_probability: f64, price: PriceDist, latency: LatencyDist| BidderProfile {
            bid_probability,
            latency,
            adomain: vec![format!("{name}.example")],
            cat: vec!["IAB3-1".into()],
            ..BidderProfile::new(name, price)
        };
    match i {
        0 => base("atlas", 0.7, logn(1.2, 6.0), lat(12.0, 45.0)),
        1 => BidderProfile {
            deal_rate: 0.5,
            ..base(
                "beacon",
                0.6,
                PriceDist::Uniform { min: 0.5, max: 3.0 },
                lat(8.0, 40.0),
            )
        },
        2 => BidderProfile {
            error_rate: 0.02,
            ..base("cobalt", 0.5, logn(2.0, 9.0), lat(20.0, 70.0))
        },
        3 => BidderProfile {
            garbage_rate: 0.01,
            markup: Markup::OnWinNotice,
            ..base("drift", 0.8, logn(1.0, 4.0), lat(25.0, 90.0))
        },
        4 => BidderProfile {
            nbr_on_no_bid: true,
            ..base("ember", 0.9, logn(0.8, 3.0), lat(5.0, 40.0))
        },
        5 => base("fjord", 0.7, logn(2.5, 10.0), lat(60.0, 180.0)),
        6 => BidderProfile {
            markup: Markup::Mix(0.5),
            ..base("glacier", 0.6, logn(1.8, 7.0), lat(45.0, 140.0))
        },
        7 => BidderProfile {
            no_answer_rate: 0.2,
            // Long past any tmax, yet short: a held request keeps a socket open on this side
            // even after the exchange gives up, so under load the hang bounds the fd count.
            hang_ms: 1_000,
            ..base("harbor", 0.7, logn(1.4, 5.0), lat(15.0, 60.0))
        },
        8 => BidderProfile {
            deal_rate: 0.3,
            markup: Markup::Mix(0.2),
            ..base("ion", 0.65, logn(1.5, 5.0), lat(10.0, 50.0))
        },
        _ => BidderProfile {
            nbr_on_no_bid: true,
            ..base(
                "juniper",
                0.4,
                PriceDist::Uniform { min: 0.2, max: 1.5 },
                lat(18.0, 85.0),
            )
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_profiles_are_valid_and_varied() {
        for n in [0, 1, 10, 25] {
            let ps = demo_profiles(n);
            assert_eq!(ps.len(), n);
            validate_profiles(&ps).unwrap();
        }
        let ps = demo_profiles(10);
        let slow = ps
            .iter()
            .filter(
                |p| matches!(p.latency, LatencyDist::LogNormal { p99_ms, .. } if p99_ms > 100.0),
            )
            .count();
        assert_eq!(slow, 2);
        assert!(ps.iter().any(|p| p.no_answer_rate >= 0.2));
        assert!(ps.iter().any(|p| p.error_rate > 0.0));
        assert!(ps.iter().any(|p| p.garbage_rate > 0.0));
        assert!(ps.iter().any(|p| p.deal_rate > 0.0));
    }

    #[test]
    fn toml_defaults_apply() {
        let ps = load_profiles(
            r#"
            [[bidders]]
            name = "a"
            price = { kind = "fixed", cpm = 1.5 }
            "#,
        )
        .unwrap();
        assert_eq!(
            ps[0],
            BidderProfile::new("a", PriceDist::Fixed { cpm: 1.5 })
        );
    }

    #[test]
    fn the_old_table_name_is_refused_with_the_new_one() {
        let e = load_profiles("[[bidder]]\nname = \"a\"\nprice = { kind = \"fixed\", cpm = 1 }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[[bidders]]"), "{e}");
    }
}
