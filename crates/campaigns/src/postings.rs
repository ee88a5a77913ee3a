//! The index of a [`CampaignSet`](crate::CampaignSet), built once at load, and the matching
//! that answers an impression's candidates from it.
//!
//!
//! One posting per (dimension, value): the campaigns that name the value. Dimensions: media
//! (banner size of any creative, within the campaign's `sizes`; or video), deal, country,
//! domain allow list, publisher, segment, content category, region, OS, device type, hour.
//! Each dimension also has an `any` posting: the campaigns that do not restrict it. A posting
//! is a sorted `u32` list when sparse, a bitset over all campaigns when it holds at least one
//! campaign in 32 (where the bitset is no larger than the list).
//!
//! For an impression, each dimension's candidates are the union of `any` and the postings of
//! the request's values (for domains, the domain and each parent; for deals, `any` only outside
//! a private auction; for media, the impression's sizes and video). Their size is known from one
//! hash lookup per value. [`Index::visit`] then:
//! 1. orders the dimensions by that size and returns at once if one is empty;
//! 2. when the smallest is tiny (under a quarter of the bitset's word count) and all lists,
//!    gathers it, sorts and deduplicates it, and verifies those campaigns in order;
//! 3. otherwise works through the bitset a chunk of [`CHUNK_WORDS`] words at a time, in
//!    campaign order: in each chunk it intersects dimensions word by word, smallest first,
//!    until the survivors are few (fewer than one per 32 words) or the dimensions run out,
//!    clears the campaigns whose `block_domains` postings hold a request domain or parent, and
//!    verifies the survivors in campaign order before the next chunk.
//!
//! Either way, each candidate goes to the visitor as soon as it is verified, and when the
//! visitor breaks no further intersection or verification is done.
//!
//! Verification reads a packed per-campaign record first (flight, creative media keys, whether
//! it has deals) and runs the predicate of [`super::targeting`] without the checks the
//! intersection already made exactly; when every dimension was intersected, a banner campaign
//! without deals on a request without `bcat`/`badv` is settled without reading the campaign.
//!
//! So the work is at most a few passes over `n / 64` words plus verification of about as many
//! campaigns as match, never the predicate on every campaign; with an early stop, only the part
//! before the stop. Correctness rests on one property, tested against the brute-force scan: the
//! union of a dimension's postings is exactly the set of campaigns that pass that dimension's
//! check.

use std::cell::RefCell;
use std::ops::ControlFlow;

use crate::facts::{ImpFacts, RequestFacts};
use crate::fxhash::FxHashMap;
use crate::model::{Campaign, Country, Media};
use crate::targeting::{
    Candidate, Done, campaign_matches_unchecked, creative_fits, parent_domains, visit_fitting,
};

/// Words of the bitset intersected and verified at a time (4,096 campaigns): small enough that
/// an early stop skips most of the work, large enough that the per-chunk cost (one look at
/// each posting) stays small next to the words.
const CHUNK_WORDS: usize = 64;

/// Per-thread buffers of [`Index::visit`], kept between calls so that
/// matching allocates nothing once warm.
#[derive(Debug, Default)]
struct Scratch {
    /// The chunk being intersected, and the union of one dimension over it.
    acc: Vec<u64>,
    tmp: Vec<u64>,
    /// The campaigns of a tiny, all-list dimension.
    ids: Vec<u32>,
    /// The postings of every restricting dimension, one range per dimension.
    parts: Vec<PostingId>,
    /// The `block_domains` postings of the request's domains and parents.
    blocked: Vec<PostingId>,
}

/// A restricting dimension of one request: its candidate count bound and its postings.
#[derive(Clone, Copy, Debug)]
struct DimParts {
    cost: usize,
    dim: Dim,
    start: usize,
    end: usize,
}

impl Default for DimParts {
    fn default() -> Self {
        DimParts {
            cost: 0,
            dim: Dim::Media,
            start: 0,
            end: 0,
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Index {
    /// Calls `visit` with every candidate of `imp` among `campaigns` (the set this index was
    /// built over), in campaign order, stopping when `visit` breaks; see the module docs.
    pub(crate) fn visit(
        &self,
        campaigns: &[Campaign],
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        visit: &mut impl FnMut(Candidate) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if campaigns.is_empty() {
            return ControlFlow::Continue(());
        }
        SCRATCH.with(|cell| {
            // A visitor that matches again on this thread gets fresh buffers.
            let mut fresh = Scratch::default();
            let mut guard = cell.try_borrow_mut();
            let scratch = match guard.as_deref_mut() {
                Ok(s) => s,
                Err(_) => &mut fresh,
            };
            self.visit_with(campaigns, scratch, req, imp, visit)
        })
    }

    fn visit_with(
        &self,
        campaigns: &[Campaign],
        scratch: &mut Scratch,
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        visit: &mut impl FnMut(Candidate) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let n = campaigns.len();
        let idx = self;
        let Scratch {
            acc,
            tmp,
            ids,
            parts,
            blocked,
        } = scratch;
        // Each restricting dimension: the size of its candidate union (an upper bound:
        // postings may overlap) and its postings, `parts[start..end]`. A dimension no campaign
        // restricts needs neither intersecting nor checking.
        parts.clear();
        let mut dims = [DimParts::default(); Dim::ALL.len()];
        let mut restricting = 0;
        let mut done = Done::NONE;
        for dim in Dim::ALL {
            if idx.unrestricted(dim, n, imp) {
                done = done.with(dim.done());
                continue;
            }
            let start = parts.len();
            let mut cost = 0;
            idx.parts(dim, req, imp, |id| {
                cost += idx.posting(id).map_or(0, Posting::len);
                parts.push(id);
            });
            if cost == 0 {
                return ControlFlow::Continue(());
            }
            if let Some(slot) = dims.get_mut(restricting) {
                *slot = DimParts {
                    cost,
                    dim,
                    start,
                    end: parts.len(),
                };
                restricting += 1;
            }
        }
        let dims = &mut dims[..restricting];
        dims.sort_unstable_by_key(|d| d.cost);
        let Some(&first) = dims.first() else {
            return ControlFlow::Continue(());
        };
        let first_parts = parts.get(first.start..first.end).unwrap_or_default();
        // The union of a dimension's postings is exactly the campaigns that pass its check.
        done = done.with(first.dim.done());
        let words = idx.words;
        if first.cost <= words / 4
            && first_parts
                .iter()
                .all(|&id| matches!(idx.posting(id), Some(Posting::Sparse(_))))
        {
            ids.clear();
            for &id in first_parts {
                if let Some(Posting::Sparse(list)) = idx.posting(id) {
                    ids.extend_from_slice(list);
                }
            }
            ids.sort_unstable();
            ids.dedup();
            for &ci in ids.iter() {
                self.verify(campaigns, ci, req, imp, done, visit)?;
            }
            return ControlFlow::Continue(());
        }
        blocked.clear();
        idx.blocked_postings(req, blocked);
        let mut w0 = 0;
        while w0 < words {
            let len = CHUNK_WORDS.min(words - w0);
            acc.clear();
            acc.resize(len, 0);
            for &id in first_parts {
                idx.or_chunk(id, w0, acc);
            }
            let mut survivors: usize = acc.iter().map(|w| w.count_ones() as usize).sum();
            let mut chunk_done = done;
            // Intersect while a pass over the chunk costs less than checking the survivors.
            for d in &dims[1..] {
                if survivors * 32 <= len {
                    break;
                }
                tmp.clear();
                tmp.resize(len, 0);
                for &id in parts.get(d.start..d.end).unwrap_or_default() {
                    idx.or_chunk(id, w0, tmp);
                }
                survivors = 0;
                for (a, t) in acc.iter_mut().zip(tmp.iter()) {
                    *a &= *t;
                    survivors += a.count_ones() as usize;
                }
                chunk_done = chunk_done.with(d.dim.done());
            }
            if survivors > 0 {
                for &id in blocked.iter() {
                    idx.clear_chunk(id, w0, acc);
                }
                chunk_done = chunk_done.with(Done::BLOCK_DOMAIN);
                for (w, &word) in acc.iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let ci = (w0 + w) * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let ci = u32::try_from(ci).unwrap_or(u32::MAX);
                        self.verify(campaigns, ci, req, imp, chunk_done, visit)?;
                    }
                }
            }
            w0 += len;
        }
        ControlFlow::Continue(())
    }

    /// Runs the predicate, less the checks in `done`, on campaign `ci`; visits what fits.
    fn verify(
        &self,
        campaigns: &[Campaign],
        ci: u32,
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        done: Done,
        visit: &mut impl FnMut(Candidate) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let Some(hot) = self.hot.get(ci as usize) else {
            return ControlFlow::Continue(());
        };
        let now = req.now.0;
        // `end == u64::MAX` stands for "no end" (an RFC 3339 end is far below it).
        if now < hot.start || (now >= hot.end && hot.end != u64::MAX) {
            return ControlFlow::Continue(());
        }
        let Some(c) = campaigns.get(ci as usize) else {
            return ControlFlow::Continue(());
        };
        if done != Done::ALL {
            return visit_fitting(ci, c, req, imp, done, visit);
        }
        // Every targeting check is done: only the deal choice and the creatives remain, and
        // both can often be settled from the compact arrays without reading the campaign.
        let deal = if hot.deals || imp.private_auction {
            match campaign_matches_unchecked(c, req, imp, done) {
                Some(deal) => deal,
                None => return ControlFlow::Continue(()),
            }
        } else {
            None
        };
        let first = hot.first_creative as usize;
        let keys = self
            .creative_keys
            .get(first..first + usize::from(hot.creatives))
            .unwrap_or_default();
        let unblocked = req.bcat.is_empty() && req.badv.is_empty();
        for (j, &key) in keys.iter().enumerate() {
            let fits = match key {
                EXCLUDED_KEY => false,
                VIDEO_KEY => {
                    imp.video.is_some()
                        && c.creatives()
                            .get(j)
                            .is_some_and(|cr| creative_fits(c, cr, req, imp))
                }
                size => {
                    imp.sizes.iter().any(|s| s.key() == size)
                        && (unblocked
                            || c.creatives()
                                .get(j)
                                .is_some_and(|cr| creative_fits(c, cr, req, imp)))
                }
            };
            if fits {
                visit(Candidate {
                    campaign: ci,
                    creative: u32::try_from(j).unwrap_or(u32::MAX),
                    deal,
                })?;
            }
        }
        ControlFlow::Continue(())
    }
}

/// The dimensions that have postings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dim {
    Media,
    Deal,
    Country,
    Domain,
    Publisher,
    Segment,
    Category,
    Region,
    Os,
    DeviceType,
    Hour,
}

impl Dim {
    const ALL: [Dim; 11] = [
        Dim::Media,
        Dim::Deal,
        Dim::Country,
        Dim::Domain,
        Dim::Publisher,
        Dim::Segment,
        Dim::Category,
        Dim::Region,
        Dim::Os,
        Dim::DeviceType,
        Dim::Hour,
    ];

    /// The predicate check an exact intersection on this dimension makes redundant (the
    /// media and deal checks are still needed: they choose the creative and the deal).
    fn done(self) -> Done {
        match self {
            Dim::Media | Dim::Deal => Done::NONE,
            Dim::Country => Done::COUNTRY,
            Dim::Domain => Done::DOMAIN,
            Dim::Publisher => Done::PUBLISHER,
            Dim::Segment => Done::SEGMENT,
            Dim::Category => Done::CATEGORY,
            Dim::Region => Done::REGION,
            Dim::Os => Done::OS,
            Dim::DeviceType => Done::DEVICE_TYPE,
            Dim::Hour => Done::HOUR,
        }
    }
}

/// A set of campaign indices: a sorted list, or a bitset of `words` words with its count.
#[derive(Debug)]
enum Posting {
    Sparse(Box<[u32]>),
    Dense { bits: Box<[u64]>, count: usize },
}

impl Posting {
    /// Dense when the bitset is no larger than the list (at least one campaign in 32).
    fn new(list: Vec<u32>, n: usize, words: usize) -> Posting {
        if list.len().saturating_mul(32) >= n && !list.is_empty() {
            let mut bits = vec![0u64; words];
            for &ci in &list {
                set_bit(&mut bits, ci);
            }
            Posting::Dense {
                bits: bits.into_boxed_slice(),
                count: list.len(),
            }
        } else {
            Posting::Sparse(list.into_boxed_slice())
        }
    }

    fn len(&self) -> usize {
        match self {
            Posting::Sparse(list) => list.len(),
            Posting::Dense { count, .. } => *count,
        }
    }

    /// The members of `list` in the `words` words from word `w0`, as bit positions in them.
    fn in_chunk(list: &[u32], w0: usize, words: usize) -> impl Iterator<Item = usize> + '_ {
        let lo = w0 * 64;
        let hi = lo + words * 64;
        let from = list.partition_point(|&ci| (ci as usize) < lo);
        list.get(from..)
            .unwrap_or_default()
            .iter()
            .map(|&ci| ci as usize)
            .take_while(move |&ci| ci < hi)
            .map(move |ci| ci - lo)
    }

    /// ORs the members in words `w0..w0 + chunk.len()` into `chunk`.
    fn or_chunk(&self, w0: usize, chunk: &mut [u64]) {
        match self {
            Posting::Sparse(list) => {
                for i in Self::in_chunk(list, w0, chunk.len()) {
                    if let Some(word) = chunk.get_mut(i / 64) {
                        *word |= 1 << (i % 64);
                    }
                }
            }
            Posting::Dense { bits, .. } => {
                let bits = bits.get(w0..).unwrap_or_default();
                for (a, b) in chunk.iter_mut().zip(bits.iter()) {
                    *a |= *b;
                }
            }
        }
    }

    /// Clears the members in words `w0..w0 + chunk.len()` from `chunk`.
    fn clear_chunk(&self, w0: usize, chunk: &mut [u64]) {
        match self {
            Posting::Sparse(list) => {
                for i in Self::in_chunk(list, w0, chunk.len()) {
                    if let Some(word) = chunk.get_mut(i / 64) {
                        *word &= !(1 << (i % 64));
                    }
                }
            }
            Posting::Dense { bits, .. } => {
                let bits = bits.get(w0..).unwrap_or_default();
                for (a, b) in chunk.iter_mut().zip(bits.iter()) {
                    *a &= !*b;
                }
            }
        }
    }
}

fn set_bit(bits: &mut [u64], ci: u32) {
    if let Some(word) = bits.get_mut(ci as usize / 64) {
        *word |= 1 << (ci % 64);
    }
}

/// Position of a posting in [`Index::postings`].
type PostingId = u32;

/// The postings of one dimension, as positions in [`Index::postings`].
#[derive(Debug)]
struct Postings<K> {
    values: FxHashMap<K, PostingId>,
    any: PostingId,
}

/// Collects lists while the index is built; [`Lists::finish`] turns them into postings.
#[derive(Debug)]
struct Lists<K> {
    values: FxHashMap<K, Vec<u32>>,
    any: Vec<u32>,
}

impl<K> Default for Lists<K> {
    fn default() -> Self {
        Lists {
            values: FxHashMap::default(),
            any: Vec::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq> Lists<K> {
    /// Campaigns are added in index order, so every list comes out sorted.
    fn add<'v, Q>(&mut self, campaign: u32, values: Option<impl IntoIterator<Item = &'v Q>>)
    where
        Q: ToKey<K> + ?Sized + 'v,
    {
        match values {
            None => self.any.push(campaign),
            Some(values) => {
                for v in values {
                    let list = self.values.entry(v.to_key()).or_default();
                    // Values are deduplicated by validation; guard anyway.
                    if list.last() != Some(&campaign) {
                        list.push(campaign);
                    }
                }
            }
        }
    }

    /// Turns the lists into postings appended to `arena`.
    fn finish(self, n: usize, words: usize, arena: &mut Vec<Posting>) -> Postings<K> {
        let mut add = |list: Vec<u32>| {
            arena.push(Posting::new(list, n, words));
            // Fewer postings than campaigns times values, far below u32::MAX.
            PostingId::try_from(arena.len() - 1).unwrap_or(PostingId::MAX)
        };
        let mut values: FxHashMap<K, PostingId> = self
            .values
            .into_iter()
            .map(|(k, list)| (k, add(list)))
            .collect();
        values.shrink_to_fit();
        Postings {
            values,
            any: add(self.any),
        }
    }
}

impl<K> Postings<K> {
    fn get<Q>(&self, key: &Q) -> Option<PostingId>
    where
        K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.values.get(key).copied()
    }
}

trait ToKey<K> {
    fn to_key(&self) -> K;
}

impl ToKey<Box<str>> for String {
    fn to_key(&self) -> Box<str> {
        Box::from(self.as_str())
    }
}

impl<T: Copy> ToKey<T> for T {
    fn to_key(&self) -> T {
        *self
    }
}

/// What verification needs first about a campaign, packed (24 bytes) so that survivors of an
/// intersection cost one cache line or less before the campaign is read.
#[derive(Clone, Copy, Debug)]
struct Hot {
    /// Flight `[start, end)` in ms; `end == u64::MAX` means no end.
    start: u64,
    end: u64,
    /// Position of the campaign's first creative in [`Index::creative_keys`].
    first_creative: u32,
    /// Number of creatives (at most [`super::limits::MAX_CREATIVES`]).
    creatives: u8,
    /// Whether the campaign has `deals` targeting.
    deals: bool,
}

/// [`Index::creative_keys`] of a video creative; size keys are below 2^47.
const VIDEO_KEY: u64 = u64::MAX;
/// [`Index::creative_keys`] of a banner whose size the campaign's `sizes` excludes.
const EXCLUDED_KEY: u64 = u64::MAX - 1;

#[derive(Debug)]
pub(crate) struct Index {
    /// Words of a bitset over all campaigns.
    words: usize,
    /// Every posting of every dimension; the dimensions hold positions in it.
    postings: Box<[Posting]>,
    /// By banner size (`Size::key`); `any` holds the campaigns with a video creative.
    media: Postings<u64>,
    deal: Postings<Box<str>>,
    country: Postings<Country>,
    domain: Postings<Box<str>>,
    /// `block_domains` (`any` unused): removed from the survivors of an intersection.
    block: Postings<Box<str>>,
    /// Per campaign, what verification reads before (often instead of) the campaign itself.
    hot: Box<[Hot]>,
    /// Per creative (campaign after campaign, see [`Hot::first_creative`]): the banner size
    /// key, [`VIDEO_KEY`], or [`EXCLUDED_KEY`] for a size outside the campaign's `sizes`.
    creative_keys: Box<[u64]>,
    publisher: Postings<Box<str>>,
    segment: Postings<Box<str>>,
    category: Postings<Box<str>>,
    region: Postings<Box<str>>,
    os: Postings<Box<str>>,
    device_type: Postings<i32>,
    hour: Postings<u8>,
}

impl Index {
    pub(crate) fn build(campaigns: &[Campaign]) -> Index {
        let n = campaigns.len();
        let words = n.div_ceil(64);
        let mut media = Lists::<u64>::default();
        let mut deal = Lists::default();
        let mut country = Lists::default();
        let mut domain = Lists::default();
        let mut block = Lists::default();
        let mut hot = Vec::with_capacity(n);
        let mut creative_keys = Vec::new();
        let mut publisher = Lists::default();
        let mut segment = Lists::default();
        let mut category = Lists::default();
        let mut region = Lists::default();
        let mut os = Lists::default();
        let mut device_type = Lists::default();
        let mut hour = Lists::default();
        for (i, c) in campaigns.iter().enumerate() {
            let ci = u32::try_from(i).unwrap_or(u32::MAX);
            let t = c.targeting();
            let mut sizes = Vec::new();
            let mut video = false;
            for cr in c.creatives() {
                match cr.media() {
                    Media::Banner(size) => {
                        if t.sizes().is_none_or(|s| s.binary_search(size).is_ok()) {
                            sizes.push(size.key());
                        }
                    }
                    Media::Video(_) => video = true,
                }
            }
            sizes.sort_unstable();
            sizes.dedup();
            media.add(ci, Some(&sizes));
            if video {
                media.any.push(ci);
            }
            deal.add(ci, t.deals());
            country.add(ci, t.countries());
            domain.add(ci, t.domains());
            block.add(ci, t.block_domains());
            let f = c.flight();
            hot.push(Hot {
                start: f.start.map_or(0, |s| s.0),
                end: f.end.map_or(u64::MAX, |e| e.0),
                first_creative: u32::try_from(creative_keys.len()).unwrap_or(u32::MAX),
                creatives: u8::try_from(c.creatives().len()).unwrap_or(u8::MAX),
                deals: t.deals().is_some(),
            });
            creative_keys.extend(c.creatives().iter().map(|cr| match cr.media() {
                Media::Banner(size) if t.sizes().is_none_or(|s| s.binary_search(size).is_ok()) => {
                    size.key()
                }
                Media::Banner(_) => EXCLUDED_KEY,
                Media::Video(_) => VIDEO_KEY,
            }));
            publisher.add(ci, t.publishers());
            segment.add(ci, t.segments());
            category.add(ci, t.categories());
            region.add(ci, t.regions());
            os.add(ci, t.os());
            device_type.add(ci, t.device_types());
            let hours: Option<Vec<u8>> = t
                .hours_mask()
                .map(|mask| (0u8..24).filter(|h| mask & (1 << h) != 0).collect());
            hour.add(ci, hours.as_deref());
        }
        let mut arena = Vec::new();
        let media = media.finish(n, words, &mut arena);
        let deal = deal.finish(n, words, &mut arena);
        let country = country.finish(n, words, &mut arena);
        let domain = domain.finish(n, words, &mut arena);
        let block = block.finish(n, words, &mut arena);
        let publisher = publisher.finish(n, words, &mut arena);
        let segment = segment.finish(n, words, &mut arena);
        let category = category.finish(n, words, &mut arena);
        let region = region.finish(n, words, &mut arena);
        let os = os.finish(n, words, &mut arena);
        let device_type = device_type.finish(n, words, &mut arena);
        let hour = hour.finish(n, words, &mut arena);
        Index {
            words,
            postings: arena.into_boxed_slice(),
            media,
            deal,
            country,
            domain,
            block,
            hot: hot.into_boxed_slice(),
            creative_keys: creative_keys.into_boxed_slice(),
            publisher,
            segment,
            category,
            region,
            os,
            device_type,
            hour,
        }
    }

    fn posting(&self, id: PostingId) -> Option<&Posting> {
        self.postings.get(id as usize)
    }

    /// ORs posting `id`'s members in words `w0..w0 + chunk.len()` into `chunk`.
    fn or_chunk(&self, id: PostingId, w0: usize, chunk: &mut [u64]) {
        if let Some(p) = self.posting(id) {
            p.or_chunk(w0, chunk);
        }
    }

    /// Clears posting `id`'s members in words `w0..w0 + chunk.len()` from `chunk`.
    fn clear_chunk(&self, id: PostingId, w0: usize, chunk: &mut [u64]) {
        if let Some(p) = self.posting(id) {
            p.clear_chunk(w0, chunk);
        }
    }

    /// Appends the `block_domains` postings of the request's domains and their parents: the
    /// campaigns to clear from the survivors.
    fn blocked_postings(&self, req: &RequestFacts<'_>, out: &mut Vec<PostingId>) {
        if self.block.values.is_empty() {
            return;
        }
        for d in &req.domains {
            for parent in parent_domains(d) {
                if let Some(id) = self.block.get(parent) {
                    out.push(id);
                }
            }
        }
    }

    /// Whether no campaign restricts `dim` (so every campaign passes it).
    fn unrestricted(&self, dim: Dim, n: usize, imp: &ImpFacts<'_>) -> bool {
        let any = *match dim {
            Dim::Media => return false,
            Dim::Deal if imp.private_auction => return false,
            Dim::Deal => &self.deal.any,
            Dim::Country => &self.country.any,
            Dim::Domain => &self.domain.any,
            Dim::Publisher => &self.publisher.any,
            Dim::Segment => &self.segment.any,
            Dim::Category => &self.category.any,
            Dim::Region => &self.region.any,
            Dim::Os => &self.os.any,
            Dim::DeviceType => &self.device_type.any,
            Dim::Hour => &self.hour.any,
        };
        self.posting(any).map_or(0, Posting::len) == n
    }

    /// Calls `f` with each posting whose union is a superset of the campaigns matching `dim`
    /// for this request and impression.
    fn parts(
        &self,
        dim: Dim,
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        mut f: impl FnMut(PostingId),
    ) {
        fn strings(p: &Postings<Box<str>>, values: &[&str], f: &mut impl FnMut(PostingId)) {
            f(p.any);
            for v in values {
                if let Some(posting) = p.get(*v) {
                    f(posting);
                }
            }
        }
        match dim {
            Dim::Media => {
                for size in &imp.sizes {
                    if let Some(posting) = self.media.get(&size.key()) {
                        f(posting);
                    }
                }
                if imp.video.is_some() {
                    f(self.media.any);
                }
            }
            Dim::Deal => {
                if !imp.private_auction {
                    f(self.deal.any);
                }
                for d in &imp.deals {
                    if let Some(posting) = self.deal.get(d.id) {
                        f(posting);
                    }
                }
            }
            Dim::Country => {
                f(self.country.any);
                if let Some(posting) = req.country.and_then(|c| self.country.get(&c)) {
                    f(posting);
                }
            }
            Dim::Domain => {
                f(self.domain.any);
                for (k, d) in req.domains.iter().enumerate() {
                    for parent in parent_domains(d) {
                        // A parent shared with an earlier domain was already visited.
                        let seen = req.domains[..k]
                            .iter()
                            .any(|e| parent_domains(e).any(|p| p == parent));
                        if let (false, Some(posting)) = (seen, self.domain.get(parent)) {
                            f(posting);
                        }
                    }
                }
            }
            Dim::Publisher => strings(&self.publisher, req.publisher.as_slice(), &mut f),
            Dim::Segment => strings(&self.segment, &req.segments, &mut f),
            Dim::Category => strings(&self.category, &req.categories, &mut f),
            Dim::Region => {
                f(self.region.any);
                if let Some(posting) = req.region.as_deref().and_then(|r| self.region.get(r)) {
                    f(posting);
                }
            }
            Dim::Os => {
                f(self.os.any);
                if let Some(posting) = req.os.as_deref().and_then(|o| self.os.get(o)) {
                    f(posting);
                }
            }
            Dim::DeviceType => {
                f(self.device_type.any);
                if let Some(posting) = req.device_type.and_then(|t| self.device_type.get(&t)) {
                    f(posting);
                }
            }
            Dim::Hour => {
                f(self.hour.any);
                if let Some(posting) = self.hour.get(&req.hour) {
                    f(posting);
                }
            }
        }
    }
}
