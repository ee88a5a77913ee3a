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
//!    gathers it, sorts and deduplicates it, and keeps, in order, the campaigns that every
//!    other dimension's union holds and no `block_domains` posting of a request domain or
//!    parent does (membership probes: a bit test, or a step along a sorted list);
//! 3. otherwise works through the bitset a chunk of [`CHUNK_WORDS`] words at a time, in
//!    campaign order: in each chunk it intersects dimensions word by word, smallest first
//!    (once survivors are left in at most half the words, reading the bitsets at those words
//!    only), until survivors are left in a quarter of the words or fewer, or the dimensions
//!    run out; clears the campaigns whose `block_domains` postings hold a request domain or
//!    parent; and probes the survivors for the dimensions left, in campaign order, before the
//!    next chunk.
//!
//! Sorted lists are read front to back across chunks and probes (each part of a visit keeps
//! its read position), not searched again for each chunk. Either way every targeting dimension
//! is checked exactly from the postings, and each surviving campaign is verified and goes to
//! the visitor at once; when the visitor breaks no further intersection or verification is
//! done.
//!
//! Verification reads the packed records of `hot.rs` (flight, creatives' media and blocking
//! keys), not the campaign, unless a deal must be chosen: only then does it run the predicate
//! of [`super::targeting`], without the checks already made.
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
use crate::hot::{Hot, HotCampaign, ImpKeys};
use crate::key::SmallKey;
use crate::model::{BidRule, Campaign, Country, Media};
use crate::targeting::{Candidate, Done, campaign_matches_unchecked, parent_domains};

/// Words of the bitset intersected and verified at a time (4,096 campaigns): small enough that
/// an early stop skips most of the work, large enough that the per-chunk cost (one look at
/// each posting) stays small next to the words.
const CHUNK_WORDS: usize = 64;
// The live words of a chunk are the bits of a `u64`.
const _: () = assert!(CHUNK_WORDS <= 64);

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
    parts: Vec<Part>,
    /// The `block_domains` postings of the request's domains and parents.
    blocked: Vec<Part>,
    /// The postings of the request's domains and parents, each once.
    domains: Vec<DomainIds>,
    /// The request's `bcat` and `badv` and the impression's video MIME types, as keys of the
    /// set's creatives.
    keys: ImpKeys,
}

/// A posting taking part in one visit, and how far the chunks have read it: chunks come in
/// campaign order, so a sorted list is read once from front to back, not searched per chunk.
#[derive(Clone, Copy, Debug)]
struct Part {
    id: PostingId,
    /// For a sparse posting, the position in its list of the first member not yet read.
    next: u32,
}

impl Part {
    fn new(id: PostingId) -> Part {
        Part { id, next: 0 }
    }
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
            domains,
            keys,
        } = scratch;
        // Each restricting dimension: the size of its candidate union (an upper bound:
        // postings may overlap) and its postings, `parts[start..end]`. A dimension no campaign
        // restricts needs neither intersecting nor checking.
        idx.domain_ids(req, domains);
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
            idx.parts(dim, req, imp, domains, |id| {
                cost += idx.posting(id).map_or(0, Posting::len);
                parts.push(Part::new(id));
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
        idx.hot.imp_keys(req, imp, keys);
        blocked.clear();
        blocked.extend(
            domains
                .iter()
                .filter(|d| d.block != NO_POSTING)
                .map(|d| Part::new(d.block)),
        );
        // The union of a dimension's postings is exactly the campaigns that pass its check.
        done = done.with(first.dim.done());
        // Every dimension checked exactly, by intersection or by membership below.
        let all_done = dims
            .iter()
            .fold(done, |acc, d| acc.with(d.dim.done()))
            .with(Done::BLOCK_DOMAIN);
        let words = idx.words;
        let first_sparse = parts
            .get(first.start..first.end)
            .unwrap_or_default()
            .iter()
            .all(|p| matches!(idx.posting(p.id), Some(Posting::Sparse(_))));
        if first.cost <= words / 4 && first_sparse {
            ids.clear();
            for p in parts.get(first.start..first.end).unwrap_or_default() {
                if let Some(Posting::Sparse(list)) = idx.posting(p.id) {
                    ids.extend_from_slice(list);
                }
            }
            ids.sort_unstable();
            ids.dedup();
            // In campaign order, so each list is read front to back by the probes.
            for &ci in ids.iter() {
                if idx.passes(&dims[1..], parts, blocked, ci) {
                    self.verify(campaigns, ci, req, imp, keys, all_done, visit)?;
                }
            }
            return ControlFlow::Continue(());
        }
        let mut w0 = 0;
        while w0 < words {
            let len = CHUNK_WORDS.min(words - w0);
            acc.clear();
            acc.resize(len, 0);
            for p in parts.get_mut(first.start..first.end).unwrap_or_default() {
                idx.or_chunk(p, w0, acc);
            }
            // The words of the chunk that still hold survivors, bit `w` for word `w`.
            let mut live = acc
                .iter()
                .enumerate()
                .filter(|(_, a)| **a != 0)
                .fold(0u64, |live, (w, _)| live | (1 << w));
            let mut rest = dims.get(1..).unwrap_or_default();
            while let Some((d, later)) = rest.split_first() {
                // Intersect while the survivors are many; a few (about one per live word) cost
                // less to probe than a pass over the chunk for each dimension left.
                let live_words = live.count_ones() as usize;
                if live_words * 4 <= len {
                    break;
                }
                rest = later;
                tmp.clear();
                tmp.resize(len, 0);
                let d_parts = parts.get_mut(d.start..d.end).unwrap_or_default();
                if live_words * 2 > len {
                    for p in d_parts {
                        idx.or_chunk(p, w0, tmp);
                    }
                    for (a, t) in acc.iter_mut().zip(tmp.iter()) {
                        *a &= *t;
                    }
                    live = acc
                        .iter()
                        .enumerate()
                        .filter(|(_, a)| **a != 0)
                        .fold(0u64, |live, (w, _)| live | (1 << w));
                } else {
                    // Few live words: the dimension's bitsets are read at those words only.
                    for p in d_parts {
                        idx.or_live(p, w0, live, tmp);
                    }
                    for w in bits_of(live) {
                        if let (Some(a), Some(t)) = (acc.get_mut(w), tmp.get(w)) {
                            *a &= *t;
                            if *a == 0 {
                                live &= !(1 << w);
                            }
                        }
                    }
                }
            }
            if live != 0 {
                for p in blocked.iter_mut() {
                    idx.clear_chunk(p, w0, acc);
                }
                for (w, &word) in acc.iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let ci = (w0 + w) * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let ci = u32::try_from(ci).unwrap_or(u32::MAX);
                        // The dimensions left after an early stop, probed: blocked ones are
                        // already cleared.
                        if idx.passes(rest, parts, &mut [], ci) {
                            self.verify(campaigns, ci, req, imp, keys, all_done, visit)?;
                        }
                    }
                }
            }
            w0 += len;
        }
        ControlFlow::Continue(())
    }

    /// Runs the predicate, less the checks in `done`, on campaign `ci`; visits what fits.
    /// Reads the campaign itself only for checks left undone or a deal to choose; otherwise
    /// the packed records settle it.
    #[allow(clippy::too_many_arguments)]
    fn verify(
        &self,
        campaigns: &[Campaign],
        ci: u32,
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        keys: &ImpKeys,
        done: Done,
        visit: &mut impl FnMut(Candidate) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let Some(hot) = self.hot.campaign(ci) else {
            return ControlFlow::Continue(());
        };
        if !hot.in_flight(req.now.0) {
            return ControlFlow::Continue(());
        }
        let deal = if done != Done::ALL || hot.deals || imp.private_auction {
            let Some(c) = campaigns.get(ci as usize) else {
                return ControlFlow::Continue(());
            };
            match campaign_matches_unchecked(c, req, imp, done) {
                Some(deal) => deal,
                None => return ControlFlow::Continue(()),
            }
        } else {
            None
        };
        self.hot.visit_creatives(ci, hot, imp, keys, deal, visit)
    }

    /// The bid rule of campaign `ci`, from the packed records.
    pub(crate) fn bid_rule(&self, ci: u32) -> Option<BidRule> {
        self.hot.campaign(ci).map(HotCampaign::bid)
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

    /// Calls `f` with the members of `list` in the `words` words from word `w0`, as bit
    /// positions in them, reading from `*next` and leaving it at the first member after the
    /// chunk. Members before the chunk (of chunks this posting sat out) are skipped by a binary
    /// search; otherwise the list is read once over all chunks.
    fn in_chunk(list: &[u32], next: &mut u32, w0: usize, words: usize, mut f: impl FnMut(usize)) {
        let lo = w0 * 64;
        let hi = lo + words * 64;
        let mut i = seek(list, *next as usize, |ci| (ci as usize) < lo);
        for &ci in list.get(i..).unwrap_or_default() {
            let ci = ci as usize;
            if ci >= hi {
                break;
            }
            f(ci - lo);
            i += 1;
        }
        // A list holds fewer members than campaigns, far below u32::MAX.
        *next = u32::try_from(i).unwrap_or(u32::MAX);
    }

    /// ORs the members in words `w0..w0 + chunk.len()` into `chunk`; `next` as in
    /// [`Posting::in_chunk`].
    fn or_chunk(&self, next: &mut u32, w0: usize, chunk: &mut [u64]) {
        match self {
            Posting::Sparse(list) => {
                Self::in_chunk(list, next, w0, chunk.len(), |i| {
                    if let Some(word) = chunk.get_mut(i / 64) {
                        *word |= 1 << (i % 64);
                    }
                });
            }
            Posting::Dense { bits, .. } => {
                let bits = bits.get(w0..).unwrap_or_default();
                for (a, b) in chunk.iter_mut().zip(bits.iter()) {
                    *a |= *b;
                }
            }
        }
    }

    /// Clears the members in words `w0..w0 + chunk.len()` from `chunk`; `next` as in
    /// [`Posting::in_chunk`].
    fn clear_chunk(&self, next: &mut u32, w0: usize, chunk: &mut [u64]) {
        match self {
            Posting::Sparse(list) => {
                Self::in_chunk(list, next, w0, chunk.len(), |i| {
                    if let Some(word) = chunk.get_mut(i / 64) {
                        *word &= !(1 << (i % 64));
                    }
                });
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

/// The first position at or after `from` in the sorted `list` whose member is not `below`:
/// a galloping search, so that a read position moving forward by a few members costs a few
/// nearby reads, not a binary search over the rest of a cold list.
fn seek(list: &[u32], from: usize, below: impl Fn(u32) -> bool) -> usize {
    let rest = list.get(from..).unwrap_or_default();
    if !rest.first().is_some_and(|&x| below(x)) {
        return from;
    }
    // rest[lo] is below; find a step past which the members are not.
    let (mut lo, mut step) = (0, 1);
    while rest.get(lo + step).is_some_and(|&x| below(x)) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(rest.len());
    let window = rest.get(lo + 1..hi).unwrap_or_default();
    from + lo + 1 + window.partition_point(|&x| below(x))
}

/// The positions of the set bits of `mask`, lowest first.
fn bits_of(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let w = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            w
        })
    })
}

fn set_bit(bits: &mut [u64], ci: u32) {
    if let Some(word) = bits.get_mut(ci as usize / 64) {
        *word |= 1 << (ci % 64);
    }
}

/// Position of a posting in [`Index::postings`].
type PostingId = u32;

/// No posting: a [`DomainIds`] side the domain is not on.
const NO_POSTING: PostingId = PostingId::MAX;

/// The postings of one domain: the campaigns that allow it (`domains`) and those that block
/// it (`block_domains`), [`NO_POSTING`] when none.
#[derive(Clone, Copy, Debug)]
struct DomainIds {
    allow: PostingId,
    block: PostingId,
}

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

impl ToKey<SmallKey> for String {
    fn to_key(&self) -> SmallKey {
        SmallKey::new(self)
    }
}

impl<T: Copy> ToKey<T> for T {
    fn to_key(&self) -> T {
        *self
    }
}

#[derive(Debug)]
pub(crate) struct Index {
    /// Words of a bitset over all campaigns.
    words: usize,
    /// Every posting of every dimension; the dimensions hold positions in it.
    postings: Box<[Posting]>,
    /// By banner size (`Size::key`); `any` holds the campaigns with a video creative.
    media: Postings<u64>,
    deal: Postings<SmallKey>,
    country: Postings<Country>,
    /// `domains` (allow list) and `block_domains`, one map: a request domain or parent is
    /// looked up once for both.
    domains: FxHashMap<SmallKey, DomainIds>,
    /// The campaigns without a `domains` allow list.
    domain_any: PostingId,
    /// `block_domains` (`any` unused): removed from the survivors of an intersection.
    /// Per campaign and creative, what verification and ranking read before (often instead
    /// of) the campaign itself.
    hot: Hot,
    publisher: Postings<SmallKey>,
    segment: Postings<SmallKey>,
    category: Postings<SmallKey>,
    region: Postings<SmallKey>,
    os: Postings<SmallKey>,
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
        let none = DomainIds {
            allow: NO_POSTING,
            block: NO_POSTING,
        };
        let mut domains: FxHashMap<SmallKey, DomainIds> = FxHashMap::default();
        for (key, id) in domain.values {
            domains.entry(key).or_insert(none).allow = id;
        }
        for (key, id) in block.values {
            domains.entry(key).or_insert(none).block = id;
        }
        domains.shrink_to_fit();
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
            domains,
            domain_any: domain.any,
            hot: Hot::build(campaigns),
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

    /// Whether campaign `ci` is in the union of each dimension of `dims` (their postings in
    /// `parts`) and in none of `blocked`: the exact check of those dimensions, by membership,
    /// without reading the campaign. Calls must come in increasing `ci` for the parts' read
    /// positions to stay valid (a later chunk's read may follow).
    fn passes(&self, dims: &[DimParts], parts: &mut [Part], blocked: &mut [Part], ci: u32) -> bool {
        dims.iter().all(|d| {
            parts
                .get_mut(d.start..d.end)
                .unwrap_or_default()
                .iter_mut()
                .any(|p| self.contains(p, ci))
        }) && !blocked.iter_mut().any(|p| self.contains(p, ci))
    }

    /// Whether part `p`'s posting holds campaign `ci`; a sparse part's read position moves to
    /// the first member not below `ci`.
    fn contains(&self, p: &mut Part, ci: u32) -> bool {
        match self.posting(p.id) {
            Some(Posting::Sparse(list)) => {
                let at = seek(list, p.next as usize, |x| x < ci);
                // A list holds fewer members than campaigns, far below u32::MAX.
                p.next = u32::try_from(at).unwrap_or(u32::MAX);
                list.get(at) == Some(&ci)
            }
            Some(Posting::Dense { bits, .. }) => bits
                .get(ci as usize / 64)
                .is_some_and(|w| w & (1 << (ci % 64)) != 0),
            None => false,
        }
    }

    /// ORs part `p`'s members in words `w0..w0 + chunk.len()` into `chunk`.
    fn or_chunk(&self, p: &mut Part, w0: usize, chunk: &mut [u64]) {
        if let Some(posting) = self.posting(p.id) {
            posting.or_chunk(&mut p.next, w0, chunk);
        }
    }

    /// ORs part `p`'s members into `chunk` (words `w0..w0 + chunk.len()`), at least at the
    /// words set in `live` (bit `w` for word `w`): a bitset is read there only; a list is
    /// read over the chunk.
    fn or_live(&self, p: &mut Part, w0: usize, live: u64, chunk: &mut [u64]) {
        match self.posting(p.id) {
            Some(Posting::Dense { bits, .. }) => {
                let bits = bits.get(w0..).unwrap_or_default();
                for w in bits_of(live) {
                    if let (Some(c), Some(b)) = (chunk.get_mut(w), bits.get(w)) {
                        *c |= *b;
                    }
                }
            }
            Some(posting) => posting.or_chunk(&mut p.next, w0, chunk),
            None => {}
        }
    }

    /// Clears part `p`'s members in words `w0..w0 + chunk.len()` from `chunk`.
    fn clear_chunk(&self, p: &mut Part, w0: usize, chunk: &mut [u64]) {
        if let Some(posting) = self.posting(p.id) {
            posting.clear_chunk(&mut p.next, w0, chunk);
        }
    }

    /// Fills `out` with the postings of the request's domains and their parents, each
    /// domain once (a parent shared by two request domains is looked up once).
    fn domain_ids(&self, req: &RequestFacts<'_>, out: &mut Vec<DomainIds>) {
        out.clear();
        if self.domains.is_empty() {
            return;
        }
        for (k, d) in req.domains.iter().enumerate() {
            for parent in parent_domains(d) {
                let seen = req.domains[..k]
                    .iter()
                    .any(|e| parent_domains(e).any(|p| p == parent));
                if let (false, Some(&ids)) = (seen, self.domains.get(parent)) {
                    out.push(ids);
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
            Dim::Domain => &self.domain_any,
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
        domains: &[DomainIds],
        mut f: impl FnMut(PostingId),
    ) {
        fn strings(p: &Postings<SmallKey>, values: &[&str], f: &mut impl FnMut(PostingId)) {
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
                f(self.domain_any);
                for d in domains.iter().filter(|d| d.allow != NO_POSTING) {
                    f(d.allow);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_finds_what_a_binary_search_finds() {
        let list: Vec<u32> = (0..200).map(|i| i * 8 + i % 7).collect();
        for from in 0..=list.len() + 1 {
            for target in 0..1_700 {
                let expected = from.min(list.len())
                    + list
                        .get(from..)
                        .unwrap_or_default()
                        .partition_point(|&x| x < target);
                let expected = if from > list.len() { from } else { expected };
                assert_eq!(
                    seek(&list, from, |x| x < target),
                    expected,
                    "{from} {target}"
                );
            }
        }
    }
}
