//! Synthetic records through the reconciler: one case per mismatch kind and cause, the
//! tolerance at and past its limit, and every case again in shuffled orders.

use std::borrow::Cow;

use super::*;
use crate::{AuctionRecord, LedgerEvent, LedgerRecord, NoticeRecord, Record, VERSION, Win};

const GAVEL: &str = "gavel-dsp";
const SIM: &str = "sim-dsp";

fn win(bidder: &str, bid: &str, told: i64) -> Win {
    Win {
        imp: "1".to_owned(),
        bidder: bidder.to_owned(),
        bid: bid.to_owned(),
        rule: Cow::Borrowed("second_price"),
        cleared_micros: told,
        charged_micros: told,
        billing_by: Some(Cow::Borrowed("exchange")),
        ..Win::default()
    }
}

fn auction(id: &str, wins: Vec<Win>) -> Record {
    Record::Auction(Box::new(AuctionRecord {
        v: VERSION,
        id: id.to_owned(),
        request_id: format!("req-{id}"),
        seller: "pub".to_owned(),
        outcome: Cow::Borrowed(if wins.is_empty() { "no_bid" } else { "bid" }),
        currency: "USD".to_owned(),
        floor_permille: 1000,
        wins,
        ..AuctionRecord::default()
    }))
}

fn test_auction(id: &str, wins: Vec<Win>) -> Record {
    let Record::Auction(mut a) = auction(id, wins) else {
        unreachable!()
    };
    a.test = true;
    Record::Auction(a)
}

fn ledger(event: LedgerEvent, auction: &str, bid: &str, campaign: &str) -> LedgerRecord {
    LedgerRecord {
        v: VERSION,
        event,
        at_ms: 1,
        node: "bidder-1".to_owned(),
        reservation: Some(bid.to_owned()),
        auction: Some(auction.to_owned()),
        imp: Some("1".to_owned()),
        campaign: Some(campaign.to_owned()),
        amount_nanos: 0,
        notice: None,
        outcome: None,
        reason: None,
        suppressed: 0,
    }
}

fn reserve(auction: &str, bid: &str, campaign: &str, nanos: i64) -> Record {
    Record::Ledger(LedgerRecord {
        amount_nanos: nanos,
        ..ledger(LedgerEvent::Reserve, auction, bid, campaign)
    })
}

fn commit(auction: &str, bid: &str, campaign: &str, nanos: i64, outcome: &'static str) -> Record {
    Record::Ledger(LedgerRecord {
        amount_nanos: nanos,
        notice: Some(Cow::Borrowed("win")),
        outcome: Some(Cow::Borrowed(outcome)),
        ..ledger(LedgerEvent::Commit, auction, bid, campaign)
    })
}

fn charge(auction: &str, bid: &str, campaign: &str, nanos: i64) -> Record {
    commit(auction, bid, campaign, nanos, "charged")
}

fn release(auction: &str, bid: &str, campaign: &str) -> Record {
    Record::Ledger(LedgerRecord {
        outcome: Some(Cow::Borrowed("released")),
        ..ledger(LedgerEvent::Release, auction, bid, campaign)
    })
}

fn refused(auction: &str, bid: &str, campaign: &str, reason: &'static str) -> Record {
    Record::Ledger(LedgerRecord {
        reason: Some(Cow::Borrowed(reason)),
        ..ledger(LedgerEvent::NoticeRefused, auction, bid, campaign)
    })
}

fn notice(
    auction: &str,
    bidder: &str,
    bid: &str,
    kind: &'static str,
    outcome: &'static str,
) -> Record {
    Record::Notice(NoticeRecord {
        v: VERSION,
        auction: auction.to_owned(),
        bidder: bidder.to_owned(),
        notice: Cow::Borrowed(kind),
        outcome: Cow::Borrowed(outcome),
        at_ms: 1,
        bid: Some(bid.to_owned()),
        attempts: 1,
        ..NoticeRecord::default()
    })
}

/// A sold win of the Gavel bidder, charged as told: what makes the bidder audited.
fn agreed(auction_id: &str, bid: &str, told: i64) -> Vec<Record> {
    vec![
        auction(auction_id, vec![win(GAVEL, bid, told)]),
        reserve(auction_id, bid, "c1", told * 2),
        notice(auction_id, GAVEL, bid, "win", "sent"),
        charge(auction_id, bid, "c1", told),
    ]
}

/// A seeded permutation (xorshift64* and Fisher-Yates): the same orders on every run.
fn shuffled(records: &[Record], seed: u64) -> Vec<Record> {
    let mut out = records.to_vec();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..out.len()).rev() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let j = usize::try_from(r % (i as u64 + 1)).unwrap();
        out.swap(i, j);
    }
    out
}

fn reconcile(records: &[Record], tolerance: &Tolerance) -> Report {
    let mut r = Reconciler::new();
    for record in records {
        r.add(record);
    }
    r.finish(tolerance)
}

/// The report, checked to be the same in the given order and in five shuffled ones.
fn report(records: &[Record], tolerance: &Tolerance) -> Report {
    let first = reconcile(records, tolerance);
    for seed in 1..=5 {
        let again = reconcile(&shuffled(records, seed), tolerance);
        assert_eq!(again, first, "order {seed} changed the report");
    }
    first
}

fn bidder<'a>(report: &'a Report, name: &str) -> &'a BidderReport {
    report
        .bidders
        .iter()
        .find(|b| b.bidder == name)
        .unwrap_or_else(|| panic!("no bidder {name} in {report:#?}"))
}

struct Case {
    name: &'static str,
    records: Vec<Record>,
    expect: MismatchCounts,
    /// The kind of the one listed mismatch, if any.
    listed: Option<MismatchKind>,
    ok: bool,
}

fn counts(f: impl FnOnce(&mut MismatchCounts)) -> MismatchCounts {
    let mut c = MismatchCounts::default();
    f(&mut c);
    c
}

fn cases() -> Vec<Case> {
    let with = |extra: Vec<Record>| {
        let mut r = agreed("a1", "b1", 510_000);
        r.extend(extra);
        r
    };
    vec![
        Case {
            name: "agreed",
            records: with(vec![]),
            expect: MismatchCounts::default(),
            listed: None,
            ok: true,
        },
        Case {
            name: "price_mismatch: charged a micro more than told",
            records: with(vec![
                auction("a2", vec![win(GAVEL, "b2", 700_000)]),
                charge("a2", "b2", "c1", 700_001),
            ]),
            expect: counts(|c| c.price_mismatch = 1),
            listed: Some(MismatchKind::PriceMismatch),
            ok: false,
        },
        Case {
            name: "double_charge: one reservation charged twice",
            records: with(vec![charge("a1", "b1", "c1", 510_000)]),
            expect: counts(|c| c.double_charge = 1),
            listed: Some(MismatchKind::DoubleCharge),
            ok: false,
        },
        Case {
            name: "won_not_charged: the billing notice failed at the exchange",
            records: with(vec![
                auction("a2", vec![win(GAVEL, "b2", 700_000)]),
                notice("a2", GAVEL, "b2", "billing", "failed"),
            ]),
            expect: counts(|c| c.notice_lost = 1),
            listed: Some(MismatchKind::WonNotCharged(Uncharged::NoticeLost)),
            ok: false,
        },
        Case {
            name: "won_not_charged: the win notice was dropped at the exchange",
            records: with(vec![
                auction("a2", vec![win(GAVEL, "b2", 700_000)]),
                notice("a2", GAVEL, "b2", "win", "dropped"),
            ]),
            expect: counts(|c| c.notice_lost = 1),
            listed: Some(MismatchKind::WonNotCharged(Uncharged::NoticeLost)),
            ok: false,
        },
        Case {
            name: "won_not_charged: the bidder refused the notice",
            records: with(vec![
                auction("a2", vec![win(GAVEL, "b2", 700_000)]),
                notice("a2", GAVEL, "b2", "win", "sent"),
                refused("a2", "b2", "c1", "bad_token"),
            ]),
            expect: counts(|c| c.refused_by_bidder = 1),
            listed: Some(MismatchKind::WonNotCharged(Uncharged::RefusedByBidder)),
            ok: false,
        },
        Case {
            name: "won_not_charged: the seller fires the billing notice",
            records: with(vec![auction(
                "a2",
                vec![Win {
                    billing_by: Some(Cow::Borrowed("seller")),
                    ..win(GAVEL, "b2", 700_000)
                }],
            )]),
            expect: counts(|c| c.seller_fires = 1),
            listed: Some(MismatchKind::WonNotCharged(Uncharged::SellerFires)),
            ok: false,
        },
        Case {
            name: "won_not_charged: nothing explains it",
            records: with(vec![
                auction("a2", vec![win(GAVEL, "b2", 700_000)]),
                notice("a2", GAVEL, "b2", "win", "sent"),
            ]),
            expect: counts(|c| c.unexplained = 1),
            listed: Some(MismatchKind::WonNotCharged(Uncharged::Unexplained)),
            ok: false,
        },
        Case {
            name: "charged_not_won: a charge for a bid that lost",
            records: with(vec![
                auction("a2", vec![]),
                charge("a2", "b2", "c1", 300_000),
            ]),
            expect: counts(|c| c.no_win = 1),
            listed: Some(MismatchKind::ChargedNotWon(NotWon::NoWin)),
            ok: false,
        },
        Case {
            name: "charged_not_won: the win was dropped",
            records: with(vec![
                auction(
                    "a2",
                    vec![Win {
                        dropped: Some(Cow::Borrowed("markup_failed")),
                        ..win(GAVEL, "b2", 700_000)
                    }],
                ),
                charge("a2", "b2", "c1", 700_000),
            ]),
            expect: counts(|c| c.win_dropped = 1),
            listed: Some(MismatchKind::ChargedNotWon(NotWon::WinDropped)),
            ok: false,
        },
        Case {
            name: "charged_not_won: a test auction",
            records: with(vec![
                test_auction("a2", vec![win(GAVEL, "b2", 700_000)]),
                charge("a2", "b2", "c1", 700_000),
            ]),
            expect: counts(|c| c.test_win = 1),
            listed: Some(MismatchKind::ChargedNotWon(NotWon::TestWin)),
            ok: false,
        },
        Case {
            name: "unknown_auction: counted apart, not a failure",
            records: with(vec![charge("elsewhere", "b9", "c1", 300_000)]),
            expect: counts(|c| c.unknown_auction = 1),
            listed: Some(MismatchKind::UnknownAuction),
            ok: true,
        },
        Case {
            name: "duplicates absorbed, loss notices and releases: no mismatch",
            records: with(vec![
                commit("a1", "b1", "c1", 510_000, "already_committed"),
                notice("a1", GAVEL, "b1", "billing", "sent"),
                auction("a2", vec![win(SIM, "s1", 400_000)]),
                reserve("a2", "b2", "c1", 200_000),
                notice("a2", GAVEL, "b2", "loss", "sent"),
                release("a2", "b2", "c1"),
            ]),
            expect: MismatchCounts::default(),
            listed: None,
            ok: true,
        },
        Case {
            name: "a conflict refused by the bidder after the charge: no mismatch",
            records: with(vec![refused("a1", "b1", "c1", "conflict")]),
            expect: MismatchCounts::default(),
            listed: None,
            ok: true,
        },
        Case {
            name: "audited by a reservation alone: every notice lost",
            records: vec![
                auction("a1", vec![win(GAVEL, "b1", 510_000)]),
                reserve("a1", "b1", "c1", 900_000),
                notice("a1", GAVEL, "b1", "win", "failed"),
            ],
            expect: counts(|c| c.notice_lost = 1),
            listed: Some(MismatchKind::WonNotCharged(Uncharged::NoticeLost)),
            ok: false,
        },
    ]
}

#[test]
fn each_mismatch_kind_and_cause_is_found_in_any_order() {
    for case in cases() {
        let report = report(&case.records, &Tolerance::default());
        let gavel = bidder(&report, GAVEL);
        assert!(gavel.audited, "{}", case.name);
        assert_eq!(gavel.mismatches, case.expect, "{}", case.name);
        assert_eq!(report.totals, case.expect, "{}", case.name);
        let kinds: Vec<MismatchKind> = report.listed.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, Vec::from_iter(case.listed), "{}", case.name);
        if let Some(m) = report.listed.first() {
            assert_eq!(m.bidder.as_deref(), Some(GAVEL), "{}", case.name);
            assert!(
                m.auction.starts_with('a') || m.auction == "elsewhere",
                "{}",
                case.name
            );
        }
        assert_eq!(
            report.verdict().is_ok(),
            case.ok,
            "{}: {:?}",
            case.name,
            report.verdict()
        );
    }
}

#[test]
fn a_mismatch_is_listed_with_its_auction_bid_and_money() {
    let mut records = agreed("a1", "b1", 510_000);
    records.push(auction("a2", vec![win(GAVEL, "b2", 700_000)]));
    records.push(charge("a2", "b2", "c1", 700_001));
    let report = report(&records, &Tolerance::default());
    assert_eq!(
        report.listed,
        vec![Mismatch {
            kind: MismatchKind::PriceMismatch,
            auction: "a2".to_owned(),
            bid: "b2".to_owned(),
            bidder: Some(GAVEL.to_owned()),
            campaign: Some("c1".to_owned()),
            told_micros: Some(700_000),
            charged_nanos: Some(700_001),
        }]
    );
    let failures = report.verdict().unwrap_err();
    let text: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert_eq!(text, [format!("{GAVEL}: 1 price_mismatch")]);
}

#[test]
fn unknown_auctions_fail_only_when_asked() {
    let mut records = agreed("a1", "b1", 510_000);
    records.push(charge("elsewhere", "b9", "c1", 300_000));
    let strict = Tolerance {
        unknown_auction_fails: true,
        ..Tolerance::default()
    };
    assert!(report(&records, &Tolerance::default()).verdict().is_ok());
    let failures = report(&records, &strict).verdict().unwrap_err();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].to_string().contains("1 unknown_auction"),
        "{}",
        failures[0]
    );
}

#[test]
fn a_dsp_without_ledger_records_is_listed_not_failed_unless_required() {
    let mut records = agreed("a1", "b1", 510_000);
    records.push(auction("a2", vec![win(SIM, "s1", 400_000)]));
    records.push(notice("a2", SIM, "s1", "win", "sent"));
    let report = report(&records, &Tolerance::default());
    let sim = bidder(&report, SIM);
    assert!(!sim.audited && !sim.joined);
    assert_eq!(sim.books.won, 1);
    assert_eq!(sim.mismatches, MismatchCounts::default());
    assert!(report.verdict().is_ok());

    let required = Tolerance {
        require_bidders: vec![SIM.to_owned(), "absent".to_owned()],
        ..Tolerance::default()
    };
    let failures = super::tests::report(&records, &required)
        .verdict()
        .unwrap_err();
    let text: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            format!("{SIM}: required, but no ledger record joined its 1 wins"),
            format!("{SIM}: 1 of 1 wins not charged (1000000 ppm), 0 allowed"),
            "absent: required, but no ledger record joined its 0 wins".to_owned(),
        ]
    );
}

/// `won` sold wins of the Gavel bidder, all charged but `uncharged` of them.
fn with_uncharged(won: usize, uncharged: usize) -> Vec<Record> {
    let mut records = Vec::new();
    for i in 0..won {
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        if i < uncharged {
            records.push(auction(&a, vec![win(GAVEL, &b, 100_000)]));
        } else {
            records.extend(agreed(&a, &b, 100_000 + i as i64));
        }
    }
    records
}

#[test]
fn the_tolerance_holds_at_its_limit_and_fails_past_it() {
    let records = with_uncharged(1000, 3);
    let ppm = |n| Tolerance {
        max_uncharged_ppm: n,
        ..Tolerance::default()
    };
    let absolute = |n| Tolerance {
        max_uncharged: n,
        ..Tolerance::default()
    };
    // 3 of 1000 is 3000 ppm.
    for (tolerance, ok) in [
        (ppm(3000), true),
        (ppm(2999), false),
        (absolute(3), true),
        (absolute(2), false),
        (Tolerance::default(), false),
        // Either limit admits.
        (
            Tolerance {
                max_uncharged_ppm: 1000,
                max_uncharged: 3,
                ..Tolerance::default()
            },
            true,
        ),
    ] {
        let report = reconcile(&records, &tolerance);
        assert_eq!(report.totals.unexplained, 3);
        assert_eq!(report.verdict().is_ok(), ok, "{tolerance:?}");
        if !ok {
            let failures = report.verdict().unwrap_err();
            let allowed = tolerance.allowed_uncharged(1000);
            assert_eq!(
                failures,
                [Failure::Uncharged {
                    bidder: GAVEL.to_owned(),
                    uncharged: 3,
                    won: 1000,
                    allowed,
                }]
            );
        }
    }
    // Price mismatches are never tolerated, however generous the tolerance.
    let mut records = records;
    records.push(auction("x", vec![win(GAVEL, "y", 5)]));
    records.push(charge("x", "y", "c1", 6));
    let generous = Tolerance {
        max_uncharged_ppm: 1_000_000,
        max_uncharged: u64::MAX,
        ..Tolerance::default()
    };
    assert!(reconcile(&records, &generous).verdict().is_err());
}

/// A day in small: two Gavel bidders (their campaigns and nodes), a simulated DSP, auctions
/// with and without wins, reservations for lost bids released or expired, notices duplicated
/// and losses reported, prices all different.
fn realistic(auctions: usize) -> Vec<Record> {
    let mut records = Vec::new();
    for i in 0..auctions {
        let id = format!("x{i:05}");
        let price = 100_000 + (i as i64 * 7_919) % 2_000_000;
        let (gavel, node, campaign) = match i % 3 {
            0 => ("gv-a", "gv-a-1", format!("a-c{}", i % 4)),
            1 => ("gv-b", "gv-b-2", format!("b-c{}", i % 2)),
            _ => ("gv-a", "gv-a-2", "a-c9".to_owned()),
        };
        let on = |r: Record| match r {
            Record::Ledger(l) => Record::Ledger(LedgerRecord {
                node: node.to_owned(),
                ..l
            }),
            other => other,
        };
        let bid = format!("r{i}");
        records.push(on(reserve(&id, &bid, &campaign, price * 2)));
        match i % 5 {
            // The Gavel bidder wins, is told, charged once; the billing notice comes again.
            0 | 1 => {
                records.push(auction(&id, vec![win(gavel, &bid, price)]));
                records.push(notice(&id, gavel, &bid, "win", "sent"));
                records.push(notice(&id, gavel, &bid, "billing", "sent"));
                records.push(on(charge(&id, &bid, &campaign, price)));
                records.push(on(commit(&id, &bid, &campaign, price, "already_committed")));
            }
            // The simulated DSP wins; the Gavel bidder's loss notice releases its reservation.
            2 => {
                records.push(auction(&id, vec![win(SIM, &format!("s{i}"), price)]));
                records.push(notice(&id, SIM, &format!("s{i}"), "win", "sent"));
                records.push(notice(&id, gavel, &bid, "loss", "sent"));
                records.push(on(release(&id, &bid, &campaign)));
            }
            // Nobody wins; the reservation expires.
            3 => {
                records.push(auction(&id, vec![]));
                records.push(on(Record::Ledger(ledger(
                    LedgerEvent::Expire,
                    &id,
                    &bid,
                    &campaign,
                ))));
            }
            // Two imps: the Gavel bidder and the DSP both win; the DSP's notice failed.
            _ => {
                records.push(auction(
                    &id,
                    vec![
                        win(gavel, &bid, price),
                        win(SIM, &format!("s{i}"), price / 2),
                    ],
                ));
                records.push(notice(&id, gavel, &bid, "win", "sent"));
                records.push(notice(&id, SIM, &format!("s{i}"), "win", "failed"));
                records.push(on(charge(&id, &bid, &campaign, price)));
            }
        }
    }
    records
}

#[test]
fn a_realistic_mix_reconciles_with_no_mismatch() {
    let records = realistic(300);
    let report = report(&records, &Tolerance::default());
    assert_eq!(report.totals, MismatchCounts::default());
    assert_eq!(report.verdict(), Ok(()));
    assert!(report.unattributed.is_empty(), "{:?}", report.unattributed);
    let (mut won, mut told) = (0, 0i128);
    for (i, price) in (0..300).map(|i| (i, 100_000 + (i as i64 * 7_919) % 2_000_000)) {
        if matches!(i % 5, 0 | 1 | 4) {
            won += 1;
            told += i128::from(price);
        }
    }
    let gavel: Vec<&BidderReport> = report.bidders.iter().filter(|b| b.audited).collect();
    assert_eq!(gavel.len(), 2);
    assert_eq!(gavel.iter().map(|b| b.books.won).sum::<u64>(), won);
    assert_eq!(gavel.iter().map(|b| b.books.charged).sum::<u64>(), won);
    assert_eq!(
        gavel.iter().map(|b| b.books.told_micros).sum::<i128>(),
        told
    );
    assert_eq!(
        gavel.iter().map(|b| b.books.charged_nanos).sum::<i128>(),
        told
    );
    assert_eq!(gavel.iter().map(|b| b.duplicates).sum::<u64>(), 120);
    for b in &gavel {
        // Each campaign's books add up to its bidder's.
        assert_eq!(
            b.campaigns.iter().map(|c| c.books.charged).sum::<u64>(),
            b.books.charged
        );
        assert_eq!(
            b.campaigns
                .iter()
                .map(|c| c.books.charged_nanos)
                .sum::<i128>(),
            b.books.charged_nanos
        );
        assert_eq!(b.books.told_charged_micros, b.books.told_micros);
    }
    let a = bidder(&report, "gv-a");
    let names: Vec<&str> = a.campaigns.iter().map(|c| c.campaign.as_str()).collect();
    assert_eq!(names, ["a-c0", "a-c1", "a-c2", "a-c3", "a-c9"]);
    let sim = bidder(&report, SIM);
    assert!(!sim.audited);
    assert_eq!(sim.notices.get("win", "failed"), 60);
    assert_eq!(sim.notices.lost("win"), 60);
    assert_eq!(sim.notices.get("win", "sent"), 60);
}

#[test]
fn only_the_first_few_of_each_kind_are_listed_all_are_counted() {
    let records = with_uncharged(50, 30);
    let mut r = Reconciler::with_limit(DEFAULT_LIMIT, 4);
    for record in shuffled(&records, 9) {
        r.add(&record);
    }
    let report = r.finish(&Tolerance::default());
    assert_eq!(report.totals.unexplained, 30);
    let bids: Vec<&str> = report.listed.iter().map(|m| m.bid.as_str()).collect();
    assert_eq!(
        bids,
        ["b0", "b1", "b10", "b11"],
        "the first in (auction, bid) order"
    );
}

#[test]
fn past_the_memory_limit_the_reconcile_is_incomplete() {
    let records = realistic(30);
    let mut r = Reconciler::with_limit(20, DEFAULT_LISTED);
    for record in &records {
        r.add(record);
    }
    let report = r.finish(&Tolerance::default());
    assert!(report.seen.over_limit > 0);
    let failures = report.verdict().unwrap_err();
    assert!(
        failures
            .iter()
            .any(|f| matches!(f, Failure::Incomplete { limit: 20, .. })),
        "{failures:?}"
    );
}

#[test]
fn a_record_without_ids_is_counted_unjoinable() {
    let mut records = agreed("a1", "b1", 510_000);
    records.push(Record::Ledger(LedgerRecord {
        auction: None,
        ..ledger(LedgerEvent::NoticeRefused, "", "b1", "c1")
    }));
    let report = report(&records, &Tolerance::default());
    assert_eq!(report.seen.unjoinable, 1);
    // Not joined to a win, but still counted with its node's bidder.
    assert_eq!(bidder(&report, GAVEL).notices_refused, 1);
    assert_eq!(report.totals, MismatchCounts::default());
}

/// A commit that timed out after Redis applied it: the bidder recorded `ledger_error`, and the
/// exchange's retry was answered `already_committed`. That answer is the charge; a second retry
/// is a duplicate. With the `charged` record present as well, every retry is a duplicate.
#[test]
fn a_charge_known_only_from_a_retry_is_the_charge() {
    let lost_first_answer = vec![
        auction("a1", vec![win(GAVEL, "b1", 510_000)]),
        reserve("a1", "b1", "c1", 900_000),
        notice("a1", GAVEL, "b1", "win", "sent"),
        refused("a1", "b1", "c1", "ledger_error"),
        commit("a1", "b1", "c1", 510_000, "already_committed"),
        commit("a1", "b1", "c1", 510_000, "already_committed"),
    ];
    let first = report(&lost_first_answer, &Tolerance::default());
    assert_eq!(first.totals, MismatchCounts::default());
    assert_eq!(first.verdict(), Ok(()));
    assert_eq!(first.seen.charged_on_retry, 1);
    let gavel = bidder(&first, GAVEL);
    assert_eq!(gavel.books.charged, 1);
    assert_eq!(gavel.books.charged_nanos, 510_000);
    assert_eq!(gavel.duplicates, 1);

    let mut answered = lost_first_answer;
    answered.push(charge("a1", "b1", "c1", 510_000));
    let second = report(&answered, &Tolerance::default());
    assert_eq!(second.totals, MismatchCounts::default());
    assert_eq!(second.seen.charged_on_retry, 0);
    let gavel = bidder(&second, GAVEL);
    assert_eq!(gavel.books.charged, 1);
    assert_eq!(gavel.books.charged_nanos, 510_000);
    assert_eq!(gavel.duplicates, 2);

    // Without any win, a retry's charge is still a charge: charged_not_won, not silence.
    let no_win = vec![
        auction("a2", vec![]),
        commit("a2", "b2", "c1", 300_000, "already_committed"),
    ];
    let third = report(&no_win, &Tolerance::default());
    assert_eq!(third.totals.charged_not_won(), 1, "{third:#?}");
}
