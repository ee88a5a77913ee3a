//! What the request path reads about a campaign, packed apart from the [`Campaign`]s so that a
//! decision never follows a pointer into one unless a deal must be chosen: each campaign's
//! flight and bid rule; each creative's media (banner size, or video duration, MIME types and
//! protocols) and the keys its categories and advertiser domains can be blocked by.
//!
//! Why: at 100,000 campaigns a decision verifies and prices a few dozen campaigns scattered
//! over hundreds of megabytes. Reading a [`Campaign`] there costs a cache miss for the struct,
//! one for its creatives, one per category, domain or MIME string: most of a decision's time
//! went to those misses, not to computing. A [`HotCampaign`] is one cache line holding, besides
//! the flight and bid rule, the banner sizes of the first creatives and a filter of the keys
//! its creatives can be blocked by: a banner campaign usually costs that one line; the
//! creative records ([`HotCreative`], adjacent per campaign) are read for a video, a fourth
//! creative, or a request that may block one.
//!
//! Strings become keys, each distinct string interned once at build, and a request's strings
//! are looked up once per impression ([`ImpKeys`]); a request string no creative carries
//! matches nothing and is dropped. The rules stay those of [`creative_fits`]:
//! - `bcat` blocks a creative category equal to an entry or whose tier-1 parent (`IAB7` of
//!   `IAB7-39`) is: a category stands for the keys {itself, its parent};
//! - `badv` blocks an advertiser domain equal to an entry or a subdomain of one: a domain
//!   stands for the keys {itself, each parent} ([`parent_domains`]);
//! - a video's MIME type fits when it equals an accepted one, ASCII case aside, the accepted
//!   one trimmed: both sides are keyed by their trimmed ASCII lower case.
//!
//! A creative is blocked exactly when one of its keys is among the request's, and fits exactly
//! when [`creative_fits`] comparing strings says so (tested in `tests/index.rs` and
//! `tests/keys.rs` against the scan, which uses it).
//!
//! [`creative_fits`]: crate::targeting::creative_fits

use std::borrow::Cow;
use std::ops::ControlFlow;

use openrtb::{Price, Video};

use crate::facts::{ImpFacts, RequestFacts};
use crate::fxhash::FxHashMap;
use crate::key::SmallKey;
use crate::model::{BidRule, Campaign, Media, Size};
use crate::targeting::{Candidate, duration_fits, parent_domains};

/// One campaign, as verification and ranking read it first: one cache line. A banner
/// campaign with at most [`INLINE`] creatives is settled from it alone unless the request
/// blocks something its creatives might carry ([`HotCampaign::block_sig`]).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct HotCampaign {
    /// Flight `[start, end)` in ms; `end == u64::MAX` means no end.
    start: u64,
    end: u64,
    /// The campaign's [`Campaign::bid`], read by ranking for every candidate it looks at.
    cpm: Price,
    max_cpm: Price,
    /// A filter of the blocking keys of all its creatives: a bit per key ([`sig_bit`]). No
    /// bit in common with the request's keys, no creative blocked.
    block_sig: u64,
    /// Shading in parts per million, 0 for none (a rule's shading is 1..=1_000_000).
    shading_ppm: u32,
    /// Position of the campaign's first creative in [`Hot::creatives`].
    first_creative: u32,
    /// The media of the first [`INLINE`] creatives: a banner's [`packed`] size, [`NO_FIT`]
    /// for a banner the campaign's `sizes` excludes, [`SEE_CREATIVE`] for a video (read from
    /// [`Hot::creatives`]).
    inline: [u32; INLINE],
    /// Number of creatives (at most [`crate::limits::MAX_CREATIVES`]).
    creatives: u8,
    /// Whether the campaign has `deals` targeting.
    pub(crate) deals: bool,
}

/// Creatives whose media a [`HotCampaign`] holds itself.
const INLINE: usize = 3;
/// [`HotCampaign::inline`] of a banner whose size the campaign's `sizes` excludes.
const NO_FIT: u32 = 0;
/// [`HotCampaign::inline`] of a video creative.
const SEE_CREATIVE: u32 = u32::MAX;

/// A banner size as one `u32`, `w` in the high half: for sizes below 65,536 on both sides
/// (every campaign's: at most [`crate::limits::MAX_DIMENSION`]), never 0 or `u32::MAX`.
fn packed(size: Size) -> Option<u32> {
    let (w, h) = (u16::try_from(size.w).ok()?, u16::try_from(size.h).ok()?);
    let code = (u32::from(w) << 16) | u32::from(h);
    (code != NO_FIT && code != SEE_CREATIVE).then_some(code)
}

/// The [`HotCampaign::block_sig`] bit of a category key (`kind` 0) or an advertiser key (1).
fn sig_bit(key: u32, kind: u64) -> u64 {
    1 << ((u64::from(key) * 2 + kind).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

impl HotCampaign {
    /// The campaign's bid rule.
    pub(crate) fn bid(&self) -> BidRule {
        BidRule {
            cpm: self.cpm,
            max_cpm: self.max_cpm,
            shading_ppm: (self.shading_ppm != 0).then_some(self.shading_ppm),
        }
    }

    /// Whether the flight contains `now` (ms since the epoch).
    pub(crate) fn in_flight(&self, now: u64) -> bool {
        // `end == u64::MAX` stands for "no end" (an RFC 3339 end is far below it).
        now >= self.start && (now < self.end || self.end == u64::MAX)
    }
}

/// A range `from..to` of [`Hot::keys`].
type Keys = (u32, u32);

/// One creative: what it can fill and the keys it can be blocked by.
#[derive(Clone, Copy, Debug)]
struct HotCreative {
    media: HotMedia,
    /// Keys of the creative's categories.
    cats: Keys,
    /// Keys of its advertiser domains.
    advs: Keys,
}

#[derive(Clone, Copy, Debug)]
enum HotMedia {
    /// A banner of this size ([`packed`]).
    Banner(u32),
    /// A banner whose size the campaign's `sizes` excludes: it never fits.
    Excluded,
    Video {
        /// Seconds.
        duration: u32,
        /// Keys of its MIME types.
        mimes: Keys,
        /// Its protocol codes, sorted (positive, so stored as `u32`); empty fits any player.
        protocols: Keys,
    },
}

/// The packed records of every campaign of a set, index for index.
#[derive(Debug, Default)]
pub(crate) struct Hot {
    campaigns: Box<[HotCampaign]>,
    /// Campaign after campaign, see [`HotCampaign::first_creative`].
    creatives: Box<[HotCreative]>,
    /// Keys and protocol codes, in the ranges the creatives name.
    keys: Box<[u32]>,
    /// Category key by string: every creative category and tier-1 parent.
    cat_keys: FxHashMap<SmallKey, u32>,
    /// Advertiser key by string: every advertiser domain and parent domain.
    adv_keys: FxHashMap<SmallKey, u32>,
    /// MIME key by trimmed ASCII lower case string.
    mime_keys: FxHashMap<SmallKey, u32>,
}

/// A request's `bcat` and `badv` and an impression's accepted video MIME types, as keys of
/// one [`Hot`], each list sorted and deduplicated; the buffers are reused.
#[derive(Debug, Default)]
pub(crate) struct ImpKeys {
    cats: Vec<u32>,
    advs: Vec<u32>,
    /// The [`sig_bit`]s of `cats` and `advs`.
    sig: u64,
    /// The impression's banner sizes, [`packed`] (a size too large to pack fits no campaign).
    sizes: Vec<u32>,
    /// The player states no MIME type: any fits.
    any_mime: bool,
    mimes: Vec<u32>,
}

fn intern(map: &mut FxHashMap<SmallKey, u32>, s: &str) -> u32 {
    if let Some(&k) = map.get(s) {
        return k;
    }
    // Fewer distinct strings than bytes in a campaign file, far below u32::MAX.
    let k = u32::try_from(map.len()).unwrap_or(u32::MAX);
    map.insert(SmallKey::new(s), k);
    k
}

/// Appends `values` to `keys`; returns their range.
fn push(keys: &mut Vec<u32>, values: impl IntoIterator<Item = u32>) -> Keys {
    // Keys grow with the file's bytes (a campaign's advertiser list, shared by the creatives
    // without their own, is stored once), far below u32::MAX.
    let at = |keys: &Vec<u32>| u32::try_from(keys.len()).unwrap_or(u32::MAX);
    let from = at(keys);
    keys.extend(values);
    (from, at(keys))
}

/// `s` trimmed, ASCII lower case (borrowed when already so).
fn mime_key(s: &str) -> Cow<'_, str> {
    let s = s.trim();
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(s.to_ascii_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}

impl Hot {
    pub(crate) fn build(campaigns: &[Campaign]) -> Hot {
        let mut hot = Hot::default();
        let mut records = Vec::with_capacity(campaigns.len());
        let mut creatives = Vec::new();
        let mut keys = Vec::new();
        for c in campaigns {
            let t = c.targeting();
            let f = c.flight();
            let bid = c.bid();
            let mut record = HotCampaign {
                start: f.start.map_or(0, |s| s.0),
                end: f.end.map_or(u64::MAX, |e| e.0),
                cpm: bid.cpm,
                max_cpm: bid.max_cpm,
                block_sig: 0,
                shading_ppm: bid.shading_ppm.unwrap_or(0),
                first_creative: u32::try_from(creatives.len()).unwrap_or(u32::MAX),
                inline: [NO_FIT; INLINE],
                creatives: u8::try_from(c.creatives().len()).unwrap_or(u8::MAX),
                deals: t.deals().is_some(),
            };
            // Creatives without their own `adomain` share the campaign's: one range for all.
            let mut last_advs: Option<(&[String], Keys)> = None;
            for (j, cr) in c.creatives().iter().enumerate() {
                let media = match cr.media() {
                    Media::Banner(size)
                        if t.sizes().is_none_or(|s| s.binary_search(size).is_ok()) =>
                    {
                        // Validated sizes always pack.
                        packed(*size).map_or(HotMedia::Excluded, HotMedia::Banner)
                    }
                    Media::Banner(_) => HotMedia::Excluded,
                    Media::Video(v) => HotMedia::Video {
                        duration: v.duration,
                        mimes: push(
                            &mut keys,
                            v.mimes
                                .iter()
                                .map(|m| intern(&mut hot.mime_keys, &mime_key(m))),
                        ),
                        protocols: push(
                            &mut keys,
                            v.protocols.iter().filter_map(|&p| u32::try_from(p).ok()),
                        ),
                    },
                };
                let mut cat_keys = Vec::new();
                for cat in cr.cat() {
                    cat_keys.push(intern(&mut hot.cat_keys, cat));
                    if let Some((parent, _)) = cat.split_once('-') {
                        cat_keys.push(intern(&mut hot.cat_keys, parent));
                    }
                }
                let cats = push(&mut keys, cat_keys);
                let advs = match last_advs {
                    Some((list, range)) if list == cr.adomain() => range,
                    _ => {
                        let mut adv_keys = Vec::new();
                        for domain in cr.adomain() {
                            for parent in parent_domains(domain) {
                                adv_keys.push(intern(&mut hot.adv_keys, parent));
                            }
                        }
                        push(&mut keys, adv_keys)
                    }
                };
                last_advs = Some((cr.adomain(), advs));
                if let Some(slot) = record.inline.get_mut(j) {
                    *slot = match media {
                        HotMedia::Banner(code) => code,
                        HotMedia::Excluded => NO_FIT,
                        HotMedia::Video { .. } => SEE_CREATIVE,
                    };
                }
                let block_keys = |range: Keys| {
                    keys.get(range.0 as usize..range.1 as usize)
                        .unwrap_or_default()
                        .iter()
                        .copied()
                };
                for k in block_keys(cats) {
                    record.block_sig |= sig_bit(k, 0);
                }
                for k in block_keys(advs) {
                    record.block_sig |= sig_bit(k, 1);
                }
                creatives.push(HotCreative { media, cats, advs });
            }
            records.push(record);
        }
        hot.campaigns = records.into_boxed_slice();
        hot.creatives = creatives.into_boxed_slice();
        hot.keys = keys.into_boxed_slice();
        hot.cat_keys.shrink_to_fit();
        hot.adv_keys.shrink_to_fit();
        hot.mime_keys.shrink_to_fit();
        hot
    }

    /// The record of campaign `ci`.
    pub(crate) fn campaign(&self, ci: u32) -> Option<&HotCampaign> {
        self.campaigns.get(ci as usize)
    }

    /// Fills `out` with the request's `bcat` and `badv` and the impression's accepted MIME
    /// types, as keys of this set.
    pub(crate) fn imp_keys(&self, req: &RequestFacts<'_>, imp: &ImpFacts<'_>, out: &mut ImpKeys) {
        fn sorted(list: &mut Vec<u32>) {
            list.sort_unstable();
            list.dedup();
        }
        out.cats.clear();
        out.advs.clear();
        out.mimes.clear();
        out.sizes.clear();
        out.sizes
            .extend(imp.sizes.iter().filter_map(|&size| packed(size)));
        if !self.cat_keys.is_empty() {
            let keys = req
                .bcat
                .iter()
                .filter_map(|b| self.cat_keys.get(b.as_str()));
            out.cats.extend(keys);
            sorted(&mut out.cats);
        }
        if !self.adv_keys.is_empty() {
            let keys = req
                .badv
                .iter()
                .filter_map(|b| self.adv_keys.get(b.as_ref()));
            out.advs.extend(keys);
            sorted(&mut out.advs);
        }
        out.sig = out.cats.iter().fold(0, |sig, &k| sig | sig_bit(k, 0));
        out.sig = out.advs.iter().fold(out.sig, |sig, &k| sig | sig_bit(k, 1));
        let accepted = imp
            .video
            .and_then(|v| v.mimes.as_deref())
            .unwrap_or_default();
        out.any_mime = accepted.is_empty();
        let keys = accepted
            .iter()
            .filter_map(|a| self.mime_keys.get(mime_key(a).as_ref()));
        out.mimes.extend(keys);
        sorted(&mut out.mimes);
    }

    fn keys(&self, range: Keys) -> &[u32] {
        self.keys
            .get(range.0 as usize..range.1 as usize)
            .unwrap_or_default()
    }

    /// Whether one of the keys in `range` is in `sorted`.
    fn any_in(&self, range: Keys, sorted: &[u32]) -> bool {
        !sorted.is_empty()
            && self
                .keys(range)
                .iter()
                .any(|k| sorted.binary_search(k).is_ok())
    }

    fn media_fits(&self, media: &HotMedia, imp: &ImpFacts<'_>, keys: &ImpKeys) -> bool {
        match *media {
            HotMedia::Banner(size) => keys.sizes.contains(&size),
            HotMedia::Excluded => false,
            HotMedia::Video {
                duration,
                mimes,
                protocols,
            } => imp.video.is_some_and(|iv: &Video| {
                (keys.any_mime || self.any_in(mimes, &keys.mimes))
                    && duration_fits(duration, iv)
                    && (protocols.0 == protocols.1
                        || match iv.protocols.as_deref() {
                            None | Some([]) => true,
                            Some(accepted) => accepted.iter().any(|p| {
                                u32::try_from(p.0)
                                    .is_ok_and(|p| self.keys(protocols).binary_search(&p).is_ok())
                            }),
                        })
            }),
        }
    }

    /// Visits each creative of campaign `ci` (`hot` its record) that fits `imp` and is not
    /// blocked by the request (`keys` from [`Hot::imp_keys`]), in creative order, bidding
    /// through `deal`: what [`creative_fits`](crate::targeting::creative_fits) accepts. Reads
    /// [`Hot::creatives`] only for a video, a creative past the first [`INLINE`], or when the
    /// request blocks a key the campaign's creatives may carry.
    pub(crate) fn visit_creatives(
        &self,
        ci: u32,
        hot: &HotCampaign,
        imp: &ImpFacts<'_>,
        keys: &ImpKeys,
        deal: Option<u32>,
        visit: &mut impl FnMut(Candidate) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let first = hot.first_creative as usize;
        let creative = |j: usize| self.creatives.get(first + j);
        let maybe_blocked = hot.block_sig & keys.sig != 0;
        for j in 0..usize::from(hot.creatives) {
            let media_fits = match hot.inline.get(j) {
                Some(&NO_FIT) => false,
                Some(&SEE_CREATIVE) | None => {
                    creative(j).is_some_and(|cr| self.media_fits(&cr.media, imp, keys))
                }
                Some(code) => keys.sizes.contains(code),
            };
            let fits = media_fits
                && !(maybe_blocked
                    && creative(j).is_none_or(|cr| {
                        self.any_in(cr.cats, &keys.cats) || self.any_in(cr.advs, &keys.advs)
                    }));
            if fits {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::set::CampaignSet;

    fn set(json: &str) -> CampaignSet {
        CampaignSet::from_json_bytes(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_campaign_record_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<HotCampaign>(), 64);
        assert_eq!(std::mem::align_of::<HotCampaign>(), 64);
    }

    #[test]
    fn sizes_pack_into_distinct_codes_and_large_ones_do_not() {
        let code = |w, h| packed(Size::new(w, h));
        assert_eq!(code(300, 250), Some((300 << 16) | 250));
        assert_ne!(code(1, 2), code(2, 1));
        assert_eq!(code(65_536, 1), None);
        assert_eq!(code(1, 70_000), None);
        assert_eq!(code(0, 0), None);
        assert_eq!(code(65_535, 65_535), None);
    }

    #[test]
    fn inherited_advertiser_lists_are_stored_once_per_campaign() {
        let s = set(
            r#"[{"id": "a", "adomain": ["x.brand.example"], "budget": {"total": 1},
            "bid": {"cpm": 1}, "creatives": [
              {"id": "1", "w": 1, "h": 1, "adm": "x", "cat": ["IAB7-39"]},
              {"id": "2", "w": 1, "h": 1, "adm": "x"},
              {"id": "3", "w": 1, "h": 1, "adm": "x", "adomain": ["other.example"]}]}]"#,
        );
        let hot = Hot::build(s.campaigns());
        // IAB7-39 and IAB7; x.brand.example, brand.example and example once; other.example
        // and example.
        assert_eq!(hot.keys.len(), 2 + 3 + 2);
        assert_eq!(hot.creatives[0].advs, hot.creatives[1].advs);
        assert_ne!(hot.creatives[1].advs, hot.creatives[2].advs);
        assert_eq!(hot.cat_keys.len(), 2);
        assert_eq!(hot.adv_keys.len(), 4);
    }
}
