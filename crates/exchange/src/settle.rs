//! From bidder replies to the seller's answer: runs the auction over every bid received, then
//! rewrites each winning bid (clearing price, original price kept in `ext.origbidprice`, macros
//! replaced) and prepares the loss notices. Synchronous and free of I/O.

use std::borrow::Cow;

use auction::{AuctionConfig, Candidate, DealRules, ImpRules, PriceRule, Rules};
use currency::Round;
use openrtb::macros::{MacroValues, substitute};
use openrtb::{Bid, BidRequest, BidResponse, LossReason, Price, RawJson, SeatBid};
use price_token::{Binding, PriceKey};
use records::BidLine;

use crate::money::Rates;
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

/// The auction's result.
#[derive(Debug, Default)]
pub struct Settlement {
    pub won: Vec<Won>,
    /// Loss notices, macros replaced.
    pub loss_urls: Vec<LossNotice>,
    /// Bids dropped before or by the auction, and why.
    pub rejected: Vec<Rejected>,
    /// Every bid and winner, for the auction record, when [`AuctionCtx::record`] asked.
    pub recorded: Option<Recorded>,
}

/// What an auction record keeps of the settlement.
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

/// Every bid of the replies as an auction candidate, with the response and bid it came from
/// (index-aligned); bids that could never be served (no markup, none to fetch) are rejected
/// here, before the auction.
struct Pool<'a> {
    candidates: Vec<Candidate<'a>>,
    sources: Vec<Source<'a>>,
    /// Every bid, when recording; `sources[i].line` indexes it.
    lines: Vec<BidLine>,
}

/// Where a candidate came from: its response, its bid, and the bid's own currency.
#[derive(Clone, Copy)]
struct Source<'a> {
    response: &'a BidResponse,
    bid: &'a Bid,
    currency: &'a str,
    /// Its line in `Pool::lines`, when recording.
    line: usize,
}

/// Runs the auction over every bid of `replies` and rewrites the winners.
pub fn settle(ctx: &AuctionCtx<'_>, replies: &[Called]) -> Settlement {
    let mut settlement = Settlement::default();
    let mut pool = candidates(ctx, replies, &mut settlement.rejected);
    if pool.candidates.is_empty() {
        settlement.recorded = ctx.record.then(|| Recorded {
            bids: pool.lines,
            wins: Vec::new(),
        });
        return settlement;
    }
    let rules = rules(ctx.request, ctx.currency);
    // Ties are broken by a hash seeded with the auction id: fair across auctions, fixed within one.
    let outcome = auction::run_seeded(
        &rules,
        &pool.candidates,
        ctx.config,
        auction::tie_seed(ctx.auction_id),
    );
    let mut wins = Vec::new();
    for rejected in &outcome.rejected {
        pool.mark(rejected.candidate, rejected.reason.label());
        let bidder = BidderIx::from_raw(pool.candidates[rejected.candidate].bidder);
        settlement.rejected.push(Rejected {
            bidder,
            reason: rejected.reason.label(),
        });
        if ctx.loss_notices {
            let loss = (rejected.reason.loss_reason(), None);
            settlement
                .loss_urls
                .extend(loss_url(ctx, &pool, rejected.candidate, loss));
        }
    }
    for imp in &outcome.imps {
        let Some(winner) = &imp.winner else { continue };
        for loser in &imp.losers {
            pool.mark(loser.candidate, "lost");
        }
        pool.mark(winner.candidate, "won");
        if ctx.loss_notices {
            for loser in &imp.losers {
                let loss = (loser.reason, Some(loser.min_to_win));
                settlement
                    .loss_urls
                    .extend(loss_url(ctx, &pool, loser.candidate, loss));
            }
        }
        let mut won = winning_bid(ctx, &pool, winner);
        won.line = settlement.won.len();
        if ctx.record {
            wins.push(win_line(ctx, &pool, winner, &won));
        }
        settlement.won.push(won);
    }
    settlement.recorded = ctx.record.then_some(Recorded {
        bids: pool.lines,
        wins,
    });
    settlement
}

impl Pool<'_> {
    /// Sets the status of candidate `i`'s bid line, when recording.
    fn mark(&mut self, i: usize, status: &'static str) {
        let line = self.sources.get(i).map(|s| s.line);
        if let Some(line) = line.and_then(|l| self.lines.get_mut(l)) {
            line.status = status.into();
        }
    }
}

/// A bid as its record line: as sent, with its price in the auction currency when converted.
fn bid_line(
    bidder: &str,
    seat: &str,
    bid: &Bid,
    currency: &str,
    auction_currency: &str,
    converted: Option<Price>,
) -> BidLine {
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
        converted_micros: converted.filter(|_| other).map(Price::micros),
        deal: bid.dealid.clone().filter(|d| !d.is_empty()),
        adomain: bid.adomain.clone().unwrap_or_default(),
        cat: bid.cat.clone().unwrap_or_default(),
        status: "".into(),
        excluded: false,
    }
}

/// A winner as its record line.
fn win_line(
    ctx: &AuctionCtx<'_>,
    pool: &Pool<'_>,
    winner: &auction::Winner,
    won: &Won,
) -> records::Win {
    let cand = &pool.candidates[winner.candidate];
    let source = pool.sources[winner.candidate];
    let other = !source.currency.eq_ignore_ascii_case(ctx.currency);
    let bidder = ctx.bidders.view(won.bidder).map_or("", |v| v.name);
    records::Win {
        imp: cand.imp_id.to_owned(),
        bidder: bidder.to_owned(),
        bid: cand.bid_id.to_owned(),
        seat: if cand.seat == bidder {
            String::new()
        } else {
            cand.seat.to_owned()
        },
        deal: cand.deal_id.filter(|d| !d.is_empty()).map(str::to_owned),
        rule: winner.price_rule.label().into(),
        cleared_micros: winner.clearing_price.micros(),
        charged_micros: in_bid_currency(ctx, winner.clearing_price, source.currency).micros(),
        cur: other.then(|| source.currency.to_owned()),
        billing_by: None,
        dropped: None,
    }
}

fn candidates<'a>(
    ctx: &AuctionCtx<'a>,
    replies: &'a [Called],
    rejected: &mut Vec<Rejected>,
) -> Pool<'a> {
    let mut pool = Pool {
        candidates: Vec::new(),
        sources: Vec::new(),
        lines: Vec::new(),
    };
    for called in replies {
        let Reply::Bids(response) = &called.reply else {
            continue;
        };
        let bidder = called.bidder;
        let view = ctx.bidders.view(bidder);
        let bidder_name = view.map_or("", |v| v.name);
        let markup_hosts = view.and_then(|v| v.markup_hosts);
        // A bid's currency is its response's; absent, USD (the spec's default).
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
                let line = pool.lines.len();
                if ctx.record {
                    let price = converted.as_ref().ok().copied();
                    pool.lines.push(bid_line(
                        bidder_name,
                        seat,
                        bid,
                        currency,
                        ctx.currency,
                        price,
                    ));
                }
                let excluded = if bid.adm.is_none() && !fetchable() {
                    Some("no_markup")
                } else {
                    converted.as_ref().err().map(|e| e.label())
                };
                if let Some(reason) = excluded {
                    rejected.push(Rejected { bidder, reason });
                    if let Some(l) = pool.lines.get_mut(line) {
                        l.status = reason.into();
                        l.excluded = true;
                    }
                    continue;
                }
                let Ok(price) = converted else { continue };
                pool.candidates.push(Candidate {
                    bidder: bidder.raw(),
                    seat,
                    bid_id: bid.id.as_str(),
                    imp_id: bid.impid.as_str(),
                    price,
                    currency: ctx.currency,
                    deal_id: bid.dealid.as_deref(),
                    adomain: bid.adomain.as_deref().unwrap_or(empty()),
                    cat: bid.cat.as_deref().unwrap_or(empty()),
                });
                pool.sources.push(Source {
                    response,
                    bid,
                    currency,
                    line,
                });
            }
        }
    }
    pool
}

/// The loss notice URL of candidate `i`, its macros replaced, when its bid has one.
fn loss_url(
    ctx: &AuctionCtx<'_>,
    pool: &Pool<'_>,
    i: usize,
    (reason, min_to_win): (LossReason, Option<Price>),
) -> Option<LossNotice> {
    let source = pool.sources[i];
    let lurl = source.bid.lurl.as_ref()?;
    let cand = &pool.candidates[i];
    let min_to_win = min_to_win.map(|p| in_bid_currency(ctx, p, source.currency));
    let values = macro_values(ctx, source, cand, None, reason, min_to_win);
    Some(LossNotice {
        bidder: BidderIx::from_raw(cand.bidder),
        url: substitute(lurl, &values).into_owned(),
        about: ctx
            .record
            .then(|| (cand.imp_id.to_owned(), cand.bid_id.to_owned())),
    })
}

/// A winner's bid as the seller gets it: the clearing price (sealed for a bidder with a key),
/// macros replaced, the bid price kept in `ext.origbidprice`.
fn winning_bid(ctx: &AuctionCtx<'_>, pool: &Pool<'_>, winner: &auction::Winner) -> Won {
    let cand = &pool.candidates[winner.candidate];
    let source = pool.sources[winner.candidate];
    let bid = source.bid;
    let clearing = winner.clearing_price;
    // The bidder is told, and charged, in its bid's currency.
    let charged = in_bid_currency(ctx, clearing, source.currency);
    let bidder = BidderIx::from_raw(cand.bidder);
    let token = sealed_price(ctx, bidder, bid, charged, source.currency);
    let mut values = macro_values(
        ctx,
        source,
        cand,
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
        seat: cand.seat.to_owned(),
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
    source: Source<'a>,
    cand: &'a Candidate<'a>,
    price: Option<Price>,
    loss: LossReason,
    min_to_win: Option<Price>,
) -> MacroValues<'a> {
    let Source {
        response,
        bid,
        currency,
        ..
    } = source;
    // "Market bid ratio": clearing price over bid price (both in the bid's currency).
    let mbr = price
        .filter(|_| bid.price.is_positive())
        .map(|p| p.micros() as f64 / bid.price.micros() as f64);
    MacroValues {
        auction_id: ctx.auction_id,
        // The spec names BidResponse.bidid; many bidders leave it out, so fall back to bid.id.
        bid_id: response.bidid.as_deref().unwrap_or(bid.id.as_str()),
        imp_id: bid.impid.as_str(),
        seat_id: cand.seat,
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
