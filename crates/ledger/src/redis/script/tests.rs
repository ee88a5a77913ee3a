//! The scripts' arguments and replies without a Redis: what is refused before sending, the
//! order of the arguments, and replies of the wrong shape read as protocol errors (never a
//! panic, never a made-up answer). What the scripts do is tested against a real Redis in
//! `tests/`.
#![allow(clippy::unwrap_used)]

use units::{Limits, Nanos, Timestamp};

use super::*;
use crate::book::{CommitOutcome, Refusal, SettleError};
use crate::redis::resp::Value;

const NOW: Timestamp = Timestamp(3 * Timestamp::MS_PER_DAY + 5);

fn ctx() -> Ctx<'static> {
    Ctx {
        now: NOW,
        ledger: "L1",
        tombstone_ms: "900000",
        sweep_batch: "1000",
    }
}

fn sent<A: std::fmt::Debug>(e: Encoded<A>) -> Vec<String> {
    match e {
        Encoded::Send(args) => args,
        Encoded::Answered(a) => panic!("answered without a call: {a:?}"),
    }
}

fn answered<A>(e: Encoded<A>) -> Result<A, LedgerError> {
    match e {
        Encoded::Send(args) => panic!("sent {args:?}"),
        Encoded::Answered(a) => a,
    }
}

fn reply(items: &[&str]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|s| match s.parse::<i64>() {
                Ok(n) => Value::Int(n),
                Err(_) => Value::Bulk(s.as_bytes().to_vec()),
            })
            .collect(),
    )
}

#[test]
fn arguments_go_in_the_order_the_scripts_read_them() {
    let reserve = Reserve {
        id: "r1",
        campaign: "c",
        amount: Nanos(7),
        expires_at: Timestamp(99),
    };
    assert_eq!(
        sent(reserve.encode(&ctx())),
        ["r1", "c", "7", "99", "3", "L1"]
    );
    let commit = Commit {
        id: "r1",
        campaign: "c",
        price: Nanos(5),
    };
    assert_eq!(
        sent(commit.encode(&ctx())),
        ["r1", "5", &NOW.millis().to_string(), "3", "900000"]
    );
    let take = TakeLease {
        id: "l".into(),
        campaign: "c".into(),
        want: Nanos(10),
        expires_at: Timestamp(50),
        take: Take::CreateOnce,
        node: "n".into(),
    };
    assert_eq!(
        sent(take.encode(&ctx())),
        ["l", "c", "10", "50", "3", "2", "n", "L1"]
    );
    let change = |base| {
        SetLimits(LimitsChange {
            campaign: "c".into(),
            limits: Limits {
                total: Nanos(100),
                daily: Some(Nanos(40)),
            },
            writer: "file:n1".into(),
            base,
        })
    };
    assert_eq!(
        sent(change(LimitsBase::Version(7)).encode(&ctx())),
        ["c", "100", "40", "3", "L1", "file:n1", "7"]
    );
    assert_eq!(sent(change(LimitsBase::Own).encode(&ctx()))[6], "");
    assert_eq!(sent(change(LimitsBase::Any).encode(&ctx()))[6], "*");
}

#[test]
fn limits_replies_read_as_typed_answers_or_protocol_errors() {
    let call = SetLimits(LimitsChange {
        campaign: "c".into(),
        limits: Limits {
            total: Nanos(100),
            daily: None,
        },
        writer: "w".into(),
        base: LimitsBase::Own,
    });
    assert_eq!(
        call.decode(reply(&["ok", "4", "1"])).unwrap(),
        Ok(LimitsWritten {
            version: 4,
            changed: true
        })
    );
    let stored = StoredLimits {
        limits: Limits {
            total: Nanos(90),
            daily: Some(Nanos(9)),
        },
        version: 5,
        writer: "admin:ops".into(),
    };
    assert_eq!(
        call.decode(reply(&["Conflict", "5", "admin:ops", "90", "9"]))
            .unwrap(),
        Err(LimitsConflict {
            campaign: "c".into(),
            version: 5,
            stored: Some(stored),
        })
    );
    let missing = Value::Array(vec![
        Value::Bulk(b"Conflict".to_vec()),
        Value::Int(0),
        Value::Bulk(Vec::new()),
        Value::Bulk(Vec::new()),
        Value::Bulk(Vec::new()),
    ]);
    assert_eq!(
        call.decode(missing).unwrap(),
        Err(LimitsConflict {
            campaign: "c".into(),
            version: 0,
            stored: None,
        })
    );
    assert!(matches!(
        call.decode(reply(&["ok", "-1", "1"])),
        Err(LedgerError::Protocol(_))
    ));
    assert!(matches!(
        call.decode(reply(&["Conflict", "x"])),
        Err(LedgerError::Protocol(_))
    ));
    let long = SetLimits(LimitsChange {
        writer: "w".repeat(MAX_WRITER_BYTES + 1),
        ..call.0.clone()
    });
    assert_eq!(
        answered(long.encode(&ctx())),
        Err(LedgerError::OutOfRange("limits writer name"))
    );
}

#[test]
fn amounts_beyond_the_exact_range_are_refused_or_clamped_never_rounded() {
    let huge = Limits {
        total: Nanos(MAX_AMOUNT + 1),
        daily: None,
    };
    let limits = SetLimits(LimitsChange {
        campaign: "c".into(),
        limits: huge,
        writer: "w".into(),
        base: LimitsBase::Any,
    });
    assert_eq!(
        answered(limits.encode(&ctx())),
        Err(LedgerError::OutOfRange("total budget"))
    );
    // A reservation beyond every budget is sent as 2^53, which Lua holds exactly and refuses.
    let reserve = Reserve {
        id: "r",
        campaign: "c",
        amount: Nanos(i64::MAX),
        expires_at: Timestamp(1),
    };
    assert_eq!(
        sent(reserve.encode(&ctx()))[2],
        (MAX_AMOUNT + 1).to_string()
    );
    let report = ReportLease {
        id: "l".into(),
        campaign: "c".to_owned(),
        cumulative: Nanos(i64::MAX),
        expires_at: Timestamp(1),
    };
    assert_eq!(sent(report.encode(&ctx()))[1], MAX_AMOUNT.to_string());
}

#[test]
fn arguments_the_script_would_refuse_are_answered_without_a_call() {
    let reserve = Reserve {
        id: "r",
        campaign: "c",
        amount: Nanos(0),
        expires_at: Timestamp(1),
    };
    assert_eq!(
        answered(reserve.encode(&ctx())),
        Ok(Err(Refusal::NonPositiveAmount))
    );
    let commit = Commit {
        id: "r",
        campaign: "c",
        price: Nanos(-1),
    };
    assert_eq!(
        answered(commit.encode(&ctx())),
        Ok(Err(SettleError::NegativePrice))
    );
    let close = CloseLease {
        id: "l".into(),
        campaign: "c".to_owned(),
        cumulative: Nanos(-1),
    };
    assert_eq!(
        answered(close.encode(&ctx())),
        Ok(Err(LeaseError::NegativeSpend))
    );
}

#[test]
fn replies_read_as_typed_answers() {
    let commit = Commit {
        id: "r",
        campaign: "c",
        price: Nanos(i64::MAX),
    };
    // The refusal names the price as the caller gave it, not as clamped for Lua.
    assert_eq!(
        commit.decode(reply(&["AboveReservation", "40"])).unwrap(),
        Err(SettleError::AboveReservation {
            reserved: Nanos(40),
            price: Nanos(i64::MAX),
        })
    );
    assert_eq!(
        commit.decode(reply(&["Charged", "30"])).unwrap(),
        Ok(CommitOutcome::Charged(Nanos(30)))
    );
    let report = ReportLease {
        id: "l".into(),
        campaign: "c".to_owned(),
        cumulative: Nanos(1),
        expires_at: Timestamp(1),
    };
    let r = report
        .decode(reply(&["ok", "1", "0", "reclaimed", "10", "1", "77"]))
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.state, r.expires_at),
        (LeaseState::Reclaimed, Timestamp(77))
    );
    assert_eq!(
        Expire {
            campaign: "c".to_owned()
        }
        .decode(reply(&["2", "1", "1"]))
        .unwrap(),
        Swept {
            reservations: 2,
            leases: 1,
            more: true
        }
    );
}

#[test]
fn replies_of_the_wrong_shape_are_protocol_errors() {
    let commit = Commit {
        id: "r",
        campaign: "c",
        price: Nanos(1),
    };
    let take = TakeLease {
        id: "l".into(),
        campaign: "c".into(),
        want: Nanos(1),
        expires_at: Timestamp(1),
        take: Take::CreateOrGrow,
        node: String::new(),
    };
    let wrong = [
        Value::Int(1),
        Value::Nil,
        reply(&[]),
        reply(&["Unheard"]),
        reply(&["Charged"]),
        reply(&["Charged", "x"]),
    ];
    for v in wrong.clone() {
        assert!(
            matches!(commit.decode(v.clone()), Err(LedgerError::Protocol(_))),
            "commit {v:?}"
        );
    }
    for v in [reply(&["ok", "1", "2"]), reply(&["ok", "1", "2", "-3"])]
        .into_iter()
        .chain(wrong)
    {
        assert!(
            matches!(take.decode(v.clone()), Err(LedgerError::Protocol(_))),
            "take {v:?}"
        );
    }
    let report = ReportLease {
        id: "l".into(),
        campaign: "c".to_owned(),
        cumulative: Nanos(1),
        expires_at: Timestamp(1),
    };
    assert!(matches!(
        report.decode(reply(&["ok", "1", "0", "half-open", "10", "1", "77"])),
        Err(LedgerError::Protocol(_))
    ));
    assert!(matches!(
        Expire {
            campaign: "c".to_owned()
        }
        .decode(reply(&["-1", "0", "0"])),
        Err(LedgerError::Protocol(_))
    ));
}

#[test]
fn a_lost_ledger_is_an_error_not_a_refusal() {
    let reserve = Reserve {
        id: "r",
        campaign: "c",
        amount: Nanos(1),
        expires_at: Timestamp(1),
    };
    assert_eq!(
        reserve.decode(reply(&["NoLedger"])),
        Err(LedgerError::NoLedger)
    );
}
