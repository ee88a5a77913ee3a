use std::borrow::Cow;

use auction::{AuctionConfig, Candidate, DealRules, ImpRules, PriceRule, Rules};
use openrtb::Price;
use records::{AuctionRecord, BidLine, Blocks, DealSummary, ImpSummary, VERSION, Win};

use super::*;

const CENT: Price = Price::from_micros(10_000);

fn bid(bidder: &str, id: &str, imp: &str, micros: i64) -> BidLine {
    BidLine {
        bidder: bidder.to_owned(),
        id: id.to_owned(),
        imp: imp.to_owned(),
        price_micros: micros,
        status: Cow::Borrowed("lost"),
        ..BidLine::default()
    }
}

fn win(bidder: &str, id: &str, imp: &str, rule: &'static str, micros: i64) -> Win {
    Win {
        imp: imp.to_owned(),
        bidder: bidder.to_owned(),
        bid: id.to_owned(),
        rule: Cow::Borrowed(rule),
        cleared_micros: micros,
        charged_micros: micros,
        ..Win::default()
    }
}

fn imp(id: &str, floor_micros: i64) -> ImpSummary {
    ImpSummary {
        id: id.to_owned(),
        floor_micros,
        ..ImpSummary::default()
    }
}

/// One imp, floor 0.50, second price: dsp-a 2.00 beat dsp-b 1.50 and paid 1.51.
fn recorded() -> AuctionRecord {
    AuctionRecord {
        v: VERSION,
        id: "x1-2a".to_owned(),
        seller: "pub".to_owned(),
        outcome: Cow::Borrowed("bid"),
        currency: "USD".to_owned(),
        floor_permille: 1000,
        imps: vec![imp("1", 500_000)],
        bids: vec![
            bid("dsp-a", "a1", "1", 2_000_000),
            bid("dsp-b", "b1", "1", 1_500_000),
        ],
        wins: vec![win("dsp-a", "a1", "1", "second_price", 1_510_000)],
        ..AuctionRecord::default()
    }
}

fn sold(bidder: &str, bid: &str, micros: i64, rule: &'static str) -> Option<Sold> {
    Some(Sold {
        bidder: bidder.to_owned(),
        bid: bid.to_owned(),
        cleared_micros: micros,
        rule: Cow::Borrowed(rule),
    })
}

#[test]
fn the_rules_it_was_recorded_with_change_nothing() {
    let replayed = replay(&recorded(), &ReplayRules::new(CENT)).unwrap();
    assert_eq!(replayed.changes, []);
    assert_eq!(
        replayed.kept,
        [sold("dsp-a", "a1", 1_510_000, "second_price").unwrap()]
    );
}

#[test]
fn a_larger_increment_raises_the_second_price_up_to_the_bid() {
    let five_cents = ReplayRules::new(Price::from_micros(50_000));
    let replayed = replay(&recorded(), &five_cents).unwrap();
    assert_eq!(
        replayed.changes,
        [ImpChange {
            imp: "1".to_owned(),
            before: sold("dsp-a", "a1", 1_510_000, "second_price"),
            after: sold("dsp-a", "a1", 1_550_000, "second_price"),
        }]
    );
    assert_eq!(replayed.changes[0].delta_micros(), 40_000);
    let huge = ReplayRules::new(Price::from_micros(5_000_000));
    let capped = replay(&recorded(), &huge).unwrap();
    assert_eq!(
        capped.changes[0].after,
        sold("dsp-a", "a1", 2_000_000, "second_price"),
        "never more than the bid"
    );
}

#[test]
fn a_floor_multiplier_scales_the_recorded_floor_as_the_seller_would() {
    // 1.60 x 0.50 floor = 0.80, rounded like `Seller::floor`; dsp-b's 1.50 is still above it.
    let mut record = recorded();
    record.bids.truncate(1);
    record.wins = vec![win("dsp-a", "a1", "1", "second_price", 510_000)];
    let raised = ReplayRules::new(CENT).seller("pub", 1_600);
    let replayed = replay(&record, &raised).unwrap();
    assert_eq!(
        replayed.changes[0].after,
        sold("dsp-a", "a1", 810_000, "second_price")
    );
    // Four times the floor is 2.00, dsp-a's bid: a price equal to the floor is valid.
    let four = ReplayRules::new(CENT).seller("pub", 4_000);
    assert_eq!(
        replay(&record, &four).unwrap().changes[0].after,
        sold("dsp-a", "a1", 2_000_000, "second_price")
    );
    // Past the bid: unsold.
    let five = ReplayRules::new(CENT).seller("pub", 5_000);
    let replayed = replay(&record, &five).unwrap();
    assert_eq!(replayed.changes[0].after, None);
    assert_eq!(replayed.changes[0].delta_micros(), -510_000);
}

#[test]
fn a_seller_no_longer_configured_keeps_the_recorded_multiplier() {
    let mut record = recorded();
    record.bids.truncate(1);
    record.floor_permille = 2_000;
    record.wins = vec![win("dsp-a", "a1", "1", "second_price", 1_010_000)];
    let rules = ReplayRules::new(CENT).seller("someone-else", 1_000);
    assert_eq!(rules.floor_permille("pub", 2_000), 2_000);
    assert_eq!(replay(&record, &rules).unwrap().changes, []);
    let now_plain = rules.seller("pub", 1_000);
    assert_eq!(
        replay(&record, &now_plain).unwrap().changes[0].after,
        sold("dsp-a", "a1", 510_000, "second_price")
    );
}

#[test]
fn floors_scale_exactly_as_the_seller_scales_them() {
    for permille in [10, 999, 1_000, 1_001, 1_100, 1_500, 33_333, 100_000] {
        let seller = Seller {
            floor_permille: permille,
            ..Seller::anonymous(false)
        };
        for micros in [0, 1, 5, 499_999, 500_000, 1_234_567, i64::MAX / 2] {
            let record = AuctionRecord {
                imps: vec![imp("1", micros)],
                floor_permille: permille,
                ..AuctionRecord::default()
            };
            let rules = auction_rules(&record, &seller);
            assert_eq!(
                rules.imps[0].floor,
                seller.floor(Price::from_micros(micros))
            );
        }
    }
}

#[test]
fn a_bid_that_never_competed_stays_out() {
    let mut record = recorded();
    // dsp-c bid more but was dropped before the auction; dsp-d's currency had no rate.
    let mut dropped = bid("dsp-c", "c1", "1", 9_000_000);
    dropped.excluded = true;
    dropped.status = Cow::Borrowed("no_markup");
    let mut unconverted = bid("dsp-d", "d1", "1", 9_000_000);
    unconverted.cur = Some("EUR".to_owned());
    record.bids.extend([dropped, unconverted]);
    assert_eq!(
        replay(&record, &ReplayRules::new(CENT)).unwrap().changes,
        []
    );
    // A converted bid competes at its converted price.
    record.bids[3].converted_micros = Some(3_000_000);
    let replayed = replay(&record, &ReplayRules::new(CENT)).unwrap();
    assert_eq!(
        replayed.changes[0].after,
        sold("dsp-d", "d1", 2_010_000, "second_price")
    );
}

#[test]
fn blocks_deals_and_the_request_rule_come_from_the_record() {
    let mut record = recorded();
    record.at = Some(1);
    record.wins = vec![win("dsp-a", "a1", "1", "first_price", 2_000_000)];
    assert_eq!(
        replay(&record, &ReplayRules::new(CENT)).unwrap().changes,
        []
    );
    record.blocks = Blocks {
        badv: vec!["blocked.com".to_owned()],
        ..Blocks::default()
    };
    record.bids[0].adomain = vec!["www.blocked.com".to_owned()];
    let replayed = replay(&record, &ReplayRules::new(CENT)).unwrap();
    assert_eq!(
        replayed.changes[0].after,
        sold("dsp-b", "b1", 1_500_000, "first_price")
    );
    // A fixed-price deal: the deal's floor, raised by the multiplier, is the price.
    let mut record = recorded();
    record.imps[0].deals = vec![DealSummary {
        id: "d".to_owned(),
        floor_micros: 1_000_000,
        at: Some(3),
        ..DealSummary::default()
    }];
    record.bids[1].deal = Some("d".to_owned());
    record.bids[1].price_micros = 2_500_000;
    let rules = ReplayRules::new(CENT).seller("pub", 1_200);
    assert_eq!(
        replay(&record, &rules).unwrap().changes[0].after,
        sold("dsp-b", "b1", 1_200_000, "fixed_price")
    );
}

#[test]
fn an_empty_seat_is_the_bidder_name_as_live() {
    // wseat names the bidder: a bid without a seat competes as its bidder's name.
    let mut record = recorded();
    record.blocks.wseat = vec!["dsp-b".to_owned()];
    record.bids[0].seat = "other".to_owned();
    let replayed = replay(&record, &ReplayRules::new(CENT)).unwrap();
    assert_eq!(
        replayed.changes[0].after,
        sold("dsp-b", "b1", 510_000, "second_price")
    );
}

#[test]
fn what_cannot_be_replayed_says_why() {
    let mut record = recorded();
    record.outcome = Cow::Borrowed("shed");
    let rules = ReplayRules::new(CENT);
    assert_eq!(
        replay(&record, &rules),
        Err(Skip::Outcome("shed".to_owned()))
    );
    record.outcome = Cow::Borrowed("no_bid");
    assert!(replay(&record, &rules).is_ok());
    record.v = 0;
    let skip = replay(&record, &rules).unwrap_err();
    assert_eq!(skip.to_string(), "version 0");
    record.v = VERSION + 1;
    assert_eq!(replay(&record, &rules), Err(Skip::Version(VERSION + 1)));
}

#[test]
fn a_repeated_imp_id_is_judged_once() {
    let mut record = recorded();
    record.imps.push(imp("1", 0));
    let replayed = replay(&record, &ReplayRules::new(CENT)).unwrap();
    assert_eq!((replayed.changes.len(), replayed.kept.len()), (0, 1));
}

#[test]
fn totals_sum_revenue_and_spend_per_currency_and_count_skips() {
    let rules = ReplayRules::new(Price::from_micros(50_000));
    let mut totals = Totals::default();
    let mut eur = recorded();
    eur.currency = "EUR".to_owned();
    let mut shed = recorded();
    shed.outcome = Cow::Borrowed("shed");
    let mut unsold = recorded();
    unsold.outcome = Cow::Borrowed("no_bid");
    unsold.bids.clear();
    unsold.wins.clear();
    for record in [recorded(), recorded(), eur, shed, unsold] {
        totals.add(&record, &replay(&record, &rules));
    }
    assert_eq!((totals.replayed, totals.changed), (4, 3));
    assert_eq!(totals.skipped.get("outcome shed"), Some(&1));
    let usd = &totals.revenue["USD"]["pub"];
    assert_eq!(
        (usd.before_micros, usd.after_micros),
        (3_020_000, 3_100_000)
    );
    assert_eq!(usd.delta_micros(), 80_000);
    assert_eq!(totals.revenue["EUR"]["pub"].delta_micros(), 40_000);
    assert_eq!(totals.spend["USD"]["dsp-a"].after_micros, 3_100_000);
    assert!(!totals.spend["USD"].contains_key("dsp-b"), "never won");
}

#[test]
fn a_table_full_of_names_sums_the_rest_under_others() {
    let rules = ReplayRules::new(CENT);
    let mut totals = Totals::default();
    for n in 0..=totals::MAX_NAMES {
        let mut record = recorded();
        record.seller = format!("s{n}");
        totals.add(&record, &replay(&record, &rules));
    }
    let usd = &totals.revenue["USD"];
    assert_eq!(usd.len(), totals::MAX_NAMES + 1);
    assert_eq!(usd[totals::OTHERS].before_micros, 1_510_000);
}

/// A seeded xorshift: the generator below is deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const BIDDERS: [&str; 4] = ["dsp-a", "dsp-b", "dsp-c", "gone"];

/// A record as the exchange would write it: the auction run the way `settle` runs it (floors
/// raised by `Seller::floor`, bidder = roster index, seat = seat or bidder name, the tie seed
/// of the auction id), its outcome written as bids' statuses and wins. Prices come from a small
/// set so ties happen.
fn generated(
    rng: &mut Rng,
    n: u64,
    increment: Price,
    permille: u32,
    roster: &[&str],
) -> AuctionRecord {
    let mut record = AuctionRecord {
        v: VERSION,
        id: format!("g-{n}"),
        seller: "pub".to_owned(),
        outcome: Cow::Borrowed("bid"),
        currency: "USD".to_owned(),
        at: [None, Some(1), Some(2)][rng.below(3) as usize],
        floor_permille: permille,
        ..AuctionRecord::default()
    };
    for i in 0..=rng.below(3) {
        let mut imp = imp(
            &i.to_string(),
            [0, 300_000, 1_000_000][rng.below(3) as usize],
        );
        if rng.below(3) == 0 {
            imp.deals.push(DealSummary {
                id: "d".to_owned(),
                floor_micros: 800_000,
                at: [None, Some(1), Some(2), Some(3)][rng.below(4) as usize],
                ..DealSummary::default()
            });
            imp.private_auction = rng.below(2) == 0;
        }
        record.imps.push(imp);
    }
    if rng.below(4) == 0 {
        record.blocks.bseat = vec!["bad-seat".to_owned()];
    }
    for b in 0..rng.below(8) {
        let mut line = bid(
            rng.pick(&BIDDERS),
            &format!("b{}", rng.below(3)),
            &rng.below(4).to_string(),
            [250_000, 900_000, 1_200_000, 1_200_000, 2_000_000][rng.below(5) as usize],
        );
        line.seat = rng.pick(&["", "", "s1", "bad-seat"]).to_owned();
        if rng.below(4) == 0 {
            line.deal = Some("d".to_owned());
        }
        if rng.below(6) == 0 {
            line.cur = Some("EUR".to_owned());
            line.converted_micros = (rng.below(2) == 0).then_some(1_100_000 + b as i64);
        }
        line.excluded = rng.below(8) == 0;
        record.bids.push(line);
    }

    // The auction, built here without the code under test.
    let seller = Seller {
        floor_permille: permille,
        ..Seller::anonymous(false)
    };
    let raised = |m: i64| seller.floor(Price::from_micros(m));
    let rules = Rules {
        currency: "USD",
        price_rule: PriceRule::from_at(record.at),
        bcat: &[],
        badv: &[],
        wseat: &[],
        bseat: &record.blocks.bseat,
        imps: record
            .imps
            .iter()
            .map(|i| ImpRules {
                id: &i.id,
                floor: raised(i.floor_micros),
                private_auction: i.private_auction,
                deals: i
                    .deals
                    .iter()
                    .map(|d| DealRules {
                        id: &d.id,
                        floor: raised(d.floor_micros),
                        price_rule: PriceRule::from_deal_at(d.at),
                        wseat: &[],
                        wadomain: &[],
                    })
                    .collect(),
            })
            .collect(),
    };
    let competing: Vec<usize> = (0..record.bids.len())
        .filter(|&i| !record.bids[i].excluded && record.bids[i].auction_price_micros().is_some())
        .collect();
    let candidates: Vec<Candidate<'_>> = competing
        .iter()
        .map(|&i| {
            let b = &record.bids[i];
            Candidate {
                bidder: roster.iter().position(|r| *r == b.bidder).unwrap() as u32,
                seat: if b.seat.is_empty() {
                    &b.bidder
                } else {
                    &b.seat
                },
                bid_id: &b.id,
                imp_id: &b.imp,
                price: Price::from_micros(b.auction_price_micros().unwrap()),
                currency: "USD",
                deal_id: b.deal.as_deref(),
                adomain: &[],
                cat: &[],
            }
        })
        .collect();
    let outcome = auction::run_seeded(
        &rules,
        &candidates,
        &AuctionConfig {
            second_price_increment: increment,
        },
        auction::tie_seed(&record.id),
    );
    let mut wins = Vec::new();
    let mut statuses = Vec::new();
    for r in &outcome.rejected {
        statuses.push((competing[r.candidate], r.reason.label()));
    }
    for (i, result) in outcome.imps.iter().enumerate() {
        let Some(w) = result.winner else { continue };
        let b = &record.bids[competing[w.candidate]];
        statuses.push((competing[w.candidate], "won"));
        wins.push(win(
            &b.bidder,
            &b.id,
            &record.imps[i].id,
            w.price_rule.label(),
            w.clearing_price.micros(),
        ));
    }
    for (i, status) in statuses {
        record.bids[i].status = Cow::Borrowed(status);
    }
    record.wins = wins;
    record
}

#[test]
fn replaying_generated_records_under_their_own_rules_changes_nothing() {
    // The roster the records were written under; "gone" has since left the configuration,
    // so replay numbers it after the others, as it was.
    let roster = BIDDERS;
    let rules = ReplayRules::new(Price::from_micros(20_000))
        .seller("pub", 1_250)
        .bidder("dsp-a")
        .bidder("dsp-b")
        .bidder("dsp-c");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut sold, mut ties) = (0, 0);
    for n in 0..3_000 {
        let record = generated(&mut rng, n, Price::from_micros(20_000), 1_250, &roster);
        let replayed = replay(&record, &rules).unwrap();
        assert_eq!(replayed.changes, [], "{record:?}");
        assert_eq!(replayed.kept.len(), record.wins.len(), "{record:?}");
        sold += record.wins.len();
        ties += usize::from(
            record
                .bids
                .iter()
                .filter(|b| b.price_micros == 1_200_000)
                .count()
                > 1,
        );
    }
    assert!(
        sold > 1_000 && ties > 100,
        "the generator exercises the auction: {sold} sold, {ties} with ties"
    );
}

#[test]
fn only_an_increment_changed_never_changes_who_wins() {
    let roster = BIDDERS;
    let rules = ReplayRules::new(Price::from_micros(70_000))
        .seller("pub", 1_000)
        .bidder("dsp-a")
        .bidder("dsp-b")
        .bidder("dsp-c");
    let mut rng = Rng(7);
    let mut changed = 0;
    for n in 0..2_000 {
        let record = generated(&mut rng, n, CENT, 1_000, &roster);
        for change in replay(&record, &rules).unwrap().changes {
            let (before, after) = (change.before.unwrap(), change.after.unwrap());
            assert_eq!((&before.bidder, &before.bid), (&after.bidder, &after.bid));
            assert_eq!(before.rule, "second_price");
            assert!(after.cleared_micros > before.cleared_micros);
            changed += 1;
        }
    }
    assert!(changed > 100, "{changed}");
}

#[test]
fn rules_come_from_a_validated_configuration() {
    let dir = testkit::TempDir::new("replay-rules");
    dir.file("pub.key", "a-seller-key-long-enough-1\n");
    let path = dir.file(
        "exchange.toml",
        "[auction]\nsecond_price_increment = 0.05\n\
         [[bidders]]\nname = \"dsp-b\"\nendpoint = \"http://127.0.0.1:9001/\"\n\
         [[bidders]]\nname = \"dsp-a\"\nendpoint = \"http://127.0.0.1:9002/\"\n\
         [[sellers]]\nname = \"pub\"\nkey_file = \"pub.key\"\nfloor_multiplier = 1.5\n",
    );
    let rules = ReplayRules::from_config(&crate::Config::load(&path).unwrap());
    let expected = ReplayRules::new(Price::from_micros(50_000))
        .seller("pub", 1_500)
        .bidder("dsp-b")
        .bidder("dsp-a");
    assert_eq!(rules, expected);
    assert_eq!(rules.floor_permille("pub", 1_000), 1_500);
    assert_eq!(rules.floor_permille("left", 1_300), 1_300);
}

/// The request and replies the live exchange would have had for `record` (floors already
/// raised, as `raise_floors` leaves them), each bid from its roster bidder in a seatbid of its
/// own; a bid marked excluded comes without markup, so `settle` drops it before the auction.
fn live_inputs(
    record: &AuctionRecord,
    permille: u32,
    roster: &[&str],
) -> (openrtb::BidRequest, Vec<crate::reply::Called>) {
    use serde_json::{Value, json};
    let seller = Seller {
        floor_permille: permille,
        ..Seller::anonymous(false)
    };
    let cpm = |micros: i64| {
        let raised = seller.floor(Price::from_micros(micros));
        json!(raised.micros() as f64 / 1e6)
    };
    let imps: Vec<Value> = record
        .imps
        .iter()
        .map(|imp| {
            let deals: Vec<Value> = imp
                .deals
                .iter()
                .map(|d| json!({"id": d.id, "bidfloor": cpm(d.floor_micros), "at": d.at}))
                .collect();
            json!({
                "id": imp.id,
                "banner": {"w": 300, "h": 250},
                "bidfloor": cpm(imp.floor_micros),
                "pmp": {"private_auction": i32::from(imp.private_auction), "deals": deals},
            })
        })
        .collect();
    let request = json!({
        "id": record.id,
        "imp": imps,
        "at": record.at.unwrap_or(2),
        "bseat": record.blocks.bseat,
    });
    let request: openrtb::BidRequest = serde_json::from_value(request).unwrap();
    let replies = roster
        .iter()
        .enumerate()
        .filter_map(|(i, name)| {
            let seatbids: Vec<Value> = record
                .bids
                .iter()
                .filter(|b| b.bidder == *name)
                .map(|b| {
                    let mut bid = json!({
                        "id": b.id,
                        "impid": b.imp,
                        "price": b.price_micros as f64 / 1e6,
                        "dealid": b.deal,
                    });
                    if !b.excluded {
                        bid["adm"] = json!("<div/>");
                    }
                    let mut seatbid = json!({"bid": [bid]});
                    if !b.seat.is_empty() {
                        seatbid["seat"] = json!(b.seat);
                    }
                    seatbid
                })
                .collect();
            if seatbids.is_empty() {
                return None;
            }
            let response = json!({"id": record.id, "seatbid": seatbids});
            Some(crate::reply::Called {
                bidder: crate::outcome::BidderIx::nth(i).unwrap(),
                reply: crate::reply::Reply::Bids(serde_json::from_value(response).unwrap()),
                took: None,
            })
        })
        .collect();
    (request, replies)
}

#[test]
fn replay_picks_the_winners_and_prices_the_live_settle_picked() {
    use crate::settle::{AuctionCtx, BidderView, settle};
    let roster = BIDDERS;
    let views: Vec<BidderView<'_>> = roster
        .iter()
        .map(|name| BidderView {
            name,
            markup_hosts: None,
            price_key: None,
        })
        .collect();
    let converter = currency::Converter::new(&[]);
    let increment = Price::from_micros(30_000);
    let config = AuctionConfig {
        second_price_increment: increment,
    };
    let rules = ReplayRules::new(increment)
        .seller("pub", 1_100)
        .bidder("dsp-a")
        .bidder("dsp-b")
        .bidder("dsp-c");
    let mut rng = Rng(0x5eed);
    let mut sold = 0;
    for n in 0..1_000 {
        let mut record = generated(&mut rng, n, increment, 1_100, &roster);
        // Live bids here are all in the auction currency (no rate tables).
        record.bids.retain(|b| b.cur.is_none());
        let (request, replies) = live_inputs(&record, 1_100, &roster);
        let ctx = AuctionCtx {
            request: &request,
            auction_id: &record.id,
            currency: "USD",
            config: &config,
            bidders: &views,
            loss_notices: false,
            price_token_ttl_s: 60,
            now_ms: 0,
            rates: crate::money::Rates {
                converter: &converter,
                stale: false,
            },
            record: true,
        };
        let settled = settle(&ctx, &replies);
        // The record of what settle did, as the auction path writes it: every bid and winner
        // (rule included) from the settlement itself.
        let recorded = settled.recorded.unwrap();
        record.bids = recorded.bids;
        record.wins = recorded.wins;
        let replayed = replay(&record, &rules).unwrap();
        assert!(
            replayed.changes.is_empty(),
            "{:?}\n{record:?}",
            replayed.changes
        );
        assert_eq!(replayed.kept.len(), record.wins.len(), "{record:?}");
        sold += record.wins.len();
    }
    assert!(sold > 300, "{sold}");
}
