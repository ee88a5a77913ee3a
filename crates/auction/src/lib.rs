//! Gavel's exchange auction: which bids may compete, who wins each impression, and what the
//! winner pays. Pure, synchronous and deterministic: no I/O, no clock, no randomness, no
//! global state. The same [`Rules`] and the same multiset of [`Candidate`]s give the same
//! [`Outcome`] whatever order the candidates arrive in.
//!
//! The exchange decodes the bid request and the bid responses, converts every price to
//! [`Price`] (integer micros), and calls [`run`] (or [`run_seeded`]) once per request. All
//! floors in [`Rules`] must already be in the auction currency: converting a `bidfloorcur`
//! other than the auction currency is the caller's job (this crate has no exchange rates).
//! Nothing the caller passes can make it panic: malformed bids are rejected, odd rules (no
//! impressions, repeated ids, negative floors) have documented meanings below.
//!
//! ```
//! use auction::{AuctionConfig, Candidate, ImpRules, PriceRule, Rules, run_seeded, tie_seed};
//! use openrtb::{LossReason, Price};
//!
//! let none: Vec<String> = Vec::new();
//! let rules = Rules {
//!     currency: "USD",
//!     price_rule: PriceRule::from_at(Some(2)),
//!     bcat: &none, badv: &none, wseat: &none, bseat: &none,
//!     imps: vec![ImpRules { id: "1", floor: Price::from_micros(500_000), private_auction: false, deals: vec![] }],
//! };
//! let adomain = vec!["advertiser.com".to_owned()];
//! let bid = |bidder: u32, micros: i64| Candidate {
//!     bidder, seat: "", bid_id: "b", imp_id: "1", price: Price::from_micros(micros),
//!     currency: "USD", deal_id: None, adomain: &adomain, cat: &none,
//! };
//! let candidates = [bid(1, 2_000_000), bid(2, 1_500_000), bid(3, 400_000)];
//! let outcome = run_seeded(&rules, &candidates, &AuctionConfig::default(), tie_seed("request-id"));
//!
//! let winner = outcome.imps[0].winner.unwrap();
//! assert_eq!(winner.candidate, 0);
//! assert_eq!(winner.clearing_price.to_string(), "1.51"); // second price 1.50 + 0.01
//! assert_eq!(outcome.imps[0].losers[0].reason, LossReason::LOST_TO_HIGHER_BID);
//! assert_eq!(outcome.rejected[0].reason.loss_reason(), LossReason::BELOW_AUCTION_FLOOR);
//! ```
//!
//! # Which bids compete (validity)
//!
//! Each candidate is checked in the order below; the first failed check is the reason it lands
//! in [`Outcome::rejected`]. Structural faults come first, then the publisher's and the deal's
//! policies, then price: a bid whose advertiser is blocked learns that, not merely that it was
//! under the floor, because bidding higher would not have helped it.
//!
//! 1. **Impression** ([`Rejection::UnknownImp`]): `imp_id` must equal the `id` of an impression of
//!    the request (exact match). If the request repeats an impression id, bids go to the first.
//! 2. **Price** ([`Rejection::NonPositivePrice`]): must be > 0. A zero or negative price is no
//!    offer to buy; OpenRTB requires a price, and a missing one reaches us as zero.
//! 3. **Currency** ([`Rejection::CurrencyMismatch`]): the bid currency must equal the auction
//!    currency, compared ASCII case-insensitively (ISO-4217 codes are upper case, but `usd` is
//!    unambiguous). An empty bid currency means `"USD"`, the default of `BidResponse.cur`; an
//!    empty auction currency likewise means `"USD"`, the exchange default. This crate converts
//!    nothing, so a bid in another currency cannot be compared with the others and is refused.
//! 4. **Deal** ([`Rejection::UnknownDeal`], [`Rejection::OpenBidInPrivateAuction`]): a bid with a
//!    `deal_id` must name a deal of *its* impression (exact match; the first deal with that id if
//!    it is repeated). An empty `deal_id` counts as absent: some bidders serialise "no deal" as
//!    `""`. When the impression's `pmp.private_auction` is set, bids without a deal are refused:
//!    the spec restricts such auctions "to the deals specified and the terms thereof".
//! 5. **Seat** ([`Rejection::SeatNotAllowed`]): when the request has a `wseat`, the bid's seat must
//!    be in it; a seat in `bseat` is refused. The spec says a seller uses at most one of the two;
//!    if both arrive, both apply. Seats are opaque ids agreed a priori, so the match is exact and
//!    case-sensitive; a bid without a seat (empty string) fails any non-empty `wseat`. The request
//!    lists apply to deal bids too: they describe who may buy this impression at all.
//! 6. **Deal seat** ([`Rejection::SeatNotAllowedForDeal`]): a deal with a non-empty `wseat` admits
//!    only those seats.
//! 7. **Blocked advertiser** ([`Rejection::BlockedAdvertiser`]): no `adomain` entry may be covered
//!    by `badv`. Domains compare ASCII case-insensitively and a listed domain covers its
//!    subdomains on whole labels (`ford.com` blocks `www.ford.com`, not `myford.com`): blocking an
//!    advertiser means every host name it declares.
//! 8. **Deal advertiser** ([`Rejection::AdvertiserNotAllowedForDeal`]): a deal with a non-empty
//!    `wadomain` admits a bid only if it declares at least one `adomain` and *every* one is
//!    covered by `wadomain` (same matching as `badv`). A bid may rotate creatives over all its
//!    domains, so one allowed domain among others is not enough, and a bid that declares none
//!    cannot be shown to be allowed.
//! 9. **Blocked category** ([`Rejection::BlockedCategory`]): no `cat` entry may be covered by
//!    `bcat`: ASCII case-insensitive, and a listed tier-1 category of Content Taxonomy 1.0 covers
//!    its subcategories (`IAB25` blocks `IAB25-3`), since that is what a publisher blocking the
//!    tier-1 category means. Numeric ids of later taxonomies match by equality.
//! 10. **Floor** ([`Rejection::BelowFloor`], [`Rejection::BelowDealFloor`]): the price must be at
//!     least the applicable floor: the impression's `bidfloor` for an open-market bid, the deal's
//!     `bidfloor` for a deal bid. The deal floor *replaces* the impression floor, even when it is
//!     lower: a deal's terms are what buyer and seller agreed for that deal. A negative floor
//!     counts as no floor (zero). A price equal to the floor is valid.
//!
//! Several bids with the same bid id, even from the same bidder, are distinct candidates: the
//! auction identifies a candidate by its index, and rejecting duplicates is a protocol policy
//! the exchange can apply before calling in.
//!
//! # Who wins (ranking)
//!
//! Per impression, the valid bid with the highest price wins. Deal bids compete on price with
//! open-market bids (a deal grants access and its own floor and auction type, not priority).
//!
//! Exact ties are broken by a *tie key*: a fixed-key hash (FNV-1a with a 64-bit finaliser,
//! implemented in this crate) of (tie seed, impression id, bidder, seat, bid id); the lower key
//! wins. The key depends on nothing but the bid itself, so arrival order cannot matter, and the
//! hash spreads tie wins evenly over bidders instead of favouring, say, the lowest bidder number.
//! If two tied bids have equal keys (only possible if they agree on all those fields), they are
//! ordered by bidder, seat, bid id, deal id, currency, advertiser domains and categories, so the
//! order is total over everything that distinguishes two candidates.
//!
//! The API carries no auction id, so [`run`] uses seed 0 and the key of a bid is the same in every
//! auction: two bidders that always tie with the same seats and bid ids (e.g. both always send
//! bid id `"1"`) would always resolve the same way. [`run_seeded`] with [`tie_seed`] of the bid
//! request id removes that bias while staying deterministic; the exchange should prefer it.
//!
//! # What the winner pays (price rule)
//!
//! The rule is the request's `at` ([`PriceRule::from_at`]), except that a winning deal bid uses its
//! deal's `at` when the deal has one ([`PriceRule::from_deal_at`]). The *applicable floor* is the
//! deal's floor for a deal bid, else the impression's.
//!
//! - [`PriceRule::FirstPrice`]: the winner pays its bid.
//! - [`PriceRule::SecondPrice`] ("second price plus"): the winner pays
//!   `min(max(second, floor) + increment, bid)`, where `second` is the highest price among the
//!   *other valid bids of the impression*, deal and open alike, whatever their own floors.
//!   With no other valid bid, `max(second, floor)` is the floor: a lone bid pays the floor plus
//!   the increment. The cap means the winner never pays more than it bid, and as the bid is at
//!   least the floor, it never pays less than the floor either. A deal winner's competition is
//!   the whole impression, not just its deal: those bids were real demand for this impression,
//!   and the deal floor already protects the seller's minimum. When the winner ties with the
//!   second price, the increment is absorbed by the cap and the winner pays exactly its bid.
//!   The increment is [`AuctionConfig::second_price_increment`] (default 0.01 CPM; a negative
//!   value counts as zero).
//! - [`PriceRule::FixedPrice`] (deal `at` = 3: "the value passed in `bidfloor` is the agreed upon
//!   deal price"): the winner pays the floor. A fixed-price rule with no positive floor has no
//!   agreed price to charge, so the winner pays its bid and [`Winner::price_rule`] reports
//!   `FirstPrice`.
//!
//! # Losers
//!
//! Every valid bid that does not win its impression is a [`Loser`]:
//! [`LossReason::LOST_TO_PMP_DEAL`] when the winning bid was a deal bid (the code's definition is
//! "lost to a bid for a PMP deal", which describes the winner, so it applies to open-market and
//! deal losers alike), otherwise [`LossReason::LOST_TO_HIGHER_BID`], including a loss on the tie
//! break at an equal price. Rejected bids carry [`Rejection::loss_reason`]; winners are
//! [`LossReason::BID_WON`] (see [`Outcome::loss_reasons`]).
//!
//! `min_to_win` follows OpenRTB 2.6 section 4.4.1 (`${AUCTION_MIN_TO_WIN}`): for the winner, the
//! price that ties the next-best valid bid, never below its floor (the floor if it was alone);
//! for a loser, the winner's clearing price when the winner paid a second price (as in the spec's
//! second-price example), otherwise the winning bid.
//!
//! # Output order and cost
//!
//! [`Outcome::imps`] is index-aligned with [`Rules::imps`]; losers and rejections are listed in
//! candidate order. [`run`] makes one pass over the candidates plus one over the valid ones,
//! allocates a handful of vectors per auction and nothing per candidate, and computes tie keys
//! only when two bids actually tie. Request lists get a per-auction prefilter that skips most
//! scans, long lists and many impressions are indexed once per auction so that the cost stays
//! linear in the number of bids; deal lists are scanned.

mod matcher;
mod tie;

use matcher::{Kind, ListMatcher, eq_exact, eq_ignore_case, linear_matches};
use openrtb::{LossReason, Price};

pub use tie::tie_seed;

/// Exchange-wide auction settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuctionConfig {
    /// Added to the second price in second-price auctions; 0.01 CPM by default.
    pub second_price_increment: Price,
}

impl Default for AuctionConfig {
    fn default() -> Self {
        AuctionConfig {
            second_price_increment: Price::from_micros(10_000),
        }
    }
}

/// How the winner's price is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PriceRule {
    /// The winner pays its bid (`at` = 1).
    FirstPrice,
    /// The winner pays the second price plus an increment, capped at its bid (`at` = 2).
    SecondPrice,
    /// The winner pays the floor, the agreed deal price (deal `at` = 3).
    FixedPrice,
}

impl PriceRule {
    /// The rule of a request's `at`: 1 is first price; 2, absent, and every other value
    /// (including exchange-specific types of 500+, which Gavel does not define) are second price,
    /// the spec's default.
    pub fn from_at(at: Option<i32>) -> PriceRule {
        match at {
            Some(1) => PriceRule::FirstPrice,
            _ => PriceRule::SecondPrice,
        }
    }

    /// The override of a deal's `at`: 1 first price, 2 second price, 3 fixed price (the deal's
    /// `bidfloor` is the agreed price). Absent or any other value is `None`: the deal inherits
    /// the request's rule rather than guessing at an auction type Gavel does not define.
    pub fn from_deal_at(at: Option<i32>) -> Option<PriceRule> {
        match at {
            Some(1) => Some(PriceRule::FirstPrice),
            Some(2) => Some(PriceRule::SecondPrice),
            Some(3) => Some(PriceRule::FixedPrice),
            _ => None,
        }
    }

    /// Bounded snake_case label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            PriceRule::FirstPrice => "first_price",
            PriceRule::SecondPrice => "second_price",
            PriceRule::FixedPrice => "fixed_price",
        }
    }
}

/// The request-level rules of one auction.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules<'a> {
    /// Auction currency (ISO-4217); empty means `"USD"`.
    pub currency: &'a str,
    /// From the request's `at`.
    pub price_rule: PriceRule,
    /// Blocked categories; empty = none.
    pub bcat: &'a [String],
    /// Blocked advertiser domains; empty = none.
    pub badv: &'a [String],
    /// Allowed buyer seats; empty = no restriction.
    pub wseat: &'a [String],
    /// Blocked buyer seats; empty = none.
    pub bseat: &'a [String],
    /// The impressions, in request order.
    pub imps: Vec<ImpRules<'a>>,
}

/// The rules of one impression.
#[derive(Clone, Debug, PartialEq)]
pub struct ImpRules<'a> {
    pub id: &'a str,
    /// `bidfloor`, in the auction currency.
    pub floor: Price,
    /// `pmp.private_auction` = 1: only deal bids are admitted.
    pub private_auction: bool,
    pub deals: Vec<DealRules<'a>>,
}

/// The terms of one deal of an impression.
#[derive(Clone, Debug, PartialEq)]
pub struct DealRules<'a> {
    pub id: &'a str,
    /// The deal's `bidfloor`, in the auction currency; replaces the impression floor.
    pub floor: Price,
    /// The deal's `at` override ([`PriceRule::from_deal_at`]); `None` inherits the request's.
    pub price_rule: Option<PriceRule>,
    /// Allowed seats; empty = no restriction.
    pub wseat: &'a [String],
    /// Allowed advertiser domains; empty = no restriction.
    pub wadomain: &'a [String],
}

/// One bid as received from one bidder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The exchange's id of the bidder (demand partner) that returned the bid.
    pub bidder: u32,
    /// `seatbid.seat`; empty if none.
    pub seat: &'a str,
    /// `bid.id`.
    pub bid_id: &'a str,
    /// `bid.impid`.
    pub imp_id: &'a str,
    /// `bid.price`.
    pub price: Price,
    /// `BidResponse.cur`; empty means `"USD"`.
    pub currency: &'a str,
    /// `bid.dealid`; `None` or empty for an open-market bid.
    pub deal_id: Option<&'a str>,
    /// `bid.adomain`.
    pub adomain: &'a [String],
    /// `bid.cat`.
    pub cat: &'a [String],
}

/// The result of one auction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// One result per impression, index-aligned with [`Rules::imps`].
    pub imps: Vec<ImpResult>,
    /// Candidates that could not compete, in candidate order.
    pub rejected: Vec<Rejected>,
}

/// The result for one impression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImpResult {
    /// `None` when no valid bid was made for the impression.
    pub winner: Option<Winner>,
    /// Every other valid bid for the impression, in candidate order.
    pub losers: Vec<Loser>,
}

/// The winning bid of an impression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Winner {
    /// Index into the candidates passed to [`run`].
    pub candidate: usize,
    /// What the winner pays (CPM, auction currency): never above its bid, never below `floor`.
    pub clearing_price: Price,
    /// The rule that set the clearing price (the deal's override, if any, else the request's).
    pub price_rule: PriceRule,
    /// The floor that applied: the deal's for a deal bid, else the impression's (negative floors
    /// reported as zero).
    pub floor: Price,
    /// The highest price among the other valid bids of the impression, if any.
    pub second_price: Option<Price>,
    /// `${AUCTION_MIN_TO_WIN}` for the winner: `max(second_price, floor)`.
    pub min_to_win: Price,
    /// Index of the winning bid's deal in [`ImpRules::deals`]; `None` for an open-market bid.
    pub deal: Option<usize>,
}

/// A valid bid that did not win its impression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loser {
    /// Index into the candidates passed to [`run`].
    pub candidate: usize,
    /// [`LossReason::LOST_TO_PMP_DEAL`] if the winner was a deal bid, else
    /// [`LossReason::LOST_TO_HIGHER_BID`].
    pub reason: LossReason,
    /// `${AUCTION_MIN_TO_WIN}`: the winner's clearing price under second price, else its bid.
    pub min_to_win: Price,
}

/// A bid that could not compete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// Index into the candidates passed to [`run`].
    pub candidate: usize,
    pub reason: Rejection,
}

/// Why a bid could not compete. The crate docs give the order in which the checks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// `imp_id` names no impression of the request.
    UnknownImp,
    /// The price is zero or negative.
    NonPositivePrice,
    /// The bid currency is not the auction currency.
    CurrencyMismatch,
    /// Open-market bid below the impression floor.
    BelowFloor,
    /// Deal bid below the deal floor.
    BelowDealFloor,
    /// `deal_id` names no deal of the bid's impression.
    UnknownDeal,
    /// Open-market bid on an impression with `private_auction` set.
    OpenBidInPrivateAuction,
    /// Seat not in the request's `wseat`, or in its `bseat`.
    SeatNotAllowed,
    /// Seat not in the deal's `wseat`.
    SeatNotAllowedForDeal,
    /// An `adomain` entry is covered by `badv`.
    BlockedAdvertiser,
    /// The deal has a `wadomain` and the bid's `adomain` is empty or not entirely covered by it.
    AdvertiserNotAllowedForDeal,
    /// A `cat` entry is covered by `bcat`.
    BlockedCategory,
}

impl Rejection {
    /// Every variant, e.g. to pre-register metric labels.
    pub const ALL: [Rejection; 12] = [
        Rejection::UnknownImp,
        Rejection::NonPositivePrice,
        Rejection::CurrencyMismatch,
        Rejection::BelowFloor,
        Rejection::BelowDealFloor,
        Rejection::UnknownDeal,
        Rejection::OpenBidInPrivateAuction,
        Rejection::SeatNotAllowed,
        Rejection::SeatNotAllowedForDeal,
        Rejection::BlockedAdvertiser,
        Rejection::AdvertiserNotAllowedForDeal,
        Rejection::BlockedCategory,
    ];

    /// The OpenRTB loss reason (list 5.25) to report to the bidder.
    ///
    /// The list has no dedicated code for some rejections; the closest is used: an unknown
    /// impression and a currency the exchange cannot accept make the response invalid (3); a bid
    /// without a deal in a private auction lacks the deal id it needed (4); a zero or negative
    /// price carries no usable price (9); seats refused by the request or the deal are blocked
    /// buyer seats (104); an advertiser outside a deal's `wadomain` is a creative not allowed in
    /// the deal (213).
    pub fn loss_reason(self) -> LossReason {
        match self {
            Rejection::UnknownImp | Rejection::CurrencyMismatch => LossReason::INVALID_BID_RESPONSE,
            Rejection::NonPositivePrice => LossReason::MISSING_BID_PRICE,
            Rejection::BelowFloor => LossReason::BELOW_AUCTION_FLOOR,
            Rejection::BelowDealFloor => LossReason::BELOW_DEAL_FLOOR,
            Rejection::UnknownDeal | Rejection::OpenBidInPrivateAuction => {
                LossReason::INVALID_DEAL_ID
            }
            Rejection::SeatNotAllowed | Rejection::SeatNotAllowedForDeal => {
                LossReason::BUYER_SEAT_BLOCKED
            }
            Rejection::BlockedAdvertiser => LossReason::CREATIVE_FILTERED_ADVERTISER,
            Rejection::AdvertiserNotAllowedForDeal => {
                LossReason::CREATIVE_FILTERED_NOT_ALLOWED_IN_DEAL
            }
            Rejection::BlockedCategory => LossReason::CREATIVE_FILTERED_CATEGORY,
        }
    }

    /// Bounded snake_case label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Rejection::UnknownImp => "unknown_imp",
            Rejection::NonPositivePrice => "non_positive_price",
            Rejection::CurrencyMismatch => "currency_mismatch",
            Rejection::BelowFloor => "below_floor",
            Rejection::BelowDealFloor => "below_deal_floor",
            Rejection::UnknownDeal => "unknown_deal",
            Rejection::OpenBidInPrivateAuction => "open_bid_in_private_auction",
            Rejection::SeatNotAllowed => "seat_not_allowed",
            Rejection::SeatNotAllowedForDeal => "seat_not_allowed_for_deal",
            Rejection::BlockedAdvertiser => "blocked_advertiser",
            Rejection::AdvertiserNotAllowedForDeal => "advertiser_not_allowed_for_deal",
            Rejection::BlockedCategory => "blocked_category",
        }
    }
}

impl Outcome {
    /// The winners, with the index of their impression.
    pub fn winners(&self) -> impl Iterator<Item = (usize, &Winner)> + '_ {
        self.imps
            .iter()
            .enumerate()
            .filter_map(|(i, imp)| imp.winner.as_ref().map(|w| (i, w)))
    }

    /// The loss reason of every candidate, indexed like the candidates ([`LossReason::BID_WON`]
    /// for winners); `None` for indices this outcome does not mention (none, when
    /// `candidate_count` is the number of candidates passed to [`run`]).
    pub fn loss_reasons(&self, candidate_count: usize) -> Vec<Option<LossReason>> {
        let mut reasons = vec![None; candidate_count];
        let mut set = |candidate: usize, reason: LossReason| {
            if let Some(slot) = reasons.get_mut(candidate) {
                *slot = Some(reason);
            }
        };
        for imp in &self.imps {
            if let Some(w) = &imp.winner {
                set(w.candidate, LossReason::BID_WON);
            }
            for l in &imp.losers {
                set(l.candidate, l.reason);
            }
        }
        for r in &self.rejected {
            set(r.candidate, r.reason.loss_reason());
        }
        reasons
    }
}

/// Runs the auction with tie seed 0; see [`run_seeded`] and the crate docs.
pub fn run(rules: &Rules<'_>, candidates: &[Candidate<'_>], config: &AuctionConfig) -> Outcome {
    run_seeded(rules, candidates, config, 0)
}

/// Runs the auction, mixing `tie_seed` into the tie-break key (use [`tie_seed`] of the bid
/// request id, so that exact ties do not resolve the same way in every auction).
pub fn run_seeded(
    rules: &Rules<'_>,
    candidates: &[Candidate<'_>],
    config: &AuctionConfig,
    tie_seed: u64,
) -> Outcome {
    let admission = Admission::new(rules, candidates.len());
    let mut states = vec![ImpState::default(); rules.imps.len()];
    // The impression of each candidate, or NOT_ADMITTED; read again to list the losers.
    let mut slots = Vec::with_capacity(candidates.len());
    let mut rejected = Vec::new();

    for (index, candidate) in candidates.iter().enumerate() {
        match admission.check(candidate) {
            Ok(admitted) => {
                slots.push(admitted.imp);
                states[admitted.imp].offer(index, admitted, candidates, tie_seed);
            }
            Err(reason) => {
                slots.push(NOT_ADMITTED);
                if rejected.capacity() == 0 {
                    // One allocation instead of repeated growth.
                    rejected.reserve_exact(candidates.len() - index);
                }
                rejected.push(Rejected {
                    candidate: index,
                    reason,
                });
            }
        }
    }

    let increment = config.second_price_increment.max(Price::ZERO);
    let mut imps: Vec<ImpResult> = states
        .iter()
        .map(|state| ImpResult {
            winner: state.best.map(|best| best.winner(state.second, increment)),
            losers: Vec::with_capacity(state.valid.saturating_sub(1)),
        })
        .collect();

    for (index, &imp) in slots.iter().enumerate() {
        let Some(result) = imps.get_mut(imp) else {
            continue;
        };
        let Some(winner) = result.winner else {
            continue;
        };
        if winner.candidate == index {
            continue;
        }
        let reason = if winner.deal.is_some() {
            LossReason::LOST_TO_PMP_DEAL
        } else {
            LossReason::LOST_TO_HIGHER_BID
        };
        let min_to_win = match winner.price_rule {
            PriceRule::SecondPrice => winner.clearing_price,
            PriceRule::FirstPrice | PriceRule::FixedPrice => candidates[winner.candidate].price,
        };
        result.losers.push(Loser {
            candidate: index,
            reason,
            min_to_win,
        });
    }

    Outcome { imps, rejected }
}

const NOT_ADMITTED: usize = usize::MAX;

/// Impressions are looked up by a scan up to this many, through a sorted index beyond.
const IMP_INDEX_MIN: usize = 8;

/// The per-auction state of the validity checks: the rules, with long lists indexed.
struct Admission<'r, 'a> {
    rules: &'r Rules<'a>,
    currency: &'a str,
    /// Impression ids sorted (stably, so the first of repeated ids comes first) when there are
    /// many impressions.
    imp_index: Option<Vec<(&'a str, usize)>>,
    bcat: ListMatcher<'a>,
    badv: ListMatcher<'a>,
    wseat: ListMatcher<'a>,
    bseat: ListMatcher<'a>,
}

/// What a valid bid competes with.
#[derive(Clone, Copy, Debug)]
struct Admitted {
    imp: usize,
    deal: Option<usize>,
    floor: Price,
    rule: PriceRule,
}

impl<'r, 'a> Admission<'r, 'a> {
    fn new(rules: &'r Rules<'a>, candidate_count: usize) -> Self {
        let imp_index = (rules.imps.len() > IMP_INDEX_MIN).then(|| {
            let mut index: Vec<(&'a str, usize)> = rules
                .imps
                .iter()
                .enumerate()
                .map(|(i, imp)| (imp.id, i))
                .collect();
            index.sort_by(|a, b| a.0.cmp(b.0));
            index
        });
        Admission {
            rules,
            currency: if rules.currency.is_empty() {
                DEFAULT_CURRENCY
            } else {
                rules.currency
            },
            imp_index,
            bcat: ListMatcher::new(Kind::Category, rules.bcat, candidate_count),
            badv: ListMatcher::new(Kind::Domain, rules.badv, candidate_count),
            wseat: ListMatcher::new(Kind::Seat, rules.wseat, candidate_count),
            bseat: ListMatcher::new(Kind::Seat, rules.bseat, candidate_count),
        }
    }

    fn find_imp(&self, id: &str) -> Option<usize> {
        match &self.imp_index {
            None => self
                .rules
                .imps
                .iter()
                .position(|imp| eq_exact(imp.id.as_bytes(), id.as_bytes())),
            Some(index) => {
                let at = index.partition_point(|(key, _)| *key < id);
                index.get(at).filter(|(key, _)| *key == id).map(|&(_, i)| i)
            }
        }
    }

    /// The validity checks, in the documented order.
    fn check(&self, c: &Candidate<'_>) -> Result<Admitted, Rejection> {
        let imp_index = self.find_imp(c.imp_id).ok_or(Rejection::UnknownImp)?;
        let imp = &self.rules.imps[imp_index];

        if !c.price.is_positive() {
            return Err(Rejection::NonPositivePrice);
        }
        let currency = if c.currency.is_empty() {
            DEFAULT_CURRENCY
        } else {
            c.currency
        };
        if !eq_ignore_case(currency.as_bytes(), self.currency.as_bytes()) {
            return Err(Rejection::CurrencyMismatch);
        }

        let deal_index = match c.deal_id.filter(|id| !id.is_empty()) {
            Some(id) => Some(
                imp.deals
                    .iter()
                    .position(|d| eq_exact(d.id.as_bytes(), id.as_bytes()))
                    .ok_or(Rejection::UnknownDeal)?,
            ),
            None if imp.private_auction => return Err(Rejection::OpenBidInPrivateAuction),
            None => None,
        };
        let deal = deal_index.map(|i| &imp.deals[i]);

        if (!self.wseat.is_empty() && !self.wseat.matches(c.seat)) || self.bseat.matches(c.seat) {
            return Err(Rejection::SeatNotAllowed);
        }
        if deal.is_some_and(|d| !d.wseat.is_empty() && !linear_matches(Kind::Seat, d.wseat, c.seat))
        {
            return Err(Rejection::SeatNotAllowedForDeal);
        }
        if !self.badv.is_empty() && c.adomain.iter().any(|a| self.badv.matches(a)) {
            return Err(Rejection::BlockedAdvertiser);
        }
        let advertiser_allowed_for_deal = |d: &DealRules<'_>| {
            d.wadomain.is_empty()
                || (!c.adomain.is_empty()
                    && c.adomain
                        .iter()
                        .all(|a| linear_matches(Kind::Domain, d.wadomain, a)))
        };
        if deal.is_some_and(|d| !advertiser_allowed_for_deal(d)) {
            return Err(Rejection::AdvertiserNotAllowedForDeal);
        }
        if !self.bcat.is_empty() && c.cat.iter().any(|k| self.bcat.matches(k)) {
            return Err(Rejection::BlockedCategory);
        }

        let (floor, below) = match deal {
            Some(d) => (d.floor, Rejection::BelowDealFloor),
            None => (imp.floor, Rejection::BelowFloor),
        };
        let floor = floor.max(Price::ZERO);
        if c.price < floor {
            return Err(below);
        }

        let rule = deal
            .and_then(|d| d.price_rule)
            .unwrap_or(self.rules.price_rule);
        Ok(Admitted {
            imp: imp_index,
            deal: deal_index,
            floor,
            rule,
        })
    }
}

const DEFAULT_CURRENCY: &str = "USD";

/// The running best bid and second price of one impression.
#[derive(Clone, Copy, Debug, Default)]
struct ImpState {
    best: Option<Best>,
    /// Highest price among the valid bids other than `best`.
    second: Option<Price>,
    /// Number of valid bids.
    valid: usize,
}

#[derive(Clone, Copy, Debug)]
struct Best {
    candidate: usize,
    price: Price,
    admitted: Admitted,
    /// The tie key, computed the first time this bid is in a tie.
    key: Option<u64>,
}

impl ImpState {
    fn offer(&mut self, index: usize, admitted: Admitted, candidates: &[Candidate<'_>], seed: u64) {
        self.valid += 1;
        let price = candidates[index].price;
        let challenger = Best {
            candidate: index,
            price,
            admitted,
            key: None,
        };
        let Some(best) = &mut self.best else {
            self.best = Some(challenger);
            return;
        };
        let (challenger_wins, challenger_key) = match price.cmp(&best.price) {
            std::cmp::Ordering::Greater => (true, None),
            std::cmp::Ordering::Less => (false, None),
            std::cmp::Ordering::Equal => {
                let (a, b) = (&candidates[index], &candidates[best.candidate]);
                let best_key = *best.key.get_or_insert_with(|| key_of(b, seed));
                let challenger_key = key_of(a, seed);
                (
                    tie_order(a, challenger_key, b, best_key).is_lt(),
                    Some(challenger_key),
                )
            }
        };
        if challenger_wins {
            // The displaced best is at least as high as any earlier second price.
            self.second = Some(best.price);
            *best = Best {
                key: challenger_key,
                ..challenger
            };
        } else {
            self.second = Some(self.second.map_or(price, |s| s.max(price)));
        }
    }
}

impl Best {
    fn winner(self, second: Option<Price>, increment: Price) -> Winner {
        let Admitted {
            deal, floor, rule, ..
        } = self.admitted;
        let bid = self.price;
        let (clearing_price, price_rule) = match rule {
            PriceRule::FirstPrice => (bid, PriceRule::FirstPrice),
            PriceRule::SecondPrice => {
                let base = second.map_or(floor, |s| s.max(floor));
                (
                    base.saturating_add(increment).min(bid),
                    PriceRule::SecondPrice,
                )
            }
            PriceRule::FixedPrice if floor.is_positive() => (floor, PriceRule::FixedPrice),
            PriceRule::FixedPrice => (bid, PriceRule::FirstPrice),
        };
        Winner {
            candidate: self.candidate,
            clearing_price,
            price_rule,
            floor,
            second_price: second,
            min_to_win: second.map_or(floor, |s| s.max(floor)),
            deal,
        }
    }
}

fn key_of(c: &Candidate<'_>, seed: u64) -> u64 {
    tie::tie_key(seed, c.imp_id, c.bidder, c.seat, c.bid_id)
}

/// Total order among bids of equal price: tie key first, then every field that can tell two
/// candidates apart. `Less` ranks first.
fn tie_order(a: &Candidate<'_>, a_key: u64, b: &Candidate<'_>, b_key: u64) -> std::cmp::Ordering {
    a_key
        .cmp(&b_key)
        .then_with(|| a.bidder.cmp(&b.bidder))
        .then_with(|| a.seat.cmp(b.seat))
        .then_with(|| a.bid_id.cmp(b.bid_id))
        .then_with(|| a.deal_id.cmp(&b.deal_id))
        .then_with(|| a.currency.cmp(b.currency))
        .then_with(|| a.adomain.cmp(b.adomain))
        .then_with(|| a.cat.cmp(b.cat))
}

#[cfg(test)]
mod tests;
