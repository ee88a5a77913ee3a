//! What the bidder decided, as values: for a bid request the [`Decision`] the bid path returns,
//! for a notice the [`NoticeResult`]. `count.rs` turns them into metrics (the only place that
//! does), and an auction record can serialize them. Pure: no I/O, no clock.

use campaigns::Skips;
use openrtb::Price;

use crate::notice::{Refusal, Settled};

/// One bid request's decision.
#[derive(Debug)]
pub(crate) struct Decision {
    pub(crate) answer: BidReply,
    /// Each impression, in request order; empty when the request stopped before ranking.
    pub(crate) imps: Vec<ImpDecision>,
}

impl Decision {
    /// A decision taken before any impression was looked at.
    pub(crate) fn early(answer: BidReply) -> Decision {
        Decision {
            answer,
            imps: Vec::new(),
        }
    }
}

/// What the request is answered.
#[derive(Debug)]
pub(crate) enum BidReply {
    /// A bid response, encoded, holding `bids` bids.
    Bid {
        body: Vec<u8>,
        bids: usize,
    },
    NoBid(NoBid),
    /// Refused with 400; the message names the problem.
    Invalid(String),
}

/// Why a valid request got no bid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoBid {
    /// It does not allow the budgets' currency, or has a floor in another.
    OtherCurrency,
    /// Its deadline left too little time to decide and answer; nothing was reserved.
    NoTimeLeft,
    /// No impression got a bid (see each [`ImpDecision`]).
    NothingWon,
    /// The response could not be encoded (an empty body would read as garbage).
    Unencodable,
}

/// One impression: what ranking passed over and how the ledger answered the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImpDecision {
    /// Matching campaigns the ranking passed over, by reason.
    pub(crate) ranked_out: Skips,
    /// Proposals whose reservation the ledger refused (budget, unknown campaign), in order,
    /// before the outcome.
    pub(crate) refused: u32,
    pub(crate) outcome: ImpOutcome,
}

impl ImpDecision {
    pub(crate) fn ranked(ranked_out: Skips) -> ImpDecision {
        ImpDecision {
            ranked_out,
            refused: 0,
            outcome: ImpOutcome::NoBid,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImpOutcome {
    /// Bid: the campaign (index into the snapshot) whose reservation backs it, at `price`.
    Bid { campaign: u32, price: Price },
    /// No proposal, or every one refused.
    NoBid,
    /// Stopped before the remaining proposals were tried.
    Stopped(Stop),
}

/// Why an impression stopped trying its proposals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Its deadline passed.
    Deadline,
    /// The ledger failed: fail closed for this impression.
    LedgerUnavailable,
    /// The ledger did not answer in time.
    LedgerTimeout,
}

/// What one notice came to.
#[derive(Debug)]
pub(crate) enum NoticeResult {
    /// Refused at once (503): `max_notices_in_flight` were being handled.
    Shed,
    /// Not a notice URL Gavel makes (400); the message names the problem.
    Invalid(String),
    /// Well formed, refused before the ledger (403): nothing changed.
    Refused(Refusal),
    /// The ledger's answer.
    Settled(Settled),
}
