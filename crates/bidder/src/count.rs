//! The one place a bid request's [`Decision`] and a notice's [`NoticeResult`] become metrics.

use crate::decision::{BidReply, Decision, ImpOutcome, NoBid, NoticeResult, Stop};
use crate::metrics::{Metrics, NoticeKind, NoticeOutcome, RequestOutcome, SkipReason};

pub(crate) fn notice(m: &Metrics, kind: NoticeKind, result: &NoticeResult) {
    match result {
        NoticeResult::Shed => m.notices_shed.inc(),
        NoticeResult::Invalid(_) => m.notice(kind, NoticeOutcome::Invalid),
        NoticeResult::Refused(why) => m.notice_refused(kind, why.metric()),
        NoticeResult::Settled(settled) => m.notice(kind, settled.outcome),
    }
}

/// Counts a bid request's decision.
pub(crate) fn count(m: &Metrics, d: &Decision) {
    for imp in &d.imps {
        m.skips_of(imp.ranked_out);
        m.skips.add(SkipReason::Refused, u64::from(imp.refused));
        if let ImpOutcome::Stopped(stop) = imp.outcome {
            m.skip(match stop {
                Stop::Deadline => SkipReason::Deadline,
                Stop::LedgerUnavailable => SkipReason::LedgerUnavailable,
                Stop::LedgerTimeout => SkipReason::LedgerTimeout,
            });
        }
    }
    match &d.answer {
        BidReply::Bid { bids, .. } => {
            m.bids.add(*bids as u64);
            m.request(RequestOutcome::Bid);
        }
        BidReply::NoBid(why) => {
            if *why == NoBid::OtherCurrency {
                m.other_currency.inc();
            }
            m.request(RequestOutcome::NoBid);
        }
        BidReply::Invalid(_) => m.request(RequestOutcome::BadRequest),
    }
}

#[cfg(test)]
mod tests {
    use campaigns::Skips;
    use openrtb::Price;

    use super::*;
    use crate::decision::ImpDecision;

    #[test]
    fn a_decision_is_counted_whole() {
        let m = Metrics::default();
        let imps = vec![
            ImpDecision {
                ranked_out: Skips {
                    below_floor: 2,
                    exhausted: 0,
                    paced: 1,
                },
                refused: 1,
                outcome: ImpOutcome::Bid {
                    campaign: 0,
                    price: Price::from_micros(1_000_000),
                },
            },
            ImpDecision {
                ranked_out: Skips::default(),
                refused: 0,
                outcome: ImpOutcome::Stopped(Stop::LedgerTimeout),
            },
        ];
        let d = Decision {
            answer: BidReply::Bid {
                body: b"{}".to_vec(),
                bids: 1,
            },
            imps,
        };
        count(&m, &d);
        count(&m, &Decision::early(BidReply::NoBid(NoBid::OtherCurrency)));
        count(&m, &Decision::early(BidReply::Invalid("bad".into())));
        assert_eq!(m.request_count(RequestOutcome::Bid), 1);
        assert_eq!(m.request_count(RequestOutcome::NoBid), 1);
        assert_eq!(m.request_count(RequestOutcome::BadRequest), 1);
        assert_eq!((m.bids.get(), m.other_currency.get()), (1, 1));
        for (reason, n) in [
            (SkipReason::BelowFloor, 2),
            (SkipReason::Paced, 1),
            (SkipReason::Refused, 1),
            (SkipReason::LedgerTimeout, 1),
            (SkipReason::Deadline, 0),
        ] {
            assert_eq!(m.skip_count(reason), n, "{reason:?}");
        }
    }
}
