//! Validation: [`CampaignSpec`] (as written) to [`Campaign`] (typed, normalized, bounded).
//!
//! Money is converted here, once: CPMs with [`Price::from_cpm`] (nearest micro), budgets with
//! [`Nanos::from_units`] (nearest nano), both ties away from zero; an amount that rounds to zero
//! is refused rather than silently disabling the campaign. Errors name the field with the
//! campaign's position in the file: `campaigns[3].creatives[0].w: must be > 0`.

use std::collections::HashSet;

use openrtb::Price;
use units::{Nanos, Timestamp};

use crate::error::{CampaignError, Problem};
use crate::limits::{
    MAX_ADM_BYTES, MAX_CAMPAIGNS, MAX_CREATIVES, MAX_DIMENSION, MAX_ENTRY_BYTES, MAX_ID_BYTES,
    MAX_LIST, MAX_VIDEO_SECONDS,
};
use crate::model::{
    BidRule, Budget, Campaign, Country, Creative, Flight, Media, Size, Targeting, VideoCreative,
};
use crate::schema::{BidSpec, BudgetSpec, CampaignSpec, CreativeSpec, FlightSpec, TargetingSpec};

type Result<T> = std::result::Result<T, CampaignError>;

/// Validates every campaign of a file, in order, and checks that ids are unique across it.
/// Stops at the first problem.
pub fn validate_all(specs: Vec<CampaignSpec>) -> Result<Vec<Campaign>> {
    if specs.len() > MAX_CAMPAIGNS {
        return Err(CampaignError::invalid(
            "campaigns",
            Problem::TooMany(MAX_CAMPAIGNS),
        ));
    }
    let mut seen = HashSet::with_capacity(specs.len());
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let campaign = Campaign::from_spec(spec, i)?;
        if !seen.insert(campaign.id.clone()) {
            return Err(CampaignError::invalid(
                format!("campaigns[{i}].id"),
                Problem::Duplicate(campaign.id),
            ));
        }
        out.push(campaign);
    }
    Ok(out)
}

impl Campaign {
    /// Validates one campaign; `index` is its position in the file, used in error paths.
    pub fn from_spec(spec: CampaignSpec, index: usize) -> Result<Campaign> {
        let at = format!("campaigns[{index}]");
        let id = check_id(&spec.id, &format!("{at}.id"))?;
        let adomain = domain_list(&spec.adomain, &format!("{at}.adomain"), true)?;
        if spec.creatives.is_empty() {
            return Err(CampaignError::invalid(
                format!("{at}.creatives"),
                Problem::Empty,
            ));
        }
        if spec.creatives.len() > MAX_CREATIVES {
            return Err(CampaignError::invalid(
                format!("{at}.creatives"),
                Problem::TooMany(MAX_CREATIVES),
            ));
        }
        let mut creative_ids = HashSet::with_capacity(spec.creatives.len());
        let mut creatives = Vec::with_capacity(spec.creatives.len());
        for (j, c) in spec.creatives.iter().enumerate() {
            let creative = creative(c, &format!("{at}.creatives[{j}]"), &adomain)?;
            if !creative_ids.insert(creative.id.clone()) {
                return Err(CampaignError::invalid(
                    format!("{at}.creatives[{j}].id"),
                    Problem::Duplicate(creative.id),
                ));
            }
            creatives.push(creative);
        }
        Ok(Campaign {
            id,
            creatives,
            targeting: targeting(&spec.targeting, &format!("{at}.targeting"))?,
            bid: bid(&spec.bid, &format!("{at}.bid"))?,
            budget: budget(&spec.budget, &format!("{at}.budget"))?,
            flight: flight(&spec.flight, &format!("{at}.flight"))?,
            pacing: spec.pacing,
        })
    }
}

fn check_id(id: &str, field: &str) -> Result<String> {
    if id.trim().is_empty() {
        return Err(CampaignError::invalid(field, Problem::Empty));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(CampaignError::invalid(
            field,
            Problem::TooLong(MAX_ID_BYTES),
        ));
    }
    Ok(id.to_owned())
}

fn creative(spec: &CreativeSpec, at: &str, campaign_adomain: &[String]) -> Result<Creative> {
    let id = check_id(&spec.id, &format!("{at}.id"))?;
    let media = match (spec.w, spec.h, &spec.video) {
        (Some(_), Some(_), Some(_)) | (Some(_), None, Some(_)) | (None, Some(_), Some(_)) => {
            return Err(CampaignError::invalid(
                format!("{at}.video"),
                Problem::BannerAndVideo,
            ));
        }
        (Some(w), Some(h), None) => Media::Banner(Size::new(
            dimension(w, &format!("{at}.w"))?,
            dimension(h, &format!("{at}.h"))?,
        )),
        (Some(_), None, None) => {
            return Err(CampaignError::invalid(format!("{at}.h"), Problem::HalfSize));
        }
        (None, Some(_), None) => {
            return Err(CampaignError::invalid(format!("{at}.w"), Problem::HalfSize));
        }
        (None, None, Some(video)) => {
            let vat = format!("{at}.video");
            let mimes = string_list(&video.mimes, &format!("{vat}.mimes"), true)?;
            let duration = in_range(
                video.duration,
                1,
                i64::from(MAX_VIDEO_SECONDS),
                &format!("{vat}.duration"),
            )?;
            let mut protocols = Vec::with_capacity(video.protocols.len());
            for (k, &p) in video.protocols.iter().enumerate() {
                if p <= 0 {
                    return Err(CampaignError::invalid(
                        format!("{vat}.protocols[{k}]"),
                        Problem::NotPositive,
                    ));
                }
                protocols.push(p);
            }
            check_len(protocols.len(), &format!("{vat}.protocols"))?;
            protocols.sort_unstable();
            protocols.dedup();
            Media::Video(VideoCreative {
                mimes,
                duration: u32::try_from(duration).unwrap_or(MAX_VIDEO_SECONDS),
                protocols,
            })
        }
        (None, None, None) => {
            return Err(CampaignError::invalid(at, Problem::NoMedia));
        }
    };
    if spec.adm.trim().is_empty() {
        return Err(CampaignError::invalid(format!("{at}.adm"), Problem::Empty));
    }
    if spec.adm.len() > MAX_ADM_BYTES {
        return Err(CampaignError::invalid(
            format!("{at}.adm"),
            Problem::TooLong(MAX_ADM_BYTES),
        ));
    }
    let cat = raw_list(&spec.cat, &format!("{at}.cat"))?;
    let adomain = match &spec.adomain {
        Some(list) => domain_list(list, &format!("{at}.adomain"), true)?,
        None => campaign_adomain.to_vec(),
    };
    Ok(Creative {
        id,
        media,
        adm: spec.adm.clone(),
        cat,
        adomain,
    })
}

fn dimension(v: i64, field: &str) -> Result<u32> {
    if v <= 0 {
        return Err(CampaignError::invalid(field, Problem::NotPositive));
    }
    let max = i64::from(MAX_DIMENSION);
    if v > max {
        return Err(CampaignError::invalid(field, Problem::TooBig(max)));
    }
    Ok(u32::try_from(v).unwrap_or(MAX_DIMENSION))
}

fn in_range(v: i64, lo: i64, hi: i64, field: &str) -> Result<i64> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(CampaignError::invalid(field, Problem::OutOfRange(lo, hi)))
    }
}

fn check_len(len: usize, field: &str) -> Result<()> {
    if len > MAX_LIST {
        Err(CampaignError::invalid(field, Problem::TooMany(MAX_LIST)))
    } else {
        Ok(())
    }
}

/// Checks list length and each entry (non-blank, bounded); keeps the entries as written.
fn raw_list(list: &[String], field: &str) -> Result<Vec<String>> {
    check_len(list.len(), field)?;
    for (k, entry) in list.iter().enumerate() {
        check_entry(entry, &format!("{field}[{k}]"))?;
    }
    Ok(list.to_vec())
}

fn check_entry(entry: &str, field: &str) -> Result<()> {
    if entry.trim().is_empty() {
        return Err(CampaignError::invalid(field, Problem::Empty));
    }
    if entry.len() > MAX_ENTRY_BYTES {
        return Err(CampaignError::invalid(
            field,
            Problem::TooLong(MAX_ENTRY_BYTES),
        ));
    }
    Ok(())
}

/// A list of strings for set lookups: checked, optionally lower-cased, sorted, deduplicated.
fn string_list(list: &[String], field: &str, lowercase: bool) -> Result<Vec<String>> {
    if list.is_empty() {
        return Err(CampaignError::invalid(field, Problem::EmptyList));
    }
    let mut out = raw_list(list, field)?;
    if lowercase {
        for s in &mut out {
            s.make_ascii_lowercase();
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A list of domain names (or app bundles): lower-cased, leading `*.`/`.` and trailing `.`
/// removed, sorted, deduplicated. Only ASCII letters, digits, `-`, `_` and `.` between
/// non-empty labels are accepted (IDNs in their `xn--` form).
fn domain_list(list: &[String], field: &str, allow_empty: bool) -> Result<Vec<String>> {
    if list.is_empty() && !allow_empty {
        return Err(CampaignError::invalid(field, Problem::EmptyList));
    }
    check_len(list.len(), field)?;
    let mut out = Vec::with_capacity(list.len());
    for (k, entry) in list.iter().enumerate() {
        let entry_field = format!("{field}[{k}]");
        check_entry(entry, &entry_field)?;
        match normalize_domain(entry) {
            Some(d) => out.push(d),
            None => {
                return Err(CampaignError::invalid(
                    entry_field,
                    Problem::BadDomain(entry.clone()),
                ));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The canonical form of a configured domain; `None` if it is not a domain name.
pub(crate) fn normalize_domain(raw: &str) -> Option<String> {
    let d = raw.trim();
    let d = d.strip_prefix("*.").unwrap_or(d);
    let d = d.strip_prefix('.').unwrap_or(d);
    let d = d.strip_suffix('.').unwrap_or(d);
    let ok = !d.is_empty()
        && d.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then(|| d.to_ascii_lowercase())
}

fn optional<T>(
    list: &Option<Vec<T>>,
    f: impl FnOnce(&[T]) -> Result<Vec<T>>,
) -> Result<Option<Vec<T>>> {
    list.as_deref().map(f).transpose()
}

fn targeting(spec: &TargetingSpec, at: &str) -> Result<Targeting> {
    let countries = match &spec.countries {
        None => None,
        Some(list) => {
            let field = format!("{at}.countries");
            if list.is_empty() {
                return Err(CampaignError::invalid(field, Problem::EmptyList));
            }
            check_len(list.len(), &field)?;
            let mut out = Vec::with_capacity(list.len());
            for (k, code) in list.iter().enumerate() {
                match Country::parse(code.trim()) {
                    Some(c) => out.push(c),
                    None => {
                        return Err(CampaignError::invalid(
                            format!("{field}[{k}]"),
                            Problem::BadCountry(code.clone()),
                        ));
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            Some(out)
        }
    };
    let device_types = match &spec.device_types {
        None => None,
        Some(list) => {
            let field = format!("{at}.device_types");
            if list.is_empty() {
                return Err(CampaignError::invalid(field, Problem::EmptyList));
            }
            check_len(list.len(), &field)?;
            if let Some(k) = list.iter().position(|&t| t <= 0) {
                return Err(CampaignError::invalid(
                    format!("{field}[{k}]"),
                    Problem::NotPositive,
                ));
            }
            let mut out = list.clone();
            out.sort_unstable();
            out.dedup();
            Some(out)
        }
    };
    let sizes = match &spec.sizes {
        None => None,
        Some(list) => {
            let field = format!("{at}.sizes");
            if list.is_empty() {
                return Err(CampaignError::invalid(field, Problem::EmptyList));
            }
            check_len(list.len(), &field)?;
            let mut out = Vec::with_capacity(list.len());
            for (k, text) in list.iter().enumerate() {
                match parse_size(text) {
                    Some(s) => out.push(s),
                    None => {
                        return Err(CampaignError::invalid(
                            format!("{field}[{k}]"),
                            Problem::BadSize(text.clone()),
                        ));
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            Some(out)
        }
    };
    let hours = match &spec.hours {
        None => None,
        Some(list) => {
            let field = format!("{at}.hours");
            if list.is_empty() {
                return Err(CampaignError::invalid(field, Problem::EmptyList));
            }
            check_len(list.len(), &field)?;
            let mut mask = 0u32;
            for (k, &h) in list.iter().enumerate() {
                let h = in_range(h, 0, 23, &format!("{field}[{k}]"))?;
                mask |= 1 << h;
            }
            Some(mask)
        }
    };
    Ok(Targeting {
        countries,
        regions: optional(&spec.regions, |l| {
            string_list(l, &format!("{at}.regions"), true)
        })?,
        device_types,
        os: optional(&spec.os, |l| string_list(l, &format!("{at}.os"), true))?,
        domains: optional(&spec.domains, |l| {
            domain_list(l, &format!("{at}.domains"), false)
        })?,
        block_domains: optional(&spec.block_domains, |l| {
            domain_list(l, &format!("{at}.block_domains"), false)
        })?,
        publishers: optional(&spec.publishers, |l| {
            string_list(l, &format!("{at}.publishers"), false)
        })?,
        categories: optional(&spec.categories, |l| {
            string_list(l, &format!("{at}.categories"), false)
        })?,
        sizes,
        deals: optional(&spec.deals, |l| {
            string_list(l, &format!("{at}.deals"), false)
        })?,
        hours,
        segments: optional(&spec.segments, |l| {
            string_list(l, &format!("{at}.segments"), false)
        })?,
    })
}

/// `"300x250"` (also `X` or `×`) to a size within 1..=[`MAX_DIMENSION`].
fn parse_size(text: &str) -> Option<Size> {
    let text = text.trim();
    let (w, h) = text
        .split_once('x')
        .or_else(|| text.split_once('X'))
        .or_else(|| text.split_once('×'))?;
    let parse = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<u32>()
            .ok()
            .filter(|v| (1..=MAX_DIMENSION).contains(v))
    };
    Some(Size::new(parse(w)?, parse(h)?))
}

fn cpm(v: f64, field: &str) -> Result<Price> {
    let price =
        Price::from_cpm(v).map_err(|_| CampaignError::invalid(field, Problem::NotFinite))?;
    if v <= 0.0 {
        return Err(CampaignError::invalid(field, Problem::NotPositive));
    }
    if !price.is_positive() {
        return Err(CampaignError::invalid(field, Problem::TooSmall("0.000001")));
    }
    Ok(price)
}

fn bid(spec: &BidSpec, at: &str) -> Result<BidRule> {
    let cpm_value = cpm(spec.cpm, &format!("{at}.cpm"))?;
    let max_cpm = match spec.max_cpm {
        None => cpm_value,
        Some(v) => {
            let field = format!("{at}.max_cpm");
            let max = cpm(v, &field)?;
            if max < cpm_value {
                return Err(CampaignError::invalid(
                    field,
                    Problem::BelowMinimum("bid.cpm"),
                ));
            }
            max
        }
    };
    let shading_ppm = match spec.shading {
        None => None,
        Some(f) => {
            let field = format!("{at}.shading");
            if !(f > 0.0 && f <= 1.0) {
                return Err(CampaignError::invalid(field, Problem::OutOfRangeFraction));
            }
            // In (0, 1] by the check above, so the cast cannot truncate or saturate.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ppm = (f * 1_000_000.0).round() as u32;
            if ppm == 0 {
                return Err(CampaignError::invalid(field, Problem::TooSmall("0.000001")));
            }
            Some(ppm)
        }
    };
    Ok(BidRule {
        cpm: cpm_value,
        max_cpm,
        shading_ppm,
    })
}

fn amount(v: f64, field: &str) -> Result<Nanos> {
    let nanos =
        Nanos::from_units(v).map_err(|_| CampaignError::invalid(field, Problem::NotFinite))?;
    if v <= 0.0 {
        return Err(CampaignError::invalid(field, Problem::NotPositive));
    }
    if !nanos.is_positive() {
        return Err(CampaignError::invalid(
            field,
            Problem::TooSmall("0.000000001"),
        ));
    }
    Ok(nanos)
}

fn budget(spec: &BudgetSpec, at: &str) -> Result<Budget> {
    let total = amount(spec.total, &format!("{at}.total"))?;
    let daily = match spec.daily {
        None => None,
        Some(v) => {
            let field = format!("{at}.daily");
            let daily = amount(v, &field)?;
            if daily > total {
                return Err(CampaignError::invalid(
                    field,
                    Problem::AboveMaximum("budget.total"),
                ));
            }
            Some(daily)
        }
    };
    Ok(Budget { total, daily })
}

fn flight(spec: &FlightSpec, at: &str) -> Result<Flight> {
    let parse = |text: &Option<super::schema::TimestampText>, key: &str| -> Result<_> {
        match text {
            None => Ok(None),
            Some(t) => Timestamp::parse_rfc3339(&t.0).map(Some).ok_or_else(|| {
                CampaignError::invalid(format!("{at}.{key}"), Problem::BadTimestamp(t.0.clone()))
            }),
        }
    };
    let start = parse(&spec.start, "start")?;
    let end = parse(&spec.end, "end")?;
    if let (Some(s), Some(e)) = (start, end)
        && e <= s
    {
        return Err(CampaignError::invalid(
            format!("{at}.end"),
            Problem::NotAfter("flight.start"),
        ));
    }
    Ok(Flight { start, end })
}
