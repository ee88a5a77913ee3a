//! The life of one bid request: decode, validate, fix the deadline, enrich and encode once, fan
//! out, settle, fetch missing markup, answer, then queue notices. See ARCHITECTURE.md for the
//! diagram.
// A request or notice path: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use openrtb::BidRequest;

use admission::Missed;

use admission::Deadline;
use http_front::json_error;

use crate::auction_record;
use crate::count;
use crate::enrich::enrich;
use crate::fanout;
use crate::intake::{self, Amended};
use crate::notice_plan::{self, Firer};
use crate::notices::NoticeAbout;
use crate::outcome::{AuctionOutcome, BidderIx, CacheOutcome, CallOutcome, RequestOutcome};
use crate::outcome::{NotCalled, NoticeKind, NoticeOutcome, PrivacyAction, WinOutcome};
use crate::outgoing;
use crate::privacy::Signals;
use crate::rates::Snapshot;
use crate::reply::Called;
use crate::roster::{Bidder, Roster};
use crate::sellers::Seller;
use crate::settle::{self, AuctionCtx, LossNotice, Recorded, Settlement, Won};
use crate::state::State;
use crate::validate::{auction_currency, validate};
use records::Record;
use upstream::notice_client::NoticeError;

/// OpenRTB no-bid reason 15, "Insufficient Auction Time".
const NBR_INSUFFICIENT_TIME: i32 = 15;

/// Markup fetched from a win notice URL may be this large.
const MAX_MARKUP_BYTES: usize = 256 * 1024;

fn no_bid() -> Response<Full<Bytes>> {
    http_front::no_content()
}

type SellerAnswer = Response<Full<Bytes>>;

/// An auction's answer and what it did.
struct Ended {
    response: SellerAnswer,
    outcome: AuctionOutcome,
}

impl Ended {
    fn at_once(response: SellerAnswer, request: RequestOutcome) -> Ended {
        Ended {
            response,
            outcome: AuctionOutcome::ended(request),
        }
    }

    fn bad_request(message: &str) -> Ended {
        Ended::at_once(
            json_error(StatusCode::BAD_REQUEST, message),
            RequestOutcome::BadRequest,
        )
    }
}

/// Runs one auction over a request body read at `read_at` and counts what it did, an answer
/// ready only after the request's `tmax` had expired included.
pub(crate) async fn run(
    state: &State,
    seller: &Seller,
    body: &[u8],
    read_at: Instant,
) -> SellerAnswer {
    // One roster for the whole auction: a reload meanwhile affects the next one.
    let roster = state.roster.load_full();
    let mut expires_at = None;
    let ended = auction(state, &roster, seller, body, read_at, &mut expires_at).await;
    let late = expires_at.is_some_and(|at| Instant::now() > at);
    count::auction(&state.metrics, &roster, &ended.outcome, late);
    ended.response
}

/// A request admitted to the auction: decoded, valid, its deadline fixed, its place held.
struct Admitted<'s> {
    request: BidRequest,
    currency: String,
    amended: Amended,
    /// The exchange rates of this auction.
    rates: Snapshot,
    deadline: Deadline,
    /// Held until the answer is built: the work ahead of later requests (admission::starter).
    _started: admission::Started<'s>,
}

/// The bidders' answers to one admitted auction, and what privacy enforcement did first.
struct FannedOut {
    auction_id: String,
    /// The seller's request id (the bidders saw the exchange's auction id instead).
    request_id: String,
    replies: Vec<Called>,
    calls: Vec<CallOutcome>,
    privacy: Vec<(BidderIx, PrivacyAction)>,
    not_called: Vec<(BidderIx, NotCalled)>,
}

/// What reached the seller and the bidders: the answer, its winners, the notices sent.
struct Delivered {
    response: SellerAnswer,
    request: RequestOutcome,
    wins: Vec<WinOutcome>,
    markup: Vec<(BidderIx, NoticeOutcome)>,
    cache: Option<CacheOutcome>,
    /// The settlement's bids and winners for the record, the winners' delivery marked.
    recorded: Option<Recorded>,
}

/// admitted → fanned out → settled → delivered; the outcome and the record are built once,
/// from those values.
async fn auction(
    state: &State,
    roster: &Roster,
    seller: &Seller,
    body: &[u8],
    read_at: Instant,
    expires_at: &mut Option<Instant>,
) -> Ended {
    let mut admitted = match admit(state, roster, seller, body, read_at).await {
        Ok(a) => a,
        Err(ended) => return ended,
    };
    *expires_at = Some(admitted.deadline.expires_at);
    let debug = wants_debug(&admitted.request, seller);
    // The record's floors are the seller's, before its multiplier (a replay applies its own).
    let draft = (debug || state.journal.is_on()).then(|| {
        let request = &admitted.request;
        let tmax = request.tmax.map(i64::from);
        auction_record::draft(
            request,
            &seller.name,
            seller.floor_permille,
            &admitted.currency,
            tmax,
        )
    });
    raise_floors(&mut admitted.request, seller);
    let mut fanned = fan_out(state, roster, seller, &mut admitted).await;
    let settlement = settle_bids(state, roster, &admitted, &fanned, draft.is_some());
    // The bids are in the settlement now: let the replies go before waiting on markup.
    drop(std::mem::take(&mut fanned.replies));
    let rejected = settlement.rejected().collect();
    let delivered = deliver(state, roster, seller, &admitted, &fanned, settlement).await;
    let amended = admitted.amended;
    let outcome = AuctionOutcome {
        request: delivered.request,
        no_time_left: false,
        calls: fanned.calls,
        rejected,
        wins: delivered.wins,
        markup: delivered.markup,
        cache: delivered.cache,
        privacy: fanned.privacy,
        not_called: fanned.not_called,
        repaired: amended.repaired,
        imps_dropped: amended.imps_dropped,
        upgraded: amended.upgraded,
    };
    let mut response = delivered.response;
    name_repairs(&mut response, &amended.repaired_paths);
    if let Some(mut record) = draft {
        record.id = fanned.auction_id;
        record.at_ms = crate::clock::wall_ms();
        if let Some(recorded) = delivered.recorded {
            record.bids = recorded.bids;
            record.wins = recorded.wins;
        }
        auction_record::complete(&mut record, &outcome, |b| {
            roster.get(b).map_or("", |b| b.name.as_str())
        });
        if debug {
            with_debug(&mut response, &record);
        }
        if state.journal.is_on() {
            state.journal.record(Record::Auction(Box::new(record)));
        }
    }
    Ended { response, outcome }
}

/// Enriches the request with the exchange's auction id and the time left, prepares each
/// bidder's copy (privacy, currency, version) and calls them until the deadline.
async fn fan_out(
    state: &State,
    roster: &Roster,
    seller: &Seller,
    admitted: &mut Admitted<'_>,
) -> FannedOut {
    let auction_id = state.next_auction_id();
    let left = admitted.deadline.remaining(Instant::now());
    let tmax_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
    let schain = &state.config.config.schain;
    let ids = enrich(&mut admitted.request, auction_id.clone(), tmax_ms, schain);
    let privacy = state.privacy.load();
    let signals = Signals::read(
        &admitted.request,
        seller.gdpr_default.unwrap_or(privacy.gdpr_default),
        privacy.gvl.is_some(),
    );
    let outgoing = admitted.rates.with(|rates| {
        let inputs = outgoing::Inputs {
            request: &admitted.request,
            auction_currency: &admitted.currency,
            signals: &signals,
            gvl: privacy.gvl.as_deref(),
            rates,
        };
        outgoing::prepare(roster, |b| seller.allows(&b.name), &inputs)
    });
    let answer_by = admitted.deadline.answer_by;
    let replies = fanout::fan_out(roster, &outgoing, &auction_id, answer_by).await;
    FannedOut {
        calls: replies.iter().map(Called::outcome).collect(),
        replies,
        auction_id,
        request_id: ids.request_id,
        privacy: outgoing
            .privacy
            .iter()
            .flat_map(|(bidder, actions)| actions.taken().map(move |a| (*bidder, a)))
            .collect(),
        not_called: outgoing.not_called,
    }
}

/// Runs the auction over the replies, in the auction's currency and rates.
fn settle_bids(
    state: &State,
    roster: &Roster,
    admitted: &Admitted<'_>,
    fanned: &FannedOut,
    record: bool,
) -> Settlement {
    let n = &state.config.config.notices;
    admitted.rates.with(|rates| {
        let ctx = AuctionCtx {
            request: &admitted.request,
            auction_id: &fanned.auction_id,
            currency: &admitted.currency,
            config: &state.auction,
            bidders: roster,
            loss_notices: n.fire_lurl,
            price_token_ttl_s: n.price_token_ttl_s,
            now_ms: crate::clock::wall_ms(),
            rates,
            record,
        };
        settle::settle(&ctx, &fanned.replies)
    })
}

/// The seller asked for the auction's detail in its answer: a test request (`test: 1`), or
/// `ext.prebid.debug` from a seller trusted with it (`trusted_debug`).
fn wants_debug(request: &BidRequest, seller: &Seller) -> bool {
    if request.test == Some(1) {
        return true;
    }
    if !seller.trusted_debug {
        return false;
    }
    let field = |object, key| openrtb::RawJson::get_field(object, key).ok().flatten();
    request
        .ext
        .as_ref()
        .and_then(|ext| field(ext.as_raw_value(), "prebid"))
        .and_then(|prebid| field(prebid, "debug"))
        .is_some_and(|debug| debug.get().trim() == "true")
}

/// Puts the auction's record in the answer's `ext.debug`, as Prebid Server's debug does: every
/// bidder's outcome and latency, every bid and why it lost. A no-bid becomes a 200 with no
/// seatbid, so the detail has somewhere to go.
fn with_debug(response: &mut SellerAnswer, record: &records::AuctionRecord) {
    // `Full` is ready at once: its data is taken without waiting.
    let answer = futures_util::FutureExt::now_or_never(http_body_util::BodyExt::collect(
        response.body().clone(),
    ))
    .and_then(Result::ok)
    .map(|c| c.to_bytes())
    .unwrap_or_default();
    let mut out = Vec::with_capacity(answer.len() + 4096);
    match answer.strip_suffix(b"}") {
        // The seller's answer is built here and has no `ext` of its own.
        Some(open) if response.status() == StatusCode::OK => out.extend_from_slice(open),
        _ => {
            out.extend_from_slice(b"{\"id\":");
            let _ = serde_json::to_writer(&mut out, &record.request_id);
            out.extend_from_slice(b",\"seatbid\":[]");
            *response.status_mut() = StatusCode::OK;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
        }
    }
    out.extend_from_slice(b",\"ext\":{\"debug\":");
    if serde_json::to_writer(&mut out, record).is_err() {
        return;
    }
    out.extend_from_slice(b"}}");
    response.headers_mut().remove(header::CONTENT_LENGTH);
    *response.body_mut() = Full::new(Bytes::from(out));
}

/// Decodes, validates and fixes the deadline of a request, then waits for its place at the
/// admission gate; or the answer it gets at once.
async fn admit<'s>(
    state: &'s State,
    roster: &Roster,
    seller: &Seller,
    body: &[u8],
    read_at: Instant,
) -> Result<Admitted<'s>, Ended> {
    let mut request = BidRequest::from_slice(body)
        .map_err(|e| Ended::bad_request(&format!("invalid bid request: {e}")))?;
    let currency =
        auction_currency(&request, &state.config.config.auction.default_currency).to_owned();
    let rates = state.rates.snapshot(&request, seller.trusted_rates);
    let auction = &state.config.config.auction;
    let amended = rates
        .with(|rates| {
            let rules = intake::Rules {
                validation: seller.validation,
                max_imps: auction.max_imps,
                overflow: auction.imp_overflow,
                currency: &currency,
                rates,
            };
            intake::amend(&mut request, &rules)
        })
        .map_err(|e| Ended::bad_request(&format!("invalid bid request: {e}")))?;
    validate(&request, &currency)
        .map_err(|e| Ended::bad_request(&format!("invalid bid request: {e}")))?;
    let tmax = seller_tmax(
        request.tmax,
        seller.max_tmax_ms,
        state.config.config.rtb.deadline.default_tmax_ms,
    );
    let deadline = state
        .policy
        .deadline(read_at, tmax)
        .map_err(|e| Ended::bad_request(&format!("invalid bid request: tmax: {e}")))?;
    let admission = state.door.admission();
    // The expected fan-out time: the configured floor, or how long the fastest bidder
    // typically takes to answer, whichever is longer.
    let needed = admission
        .config()
        .min_time_left()
        .max(Duration::from_millis(1))
        .max(roster.fastest_typical_answer());
    match admission.start(deadline.answer_by, needed).await {
        Ok(started) => Ok(Admitted {
            request,
            currency,
            amended,
            rates,
            deadline,
            _started: started,
        }),
        Err(Missed::TooLittleTime) => {
            // No bidder can be expected to answer in the time left: answer now, and spend no
            // bidder's capacity on it.
            let response =
                http_front::no_bid(admission.config().no_bid, body, NBR_INSUFFICIENT_TIME);
            let mut ended = Ended::at_once(response, RequestOutcome::NoBid);
            ended.outcome.no_time_left = true;
            Err(ended)
        }
        // The work ahead of it would have made it late, and no start in time came.
        Err(Missed::WouldMiss) => Err(Ended::at_once(
            http_front::shed_answer(admission, body),
            RequestOutcome::Shed,
        )),
    }
}

/// From the settlement to the seller's answer: markup fetched where missing, loss notices
/// fired, markup cached, then the answer encoded; the winners' win and billing notices go out
/// only with an answer (the seller's to fire where the plan says so).
async fn deliver(
    state: &State,
    roster: &Roster,
    seller: &Seller,
    admitted: &Admitted<'_>,
    fanned: &FannedOut,
    settlement: Settlement,
) -> Delivered {
    let deadline = &admitted.deadline;
    let mut recorded = settlement.recorded;
    let mut won = settlement.won;
    let mut markup = Vec::new();
    // Fetching markup is itself the win notice: mark which winners had theirs fired that way.
    let fetched_nurl =
        fetch_missing_markup(state, roster, &mut won, deadline.markup_by(), &mut markup).await;
    if let Some(r) = recorded.as_mut() {
        mark_dropped(&mut r.wins, &won, DROPPED_NO_MARKUP);
    }
    fire_losses(state, roster, settlement.loss_urls, &fanned.auction_id);
    let mut delivered = Delivered {
        response: no_bid(),
        request: RequestOutcome::NoBid,
        wins: Vec::new(),
        markup,
        cache: None,
        recorded,
    };
    if won.is_empty() {
        return delivered;
    }
    if let Some(cache) = &state.markup_cache {
        delivered.cache = cache.store(&mut won, deadline.cache_by()).await;
    }
    let mut pending = Vec::new();
    for (w, fetched) in won.iter_mut().zip(&fetched_nurl) {
        delivered.wins.push(WinOutcome {
            bidder: w.bidder,
            cleared: w.bid.price,
        });
        let line = delivered
            .recorded
            .as_mut()
            .and_then(|r| r.wins.get_mut(w.line));
        let about = line.as_ref().map(|l| NoticeAbout {
            auction: fanned.auction_id.clone(),
            imp: l.imp.clone(),
            bid: l.bid.clone(),
            price_micros: Some(l.charged_micros),
        });
        let billing_by = plan_notices(state, seller, w, *fetched, about, &mut pending);
        if let Some(line) = line {
            line.billing_by = billing_by.map(Into::into);
        }
    }
    let request_id = fanned.request_id.clone();
    let response = settle::seller_response(request_id, &fanned.auction_id, &admitted.currency, won);
    match response.to_vec() {
        Ok(body) => {
            for notice in pending {
                if let Some(bidder) = roster.get(notice.bidder) {
                    let (kind, url, about) = (notice.kind, &notice.url, notice.about);
                    state.notifier.fire(kind, url, &bidder.notices, about);
                }
            }
            delivered.response = bid_answer(body);
            delivered.request = RequestOutcome::Bid;
        }
        Err(e) => undelivered(&mut delivered, &e),
    }
    delivered
}

/// Why a recorded winner was not sold: its markup could not be fetched.
const DROPPED_NO_MARKUP: &str = "markup_failed";
/// Why a recorded winner was not sold: the seller's answer could not be built.
const DROPPED_INTERNAL_ERROR: &str = "internal_error";

/// The seller's answer could not be encoded: it gets a 500, no winner is sold and none of the
/// winners' own notices is fired (markup fetches and loss notices already went out, and
/// stay in the record).
fn undelivered(delivered: &mut Delivered, e: &dyn std::fmt::Display) {
    tracing::error!(error = %e, "encoding the seller response failed");
    delivered.response = json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
    delivered.request = RequestOutcome::InternalError;
    delivered.wins.clear();
    if let Some(r) = delivered.recorded.as_mut() {
        for win in &mut r.wins {
            win.billing_by = None;
            win.dropped
                .get_or_insert_with(|| DROPPED_INTERNAL_ERROR.into());
        }
    }
}

fn bid_answer(body: Vec<u8>) -> SellerAnswer {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-openrtb-version", "2.6")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// Fires the loss notices the settlement prepared.
fn fire_losses(state: &State, roster: &Roster, losses: Vec<LossNotice>, auction_id: &str) {
    for loss in losses {
        if let Some(b) = roster.get(loss.bidder) {
            let about = loss.about.map(|(imp, bid)| NoticeAbout {
                auction: auction_id.to_owned(),
                imp,
                bid,
                price_micros: None,
            });
            state
                .notifier
                .fire(NoticeKind::Loss, &loss.url, &b.notices, about);
        }
    }
}

/// Marks the recorded winners that are no longer among `won` as dropped (not sold), and why.
fn mark_dropped(wins: &mut [records::Win], won: &[Won], why: &'static str) {
    for (i, win) in wins.iter_mut().enumerate() {
        if !won.iter().any(|w| w.line == i) {
            win.dropped = Some(why.into());
        }
    }
}

/// Longest `x-gavel-repaired` header: the paths of a request's repairs, cut at a path.
const MAX_REPAIRED_HEADER: usize = 1024;

/// Names what was repaired in the seller's answer (`x-gavel-repaired: imp[0].native.request,
/// device.geo.lat`), so the seller can fix its side.
fn name_repairs(response: &mut SellerAnswer, paths: &[String]) {
    if paths.is_empty() {
        return;
    }
    let mut value = String::new();
    for path in paths {
        if value.len() + path.len() + 2 > MAX_REPAIRED_HEADER {
            value.push_str(", ...");
            break;
        }
        if !value.is_empty() {
            value.push_str(", ");
        }
        value.push_str(path);
    }
    if let Ok(v) = http::HeaderValue::from_str(&value) {
        response.headers_mut().insert("x-gavel-repaired", v);
    }
}

/// A winner's notice the exchange fires once the seller's answer exists.
struct Pending {
    kind: NoticeKind,
    url: String,
    bidder: BidderIx,
    about: Option<NoticeAbout>,
}

/// Plans a winner's notices (`notice_plan`): those the exchange fires move to `pending`, those
/// nobody may are stripped, the seller's stay in the bid. Returns who decides its charge
/// (`NoticePlan::billing_by`): `exchange`, `seller`, or `None` when it has neither `nurl`
/// nor `burl`.
fn plan_notices(
    state: &State,
    seller: &Seller,
    w: &mut Won,
    fetched: bool,
    about: Option<NoticeAbout>,
    pending: &mut Vec<Pending>,
) -> Option<&'static str> {
    let plan = notice_plan::plan(seller, state.config.config.notices.fire_nurl, fetched);
    let billing_by = plan.billing_by(w.bid.nurl.is_some(), w.bid.burl.is_some());
    for (firer, url, kind) in [
        (plan.nurl, &mut w.bid.nurl, NoticeKind::Win),
        (plan.burl, &mut w.bid.burl, NoticeKind::Billing),
        (plan.lurl, &mut w.bid.lurl, NoticeKind::Loss),
    ] {
        match firer {
            Firer::Seller => {}
            Firer::Nobody => *url = None,
            Firer::Exchange => {
                if let Some(url) = url.take() {
                    pending.push(Pending {
                        kind,
                        url,
                        bidder: w.bidder,
                        about: about.clone(),
                    });
                }
            }
        }
    }
    billing_by
}

/// For winners without `adm` (only bidders with `fetch_markup` may send those: see
/// `settle`), GETs the (macro-replaced) `nurl`, checked against the bidder's notice hosts, and
/// uses its body as the markup, as OpenRTB allows. A winner whose markup cannot be had by `by`
/// is dropped: an ad without markup cannot be served. Returns, index-aligned with the
/// remaining winners, whether the `nurl` was already called; each fetch's outcome goes to
/// `fetches`.
async fn fetch_missing_markup(
    state: &State,
    roster: &Roster,
    won: &mut Vec<Won>,
    by: Instant,
    fetches: &mut Vec<(BidderIx, NoticeOutcome)>,
) -> Vec<bool> {
    let needs = |w: &Won| w.bid.adm.is_none();
    if !won.iter().any(needs) {
        return vec![false; won.len()];
    }
    let timeout = by.saturating_duration_since(Instant::now());
    let results = join_all(won.iter().map(|w| async move {
        if !needs(w) {
            return None;
        }
        Some(fetch_markup(state, roster.get(w.bidder)?, &w.bid, timeout).await)
    }))
    .await;
    let mut kept = Vec::with_capacity(won.len());
    let mut fired = Vec::with_capacity(won.len());
    for (mut w, result) in std::mem::take(won).into_iter().zip(results) {
        let outcome = match result {
            // The bidder left the roster meanwhile: no route, no markup.
            None if needs(&w) => NoticeOutcome::Failed,
            None => {
                kept.push(w);
                fired.push(false);
                continue;
            }
            Some(Ok(markup)) => {
                w.bid.adm = Some(markup);
                fetches.push((w.bidder, NoticeOutcome::Sent));
                kept.push(w);
                fired.push(true);
                continue;
            }
            Some(Err(NoticeError::Refused(refusal))) => {
                if let Some(b) = roster.get(w.bidder) {
                    b.notices.refused("markup fetch", &refusal);
                }
                NoticeOutcome::Refused
            }
            Some(Err(NoticeError::Failed(e))) => {
                tracing::debug!(error = %e, "markup fetch failed; winner dropped");
                NoticeOutcome::Failed
            }
        };
        fetches.push((w.bidder, outcome));
    }
    *won = kept;
    fired
}

/// One winner's markup from its `nurl`, within `timeout`.
async fn fetch_markup(
    state: &State,
    bidder: &Bidder,
    bid: &openrtb::Bid,
    timeout: Duration,
) -> Result<String, NoticeError> {
    let route = &bidder.notices;
    let url = bid.nurl.as_deref().unwrap_or_default();
    let target = route.hosts.check(url).map_err(NoticeError::Refused)?;
    let get = state
        .notice_client
        .get(&target, route.tls.as_ref(), MAX_MARKUP_BYTES);
    match tokio::time::timeout(timeout, get).await {
        Ok(Ok(a)) if a.status.is_success() && !a.body.is_empty() => {
            Ok(String::from_utf8_lossy(&a.body).into_owned())
        }
        Ok(Ok(a)) => Err(NoticeError::Failed(format!("status {}", a.status))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(NoticeError::Failed("timed out".to_owned())),
    }
}

/// The `tmax` the deadline is computed from: the request's (or the default), capped by the
/// seller's `max_tmax_ms`.
fn seller_tmax(request: Option<i32>, cap: Option<u32>, default_ms: u64) -> Option<i64> {
    match (request, cap) {
        (tmax, None) => tmax.map(i64::from),
        (Some(t), Some(c)) => Some(i64::from(t).min(i64::from(c))),
        (None, Some(c)) => Some(i64::try_from(default_ms.min(u64::from(c))).unwrap_or(i64::MAX)),
    }
}

/// Applies the seller's floor multiplier to every imp and deal floor, before bidders see them.
fn raise_floors(request: &mut BidRequest, seller: &Seller) {
    if seller.floor_permille == 1000 {
        return;
    }
    for imp in &mut request.imp {
        if let Some(f) = imp.bidfloor.as_mut() {
            *f = seller.floor(*f);
        }
        let deals = imp.pmp.as_mut().and_then(|p| p.deals.as_mut());
        for deal in deals.into_iter().flatten() {
            if let Some(f) = deal.bidfloor.as_mut() {
                *f = seller.floor(*f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seller_caps_tmax_given_or_defaulted() {
        assert_eq!(seller_tmax(Some(300), None, 100), Some(300));
        assert_eq!(seller_tmax(None, None, 100), None);
        assert_eq!(seller_tmax(Some(300), Some(120), 100), Some(120));
        assert_eq!(seller_tmax(Some(80), Some(120), 100), Some(80));
        assert_eq!(seller_tmax(None, Some(50), 100), Some(50));
        assert_eq!(seller_tmax(None, Some(500), 100), Some(100));
    }

    fn win(dropped: Option<&'static str>) -> records::Win {
        records::Win {
            imp: "1".into(),
            bidder: "a".into(),
            bid: "b".into(),
            billing_by: Some("exchange".into()),
            dropped: dropped.map(Into::into),
            ..records::Win::default()
        }
    }

    /// An answer that cannot be encoded sells nothing: the seller gets a 500, the outcome says
    /// `internal_error`, and the record keeps every winner, marked not sold and not billed,
    /// while what went out before (a markup fetch) stays in it.
    #[test]
    fn an_answer_that_cannot_be_built_records_its_winners_as_unsold() {
        let mut delivered = Delivered {
            response: no_bid(),
            request: RequestOutcome::NoBid,
            wins: vec![WinOutcome {
                bidder: BidderIx::nth(0).unwrap(),
                cleared: openrtb::Price::from_micros(1_000_000),
            }],
            markup: vec![(BidderIx::nth(1).unwrap(), NoticeOutcome::Failed)],
            cache: None,
            recorded: Some(Recorded {
                bids: Vec::new(),
                wins: vec![win(None), win(Some(DROPPED_NO_MARKUP))],
            }),
        };
        let error = serde_json::from_str::<u32>("x").unwrap_err();
        undelivered(&mut delivered, &error);
        assert_eq!(
            delivered.response.status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(delivered.request, RequestOutcome::InternalError);
        assert!(delivered.wins.is_empty(), "nothing was sold");
        assert_eq!(delivered.markup.len(), 1, "what was sent stays");
        let wins = delivered.recorded.unwrap().wins;
        assert_eq!(wins.len(), 2);
        assert_eq!(wins[0].dropped.as_deref(), Some(DROPPED_INTERNAL_ERROR));
        assert_eq!(wins[0].billing_by, None);
        assert_eq!(
            wins[1].dropped.as_deref(),
            Some(DROPPED_NO_MARKUP),
            "the first reason stays"
        );
    }

    #[test]
    fn floors_of_imps_and_deals_are_raised() {
        let mut request = BidRequest::from_slice(
            br#"{"id":"r","imp":[{"id":"1","bidfloor":1.0,"banner":{"w":1,"h":1},
                "pmp":{"deals":[{"id":"d","bidfloor":2.0},{"id":"e"}]}}]}"#,
        )
        .unwrap();
        let mut seller = Seller::anonymous(false);
        seller.floor_permille = 1_500;
        raise_floors(&mut request, &seller);
        let imp = &request.imp[0];
        assert_eq!(imp.bidfloor, Some(openrtb::Price::from_micros(1_500_000)));
        let deals = imp.pmp.as_ref().unwrap().deals.as_ref().unwrap();
        assert_eq!(
            deals[0].bidfloor,
            Some(openrtb::Price::from_micros(3_000_000))
        );
        assert_eq!(deals[1].bidfloor, None, "no floor stays no floor");
    }
}
