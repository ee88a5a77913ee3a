//! What targeting needs from a bid request, extracted once per request ([`RequestFacts`]) and
//! once per impression ([`ImpFacts`]).
//!
//! Facts borrow from the request and allocate only where a value must be normalized (a domain
//! or OS name that is not already lower case) or collected (categories, segments, sizes).

use std::borrow::Cow;

use openrtb::{AuctionType, BidRequest, Geo, Imp, Price, Video};
use units::Timestamp;

use crate::model::{Country, Size};

/// Request-wide facts: who, where, when.
#[derive(Clone, Debug)]
pub struct RequestFacts<'a> {
    pub(crate) now: Timestamp,
    pub(crate) country: Option<Country>,
    pub(crate) region: Option<Cow<'a, str>>,
    pub(crate) device_type: Option<i32>,
    pub(crate) os: Option<Cow<'a, str>>,
    pub(crate) domains: Vec<Cow<'a, str>>,
    pub(crate) publisher: Option<&'a str>,
    pub(crate) categories: Vec<&'a str>,
    pub(crate) segments: Vec<&'a str>,
    pub(crate) hour: u8,
    pub(crate) first_price: bool,
    pub(crate) bcat: &'a [String],
    pub(crate) badv: Vec<Cow<'a, str>>,
}

impl<'a> RequestFacts<'a> {
    /// Extracts the facts of `req` at `now` (the decision time, for flights and hours).
    ///
    /// - country, region and UTC offset come from `device.geo`, else `user.geo`;
    /// - domains: `site.domain` (else the host of `site.page`), or `app.bundle` and
    ///   `app.domain`, or `dooh.domain`; lower case, trailing dot removed;
    /// - publisher: the `publisher.id` of the site, app or dooh;
    /// - categories: `cat`, `sectioncat` and `pagecat` of the site or app;
    /// - segments: every `user.data[].segment[].id`;
    /// - hour: of `now` shifted by `utcoffset` minutes when given (and within a day), else UTC.
    pub fn from_request(req: &'a BidRequest, now: Timestamp) -> RequestFacts<'a> {
        let device = req.device.as_ref();
        let user = req.user.as_ref();
        let geos: [Option<&Geo>; 2] = [
            device.and_then(|d| d.geo.as_ref()),
            user.and_then(|u| u.geo.as_ref()),
        ];
        let country = geos
            .iter()
            .flatten()
            .find_map(|g| g.country.as_deref())
            .and_then(|c| Country::parse(c.trim()));
        let region = geos
            .iter()
            .flatten()
            .find_map(|g| g.region.as_deref())
            .map(|r| lower(r.trim()));
        let utcoffset = geos.iter().flatten().find_map(|g| g.utcoffset);

        let mut domains = Vec::new();
        let mut publisher = None;
        let mut categories = Vec::new();
        let mut push_cats = |lists: [&'a Option<Vec<String>>; 3]| {
            for list in lists.into_iter().flatten() {
                categories.extend(list.iter().map(String::as_str));
            }
        };
        if let Some(site) = &req.site {
            match site.domain.as_deref() {
                Some(d) => push_domain(&mut domains, d),
                None => {
                    if let Some(host) = site.page.as_deref().and_then(url_host) {
                        push_domain(&mut domains, host);
                    }
                }
            }
            publisher = site.publisher.as_ref().and_then(|p| p.id.as_deref());
            push_cats([&site.cat, &site.sectioncat, &site.pagecat]);
        } else if let Some(app) = &req.app {
            for d in [&app.bundle, &app.domain].into_iter().flatten() {
                push_domain(&mut domains, d);
            }
            publisher = app.publisher.as_ref().and_then(|p| p.id.as_deref());
            push_cats([&app.cat, &app.sectioncat, &app.pagecat]);
        } else if let Some(dooh) = &req.dooh {
            if let Some(d) = &dooh.domain {
                push_domain(&mut domains, d);
            }
            publisher = dooh.publisher.as_ref().and_then(|p| p.id.as_deref());
        }
        categories.sort_unstable();
        categories.dedup();

        let mut segments: Vec<&str> = user
            .and_then(|u| u.data.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|d| d.segment.as_ref())
            .flatten()
            .filter_map(|s| s.id.as_deref())
            .collect();
        segments.sort_unstable();
        segments.dedup();

        RequestFacts {
            now,
            country,
            region,
            device_type: device.and_then(|d| d.devicetype).map(|t| t.0),
            os: device
                .and_then(|d| d.os.as_deref())
                .map(|o| lower(o.trim())),
            domains,
            publisher,
            categories,
            segments,
            hour: local_hour(now, utcoffset),
            first_price: req.at == Some(AuctionType::FIRST_PRICE),
            bcat: req.bcat.as_deref().unwrap_or_default(),
            badv: req
                .badv
                .iter()
                .flatten()
                .filter_map(|d| normalize_request_domain(d))
                .collect(),
        }
    }

    /// The decision time given at extraction.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Hour of the day (0-23) used for `hours` targeting.
    pub fn hour(&self) -> u8 {
        self.hour
    }

    /// Whether the request's auction (`at`) is first price.
    pub fn first_price(&self) -> bool {
        self.first_price
    }

    pub fn country(&self) -> Option<Country> {
        self.country
    }

    /// Lower-cased domains the request is on (site domain, or app bundle and domain).
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.iter().map(|d| d.as_ref())
    }
}

/// Per-impression facts: what can be shown and on what terms.
#[derive(Clone, Debug)]
pub struct ImpFacts<'a> {
    pub(crate) sizes: Vec<Size>,
    pub(crate) video: Option<&'a Video>,
    pub(crate) deals: Vec<DealFacts<'a>>,
    pub(crate) private_auction: bool,
    pub(crate) floor: Price,
}

/// One deal on offer, as a campaign's `deals` targeting sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DealFacts<'a> {
    /// Position in `imp.pmp.deals` (what [`super::Candidate::deal`] refers to).
    pub index: u32,
    pub id: &'a str,
    /// `deal.bidfloor`, 0 when absent (a deal does not inherit the impression's floor).
    pub floor: Price,
    /// `deal.at`, when the deal overrides the request's auction type.
    pub at: Option<AuctionType>,
}

impl<'a> ImpFacts<'a> {
    /// Extracts the facts of one impression: banner sizes (`banner.format[]` with positive
    /// `w`/`h`, and `banner.w`/`h`), the video object, the deals with an id, whether only deal
    /// bids are accepted, and the floor (negative floors read as 0).
    pub fn from_imp(imp: &'a Imp) -> ImpFacts<'a> {
        let mut sizes = Vec::new();
        if let Some(banner) = &imp.banner {
            for f in banner.format.iter().flatten() {
                if let Some(s) = size_of(f.w, f.h) {
                    sizes.push(s);
                }
            }
            if let Some(s) = size_of(banner.w, banner.h) {
                sizes.push(s);
            }
        }
        sizes.sort_unstable();
        sizes.dedup();
        let pmp = imp.pmp.as_ref();
        let deals = pmp
            .and_then(|p| p.deals.as_ref())
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, d)| {
                Some(DealFacts {
                    index: u32::try_from(i).ok()?,
                    id: d.id.as_deref().filter(|id| !id.is_empty())?,
                    floor: non_negative(d.bidfloor.unwrap_or_default()),
                    at: d.at,
                })
            })
            .collect();
        ImpFacts {
            sizes,
            video: imp.video.as_ref(),
            deals,
            private_auction: pmp.and_then(|p| p.private_auction) == Some(1),
            floor: non_negative(imp.bidfloor.unwrap_or_default()),
        }
    }

    /// Banner sizes on offer, sorted, deduplicated.
    pub fn sizes(&self) -> &[Size] {
        &self.sizes
    }

    /// The deals on offer that have an id, in request order.
    pub fn deals(&self) -> &[DealFacts<'a>] {
        &self.deals
    }

    /// `pmp.private_auction == 1`: only bids on a listed deal are accepted.
    pub fn private_auction(&self) -> bool {
        self.private_auction
    }

    /// The impression's floor (`bidfloor`, 0 when absent or negative).
    pub fn floor(&self) -> Price {
        self.floor
    }

    /// The floor and auction kind for a bid through `deal` (an index of `imp.pmp.deals`, as
    /// in [`super::Candidate::deal`]) or in the open auction (`None`): a deal has its own
    /// floor and may override the auction type; a fixed-price deal (`at` = 3) counts as first
    /// price, since the bid is what is paid.
    pub fn terms(&self, req: &RequestFacts<'_>, deal: Option<u32>) -> (Price, bool) {
        match deal.and_then(|i| self.deals.iter().find(|d| d.index == i)) {
            Some(d) => {
                let first = match d.at {
                    Some(at) => at == AuctionType::FIRST_PRICE || at == AuctionType::FIXED_PRICE,
                    None => req.first_price,
                };
                (d.floor, first)
            }
            None => (self.floor, req.first_price),
        }
    }
}

fn non_negative(p: Price) -> Price {
    if p.micros() < 0 { Price::ZERO } else { p }
}

fn size_of(w: Option<i32>, h: Option<i32>) -> Option<Size> {
    let w = u32::try_from(w?).ok().filter(|&v| v > 0)?;
    let h = u32::try_from(h?).ok().filter(|&v| v > 0)?;
    Some(Size::new(w, h))
}

/// Lower-cases ASCII, borrowing when there is nothing to change.
fn lower(s: &str) -> Cow<'_, str> {
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(s.to_ascii_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}

/// A request's domain, lower case, without surrounding blanks or a trailing dot.
fn normalize_request_domain(raw: &str) -> Option<Cow<'_, str>> {
    let d = raw.trim();
    let d = d.strip_suffix('.').unwrap_or(d);
    (!d.is_empty()).then(|| lower(d))
}

fn push_domain<'a>(out: &mut Vec<Cow<'a, str>>, raw: &'a str) {
    if let Some(d) = normalize_request_domain(raw)
        && !out.contains(&d)
    {
        out.push(d);
    }
}

/// The host of an absolute URL (`https://news.example.com:443/a?b` -> `news.example.com`).
fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let end = rest.find(['/', '?', '#', ':']).unwrap_or(rest.len());
    let host = &rest[..end];
    (!host.is_empty()).then_some(host)
}

/// Hour of the day at `now` shifted by `utcoffset` minutes (ignored beyond +/-24 h).
fn local_hour(now: Timestamp, utcoffset: Option<i32>) -> u8 {
    let offset_secs = utcoffset
        .filter(|m| m.abs() <= 24 * 60)
        .map_or(0, |m| i64::from(m) * 60);
    let secs = i64::try_from(now.0 / 1000).unwrap_or(i64::MAX - 86_400) + offset_secs;
    // rem_euclid(24) is in 0..24, so the cast cannot truncate.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let hour = secs.div_euclid(3600).rem_euclid(24) as u8;
    hour
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_host_takes_the_authority() {
        assert_eq!(
            url_host("https://news.example.com:443/a?b"),
            Some("news.example.com")
        );
        assert_eq!(url_host("news.example.com/x"), Some("news.example.com"));
        assert_eq!(url_host("https://u:p@h.example/"), Some("h.example"));
        assert_eq!(url_host("https:///x"), None);
    }

    #[test]
    fn local_hour_applies_the_offset() {
        let ten_utc = Timestamp(10 * 3_600_000);
        assert_eq!(local_hour(ten_utc, None), 10);
        assert_eq!(local_hour(ten_utc, Some(120)), 12);
        assert_eq!(local_hour(ten_utc, Some(-660)), 23);
        assert_eq!(local_hour(ten_utc, Some(99_999)), 10);
        assert!(local_hour(Timestamp(u64::MAX), Some(-1440)) < 24);
    }
}
