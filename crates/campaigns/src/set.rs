//! [`CampaignSet`]: the validated campaigns of one file and the index built over them once, at
//! load. Immutable afterwards: a reload builds a new set aside and swaps it in whole.
//!
//! # Order
//!
//! The set holds its campaigns by highest possible bid, [`BidRule::max_cpm`] descending (file
//! order among equal ones), and every index ([`Candidate::campaign`], [`CampaignSet::position`])
//! is a position in that order. Matching visits candidates in campaign order, so a caller that
//! wants only the best few bids can stop as soon as the next campaign's `max_cpm` cannot beat
//! what it holds ([`CampaignSet::visit_candidates`]). How matching finds them without running
//! the predicate on every campaign is the index's story, in `postings.rs`.
//!
//! [`BidRule::max_cpm`]: crate::model::BidRule::max_cpm

use std::ops::ControlFlow;

use crate::error::{CampaignError, Problem};
use crate::facts::{ImpFacts, RequestFacts};
use crate::fxhash::FxHashMap;
use crate::limits::MAX_CAMPAIGNS;
use crate::model::{BidRule, Campaign};
use crate::parse::{self, Format};
use crate::postings::Index;
use crate::targeting::{Candidate, Done, visit_fitting};
use crate::validate::validate_all;

/// Validated campaigns and their index; see the module documentation.
///
/// [`CampaignSet::campaigns`] is in descending [`BidRule::max_cpm`] order, file order within
/// equal ones; [`Candidate::campaign`], [`CampaignSet::position`] and anything indexed like the
/// campaigns (a snapshot's states) use that order, not the file's.
///
/// [`BidRule::max_cpm`]: crate::model::BidRule::max_cpm
#[derive(Debug)]
pub struct CampaignSet {
    campaigns: Vec<Campaign>,
    by_id: FxHashMap<Box<str>, u32>,
    index: Index,
}

impl CampaignSet {
    /// Parses the bytes of a campaign file in `format`, validates and indexes them. Reading the
    /// file is the caller's (the bidder's loader): this crate does no I/O.
    pub fn from_bytes(format: Format, bytes: &[u8]) -> Result<CampaignSet, CampaignError> {
        Self::from_campaigns(validate_all(parse::parse_bytes(format, bytes)?)?)
    }

    /// From JSON: an array of campaigns, or `{"campaign": [...]}`.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<CampaignSet, CampaignError> {
        Self::from_campaigns(validate_all(parse::parse_json(bytes)?)?)
    }

    /// From TOML: `[[campaign]]` tables.
    pub fn from_toml_str(text: &str) -> Result<CampaignSet, CampaignError> {
        Self::from_campaigns(validate_all(parse::parse_toml(text)?)?)
    }

    /// Indexes already validated campaigns; refuses duplicate ids (named by their position in
    /// `campaigns`) and more than [`MAX_CAMPAIGNS`]. The set then orders them by descending
    /// `max_cpm`, stably (see [`CampaignSet::campaigns`]).
    pub fn from_campaigns(mut campaigns: Vec<Campaign>) -> Result<CampaignSet, CampaignError> {
        if campaigns.len() > MAX_CAMPAIGNS {
            return Err(CampaignError::invalid(
                "campaigns",
                Problem::TooMany(MAX_CAMPAIGNS),
            ));
        }
        let mut by_id = FxHashMap::default();
        by_id.reserve(campaigns.len());
        for (i, c) in campaigns.iter().enumerate() {
            // i < MAX_CAMPAIGNS < u32::MAX by the check above.
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            if by_id.insert(Box::from(c.id()), i).is_some() {
                return Err(CampaignError::invalid(
                    format!("campaigns[{i}].id"),
                    Problem::Duplicate(c.id().to_owned()),
                ));
            }
        }
        // Validated in file order above (errors name file positions); from here on, by highest
        // possible bid. `sort_by_key` is stable: equal ceilings keep file order.
        campaigns.sort_by_key(|c| std::cmp::Reverse(c.bid().max_cpm));
        for (i, c) in campaigns.iter().enumerate() {
            if let Some(slot) = by_id.get_mut(c.id()) {
                *slot = u32::try_from(i).unwrap_or(u32::MAX);
            }
        }
        let index = Index::build(&campaigns);
        Ok(CampaignSet {
            campaigns,
            by_id,
            index,
        })
    }

    /// The campaigns by descending `max_cpm`, file order within equal ones;
    /// [`Candidate::campaign`] indexes this slice.
    pub fn campaigns(&self) -> &[Campaign] {
        &self.campaigns
    }

    pub fn len(&self) -> usize {
        self.campaigns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.campaigns.is_empty()
    }

    /// The campaign with this id.
    pub fn get(&self, id: &str) -> Option<&Campaign> {
        let &i = self.by_id.get(id)?;
        self.campaigns.get(i as usize)
    }

    /// Index into [`CampaignSet::campaigns`] of the campaign with this id.
    pub fn position(&self, id: &str) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    /// Appends to `out` every (campaign, creative) that may bid on `imp`, sorted by campaign
    /// then creative, each once. Uses the index (see the module documentation); the same as
    /// [`CampaignSet::visit_candidates`] visiting everything.
    pub fn candidates(&self, req: &RequestFacts<'_>, imp: &ImpFacts<'_>, out: &mut Vec<Candidate>) {
        let _ = self.visit_candidates(req, imp, |c| {
            out.push(c);
            ControlFlow::Continue(())
        });
    }

    /// Calls `visit` with every (campaign, creative) that may bid on `imp`, in the order of
    /// [`CampaignSet::candidates`]: by campaign (so by descending `max_cpm`), then creative.
    /// Candidates are found lazily, in that order: when `visit` breaks, matching stops there,
    /// without intersecting or verifying the rest. Returns `Break` when `visit` did.
    pub fn visit_candidates(
        &self,
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        mut visit: impl FnMut(Candidate) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.index.visit(&self.campaigns, req, imp, &mut visit)
    }

    /// The bid rule of the campaign at `campaign` (an index of [`CampaignSet::campaigns`]),
    /// the same as its [`Campaign::bid`], read from a packed copy: ranking reads it for every
    /// candidate, and the campaign itself may be a cache miss away.
    pub fn bid_rule(&self, campaign: u32) -> Option<BidRule> {
        self.index.bid_rule(campaign)
    }

    /// The reference the index is tested against: the same predicate over every campaign.
    /// Same output as [`CampaignSet::candidates`], at a cost proportional to the set's size.
    pub fn candidates_scan(
        &self,
        req: &RequestFacts<'_>,
        imp: &ImpFacts<'_>,
        out: &mut Vec<Candidate>,
    ) {
        let mut push = |cand| {
            out.push(cand);
            ControlFlow::Continue(())
        };
        for (i, c) in self.campaigns.iter().enumerate() {
            // Fewer than u32::MAX campaigns, checked at construction.
            let ci = u32::try_from(i).unwrap_or(u32::MAX);
            let _ = visit_fitting(ci, c, req, imp, Done::NONE, &mut push);
        }
    }
}
