//! Data-driven unit tests: each case is request rules, bids, and the expected outcome.

use super::*;

/// Price in cents of a currency unit (CPM): `c(150)` = 1.50.
const fn c(cents: i64) -> Price {
    Price::from_micros(cents * 10_000)
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Owned form of [`DealRules`].
#[derive(Clone, Debug)]
struct DealFx {
    id: String,
    floor: Price,
    rule: Option<PriceRule>,
    wseat: Vec<String>,
    wadomain: Vec<String>,
}

fn deal(id: &str, floor_cents: i64) -> DealFx {
    DealFx {
        id: id.to_owned(),
        floor: c(floor_cents),
        rule: None,
        wseat: Vec::new(),
        wadomain: Vec::new(),
    }
}

impl DealFx {
    fn at(mut self, rule: PriceRule) -> Self {
        self.rule = Some(rule);
        self
    }
    fn wseat(mut self, seats: &[&str]) -> Self {
        self.wseat = strings(seats);
        self
    }
    fn wadomain(mut self, domains: &[&str]) -> Self {
        self.wadomain = strings(domains);
        self
    }
}

/// Owned form of [`ImpRules`].
#[derive(Clone, Debug)]
struct ImpFx {
    id: String,
    floor: Price,
    private: bool,
    deals: Vec<DealFx>,
}

fn imp(id: &str, floor_cents: i64) -> ImpFx {
    ImpFx {
        id: id.to_owned(),
        floor: c(floor_cents),
        private: false,
        deals: Vec::new(),
    }
}

impl ImpFx {
    fn private(mut self) -> Self {
        self.private = true;
        self
    }
    fn deal(mut self, d: DealFx) -> Self {
        self.deals.push(d);
        self
    }
}

/// Owned form of [`Rules`].
#[derive(Clone, Debug)]
struct RulesFx {
    currency: String,
    rule: PriceRule,
    bcat: Vec<String>,
    badv: Vec<String>,
    wseat: Vec<String>,
    bseat: Vec<String>,
    imps: Vec<ImpFx>,
}

fn second_price(imps: Vec<ImpFx>) -> RulesFx {
    RulesFx {
        currency: "USD".to_owned(),
        rule: PriceRule::SecondPrice,
        bcat: Vec::new(),
        badv: Vec::new(),
        wseat: Vec::new(),
        bseat: Vec::new(),
        imps,
    }
}

fn first_price(imps: Vec<ImpFx>) -> RulesFx {
    RulesFx {
        rule: PriceRule::FirstPrice,
        ..second_price(imps)
    }
}

impl RulesFx {
    fn currency(mut self, cur: &str) -> Self {
        self.currency = cur.to_owned();
        self
    }
    fn bcat(mut self, list: &[&str]) -> Self {
        self.bcat = strings(list);
        self
    }
    fn badv(mut self, list: &[&str]) -> Self {
        self.badv = strings(list);
        self
    }
    fn wseat(mut self, list: &[&str]) -> Self {
        self.wseat = strings(list);
        self
    }
    fn bseat(mut self, list: &[&str]) -> Self {
        self.bseat = strings(list);
        self
    }

    fn rules(&self) -> Rules<'_> {
        Rules {
            currency: &self.currency,
            price_rule: self.rule,
            bcat: &self.bcat,
            badv: &self.badv,
            wseat: &self.wseat,
            bseat: &self.bseat,
            imps: self
                .imps
                .iter()
                .map(|i| ImpRules {
                    id: &i.id,
                    floor: i.floor,
                    private_auction: i.private,
                    deals: i
                        .deals
                        .iter()
                        .map(|d| DealRules {
                            id: &d.id,
                            floor: d.floor,
                            price_rule: d.rule,
                            wseat: &d.wseat,
                            wadomain: &d.wadomain,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Owned form of [`Candidate`].
#[derive(Clone, Debug)]
struct BidFx {
    bidder: u32,
    seat: String,
    id: String,
    imp: String,
    price: Price,
    cur: String,
    deal: Option<String>,
    adomain: Vec<String>,
    cat: Vec<String>,
}

/// A bid of `bidder` on impression "1", seat "seat{bidder}", bid id "b{bidder}", in USD.
fn bid(bidder: u32, cents: i64) -> BidFx {
    BidFx {
        bidder,
        seat: format!("seat{bidder}"),
        id: format!("b{bidder}"),
        imp: "1".to_owned(),
        price: c(cents),
        cur: "USD".to_owned(),
        deal: None,
        adomain: strings(&["adv.com"]),
        cat: Vec::new(),
    }
}

impl BidFx {
    fn imp(mut self, id: &str) -> Self {
        self.imp = id.to_owned();
        self
    }
    fn deal(mut self, id: &str) -> Self {
        self.deal = Some(id.to_owned());
        self
    }
    fn seat(mut self, seat: &str) -> Self {
        self.seat = seat.to_owned();
        self
    }
    fn id(mut self, id: &str) -> Self {
        self.id = id.to_owned();
        self
    }
    fn cur(mut self, cur: &str) -> Self {
        self.cur = cur.to_owned();
        self
    }
    fn adomain(mut self, list: &[&str]) -> Self {
        self.adomain = strings(list);
        self
    }
    fn cat(mut self, list: &[&str]) -> Self {
        self.cat = strings(list);
        self
    }
    fn micros(mut self, micros: i64) -> Self {
        self.price = Price::from_micros(micros);
        self
    }

    fn candidate(&self) -> Candidate<'_> {
        Candidate {
            bidder: self.bidder,
            seat: &self.seat,
            bid_id: &self.id,
            imp_id: &self.imp,
            price: self.price,
            currency: &self.cur,
            deal_id: self.deal.as_deref(),
            adomain: &self.adomain,
            cat: &self.cat,
        }
    }
}

fn run_fx(rules: &RulesFx, bids: &[BidFx]) -> Outcome {
    let candidates: Vec<Candidate<'_>> = bids.iter().map(BidFx::candidate).collect();
    run(&rules.rules(), &candidates, &AuctionConfig::default())
}

/// Expected winner of one impression.
#[derive(Clone, Copy, Debug)]
struct Win {
    bid: usize,
    pays: Price,
    rule: PriceRule,
}

fn win(bid: usize, pays_cents: i64, rule: PriceRule) -> Option<Win> {
    Some(Win {
        bid,
        pays: c(pays_cents),
        rule,
    })
}

const FP: PriceRule = PriceRule::FirstPrice;
const SP: PriceRule = PriceRule::SecondPrice;
const FIX: PriceRule = PriceRule::FixedPrice;

struct Case {
    name: &'static str,
    rules: RulesFx,
    bids: Vec<BidFx>,
    /// Per impression.
    winners: Vec<Option<Win>>,
    /// Exactly the rejected bids.
    rejected: Vec<(usize, Rejection)>,
    /// Exactly the losers, when `Some`.
    losers: Option<Vec<(usize, LossReason)>>,
}

fn case(name: &'static str, rules: RulesFx, bids: Vec<BidFx>) -> Case {
    Case {
        name,
        rules,
        bids,
        winners: Vec::new(),
        rejected: Vec::new(),
        losers: None,
    }
}

impl Case {
    fn wins(mut self, winners: Vec<Option<Win>>) -> Self {
        self.winners = winners;
        self
    }
    fn rejects(mut self, rejected: Vec<(usize, Rejection)>) -> Self {
        self.rejected = rejected;
        self
    }
    fn losers(mut self, losers: Vec<(usize, LossReason)>) -> Self {
        self.losers = Some(losers);
        self
    }

    fn check(&self) {
        let out = run_fx(&self.rules, &self.bids);
        let name = self.name;
        assert_eq!(
            out.imps.len(),
            self.rules.imps.len(),
            "{name}: one result per imp"
        );
        assert_eq!(
            out.imps.len(),
            self.winners.len(),
            "{name}: expectation per imp"
        );
        for (i, (got, want)) in out.imps.iter().zip(&self.winners).enumerate() {
            match (got.winner, want) {
                (None, None) => {}
                (Some(w), Some(want)) => {
                    assert_eq!(w.candidate, want.bid, "{name}: imp {i} winner");
                    assert_eq!(
                        w.clearing_price, want.pays,
                        "{name}: imp {i} clearing price {} != {}",
                        w.clearing_price, want.pays
                    );
                    assert_eq!(w.price_rule, want.rule, "{name}: imp {i} rule");
                }
                (got, want) => panic!("{name}: imp {i} winner {got:?}, expected {want:?}"),
            }
        }
        let rejected: Vec<(usize, Rejection)> = out
            .rejected
            .iter()
            .map(|r| (r.candidate, r.reason))
            .collect();
        assert_eq!(rejected, self.rejected, "{name}: rejected");
        if let Some(want) = &self.losers {
            let mut losers: Vec<(usize, LossReason)> = out
                .imps
                .iter()
                .flat_map(|i| i.losers.iter().map(|l| (l.candidate, l.reason)))
                .collect();
            losers.sort_unstable();
            assert_eq!(&losers, want, "{name}: losers");
        }
        assert_partition(&out, self.bids.len(), name);
    }
}

/// Every candidate appears exactly once across winners, losers and rejections.
fn assert_partition(out: &Outcome, n: usize, name: &str) {
    let mut seen = vec![0_u32; n];
    for imp in &out.imps {
        for idx in imp
            .winner
            .iter()
            .map(|w| w.candidate)
            .chain(imp.losers.iter().map(|l| l.candidate))
        {
            seen[idx] += 1;
        }
    }
    for r in &out.rejected {
        seen[r.candidate] += 1;
    }
    assert!(seen.iter().all(|&k| k == 1), "{name}: partition {seen:?}");
}

const LOST: LossReason = LossReason::LOST_TO_HIGHER_BID;
const LOST_PMP: LossReason = LossReason::LOST_TO_PMP_DEAL;

fn cases() -> Vec<Case> {
    use Rejection::*;
    vec![
        // --- Price rules -------------------------------------------------------------------
        case(
            "second price: runner-up plus increment",
            second_price(vec![imp("1", 50)]),
            vec![bid(1, 300), bid(2, 200), bid(3, 100)],
        )
        .wins(vec![win(0, 201, SP)])
        .losers(vec![(1, LOST), (2, LOST)]),
        case(
            "second price: runner-up below floor pays floor plus increment",
            second_price(vec![imp("1", 150)]),
            vec![bid(1, 300), bid(2, 160)],
        )
        .wins(vec![win(0, 161, SP)]),
        case(
            "second price: increment capped at own bid",
            second_price(vec![imp("1", 50)]),
            vec![bid(1, 200).micros(2_005_000), bid(2, 200)],
        )
        .wins(vec![Some(Win {
            bid: 0,
            pays: Price::from_micros(2_005_000),
            rule: SP,
        })]),
        case(
            "second price: single bid pays floor plus increment",
            second_price(vec![imp("1", 100)]),
            vec![bid(1, 300)],
        )
        .wins(vec![win(0, 101, SP)]),
        case(
            "second price: single bid at the floor pays its bid",
            second_price(vec![imp("1", 100)]),
            vec![bid(1, 100)],
        )
        .wins(vec![win(0, 100, SP)]),
        case(
            "second price: single bid, no floor, pays the increment",
            second_price(vec![imp("1", 0)]),
            vec![bid(1, 300)],
        )
        .wins(vec![win(0, 1, SP)]),
        case(
            "second price: tie pays the bid",
            second_price(vec![imp("1", 10)]),
            vec![bid(1, 250), bid(2, 250)],
        )
        .wins(vec![win(1, 250, SP)])
        .losers(vec![(0, LOST)]),
        case(
            "first price pays the bid",
            first_price(vec![imp("1", 50)]),
            vec![bid(1, 300), bid(2, 200)],
        )
        .wins(vec![win(0, 300, FP)]),
        case(
            "first price: single bid pays the bid",
            first_price(vec![imp("1", 50)]),
            vec![bid(1, 70)],
        )
        .wins(vec![win(0, 70, FP)]),
        // --- Floors --------------------------------------------------------------------------
        case(
            "floors: below floor rejected, equal admitted",
            second_price(vec![imp("1", 100)]),
            vec![bid(1, 99), bid(2, 100), bid(3, 150)],
        )
        .wins(vec![win(2, 101, SP)])
        .rejects(vec![(0, BelowFloor)]),
        case(
            "floors: every bid below floor, no winner",
            second_price(vec![imp("1", 500)]),
            vec![bid(1, 300), bid(2, 400)],
        )
        .wins(vec![None])
        .rejects(vec![(0, BelowFloor), (1, BelowFloor)]),
        case(
            "floors: negative floor is no floor",
            second_price(vec![imp("1", -100)]),
            vec![bid(1, 5)],
        )
        .wins(vec![win(0, 1, SP)]),
        // --- Deals ---------------------------------------------------------------------------
        case(
            "deal floor applies to the deal bid only",
            second_price(vec![imp("1", 100).deal(deal("d1", 300))]),
            vec![bid(1, 250).deal("d1"), bid(2, 250), bid(3, 350).deal("d1")],
        )
        .wins(vec![win(2, 301, SP)])
        .rejects(vec![(0, BelowDealFloor)])
        .losers(vec![(1, LOST_PMP)]),
        case(
            "deal floor below the imp floor replaces it",
            second_price(vec![imp("1", 300).deal(deal("d1", 100))]),
            vec![bid(1, 200).deal("d1"), bid(2, 200)],
        )
        .wins(vec![win(0, 101, SP)])
        .rejects(vec![(1, BelowFloor)]),
        case(
            "deal winner's second price counts open bids",
            second_price(vec![imp("1", 50).deal(deal("d1", 200))]),
            vec![bid(1, 500).deal("d1"), bid(2, 400)],
        )
        .wins(vec![win(0, 401, SP)])
        .losers(vec![(1, LOST_PMP)]),
        case(
            "deal at=1 overrides request second price",
            second_price(vec![imp("1", 50).deal(deal("d1", 200).at(FP))]),
            vec![bid(1, 500).deal("d1"), bid(2, 400)],
        )
        .wins(vec![win(0, 500, FP)]),
        case(
            "deal at=2 overrides request first price",
            first_price(vec![imp("1", 50).deal(deal("d1", 200).at(SP))]),
            vec![bid(1, 500).deal("d1"), bid(2, 400)],
        )
        .wins(vec![win(0, 401, SP)]),
        case(
            "deal without at inherits request rule",
            first_price(vec![imp("1", 50).deal(deal("d1", 200))]),
            vec![bid(1, 500).deal("d1"), bid(2, 400)],
        )
        .wins(vec![win(0, 500, FP)]),
        case(
            "open winner uses the request rule, not a deal's",
            first_price(vec![imp("1", 50).deal(deal("d1", 200).at(SP))]),
            vec![bid(1, 300).deal("d1"), bid(2, 400)],
        )
        .wins(vec![win(1, 400, FP)])
        .losers(vec![(0, LOST)]),
        case(
            "fixed price deal pays the deal floor",
            second_price(vec![imp("1", 50).deal(deal("d1", 250).at(FIX))]),
            vec![bid(1, 300).deal("d1"), bid(2, 280)],
        )
        .wins(vec![win(0, 250, FIX)]),
        case(
            "fixed price deal without a floor pays its bid",
            second_price(vec![imp("1", 50).deal(deal("d1", 0).at(FIX))]),
            vec![bid(1, 300).deal("d1")],
        )
        .wins(vec![win(0, 300, FP)]),
        case(
            "deal bids losing to a deal bid lose to PMP",
            second_price(vec![
                imp("1", 50).deal(deal("d1", 100)).deal(deal("d2", 100)),
            ]),
            vec![bid(1, 300).deal("d1"), bid(2, 200).deal("d2"), bid(3, 150)],
        )
        .wins(vec![win(0, 201, SP)])
        .losers(vec![(1, LOST_PMP), (2, LOST_PMP)]),
        case(
            "deal bid losing to an open bid loses to higher bid",
            second_price(vec![imp("1", 50).deal(deal("d1", 100))]),
            vec![bid(1, 200).deal("d1"), bid(2, 300)],
        )
        .wins(vec![win(1, 201, SP)])
        .losers(vec![(0, LOST)]),
        case(
            "unknown deal id",
            second_price(vec![imp("1", 50).deal(deal("d1", 100))]),
            vec![bid(1, 300).deal("nope"), bid(2, 200)],
        )
        .wins(vec![win(1, 51, SP)])
        .rejects(vec![(0, UnknownDeal)]),
        case(
            "deal of another imp is unknown here",
            second_price(vec![
                imp("1", 50).deal(deal("d1", 100)),
                imp("2", 50).deal(deal("d2", 100)),
            ]),
            vec![bid(1, 300).deal("d2"), bid(2, 300).imp("2").deal("d2")],
        )
        .wins(vec![None, win(1, 101, SP)])
        .rejects(vec![(0, UnknownDeal)]),
        case(
            "deal id matching is case-sensitive",
            second_price(vec![imp("1", 50).deal(deal("D1", 100))]),
            vec![bid(1, 300).deal("d1")],
        )
        .wins(vec![None])
        .rejects(vec![(0, UnknownDeal)]),
        case(
            "empty deal id is an open bid",
            second_price(vec![imp("1", 50).deal(deal("d1", 100))]),
            vec![bid(1, 60).deal("")],
        )
        .wins(vec![win(0, 51, SP)]),
        case(
            "private auction rejects open bids",
            second_price(vec![imp("1", 50).private().deal(deal("d1", 100))]),
            vec![bid(1, 900), bid(2, 200).deal("d1"), bid(3, 800).deal("")],
        )
        .wins(vec![win(1, 101, SP)])
        .rejects(vec![
            (0, OpenBidInPrivateAuction),
            (2, OpenBidInPrivateAuction),
        ]),
        case(
            "private auction without deals admits nothing",
            second_price(vec![imp("1", 50).private()]),
            vec![bid(1, 900)],
        )
        .wins(vec![None])
        .rejects(vec![(0, OpenBidInPrivateAuction)]),
        case(
            "deal wseat",
            second_price(vec![imp("1", 50).deal(deal("d1", 100).wseat(&["Agency1"]))]),
            vec![
                bid(1, 300).deal("d1").seat("Agency1"),
                bid(2, 400).deal("d1").seat("Agency2"),
                bid(3, 500).deal("d1").seat("agency1"),
                bid(4, 200).seat("Agency2"),
            ],
        )
        .wins(vec![win(0, 201, SP)])
        .rejects(vec![(1, SeatNotAllowedForDeal), (2, SeatNotAllowedForDeal)]),
        case(
            "deal wadomain: every domain must be allowed, and one must be given",
            second_price(vec![
                imp("1", 50).deal(deal("d1", 100).wadomain(&["brand.com"])),
            ]),
            vec![
                bid(1, 300).deal("d1").adomain(&["www.Brand.com"]),
                bid(2, 400).deal("d1").adomain(&["brand.com", "other.com"]),
                bid(3, 500).deal("d1").adomain(&[]),
                bid(4, 600).adomain(&["other.com"]),
            ],
        )
        .wins(vec![win(3, 301, SP)])
        .rejects(vec![
            (1, AdvertiserNotAllowedForDeal),
            (2, AdvertiserNotAllowedForDeal),
        ]),
        // --- Request policy ------------------------------------------------------------------
        case(
            "bcat blocks categories and their subcategories",
            second_price(vec![imp("1", 50)]).bcat(&["IAB25", "IAB7-39"]),
            vec![
                bid(1, 900).cat(&["IAB25-3"]),
                bid(2, 800).cat(&["IAB1", "iab7-39"]),
                bid(3, 700).cat(&["IAB7"]),
                bid(4, 600).cat(&["IAB2"]),
            ],
        )
        .wins(vec![win(2, 601, SP)])
        .rejects(vec![(0, BlockedCategory), (1, BlockedCategory)]),
        case(
            "badv blocks domains case-insensitively, with subdomains",
            second_price(vec![imp("1", 50)]).badv(&["Ford.com"]),
            vec![
                bid(1, 900).adomain(&["ford.com"]),
                bid(2, 800).adomain(&["other.com", "WWW.FORD.COM"]),
                bid(3, 700).adomain(&["myford.com"]),
            ],
        )
        .wins(vec![win(2, 51, SP)])
        .rejects(vec![(0, BlockedAdvertiser), (1, BlockedAdvertiser)]),
        case(
            "wseat admits only listed seats",
            second_price(vec![imp("1", 50)]).wseat(&["seat1", "seat3"]),
            vec![bid(1, 300), bid(2, 900), bid(3, 200), bid(4, 800).seat("")],
        )
        .wins(vec![win(0, 201, SP)])
        .rejects(vec![(1, SeatNotAllowed), (3, SeatNotAllowed)]),
        case(
            "bseat blocks listed seats",
            second_price(vec![imp("1", 50)]).bseat(&["seat2"]),
            vec![bid(1, 300), bid(2, 900), bid(3, 200).seat("")],
        )
        .wins(vec![win(0, 201, SP)])
        .rejects(vec![(1, SeatNotAllowed)]),
        case(
            "wseat and bseat both apply",
            second_price(vec![imp("1", 50)])
                .wseat(&["seat1", "seat2"])
                .bseat(&["seat2"]),
            vec![bid(1, 300), bid(2, 900), bid(3, 800)],
        )
        .wins(vec![win(0, 51, SP)])
        .rejects(vec![(1, SeatNotAllowed), (2, SeatNotAllowed)]),
        case(
            "request wseat applies to deal bids",
            second_price(vec![imp("1", 50).deal(deal("d1", 100))]).wseat(&["seat1"]),
            vec![bid(1, 300), bid(2, 900).deal("d1")],
        )
        .wins(vec![win(0, 51, SP)])
        .rejects(vec![(1, SeatNotAllowed)]),
        // --- Currency ------------------------------------------------------------------------
        case(
            "currency mismatch; case-insensitive; empty means USD",
            second_price(vec![imp("1", 50)]),
            vec![
                bid(1, 900).cur("EUR"),
                bid(2, 300).cur("usd"),
                bid(3, 200).cur(""),
            ],
        )
        .wins(vec![win(1, 201, SP)])
        .rejects(vec![(0, CurrencyMismatch)]),
        case(
            "auction in EUR",
            second_price(vec![imp("1", 50)]).currency("EUR"),
            vec![bid(1, 900).cur("EUR"), bid(2, 950).cur("")],
        )
        .wins(vec![win(0, 51, SP)])
        .rejects(vec![(1, CurrencyMismatch)]),
        case(
            "empty auction currency means USD",
            second_price(vec![imp("1", 50)]).currency(""),
            vec![bid(1, 900).cur("USD"), bid(2, 950).cur("EUR")],
        )
        .wins(vec![win(0, 51, SP)])
        .rejects(vec![(1, CurrencyMismatch)]),
        // --- Structure -----------------------------------------------------------------------
        case(
            "multi-imp: independent auctions",
            second_price(vec![imp("1", 50), imp("2", 100), imp("3", 10)]),
            vec![
                bid(1, 300),
                bid(2, 400).imp("2"),
                bid(3, 200),
                bid(4, 150).imp("2"),
                bid(5, 90).imp("2"),
                bid(6, 500).imp("9"),
            ],
        )
        .wins(vec![win(0, 201, SP), win(1, 151, SP), None])
        .rejects(vec![(4, BelowFloor), (5, UnknownImp)])
        .losers(vec![(2, LOST), (3, LOST)]),
        case(
            "zero and negative prices",
            second_price(vec![imp("1", 0)]),
            vec![bid(1, 0), bid(2, -100), bid(3, 1)],
        )
        .wins(vec![win(2, 1, SP)])
        .rejects(vec![(0, NonPositivePrice), (1, NonPositivePrice)]),
        case("no bids", second_price(vec![imp("1", 50)]), vec![]).wins(vec![None]),
        case("no imps", second_price(vec![]), vec![bid(1, 100)])
            .wins(vec![])
            .rejects(vec![(0, UnknownImp)]),
        case(
            "repeated imp id: bids go to the first",
            second_price(vec![imp("1", 50), imp("1", 10)]),
            vec![bid(1, 100)],
        )
        .wins(vec![win(0, 51, SP), None]),
        case(
            "duplicate bid ids are distinct candidates",
            second_price(vec![imp("1", 50)]),
            vec![bid(1, 300).id("x"), bid(1, 200).id("x")],
        )
        .wins(vec![win(0, 201, SP)])
        .losers(vec![(1, LOST)]),
        case(
            "first failing check decides the reason",
            second_price(vec![imp("1", 500)])
                .badv(&["bad.com"])
                .bcat(&["IAB25"]),
            vec![
                bid(1, 100).adomain(&["bad.com"]).cat(&["IAB25"]),
                bid(2, 100).cat(&["IAB25"]),
                bid(3, 0).cur("EUR"),
                bid(4, 100).cur("EUR"),
                bid(5, 0).imp("x"),
            ],
        )
        .wins(vec![None])
        .rejects(vec![
            (0, BlockedAdvertiser),
            (1, BlockedCategory),
            (2, NonPositivePrice),
            (3, CurrencyMismatch),
            (4, UnknownImp),
        ]),
    ]
}

#[test]
fn table() {
    let cases = cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    for case in &cases {
        case.check();
    }
}

#[test]
fn every_case_is_independent_of_arrival_order() {
    for case in cases() {
        let n = case.bids.len();
        let forward = run_fx(&case.rules, &case.bids);
        let reversed: Vec<BidFx> = case.bids.iter().rev().cloned().collect();
        let backward = run_fx(&case.rules, &reversed);
        let back = |i: usize| n - 1 - i;
        for (f, b) in forward.imps.iter().zip(&backward.imps) {
            assert_eq!(
                f.winner.map(|w| w.candidate),
                b.winner.map(|w| back(w.candidate)),
                "{}",
                case.name
            );
            assert_eq!(
                f.winner.map(|w| w.clearing_price),
                b.winner.map(|w| w.clearing_price),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn ties_ignore_arrival_order_and_depend_on_the_seed() {
    let rules = second_price(vec![imp("1", 10)]);
    let bids: Vec<BidFx> = (1..=6).map(|b| bid(b, 250)).collect();
    let candidates: Vec<Candidate<'_>> = bids.iter().map(BidFx::candidate).collect();
    let cfg = AuctionConfig::default();
    let mut winners_by_seed = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let winner = |cands: &[Candidate<'_>]| {
            let out = run_seeded(&rules.rules(), cands, &cfg, seed);
            let w = out.imps[0].winner.unwrap();
            assert_eq!(w.clearing_price, c(250));
            cands[w.candidate].bidder
        };
        let first = winner(&candidates);
        let mut rotated = candidates.clone();
        for _ in 0..candidates.len() {
            rotated.rotate_left(1);
            assert_eq!(winner(&rotated), first, "seed {seed}");
        }
        winners_by_seed.insert(first);
    }
    // With different seeds, different bidders win the tie.
    assert!(winners_by_seed.len() >= 4, "{winners_by_seed:?}");
}

#[test]
fn ties_between_identical_keys_fall_back_to_the_other_fields() {
    // Same bidder, seat, bid id and imp: equal tie keys; the deal id then decides.
    let rules = second_price(vec![imp("1", 10).deal(deal("a", 10)).deal(deal("b", 10))]);
    let bids = vec![bid(1, 250).deal("b"), bid(1, 250).deal("a")];
    let out = run_fx(&rules, &bids);
    assert_eq!(out.imps[0].winner.unwrap().candidate, 1);
    let reversed: Vec<BidFx> = bids.iter().rev().cloned().collect();
    assert_eq!(
        run_fx(&rules, &reversed).imps[0].winner.unwrap().candidate,
        0
    );
}

#[test]
fn tie_winner_is_the_lowest_tie_key() {
    let rules = second_price(vec![imp("1", 10)]);
    let bids: Vec<BidFx> = (1..=5).map(|b| bid(b, 250)).collect();
    let out = run_fx(&rules, &bids);
    let expected = (0..bids.len())
        .min_by_key(|&i| tie::tie_key(0, "1", bids[i].bidder, &bids[i].seat, &bids[i].id))
        .unwrap();
    assert_eq!(out.imps[0].winner.unwrap().candidate, expected);
}

#[test]
fn second_price_details_and_min_to_win() {
    // The spec's 4.4.1 example: floor 0.85, bids 1.00, 0.90, 0.80, and an invalid one.
    let rules = second_price(vec![imp("1", 85)]);
    let bids = vec![bid(1, 100), bid(2, 90), bid(3, 80), bid(4, 100).cur("EUR")];
    let out = run_fx(&rules, &bids);
    let w = out.imps[0].winner.unwrap();
    assert_eq!(
        (w.candidate, w.clearing_price, w.min_to_win),
        (0, c(91), c(90))
    );
    assert_eq!(w.second_price, Some(c(90)));
    assert_eq!((w.floor, w.deal), (c(85), None));
    // 0.80 is below the floor here, so only 0.90 loses.
    let losers: Vec<(usize, Price)> = out.imps[0]
        .losers
        .iter()
        .map(|l| (l.candidate, l.min_to_win))
        .collect();
    assert_eq!(losers, vec![(1, c(91))]);

    // First price: losers learn the winning bid; the winner the runner-up.
    let rules = first_price(vec![imp("1", 85)]);
    let out = run_fx(&rules, &bids[..3]);
    let w = out.imps[0].winner.unwrap();
    assert_eq!((w.clearing_price, w.min_to_win), (c(100), c(90)));
    assert!(out.imps[0].losers.iter().all(|l| l.min_to_win == c(100)));

    // Alone: the floor.
    let out = run_fx(&rules, &bids[..1]);
    assert_eq!(out.imps[0].winner.unwrap().min_to_win, c(85));

    // A deal winner's min_to_win is never below its deal floor.
    let rules = second_price(vec![imp("1", 10).deal(deal("d", 300))]);
    let out = run_fx(&rules, &[bid(1, 400).deal("d"), bid(2, 100)]);
    let w = out.imps[0].winner.unwrap();
    assert_eq!(
        (w.clearing_price, w.min_to_win, w.floor, w.deal),
        (c(301), c(300), c(300), Some(0))
    );
    assert_eq!(w.second_price, Some(c(100)));
}

#[test]
fn increment_is_configurable_and_never_negative() {
    let rules = second_price(vec![imp("1", 50)]);
    let bids = [bid(1, 300), bid(2, 200)];
    let candidates: Vec<Candidate<'_>> = bids.iter().map(BidFx::candidate).collect();
    let price_with = |inc: Price| {
        let cfg = AuctionConfig {
            second_price_increment: inc,
        };
        run(&rules.rules(), &candidates, &cfg).imps[0]
            .winner
            .unwrap()
            .clearing_price
    };
    assert_eq!(price_with(Price::ZERO), c(200));
    assert_eq!(price_with(c(50)), c(250));
    assert_eq!(price_with(c(-50)), c(200));
    assert_eq!(price_with(Price::from_micros(i64::MAX)), c(300));
    assert_eq!(
        AuctionConfig::default().second_price_increment,
        Price::from_micros(10_000)
    );
}

#[test]
fn long_lists_and_many_imps_take_the_indexed_paths() {
    // Above the indexing thresholds: 20 imps, 40-entry lists, 12 bids.
    let imps: Vec<ImpFx> = (0..20).map(|i| imp(&format!("imp{i}"), 10)).collect();
    let badv: Vec<String> = (0..40).map(|i| format!("blocked{i}.com")).collect();
    let bcat: Vec<String> = (0..40).map(|i| format!("IAB{i}")).collect();
    let bseat: Vec<String> = (0..40).map(|i| format!("bad{i}")).collect();
    let mut rules = second_price(imps);
    rules.badv = badv;
    rules.bcat = bcat;
    rules.bseat = bseat;
    let bids = vec![
        bid(1, 100).imp("imp3"),
        bid(2, 200).imp("imp3").adomain(&["www.BLOCKED7.com"]),
        bid(3, 300).imp("imp3").cat(&["IAB12-4"]),
        bid(4, 400).imp("imp3").seat("bad39"),
        bid(5, 500).imp("imp19"),
        bid(6, 600).imp("imp20"),
        bid(7, 700).imp("imp19").cat(&["IAB400"]),
        bid(8, 50).imp("imp0").adomain(&["notblocked7.com"]),
        bid(9, 60).imp("imp0"),
        bid(10, 70).imp("imp0"),
        bid(11, 80).imp("imp0"),
        bid(12, 90).imp("imp0").seat("bad4"),
    ];
    let out = run_fx(&rules, &bids);
    let winner = |imp: usize| {
        out.imps[imp]
            .winner
            .map(|w| (w.candidate, w.clearing_price))
    };
    assert_eq!(winner(3), Some((0, c(11))));
    assert_eq!(winner(19), Some((6, c(501))));
    assert_eq!(winner(0), Some((10, c(71))));
    let rejected: Vec<(usize, Rejection)> = out
        .rejected
        .iter()
        .map(|r| (r.candidate, r.reason))
        .collect();
    assert_eq!(
        rejected,
        vec![
            (1, Rejection::BlockedAdvertiser),
            (2, Rejection::BlockedCategory),
            (3, Rejection::SeatNotAllowed),
            (5, Rejection::UnknownImp),
            (11, Rejection::SeatNotAllowed),
        ]
    );
}

#[test]
fn loss_reasons_cover_every_candidate() {
    let rules = second_price(vec![imp("1", 50).deal(deal("d", 100)), imp("2", 50)]);
    let bids = vec![
        bid(1, 300).deal("d"),
        bid(2, 200),
        bid(3, 10),
        bid(4, 100).imp("2"),
    ];
    let out = run_fx(&rules, &bids);
    assert_eq!(
        out.loss_reasons(bids.len()),
        vec![
            Some(LossReason::BID_WON),
            Some(LossReason::LOST_TO_PMP_DEAL),
            Some(LossReason::BELOW_AUCTION_FLOOR),
            Some(LossReason::BID_WON),
        ]
    );
    assert_eq!(
        out.winners()
            .map(|(imp, w)| (imp, w.candidate))
            .collect::<Vec<_>>(),
        vec![(0, 0), (1, 3)]
    );
    // Shorter or longer tables than the candidates are tolerated.
    assert_eq!(out.loss_reasons(1).len(), 1);
    assert_eq!(out.loss_reasons(6)[5], None);
}

#[test]
fn rejection_codes_and_labels() {
    use Rejection::*;
    let expected = [
        (UnknownImp, 3, "unknown_imp"),
        (NonPositivePrice, 9, "non_positive_price"),
        (CurrencyMismatch, 3, "currency_mismatch"),
        (BelowFloor, 100, "below_floor"),
        (BelowDealFloor, 101, "below_deal_floor"),
        (UnknownDeal, 4, "unknown_deal"),
        (OpenBidInPrivateAuction, 4, "open_bid_in_private_auction"),
        (SeatNotAllowed, 104, "seat_not_allowed"),
        (SeatNotAllowedForDeal, 104, "seat_not_allowed_for_deal"),
        (BlockedAdvertiser, 205, "blocked_advertiser"),
        (
            AdvertiserNotAllowedForDeal,
            213,
            "advertiser_not_allowed_for_deal",
        ),
        (BlockedCategory, 209, "blocked_category"),
    ];
    assert_eq!(expected.len(), Rejection::ALL.len());
    for ((reason, code, label), listed) in expected.iter().zip(Rejection::ALL) {
        assert_eq!(*reason, listed, "ALL is in declaration order");
        assert_eq!(reason.loss_reason(), LossReason(*code), "{reason:?}");
        assert!(
            reason.loss_reason().label().is_some(),
            "{reason:?} maps to a listed code"
        );
        assert_eq!(reason.label(), *label);
        assert!(label.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    }
}

#[test]
fn price_rule_from_at() {
    assert_eq!(PriceRule::from_at(Some(1)), PriceRule::FirstPrice);
    for at in [None, Some(2), Some(0), Some(3), Some(-1), Some(500)] {
        assert_eq!(PriceRule::from_at(at), PriceRule::SecondPrice, "{at:?}");
    }
    assert_eq!(
        PriceRule::from_deal_at(Some(1)),
        Some(PriceRule::FirstPrice)
    );
    assert_eq!(
        PriceRule::from_deal_at(Some(2)),
        Some(PriceRule::SecondPrice)
    );
    assert_eq!(
        PriceRule::from_deal_at(Some(3)),
        Some(PriceRule::FixedPrice)
    );
    for at in [None, Some(0), Some(4), Some(500)] {
        assert_eq!(PriceRule::from_deal_at(at), None, "{at:?}");
    }
    assert_eq!(PriceRule::FixedPrice.label(), "fixed_price");
}

#[test]
fn repeated_imp_ids_go_to_the_first_on_the_indexed_path_too() {
    // 12 impressions (above the scan threshold), "5" repeated at positions 4 and 10.
    let imps: Vec<ImpFx> = (0..12)
        .map(|i| {
            imp(
                if i == 10 {
                    "5"
                } else {
                    ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "x", "12"][i]
                },
                10,
            )
        })
        .collect();
    let rules = second_price(imps);
    let out = run_fx(&rules, &[bid(1, 100).imp("5"), bid(2, 100).imp("12")]);
    assert_eq!(out.imps[4].winner.map(|w| w.candidate), Some(0));
    assert_eq!(out.imps[10].winner, None);
    assert_eq!(out.imps[11].winner.map(|w| w.candidate), Some(1));
}
