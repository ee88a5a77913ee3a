//! The targeting predicate: whether a campaign, and which of its creatives, may bid on an
//! impression. One definition, used both by the index (on the few campaigns it selects) and by
//! the brute-force scan it is tested against.
//!
//! Rules (see `docs/campaigns.md`):
//! - every dimension the campaign sets must match; an unset dimension matches anything,
//!   including a request that lacks the value; a set dimension never matches a request that
//!   lacks the value;
//! - list dimensions match when the request's value (or any of its values, for categories and
//!   segments) is in the list;
//! - domains match the request domain or any parent of it (`news.example.com` is matched by
//!   `example.com`); `block_domains` rejects the same way;
//! - a campaign with `deals` bids only through the first deal of the impression (in request
//!   order) that it lists; a campaign without `deals` bids in the open auction, which a private
//!   auction (`pmp.private_auction = 1`) does not have;
//! - the flight must contain the decision time.
//!
//! A creative fits when its size is among the impression's banner sizes (and the campaign's
//! `sizes`, when set), or when it is a video that the impression's video player accepts; and
//! when none of its categories is blocked by `bcat` (a blocked `IAB7` also blocks `IAB7-39`)
//! and none of its advertiser domains is blocked by `badv` (parents included).

use std::ops::ControlFlow;

use openrtb::Video;

use crate::facts::{ImpFacts, RequestFacts};
use crate::model::{Campaign, Creative, Media, VideoCreative};

/// Targeting dimensions whose check the caller has already done exactly (the index, by
/// intersecting postings); [`campaign_matches_unchecked`] skips them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Done(u16);

impl Done {
    pub(crate) const NONE: Done = Done(0);
    pub(crate) const COUNTRY: Done = Done(1);
    pub(crate) const DEVICE_TYPE: Done = Done(1 << 1);
    pub(crate) const HOUR: Done = Done(1 << 2);
    pub(crate) const OS: Done = Done(1 << 3);
    pub(crate) const REGION: Done = Done(1 << 4);
    pub(crate) const PUBLISHER: Done = Done(1 << 5);
    pub(crate) const DOMAIN: Done = Done(1 << 6);
    pub(crate) const CATEGORY: Done = Done(1 << 7);
    pub(crate) const SEGMENT: Done = Done(1 << 8);
    pub(crate) const BLOCK_DOMAIN: Done = Done(1 << 9);
    /// Every check above.
    pub(crate) const ALL: Done = Done((1 << 10) - 1);

    pub(crate) fn with(self, other: Done) -> Done {
        Done(self.0 | other.0)
    }

    fn has(self, other: Done) -> bool {
        self.0 & other.0 != 0
    }
}

/// The campaign-level decision: `None` when the campaign may not bid on this impression,
/// `Some(deal)` when it may, with the position in `imp.pmp.deals` of the deal it bids through
/// (`Some(None)`: open auction).
pub fn campaign_matches(
    c: &Campaign,
    req: &RequestFacts<'_>,
    imp: &ImpFacts<'_>,
) -> Option<Option<u32>> {
    campaign_matches_unchecked(c, req, imp, Done::NONE)
}

/// [`campaign_matches`] without the checks in `done`, which the caller guarantees. The flight
/// and the deal choice are always checked.
pub(crate) fn campaign_matches_unchecked(
    c: &Campaign,
    req: &RequestFacts<'_>,
    imp: &ImpFacts<'_>,
    done: Done,
) -> Option<Option<u32>> {
    if !c.flight.contains(req.now) {
        return None;
    }
    let t = &c.targeting;
    let deal = match &t.deals {
        Some(list) => Some(
            imp.deals
                .iter()
                .find(|d| list.binary_search_by(|x| x.as_str().cmp(d.id)).is_ok())?
                .index,
        ),
        None if imp.private_auction => return None,
        None => None,
    };
    // Each check: skipped when done, passed when the dimension is not set.
    if !done.has(Done::COUNTRY)
        && let Some(list) = &t.countries
        && req.country.is_none_or(|v| list.binary_search(&v).is_err())
    {
        return None;
    }
    if !done.has(Done::DEVICE_TYPE)
        && let Some(list) = &t.device_types
        && req
            .device_type
            .is_none_or(|v| list.binary_search(&v).is_err())
    {
        return None;
    }
    if !done.has(Done::HOUR) && !t.allows_hour(req.hour) {
        return None;
    }
    if !done.has(Done::OS)
        && let Some(list) = &t.os
        && !req.os.as_deref().is_some_and(|v| contains(list, v))
    {
        return None;
    }
    if !done.has(Done::REGION)
        && let Some(list) = &t.regions
        && !req.region.as_deref().is_some_and(|v| contains(list, v))
    {
        return None;
    }
    if !done.has(Done::PUBLISHER)
        && let Some(list) = &t.publishers
        && !req.publisher.is_some_and(|v| contains(list, v))
    {
        return None;
    }
    if !done.has(Done::DOMAIN)
        && let Some(list) = &t.domains
        && !req.domains.iter().any(|d| domain_listed(list, d))
    {
        return None;
    }
    if !done.has(Done::CATEGORY)
        && let Some(list) = &t.categories
        && !req.categories.iter().any(|v| contains(list, v))
    {
        return None;
    }
    if !done.has(Done::SEGMENT)
        && let Some(list) = &t.segments
        && !req.segments.iter().any(|v| contains(list, v))
    {
        return None;
    }
    if !done.has(Done::BLOCK_DOMAIN)
        && let Some(list) = &t.block_domains
        && req.domains.iter().any(|d| domain_listed(list, d))
    {
        return None;
    }
    Some(deal)
}

/// Whether `creative` of campaign `c` can fill the impression and is not blocked by the
/// request. Call only for a campaign that [`campaign_matches`].
pub fn creative_fits(
    c: &Campaign,
    creative: &Creative,
    req: &RequestFacts<'_>,
    imp: &ImpFacts<'_>,
) -> bool {
    let media_ok = match &creative.media {
        Media::Banner(size) => {
            imp.sizes.binary_search(size).is_ok()
                && c.targeting
                    .sizes
                    .as_ref()
                    .is_none_or(|list| list.binary_search(size).is_ok())
        }
        Media::Video(v) => imp.video.is_some_and(|iv| video_fits(v, iv)),
    };
    // Empty block lists are the common case: test them first, without touching the
    // creative's own lists.
    media_ok
        && (req.bcat.is_empty()
            || !creative
                .cat
                .iter()
                .any(|cat| category_blocked(req.bcat, cat)))
        && (req.badv.is_empty()
            || !creative
                .adomain
                .iter()
                .any(|a| req.badv.iter().any(|b| is_domain_or_parent(a, b))))
}

fn video_fits(v: &VideoCreative, iv: &Video) -> bool {
    let mimes_ok = match iv.mimes.as_deref() {
        None | Some([]) => true,
        Some(accepted) => v
            .mimes
            .iter()
            .any(|m| accepted.iter().any(|a| a.trim().eq_ignore_ascii_case(m))),
    };
    let duration_ok = duration_fits(v.duration, iv);
    let protocols_ok = v.protocols.is_empty()
        || match iv.protocols.as_deref() {
            None | Some([]) => true,
            Some(accepted) => accepted
                .iter()
                .any(|p| v.protocols.binary_search(&p.0).is_ok()),
        };
    mimes_ok && duration_ok && protocols_ok
}

/// Whether a video of `duration` seconds meets the player's required durations (`rqddurs`),
/// else its `minduration` and `maxduration` (a `maxduration` of 0 or less sets no maximum).
pub(crate) fn duration_fits(duration: u32, iv: &Video) -> bool {
    let d = i64::from(duration);
    match iv.rqddurs.as_deref() {
        Some(durs) if !durs.is_empty() => durs.iter().any(|&r| i64::from(r) == d),
        _ => {
            iv.minduration.is_none_or(|min| i64::from(min) <= d)
                && iv
                    .maxduration
                    .is_none_or(|max| max <= 0 || d <= i64::from(max))
        }
    }
}

fn contains(sorted: &[String], value: &str) -> bool {
    sorted.binary_search_by(|x| x.as_str().cmp(value)).is_ok()
}

/// Whether `domain` or one of its parents is in the sorted `list`.
pub(crate) fn domain_listed(list: &[String], domain: &str) -> bool {
    parent_domains(domain).any(|d| contains(list, d))
}

/// `a.b.c`, `b.c`, `c`: the domain and each parent, without allocating.
pub(crate) fn parent_domains(domain: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(domain);
    std::iter::from_fn(move || {
        let current = next?;
        next = current
            .split_once('.')
            .map(|(_, rest)| rest)
            .filter(|r| !r.is_empty());
        Some(current)
    })
}

/// `domain` equals `parent` or is a subdomain of it (both lower case).
fn is_domain_or_parent(domain: &str, parent: &str) -> bool {
    domain == parent
        || (domain.len() > parent.len()
            && domain.ends_with(parent)
            && domain.as_bytes().get(domain.len() - parent.len() - 1) == Some(&b'.'))
}

/// `bcat` blocks a category itself and, for a tier-1 entry such as `IAB7`, its subcategories
/// (`IAB7-39`).
fn category_blocked(bcat: &[String], cat: &str) -> bool {
    let parent = cat.split_once('-').map(|(p, _)| p);
    bcat.iter()
        .any(|b| b.as_str() == cat || parent.is_some_and(|p| b.as_str() == p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_walk_up_to_the_last_label() {
        let all: Vec<&str> = parent_domains("news.example.com").collect();
        assert_eq!(all, ["news.example.com", "example.com", "com"]);
        let odd: Vec<&str> = parent_domains("a.").collect();
        assert_eq!(odd, ["a."]);
    }

    #[test]
    fn subdomain_test_needs_a_dot_boundary() {
        assert!(is_domain_or_parent("shop.example", "shop.example"));
        assert!(is_domain_or_parent("www.shop.example", "shop.example"));
        assert!(!is_domain_or_parent("myshop.example", "shop.example"));
    }

    #[test]
    fn tier1_category_blocks_its_children() {
        let bcat = vec!["IAB7".to_owned(), "IAB25-3".to_owned()];
        assert!(category_blocked(&bcat, "IAB7-39"));
        assert!(category_blocked(&bcat, "IAB7"));
        assert!(category_blocked(&bcat, "IAB25-3"));
        assert!(!category_blocked(&bcat, "IAB25-2"));
        assert!(!category_blocked(&bcat, "IAB70"));
    }
}

/// One way a campaign may answer an impression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    /// Index into [`crate::CampaignSet::campaigns`] (descending `max_cpm` order).
    pub campaign: u32,
    /// Index into that campaign's [`Campaign::creatives`].
    pub creative: u32,
    /// Position in `imp.pmp.deals` of the deal the campaign bids through (`None`: open
    /// auction).
    pub deal: Option<u32>,
}

/// Runs the predicate, less the checks in `done`, on campaign `c` (at position `ci`); visits
/// each creative that fits.
pub(crate) fn visit_fitting(
    ci: u32,
    c: &Campaign,
    req: &RequestFacts<'_>,
    imp: &ImpFacts<'_>,
    done: Done,
    visit: &mut impl FnMut(Candidate) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let Some(deal) = campaign_matches_unchecked(c, req, imp, done) else {
        return ControlFlow::Continue(());
    };
    for (j, cr) in c.creatives().iter().enumerate() {
        if creative_fits(c, cr, req, imp) {
            visit(Candidate {
                campaign: ci,
                // At most MAX_CREATIVES creatives.
                creative: u32::try_from(j).unwrap_or(u32::MAX),
                deal,
            })?;
        }
    }
    ControlFlow::Continue(())
}
