//! The bidder's ledger records (`records::LedgerRecord`): one per reservation made or refused
//! and per notice settled, built from the typed outcomes the bid path and the notice handler
//! already have, and handed to the journal (which never waits).
//!
//! A notice refused before the ledger is anyone's to send, a million times: those are counted
//! (`gavel_bidder_notices_refused_total{reason}`) and recorded at most once a second per
//! reason ([`RefusalSamples`]), the record saying how many it stands for (`suppressed`), and
//! holding only what the notice's token vouched for: nothing but the reason when the token did
//! not verify, so a forger chooses no byte of what is kept.

use http_front::log_limit::LogLimit;
use journal::Journal;
use records::{LedgerEvent, LedgerRecord, Record};
use units::{Nanos, Timestamp};

use crate::metrics::{NoticeKind, NoticeOutcome, NoticeRefusal};
use crate::notice::{Notice, Refusal, Settled};
use crate::token::TokenError;

/// What one event names: the reservation and where it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) reservation: Option<&'a str>,
    pub(crate) auction: Option<&'a str>,
    pub(crate) imp: Option<&'a str>,
    pub(crate) campaign: Option<&'a str>,
}

impl<'a> Subject<'a> {
    pub(crate) fn of(notice: &'a Notice) -> Subject<'a> {
        Subject {
            reservation: Some(&notice.reservation),
            auction: notice.auction.as_deref(),
            imp: notice.imp.as_deref(),
            campaign: notice.campaign.as_deref(),
        }
    }
}

/// Records of notices refused before the ledger: at most one a second per reason.
#[derive(Debug)]
pub(crate) struct RefusalSamples {
    per_reason: Vec<LogLimit>,
}

impl Default for RefusalSamples {
    fn default() -> RefusalSamples {
        RefusalSamples {
            per_reason: NoticeRefusal::ALL
                .iter()
                .map(|_| LogLimit::new(1))
                .collect(),
        }
    }
}

impl RefusalSamples {
    /// Whether a refusal for `reason` in wall-clock second `second` is recorded; if so, how many
    /// of that reason were left out before it.
    pub(crate) fn admit(&self, reason: NoticeRefusal, second: u64) -> Option<u64> {
        self.per_reason.get(reason as usize)?.admit(second)
    }
}

/// What of a refused notice its token vouched for: all of it when the token verified (an
/// expired or over-priced notice, a price the bidder does not accept), nothing when it did not.
fn vouched_for(notice: &Notice, why: Refusal) -> Subject<'_> {
    match why {
        Refusal::Token(TokenError::Missing | TokenError::Malformed | TokenError::BadSignature) => {
            Subject {
                reservation: None,
                auction: None,
                imp: None,
                campaign: None,
            }
        }
        Refusal::Token(TokenError::Expired) | Refusal::AboveBid | Refusal::Price(_) => {
            Subject::of(notice)
        }
    }
}

/// Records a notice refused before the ledger, sampled (at most one a second per reason) and
/// cut to what its token vouched for.
pub(crate) fn refused(
    journal: &Journal,
    samples: &RefusalSamples,
    node: &str,
    kind: NoticeKind,
    notice: &Notice,
    why: Refusal,
) {
    if !journal.is_on() {
        return;
    }
    let reason = why.metric();
    let Some(suppressed) = samples.admit(reason, Timestamp::now().millis() / 1000) else {
        return;
    };
    let detail = Detail {
        notice: Some(notice_name(kind)),
        reason: Some(reason.label()),
        ..Detail::default()
    };
    let subject = vouched_for(notice, why);
    write(
        journal,
        node,
        LedgerEvent::NoticeRefused,
        subject,
        Nanos::ZERO,
        detail,
        suppressed,
    );
}

/// Records `event` about `subject` when records are on.
pub(crate) fn record(
    journal: &Journal,
    node: &str,
    event: LedgerEvent,
    subject: Subject<'_>,
    amount: Nanos,
    detail: Detail,
) {
    if !journal.is_on() {
        return;
    }
    write(journal, node, event, subject, amount, detail, 0);
}

fn write(
    journal: &Journal,
    node: &str,
    event: LedgerEvent,
    subject: Subject<'_>,
    amount: Nanos,
    detail: Detail,
    suppressed: u64,
) {
    let owned = |s: Option<&str>| s.map(str::to_owned);
    journal.record(Record::Ledger(LedgerRecord {
        v: records::VERSION,
        event,
        at_ms: wall_ms(),
        node: node.to_owned(),
        reservation: owned(subject.reservation),
        auction: owned(subject.auction),
        imp: owned(subject.imp),
        campaign: owned(subject.campaign),
        amount_nanos: amount.get(),
        notice: detail.notice.map(Into::into),
        outcome: detail.outcome.map(Into::into),
        reason: detail.reason.map(Into::into),
        suppressed,
    }));
}

/// The labels of an event.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Detail {
    pub(crate) notice: Option<&'static str>,
    pub(crate) outcome: Option<&'static str>,
    pub(crate) reason: Option<&'static str>,
}

/// What a settled notice did to the ledger, as an event; `None` when it did nothing worth a
/// record (a win only recorded, with `charge_on = bill`; a loss reporting "bid won").
pub(crate) fn settled_event(
    kind: NoticeKind,
    settled: &Settled,
    asked: Nanos,
) -> Option<(LedgerEvent, Nanos, Detail)> {
    let charging = kind != NoticeKind::Loss;
    let kind = notice_name(kind);
    let detail = |outcome: Option<&'static str>, reason: Option<&'static str>| Detail {
        notice: Some(kind),
        outcome,
        reason,
    };
    Some(match settled.outcome {
        NoticeOutcome::Charged | NoticeOutcome::ChargedAfterRelease => (
            LedgerEvent::Commit,
            settled.charged,
            detail(Some(settled.outcome.label()), None),
        ),
        NoticeOutcome::Duplicate if charging => (
            LedgerEvent::Commit,
            asked,
            detail(Some("already_committed"), None),
        ),
        NoticeOutcome::Duplicate => (
            LedgerEvent::Release,
            Nanos::ZERO,
            detail(Some("already_released"), None),
        ),
        NoticeOutcome::Released => (
            LedgerEvent::Release,
            Nanos::ZERO,
            detail(Some("released"), None),
        ),
        NoticeOutcome::LossAfterWin => (
            LedgerEvent::Release,
            Nanos::ZERO,
            detail(Some("already_committed"), None),
        ),
        NoticeOutcome::Recorded => return None,
        NoticeOutcome::Conflict
        | NoticeOutcome::Unknown
        | NoticeOutcome::AbovePrice
        | NoticeOutcome::Refused
        | NoticeOutcome::Invalid
        | NoticeOutcome::LedgerError => (
            LedgerEvent::NoticeRefused,
            asked,
            detail(None, Some(settled.outcome.label())),
        ),
    })
}

/// A notice kind as records name it (the exchange's names: `win`, `billing`, `loss`).
pub(crate) fn notice_name(kind: NoticeKind) -> &'static str {
    match kind {
        NoticeKind::Win => "win",
        NoticeKind::Bill => "billing",
        NoticeKind::Loss => "loss",
    }
}

fn wall_ms() -> i64 {
    i64::try_from(Timestamp::now().millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_one_reason_is_sampled_and_other_reasons_keep_their_own() {
        let samples = RefusalSamples::default();
        let kept: Vec<_> = (0..10_000)
            .filter_map(|_| samples.admit(NoticeRefusal::BadSignature, 100))
            .collect();
        assert_eq!(kept, [0], "one record in that second");
        assert_eq!(samples.admit(NoticeRefusal::Expired, 100), Some(0));
        assert_eq!(samples.admit(NoticeRefusal::BadSignature, 101), Some(9_999));
    }

    #[test]
    fn only_what_a_verified_token_vouches_for_is_kept() {
        let notice = crate::notice::parse(
            NoticeKind::Win,
            "r=res-1&a=ESC%1B%5B2J&c=%0Averdict%3A%20ok&i=1&price=1.00&t=forged",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let forged = vouched_for(&notice, Refusal::Token(TokenError::BadSignature));
        assert!(
            forged.reservation.is_none()
                && forged.auction.is_none()
                && forged.campaign.is_none()
                && forged.imp.is_none()
        );
        let expired = vouched_for(&notice, Refusal::Token(TokenError::Expired));
        assert_eq!(expired.reservation, Some("res-1"));
        assert_eq!(
            vouched_for(&notice, Refusal::AboveBid).campaign,
            Some("\nverdict: ok")
        );
    }
}
