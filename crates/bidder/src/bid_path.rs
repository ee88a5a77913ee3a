//! The life of one bid request inside the bidder: decode and validate (the same rules as the
//! exchange), fix the deadline, rank each impression's candidates, reserve the best one's
//! maximum cost in the ledger, and answer with bids carrying their notice URLs.
// A request or notice path: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use ledger::Refusal;
use openrtb::{Bid, BidRequest, BidResponse, MarkupType, SeatBid};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use units::{Nanos, Timestamp};

use crate::decision::{BidReply, Decision, ImpDecision, ImpOutcome, NoBid, Stop};
use crate::ledger_record::{self, Detail, Subject};
use crate::notice::{BidNotice, notice_urls};
use crate::state::State;
use campaigns::{ImpFacts, Media, Proposal, Ranking, RequestFacts, Snapshot, rank};
use ledger::ReserveError;
use records::LedgerEvent;

/// After a budget refusal that is the ledger's last word (`Ledger::refusal_is_final`), how long a
/// campaign is skipped at first: doubled for each refusal in a row, up to 4 s
/// (`CampaignState::mark_exhausted`). A refusal in lease mode that only asked for a lease is not
/// remembered.
const EXHAUSTED_BACKOFF: Duration = Duration::from_millis(250);

thread_local! {
    /// Per-thread pacing draws, seeded from the configured seed so that a one-thread bidder
    /// makes the same decisions for the same input.
    static DRAWS: RefCell<Option<SmallRng>> = const { RefCell::new(None) };
}

/// The request's and its imps' ids fit in a notice URL (a price token is bound to them too).
fn ids_fit_notices(request: &BidRequest) -> Result<(), String> {
    let too_long = |what: &str, id: &str| {
        format!(
            "{what} {:?}...: longer than {} bytes",
            id.chars().take(16).collect::<String>(),
            crate::notice::MAX_ID_BYTES
        )
    };
    if request.id.len() > crate::notice::MAX_ID_BYTES {
        return Err(too_long("id", &request.id));
    }
    match request
        .imp
        .iter()
        .find(|i| i.id.len() > crate::notice::MAX_ID_BYTES)
    {
        Some(imp) => Err(too_long("imp.id", &imp.id)),
        None => Ok(()),
    }
}

/// Runs one request to its decision: a bid response, a no-bid and why, or a 400's message.
pub(crate) async fn run(state: &State, body: &[u8], read_at: Instant) -> Decision {
    let request = match admit(state, body, read_at) {
        Ok(admitted) => admitted,
        Err(early) => return early,
    };
    let (request, deadline) = request;
    let now = Timestamp::now();
    let snapshot = state.snapshot.load_full();
    let rankings = rank_imps(state, &snapshot, &request, now);
    let mut bids = Vec::new();
    let mut imps = Vec::with_capacity(rankings.len());
    for (imp_index, ranking) in rankings.into_iter().enumerate() {
        let mut imp = ImpDecision::ranked(ranking.skips);
        let tried = Tried {
            request: &request,
            imp_index,
            deadline,
            now,
        };
        if let Some(bid) =
            reserve_first(state, &snapshot, &tried, &ranking.proposals, &mut imp).await
        {
            bids.push(bid);
        }
        imps.push(imp);
    }
    Decision {
        answer: respond(state, &request, bids),
        imps,
    }
}

/// Decodes and checks a request and fixes its deadline; or the decision to stop there.
fn admit(state: &State, body: &[u8], read_at: Instant) -> Result<(BidRequest, Instant), Decision> {
    let invalid = |message: String| Decision::early(BidReply::Invalid(message));
    // `from_slice`, not the generic `openrtb::decode`: only it takes the direct decoder.
    let request = BidRequest::from_slice(body).map_err(|e| invalid(e.to_string()))?;
    let auction = openrtb::validate::auction_currency(&request, "USD");
    openrtb::validate::validate(&request, auction).map_err(|e| invalid(e.to_string()))?;
    if !in_currency(&request, state.config.currency.as_str()) {
        return Err(Decision::early(BidReply::NoBid(NoBid::OtherCurrency)));
    }
    ids_fit_notices(&request).map_err(invalid)?;
    let deadline = state
        .deadline
        .deadline(read_at, request.tmax.map(i64::from))
        .map_err(|e| invalid(e.to_string()))?
        .answer_by;
    if deadline.saturating_duration_since(Instant::now())
        < state.door.admission().config().min_time_left()
    {
        // Too little time to decide and answer usefully: a no-bid now, nothing reserved.
        state.door.admission().count_late();
        return Err(Decision::early(BidReply::NoBid(NoBid::NoTimeLeft)));
    }
    Ok((request, deadline))
}

/// The answer carrying `bids`, or a no-bid.
fn respond(state: &State, request: &BidRequest, bids: Vec<Bid>) -> BidReply {
    if bids.is_empty() {
        return BidReply::NoBid(NoBid::NothingWon);
    }
    let count = bids.len();
    let response = BidResponse {
        id: request.id.clone(),
        seatbid: Some(vec![SeatBid {
            bid: bids,
            seat: Some(state.config.seat.clone()),
            ..Default::default()
        }]),
        cur: Some(state.config.currency.clone()),
        ..Default::default()
    };
    // Encoding owned strings and integers cannot fail; an empty body would read as garbage, so
    // answer no-bid instead.
    match response.to_vec() {
        Ok(body) => BidReply::Bid { body, bids: count },
        Err(_) => BidReply::NoBid(NoBid::Unencodable),
    }
}

/// Whether `request` can be bid on in `currency`, the one of every budget and CPM: the request
/// allows it (no `cur` means USD) and every floor is in it (`bidfloorcur` defaults to USD; a
/// floor in another currency cannot be compared with our CPMs). Money is never mixed.
fn in_currency(request: &BidRequest, currency: &str) -> bool {
    let allowed = match request.cur.as_deref() {
        Some(list) if !list.is_empty() => list.iter().any(|c| c.eq_ignore_ascii_case(currency)),
        _ => currency == "USD",
    };
    allowed
        && request.imp.iter().all(|imp| {
            imp.bidfloorcur
                .as_deref()
                .unwrap_or("USD")
                .eq_ignore_ascii_case(currency)
        })
}

/// Ranks every impression's candidates; synchronous, no await.
fn rank_imps(
    state: &State,
    snapshot: &Snapshot,
    request: &BidRequest,
    now: Timestamp,
) -> Vec<Ranking> {
    let facts = RequestFacts::from_request(request, now);
    DRAWS.with(|cell| {
        let mut cell = cell.borrow_mut();
        let rng = cell.get_or_insert_with(|| SmallRng::seed_from_u64(state.config.pacing.seed));
        let mut draw = || rng.random_range(0..1_000_000u32);
        request
            .imp
            .iter()
            .map(|imp| rank(snapshot, &facts, &ImpFacts::from_imp(imp), now, &mut draw))
            .collect()
    })
}

/// The impression being bid on.
struct Tried<'a> {
    request: &'a BidRequest,
    imp_index: usize,
    deadline: Instant,
    now: Timestamp,
}

/// Tries the proposals in order until one's maximum cost is reserved; builds its bid. What
/// happened is written into `imp`.
async fn reserve_first(
    state: &State,
    snapshot: &Snapshot,
    tried: &Tried<'_>,
    proposals: &[Proposal],
    imp: &mut ImpDecision,
) -> Option<Bid> {
    for p in proposals {
        if Instant::now() >= tried.deadline {
            imp.outcome = ImpOutcome::Stopped(Stop::Deadline);
            return None;
        }
        let campaign = snapshot.set.campaigns().get(p.campaign as usize)?;
        let campaign_state = snapshot.states.get(p.campaign as usize)?;
        let id = state.next_reservation_id();
        // The most this bid can cost: its own price (a clearing price never exceeds the bid).
        let amount = Nanos::of_impression(p.price);
        let reserved = state
            .ledger
            .reserve(&id, campaign.id(), amount, tried.deadline)
            .await;
        record_reservation(state, tried, campaign.id(), &id, amount, &reserved);
        match reserved {
            Ok(()) => {
                campaign_state.bids.fetch_add(1, Relaxed);
                campaign_state.note_funded();
                imp.outcome = ImpOutcome::Bid {
                    campaign: p.campaign,
                    price: p.price,
                };
                return Some(build_bid(state, snapshot, tried, p, id));
            }
            Err(ReserveError::Refused(r)) => {
                imp.refused += 1;
                if r == Refusal::UnknownCampaign {
                    // The ledger lost its limits (a Redis restarted empty): the pacing tick
                    // writes them again.
                    state.limits_pending.store(true, Relaxed);
                }
                if matches!(
                    r,
                    Refusal::InsufficientBudget | Refusal::InsufficientDailyBudget
                ) && state.ledger.refusal_is_final(campaign.id(), tried.now)
                {
                    campaign_state.mark_exhausted(tried.now, EXHAUSTED_BACKOFF);
                }
            }
            // The store is down or slow: fail closed for this impression.
            Err(ReserveError::Unavailable(_)) => {
                imp.outcome = ImpOutcome::Stopped(Stop::LedgerUnavailable);
                return None;
            }
            Err(ReserveError::Timeout) => {
                imp.outcome = ImpOutcome::Stopped(Stop::LedgerTimeout);
                return None;
            }
        }
    }
    None
}

/// The reservation's ledger record: made, or refused and why.
fn record_reservation(
    state: &State,
    tried: &Tried<'_>,
    campaign: &str,
    id: &str,
    amount: Nanos,
    reserved: &Result<(), ReserveError>,
) {
    if !state.journal.is_on() {
        return;
    }
    let imp = tried
        .request
        .imp
        .get(tried.imp_index)
        .map(|i| i.id.as_str());
    let subject = Subject {
        reservation: Some(id),
        auction: Some(tried.request.id.as_str()),
        imp,
        campaign: Some(campaign),
    };
    let (event, reason) = match reserved {
        Ok(()) => (LedgerEvent::Reserve, None),
        Err(ReserveError::Refused(r)) => (LedgerEvent::Refuse, Some(r.label())),
        Err(ReserveError::Unavailable(_)) => (LedgerEvent::Refuse, Some("ledger_unavailable")),
        Err(ReserveError::Timeout) => (LedgerEvent::Refuse, Some("ledger_timeout")),
    };
    let detail = Detail {
        reason,
        ..Detail::default()
    };
    ledger_record::record(&state.journal, &state.node, event, subject, amount, detail);
}

fn build_bid(
    state: &State,
    snapshot: &Snapshot,
    tried: &Tried<'_>,
    p: &Proposal,
    reservation: String,
) -> Bid {
    let (request, now) = (tried.request, tried.now);
    let campaign = snapshot.set.campaigns().get(p.campaign as usize);
    let creative = campaign.and_then(|c| c.creatives().get(p.creative as usize));
    let imp = request.imp.get(tried.imp_index);
    let campaign_id = campaign.map_or("", |c| c.id());
    let impid = imp.map_or("", |i| i.id.as_str());
    // From the request's clock reading (taken just before the reservation), rounded up to the
    // second: the URL expires within a second of the reservation, with no clock read per bid.
    let expires = now.saturating_add(state.notice_lifetime);
    let urls = notice_urls(
        state.keys.as_ref(),
        &BidNotice {
            base: &state.public_url,
            reservation: &reservation,
            auction: &request.id,
            campaign: campaign_id,
            imp: impid,
            max_price: p.price,
            expires_at_s: expires.0.div_ceil(1000),
        },
    );
    let dealid = p.deal.and_then(|d| {
        imp.and_then(|i| i.pmp.as_ref())
            .and_then(|pmp| pmp.deals.as_ref())
            .and_then(|deals| deals.get(d as usize))
            .and_then(|deal| deal.id.clone())
    });
    let (w, h, mtype) = match creative.map(|c| c.media()) {
        Some(Media::Banner(size)) => (
            i32::try_from(size.w).ok(),
            i32::try_from(size.h).ok(),
            MarkupType::BANNER,
        ),
        _ => (None, None, MarkupType::VIDEO),
    };
    let non_empty = |v: &[String]| (!v.is_empty()).then(|| v.to_vec());
    Bid {
        id: reservation,
        impid: impid.to_owned(),
        price: p.price,
        nurl: Some(urls.nurl),
        burl: Some(urls.burl),
        lurl: Some(urls.lurl),
        adm: creative.map(|c| c.adm().to_owned()),
        adomain: creative.and_then(|c| non_empty(c.adomain())),
        cid: Some(campaign_id.to_owned()),
        crid: creative.map(|c| c.id().to_owned()),
        cat: creative.and_then(|c| non_empty(c.cat())),
        dealid,
        w,
        h,
        mtype: Some(mtype),
        ..Default::default()
    }
}
