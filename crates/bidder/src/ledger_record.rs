//! The bidder's ledger records (`records::LedgerRecord`): one per reservation made or refused
//! and per notice settled or refused, built from the typed outcomes the bid path and the
//! notice handler already have, and handed to the journal (which never waits).

use journal::Journal;
use records::{LedgerEvent, LedgerRecord, Record};
use units::{Nanos, Timestamp};

use crate::metrics::{NoticeKind, NoticeOutcome};
use crate::notice::{Notice, Settled};

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
