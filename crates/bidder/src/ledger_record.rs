//! The bidder's ledger records (`records::LedgerRecord`): one per reservation made or refused
//! and per notice settled, built from the typed outcomes the bid path and the notice handler
//! already have, and handed to the journal (which never waits).
//!
//! A notice refused before the ledger is anyone's to send, a million times: those are counted
//! (`gavel_bidder_notices_refused_total{reason}`) and recorded at most once a second per
//! reason ([`RefusalSamples`]), the record saying how many it stands for (`suppressed`), and
//! holding only what the notice's token vouched for: nothing but the reason when the token did
//! not verify (or notices are not signed), so a forger chooses no byte of what is kept.
//!
//! A valid notice URL replayed (a seller firing its `burl` a million times) settles as a
//! duplicate or a refusal at the ledger: the first of each (reservation, event, outcome) is
//! recorded, repeats are counted only ([`RefusalSamples::first_time`], a bounded set). Without
//! signed notices nothing about such a refusal is verified: it is sampled like the others.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

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
    /// Nothing vouched for: a refusal of a notice whose token did not verify.
    pub(crate) const NONE: Subject<'static> = Subject {
        reservation: None,
        auction: None,
        imp: None,
        campaign: None,
    };

    pub(crate) fn of(notice: &'a Notice) -> Subject<'a> {
        Subject {
            reservation: Some(&notice.reservation),
            auction: notice.auction.as_deref(),
            imp: notice.imp.as_deref(),
            campaign: notice.campaign.as_deref(),
        }
    }
}

/// Repeats remembered before the set starts again: a few MB at most.
const MAX_REMEMBERED: usize = 65_536;

/// What bounds the records anyone holding or forging a notice URL can cause.
#[derive(Debug)]
pub(crate) struct RefusalSamples {
    /// Notices refused before the ledger: at most one record a second per reason.
    per_reason: Vec<LogLimit>,
    /// Refusals at the ledger of unsigned notices: at most one a second per outcome.
    per_outcome: Vec<LogLimit>,
    /// (reservation, event, outcome) already recorded as a duplicate or a refusal.
    recorded: Mutex<HashSet<u64>>,
}

impl Default for RefusalSamples {
    fn default() -> RefusalSamples {
        RefusalSamples {
            per_reason: NoticeRefusal::ALL
                .iter()
                .map(|_| LogLimit::new(1))
                .collect(),
            per_outcome: NoticeOutcome::ALL
                .iter()
                .map(|_| LogLimit::new(1))
                .collect(),
            recorded: Mutex::default(),
        }
    }
}

impl RefusalSamples {
    /// Whether a refusal for `reason` in wall-clock second `second` is recorded; if so, how many
    /// of that reason were left out before it.
    pub(crate) fn admit(&self, reason: NoticeRefusal, second: u64) -> Option<u64> {
        self.per_reason.get(reason as usize)?.admit(second)
    }

    /// The same for a refusal at the ledger, by its outcome.
    fn admit_outcome(&self, outcome: NoticeOutcome, second: u64) -> Option<u64> {
        self.per_outcome.get(outcome as usize)?.admit(second)
    }

    /// Whether this (reservation, event, outcome) is recorded for the first time. The set is
    /// bounded: full, it starts again (a replay then records once more per start).
    pub(crate) fn first_time(&self, reservation: &str, event: LedgerEvent, detail: Detail) -> bool {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            reservation,
            event,
            detail.notice,
            detail.outcome,
            detail.reason,
        )
            .hash(&mut h);
        let key = h.finish();
        let mut set = telemetry::locks::lock(&self.recorded);
        if set.len() >= MAX_REMEMBERED {
            set.clear();
        }
        set.insert(key)
    }
}

/// Records what settling a notice did (`settled_event`), bounded: a repeat of a duplicate or a
/// refusal for one reservation is not recorded again, and a refusal of an unsigned notice is
/// sampled and cut like one refused before the ledger.
#[allow(clippy::too_many_arguments)]
pub(crate) fn settled(
    journal: &Journal,
    samples: &RefusalSamples,
    node: &str,
    kind: NoticeKind,
    notice: &Notice,
    signed: bool,
    settled: &Settled,
    asked: Nanos,
) {
    if !journal.is_on() {
        return;
    }
    let Some((event, amount, detail)) = settled_event(kind, settled, asked) else {
        return;
    };
    let repeatable = !matches!(
        settled.outcome,
        NoticeOutcome::Charged | NoticeOutcome::ChargedAfterRelease | NoticeOutcome::Released
    );
    if repeatable && !signed && event == LedgerEvent::NoticeRefused {
        let Some(suppressed) =
            samples.admit_outcome(settled.outcome, Timestamp::now().millis() / 1000)
        else {
            return;
        };
        let detail = Detail {
            suppressed,
            ..detail
        };
        record(journal, node, event, Subject::NONE, Nanos::ZERO, detail);
        return;
    }
    if repeatable && !samples.first_time(&notice.reservation, event, detail) {
        return;
    }
    record(journal, node, event, Subject::of(notice), amount, detail);
}

/// What of a refused notice its token vouched for: all of it when the token verified (an
/// expired or over-priced notice, a price the bidder does not accept), nothing when it did not
/// or notices are not signed (`signed` false).
fn vouched_for(notice: &Notice, why: Refusal, signed: bool) -> Subject<'_> {
    if !signed {
        return Subject::NONE;
    }
    match why {
        Refusal::Token(TokenError::Missing | TokenError::Malformed | TokenError::BadSignature) => {
            Subject::NONE
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
    signed: bool,
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
        suppressed,
        ..Detail::default()
    };
    let subject = vouched_for(notice, why, signed);
    record(
        journal,
        node,
        LedgerEvent::NoticeRefused,
        subject,
        Nanos::ZERO,
        detail,
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
        suppressed: detail.suppressed,
    }));
}

/// The labels of an event.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Detail {
    pub(crate) notice: Option<&'static str>,
    pub(crate) outcome: Option<&'static str>,
    pub(crate) reason: Option<&'static str>,
    /// A sampled record: how many of its reason were left out since the previous one.
    pub(crate) suppressed: u64,
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
        suppressed: 0,
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
        let forged = vouched_for(&notice, Refusal::Token(TokenError::BadSignature), true);
        assert!(
            forged.reservation.is_none()
                && forged.auction.is_none()
                && forged.campaign.is_none()
                && forged.imp.is_none()
        );
        let expired = vouched_for(&notice, Refusal::Token(TokenError::Expired), true);
        assert_eq!(expired.reservation, Some("res-1"));
        assert_eq!(
            vouched_for(&notice, Refusal::AboveBid, true).campaign,
            Some("\nverdict: ok")
        );
        // Notices not signed: nothing is vouched for.
        assert_eq!(
            vouched_for(&notice, Refusal::AboveBid, false).campaign,
            None
        );
    }

    #[test]
    fn a_replayed_duplicate_is_recorded_once_per_reservation() {
        let samples = RefusalSamples::default();
        let detail = Detail {
            notice: Some("billing"),
            outcome: Some("already_committed"),
            reason: None,
            suppressed: 0,
        };
        assert!(samples.first_time("r1", LedgerEvent::Commit, detail));
        assert!((0..1_000).all(|_| !samples.first_time("r1", LedgerEvent::Commit, detail)));
        assert!(samples.first_time("r2", LedgerEvent::Commit, detail));
        let refused = Detail {
            reason: Some("conflict"),
            outcome: None,
            ..detail
        };
        assert!(samples.first_time("r1", LedgerEvent::NoticeRefused, refused));
    }
}
