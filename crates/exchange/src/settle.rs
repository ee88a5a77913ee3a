//! From bidder replies to the seller's answer: runs the auction over every bid received, then
//! rewrites each winning bid (clearing price, original price kept in `ext.origbidprice`, macros
//! replaced) and prepares the loss notices. Synchronous and free of I/O.
// A request or notice path: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::borrow::Cow;

use auction::{AuctionConfig, Candidate, DealRules, ImpRules, PriceRule, Rules};
use currency::Round;
use openrtb::macros::{MacroValues, substitute};
use openrtb::{Bid, BidRequest, BidResponse, LossReason, Price, RawJson, SeatBid};
use price_token::{Binding, PriceKey};
use records::BidLine;

use crate::money::{NoConversion, Rates};
use crate::outcome::{BidderIx, Rejected};
use crate::reply::{Called, Reply};
use upstream::outbound::NoticeHosts;

/// What settlement reads of one bidder.
#[derive(Debug, Clone, Copy)]
pub struct BidderView<'a> {
    pub name: &'a str,
    /// For a bidder whose markup may be fetched from `nurl` (`fetch_markup`), the hosts that
    /// `nurl` may name. A bid without `adm` that is not from such a bidder, with such an
    /// `nurl`, cannot be served and is dropped before the auction (`no_markup`), so the next
    /// bid can win.
    pub markup_hosts: Option<&'a NoticeHosts>,
    /// A bidder with a key gets its clearing price as a token sealed with it (`price_token`),
    /// bound to this auction, the imp and the bid.
    pub price_key: Option<&'a PriceKey>,
}

/// The bidders of one auction, each as settlement sees it (the roster, or a bench's list).
pub trait Lineup: std::fmt::Debug + Sync {
    fn view(&self, bidder: BidderIx) -> Option<BidderView<'_>>;
}

impl Lineup for Vec<BidderView<'_>> {
    fn view(&self, bidder: BidderIx) -> Option<BidderView<'_>> {
        self.get(bidder.index()).copied()
    }
}

/// Everything one auction's settlement reads (one context instead of many parameters).
#[derive(Debug, Clone, Copy)]
pub struct AuctionCtx<'a> {
    /// The request as the bidders saw it (exchange auction id, enriched).
    pub request: &'a BidRequest,
    pub auction_id: &'a str,
    pub currency: &'a str,
    pub config: &'a AuctionConfig,
    pub bidders: &'a dyn Lineup,
    /// Prepare `lurl` notices for losing and rejected bids.
    pub loss_notices: bool,
    /// How long a price token stays valid, in seconds.
    pub price_token_ttl_s: u64,
    /// Wall-clock milliseconds since the epoch, for `${AUCTION_IMP_TS}` and token expiries.
    pub now_ms: i64,
    /// Bids in another currency are converted to `currency` with these (rounded down), and
    /// a winner's clearing price back to its bid's currency for its notices (rounded down).
    pub rates: Rates<'a>,
    /// Keep every bid and winner for the auction record ([`Settlement::recorded`]).
    pub record: bool,
}

/// A winning bid, rewritten for the seller.
#[derive(Debug)]
pub struct Won {
    pub bidder: BidderIx,
    /// Seat reported to the seller: the bidder's `seatbid.seat`, else the bidder's name.
    pub seat: String,
    pub bid: Bid,
    /// Its place among the auction's winners (and in [`Recorded::wins`]), kept when later
    /// steps drop winners.
    pub line: usize,
}

/// A loss notice to fire.
#[derive(Debug)]
pub struct LossNotice {
    pub bidder: BidderIx,
    /// Its macros replaced.
    pub url: String,
    /// The imp and bid id it is about, when recording.
    pub about: Option<(String, String)>,
}

/// What became of one bid received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Kept out of the auction: no markup, and none its bidder may fetch.
    NoMarkup,
    /// Kept out of the auction: its price has no value in the auction currency.
    NotConverted(NoConversion),
    /// Refused by the auction's rules.
    Rejected(auction::Rejection),
    /// Lost its imp to a better bid.
    Lost,
    /// Won its imp.
    Won,
    /// Competed, and the auction named it neither winner, loser nor rejected.
    Unplaced,
}

impl Fate {
    /// The record's `status` of a bid with this fate.
    pub fn label(self) -> &'static str {
        match self {
            Fate::NoMarkup => "no_markup",
            Fate::NotConverted(e) => e.label(),
            Fate::Rejected(r) => r.label(),
            Fate::Lost => "lost",
            Fate::Won => "won",
            Fate::Unplaced => "",
        }
    }

    /// Kept out before the auction ran: it never competed.
    pub fn excluded(self) -> bool {
        matches!(self, Fate::NoMarkup | Fate::NotConverted(_))
    }

    /// Why it was dropped before or by the auction, when it was.
    pub fn rejection(self) -> Option<&'static str> {
        match self {
            Fate::NoMarkup | Fate::NotConverted(_) | Fate::Rejected(_) => Some(self.label()),
            Fate::Lost | Fate::Won | Fate::Unplaced => None,
        }
    }
}

/// One bid's bidder and fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BidFate {
    pub bidder: BidderIx,
    pub fate: Fate,
}

/// The auction's result.
#[derive(Debug, Default)]
pub struct Settlement {
    pub won: Vec<Won>,
    /// Loss notices, macros replaced.
    pub loss_urls: Vec<LossNotice>,
    /// What became of every bid received, in the order the auction saw them.
    pub fates: Vec<BidFate>,
    /// Every bid and winner, for the auction record, when [`AuctionCtx::record`] asked.
    pub recorded: Option<Recorded>,
}

impl Settlement {
    /// The bids dropped before or by the auction, and why.
    pub fn rejected(&self) -> impl Iterator<Item = Rejected> + '_ {
        self.fates.iter().filter_map(|f| {
            f.fate.rejection().map(|reason| Rejected {
                bidder: f.bidder,
                reason,
            })
        })
    }
}

/// What an auction record keeps of the settlement, derived from the bids' fates.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Every bid received, in the order the auction saw them.
    pub bids: Vec<BidLine>,
    /// The winners, index-aligned with [`Settlement::won`].
    pub wins: Vec<records::Win>,
}

fn empty() -> &'static [String] {
    &[]
}

/// Builds the auction rules from the request.
pub fn rules<'a>(request: &'a BidRequest, currency: &'a str) -> Rules<'a> {
    let imps = request
        .imp
        .iter()
        .map(|imp| {
            let pmp = imp.pmp.as_ref();
            let deals = pmp
                .and_then(|p| p.deals.as_deref())
                .unwrap_or(&[])
                .iter()
                .map(|d| DealRules {
                    id: d.id.as_deref().unwrap_or(""),
                    floor: d.bidfloor.unwrap_or(Price::ZERO),
                    price_rule: PriceRule::from_deal_at(d.at.map(|at| at.0)),
                    wseat: d.wseat.as_deref().unwrap_or(empty()),
                    wadomain: d.wadomain.as_deref().unwrap_or(empty()),
                })
                .collect();
            ImpRules {
                id: imp.id.as_str(),
                floor: imp.bidfloor.unwrap_or(Price::ZERO),
                private_auction: pmp.and_then(|p| p.private_auction) == Some(1),
                deals,
            }
        })
        .collect();
    Rules {
        currency,
        price_rule: PriceRule::from_at(request.at.map(|a| a.0)),
        bcat: request.bcat.as_deref().unwrap_or(empty()),
        badv: request.badv.as_deref().unwrap_or(empty()),
        wseat: request.wseat.as_deref().unwrap_or(empty()),
        bseat: request.bseat.as_deref().unwrap_or(empty()),
        imps,
    }
}

/// One bid received, with what the auction needs of it and, once settled, its fate.
#[derive(Clone, Copy)]
struct Received<'a> {
    bidder: BidderIx,
    bidder_name: &'a str,
    /// Its `seatbid.seat`, else its bidder's name.
    seat: &'a str,
    response: &'a BidResponse,
    bid: &'a Bid,
    /// The bid's own currency: its response's, else USD (the spec's default).
    currency: &'a str,
    /// Its price in the auction currency.
    converted: Result<Price, NoConversion>,
    fate: Fate,
}

impl<'a> Received<'a> {
    /// The bid as a candidate of the auction, priced in `currency` (the auction's).
    fn candidate(&self, currency: &'a str) -> Candidate<'a> {
        let bid = self.bid;
        Candidate {
            bidder: self.bidder.raw(),
            seat: self.seat,
            bid_id: bid.id.as_str(),
            imp_id: bid.impid.as_str(),
            price: self.converted.unwrap_or(Price::ZERO),
            currency,
            deal_id: bid.dealid.as_deref(),
            adomain: bid.adomain.as_deref().unwrap_or(empty()),
            cat: bid.cat.as_deref().unwrap_or(empty()),
        }
    }
}

/// Runs the auction over every bid of `replies` and rewrites the winners.
pub fn settle(ctx: &AuctionCtx<'_>, replies: &[Called]) -> Settlement {
    let mut bids = received(ctx, replies);
    // The auction's input: the bids not kept out, each knowing its place in `bids`.
    let entered: Vec<usize> = (0..bids.len())
        .filter(|&i| !bids[i].fate.excluded())
        .collect();
    let candidates: Vec<Candidate<'_>> = entered
        .iter()
        .map(|&i| bids[i].candidate(ctx.currency))
        .collect();
    let mut settlement = Settlement::default();
    let mut wins = Vec::new();
    if !candidates.is_empty() {
        let rules = rules(ctx.request, ctx.currency);
        // Ties are broken by a hash seeded with the auction id: fair across auctions, fixed
        // within one.
        let seed = auction::tie_seed(ctx.auction_id);
        let outcome = auction::run_seeded(&rules, &candidates, ctx.config, seed);
        for rejected in &outcome.rejected {
            let bid = &mut bids[entered[rejected.candidate]];
            bid.fate = Fate::Rejected(rejected.reason);
            if ctx.loss_notices {
                let loss = (rejected.reason.loss_reason(), None);
                settlement.loss_urls.extend(loss_url(ctx, bid, loss));
            }
        }
        for imp in &outcome.imps {
            let Some(winner) = &imp.winner else { continue };
            for loser in &imp.losers {
                let bid = &mut bids[entered[loser.candidate]];
                bid.fate = Fate::Lost;
                if ctx.loss_notices {
                    let loss = (loser.reason, Some(loser.min_to_win));
                    settlement.loss_urls.extend(loss_url(ctx, bid, loss));
                }
            }
            let bid = &mut bids[entered[winner.candidate]];
            bid.fate = Fate::Won;
            let mut won = winning_bid(ctx, bid, winner);
            won.line = settlement.won.len();
            if ctx.record {
                wins.push(win_line(ctx, bid, winner));
            }
            settlement.won.push(won);
        }
    }
    settlement.fates = bids
        .iter()
        .map(|b| BidFate {
            bidder: b.bidder,
            fate: b.fate,
        })
        .collect();
    settlement.recorded = ctx.record.then(|| Recorded {
        bids: bids.iter().map(|b| bid_line(b, ctx.currency)).collect(),
        wins,
    });
    settlement
}

/// A bid as its record line: as sent, with its price in the auction currency when converted,
/// and its fate.
fn bid_line(received: &Received<'_>, auction_currency: &str) -> BidLine {
    let Received {
        bidder_name: bidder,
        seat,
        bid,
        currency,
        fate,
        ..
    } = *received;
    let other = !currency.eq_ignore_ascii_case(auction_currency);
    BidLine {
        bidder: bidder.to_owned(),
        seat: if seat == bidder {
            String::new()
        } else {
            seat.to_owned()
        },
        id: bid.id.clone(),
        imp: bid.impid.clone(),
        price_micros: bid.price.micros(),
        cur: other.then(|| currency.to_owned()),
        converted_micros: received.converted.ok().filter(|_| other).map(Price::micros),
        deal: bid.dealid.clone().filter(|d| !d.is_empty()),
        adomain: bid.adomain.clone().unwrap_or_default(),
        cat: bid.cat.clone().unwrap_or_default(),
        status: fate.label().into(),
        excluded: fate.excluded(),
    }
}

/// A winner as its record line.
fn win_line(ctx: &AuctionCtx<'_>, won: &Received<'_>, winner: &auction::Winner) -> records::Win {
    let other = !won.currency.eq_ignore_ascii_case(ctx.currency);
    let bidder = won.bidder_name;
    records::Win {
        imp: won.bid.impid.clone(),
        bidder: bidder.to_owned(),
        bid: won.bid.id.clone(),
        seat: if won.seat == bidder {
            String::new()
        } else {
            won.seat.to_owned()
        },
        deal: won.bid.dealid.clone().filter(|d| !d.is_empty()),
        rule: winner.price_rule.label().into(),
        cleared_micros: winner.clearing_price.micros(),
        charged_micros: in_bid_currency(ctx, winner.clearing_price, won.currency).micros(),
        cur: other.then(|| won.currency.to_owned()),
        billing_by: None,
        dropped: None,
    }
}

/// Every bid of the replies, in order; those that could never be served (no markup, none to
/// fetch) or priced in the auction currency are kept out here, before the auction.
fn received<'a>(ctx: &AuctionCtx<'a>, replies: &'a [Called]) -> Vec<Received<'a>> {
    let mut bids = Vec::new();
    for called in replies {
        let Reply::Bids(response) = &called.reply else {
            continue;
        };
        let bidder = called.bidder;
        let view = ctx.bidders.view(bidder);
        let bidder_name = view.map_or("", |v| v.name);
        let markup_hosts = view.and_then(|v| v.markup_hosts);
        let currency = response.cur.as_deref().unwrap_or("USD");
        for seatbid in response.seatbid.as_deref().unwrap_or(&[]) {
            let seat = seatbid.seat.as_deref().unwrap_or(bidder_name);
            for bid in &seatbid.bid {
                let fetchable = || match (markup_hosts, &bid.nurl) {
                    (Some(hosts), Some(nurl)) => hosts.allows_host_of(nurl),
                    _ => false,
                };
                let converted = ctx
                    .rates
                    .convert(bid.price, currency, ctx.currency, Round::Down);
                let fate = match converted {
                    _ if bid.adm.is_none() && !fetchable() => Fate::NoMarkup,
                    Err(e) => Fate::NotConverted(e),
                    Ok(_) => Fate::Unplaced,
                };
                bids.push(Received {
                    bidder,
                    bidder_name,
                    seat,
                    response,
                    bid,
                    currency,
                    converted,
                    fate,
                });
            }
        }
    }
    bids
}

/// The loss notice URL of a bid, its macros replaced, when it has one.
fn loss_url(
    ctx: &AuctionCtx<'_>,
    lost: &Received<'_>,
    (reason, min_to_win): (LossReason, Option<Price>),
) -> Option<LossNotice> {
    let lurl = lost.bid.lurl.as_ref()?;
    let min_to_win = min_to_win.map(|p| in_bid_currency(ctx, p, lost.currency));
    let values = macro_values(ctx, lost, None, reason, min_to_win);
    Some(LossNotice {
        bidder: lost.bidder,
        url: substitute(lurl, &values).into_owned(),
        about: ctx
            .record
            .then(|| (lost.bid.impid.clone(), lost.bid.id.clone())),
    })
}

/// A winner's bid as the seller gets it: the clearing price (sealed for a bidder with a key),
/// macros replaced, the bid price kept in `ext.origbidprice`.
fn winning_bid(ctx: &AuctionCtx<'_>, source: &Received<'_>, winner: &auction::Winner) -> Won {
    let bid = source.bid;
    let clearing = winner.clearing_price;
    // The bidder is told, and charged, in its bid's currency.
    let charged = in_bid_currency(ctx, clearing, source.currency);
    let bidder = source.bidder;
    let token = sealed_price(ctx, bidder, bid, charged, source.currency);
    let mut values = macro_values(
        ctx,
        source,
        Some(charged),
        LossReason::BID_WON,
        Some(in_bid_currency(ctx, winner.min_to_win, source.currency)),
    );
    values.price_token = token.as_deref();
    let mut won = bid.clone();
    won.price = clearing;
    replace(&mut won.adm, &values);
    replace(&mut won.nurl, &values);
    replace(&mut won.burl, &values);
    replace(&mut won.lurl, &values);
    // A bid whose ext is not an object keeps its ext; the original price is then only in
    // the exchange's metrics and logs.
    if let Ok(ext) = RawJson::with_field(bid.ext.as_ref(), "origbidprice", bid.price) {
        won.ext = Some(ext);
    }
    if source.currency != ctx.currency
        && let Ok(ext) = RawJson::with_field(won.ext.as_ref(), "origbidcur", source.currency)
    {
        won.ext = Some(ext);
    }
    Won {
        bidder,
        seat: source.seat.to_owned(),
        bid: won,
        line: 0,
    }
}

/// The price token of a winning bid from a bidder that has a key: what its
/// `${AUCTION_PRICE}` becomes.
fn sealed_price(
    ctx: &AuctionCtx<'_>,
    bidder: BidderIx,
    bid: &Bid,
    clearing: Price,
    currency: &str,
) -> Option<String> {
    let key = ctx.bidders.view(bidder)?.price_key?;
    let now_s = u64::try_from(ctx.now_ms / 1000).unwrap_or(0);
    let bound = Binding {
        auction: ctx.auction_id,
        imp: bid.impid.as_str(),
        bid: bid.id.as_str(),
        currency,
    };
    Some(key.seal(
        clearing,
        &bound,
        now_s.saturating_add(ctx.price_token_ttl_s),
    ))
}

fn replace(field: &mut Option<String>, values: &MacroValues<'_>) {
    if let Some(text) = field
        && let Cow::Owned(replaced) = substitute(text, values)
    {
        *text = replaced;
    }
}

fn macro_values<'a>(
    ctx: &'a AuctionCtx<'a>,
    source: &Received<'a>,
    price: Option<Price>,
    loss: LossReason,
    min_to_win: Option<Price>,
) -> MacroValues<'a> {
    let Received {
        response,
        bid,
        currency,
        seat,
        ..
    } = *source;
    // "Market bid ratio": clearing price over bid price (both in the bid's currency).
    let mbr = price
        .filter(|_| bid.price.is_positive())
        .map(|p| p.micros() as f64 / bid.price.micros() as f64);
    MacroValues {
        auction_id: ctx.auction_id,
        // The spec names BidResponse.bidid; many bidders leave it out, so fall back to bid.id.
        bid_id: response.bidid.as_deref().unwrap_or(bid.id.as_str()),
        imp_id: bid.impid.as_str(),
        seat_id: seat,
        ad_id: bid.adid.as_deref().unwrap_or(""),
        price,
        price_token: None,
        currency,
        mbr,
        loss: Some(loss),
        min_to_win,
        imp_ts_ms: Some(ctx.now_ms),
    }
}

/// `price`, in the auction currency, in `bid_currency`, rounded down. The bid was converted
/// forward with the same tables, so the way back exists (rates are invertible); were it
/// missing, the price stays as it is.
fn in_bid_currency(ctx: &AuctionCtx<'_>, price: Price, bid_currency: &str) -> Price {
    ctx.rates
        .convert(price, ctx.currency, bid_currency, Round::Down)
        .unwrap_or(price)
}

/// Groups winning bids into the seller's BidResponse.
pub fn seller_response(
    request_id: String,
    auction_id: &str,
    currency: &str,
    won: Vec<Won>,
) -> BidResponse {
    let mut seatbids: Vec<SeatBid> = Vec::new();
    for w in won {
        match seatbids
            .iter_mut()
            .find(|s| s.seat.as_deref() == Some(w.seat.as_str()))
        {
            Some(s) => s.bid.push(w.bid),
            None => seatbids.push(SeatBid {
                seat: Some(w.seat),
                bid: vec![w.bid],
                ..Default::default()
            }),
        }
    }
    BidResponse {
        id: request_id,
        seatbid: Some(seatbids),
        bidid: Some(auction_id.to_owned()),
        cur: Some(currency.to_owned()),
        ..Default::default()
    }
}
