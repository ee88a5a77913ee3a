//! Reconcile: do the exchange's books agree with each bidder's, and with what the bidders were
//! told? Fed the exchange's auction and notice records and the bidders' ledger records, in any
//! order ([`Reconciler::add`]), it joins each win of the exchange to the charge of its bidder's
//! ledger and reports per exchange bidder and per campaign ([`Reconciler::finish`]).
//!
//! The join: a Gavel bidder's bid id is its reservation id, so a [`Win`] (auction `id`, `bid`)
//! meets the [`LedgerRecord`]s of (`auction`, `reservation`). A win counts as sold unless it
//! was `dropped` or in a `test` auction; a charge is a `commit` whose outcome is `charged` or
//! `charged_after_release` (`already_committed` is a duplicate notice absorbed). An
//! `already_committed` of a reservation no `charged` record is found for is the charge itself:
//! the ledger says it charged that amount, and the bidder's first answer was lost (a commit that
//! timed out after Redis applied it is recorded as `ledger_error`, its retry as
//! `already_committed`). Counted in [`Seen::charged_on_retry`].
//!
//! | the exchange recorded | the ledger recorded | reported |
//! | --- | --- | --- |
//! | a sold win | one charge of the price told (`amount_nanos == charged_micros`) | agreed |
//! | a sold win | one charge of another amount | `price_mismatch` |
//! | a sold win | two or more charges | `double_charge` (each extra one) |
//! | a sold win | no charge | `won_not_charged`: `notice_lost` (a win, billing or markup-fetch notice for it failed, dropped or refused at the exchange), `refused_by_bidder` (a `notice_refused` for it), `seller_fires` (`billing_by = seller`), else `unexplained` |
//! | a dropped or test win, or the auction without this win | a charge | `charged_not_won` (`win_dropped`, `test_win`, `no_win`) |
//! | no such auction | a charge | `unknown_auction`: another exchange's, or outside the window read; counted apart |
//!
//! Which bidders are audited: those with at least one ledger record (a reservation, charge,
//! release or expiry) joined to one of their wins, and those the [`Tolerance`] requires.
//! Others are listed as having no ledger records (simulated DSPs are not Gavel bidders) and
//! their wins are not counted as uncharged. A ledger record that joined no win is placed with
//! the exchange bidder its node's other records joined, or else listed unattributed.
//!
//! Memory: the records are not kept. What is kept is one entry per win and per charge, full
//! (ids and prices) while it waits for its other half and a 32-byte summary once joined (a
//! later charge of the same reservation is a double charge), a 16-byte fingerprint per auction
//! (to tell `charged_not_won` from `unknown_auction`) and per notice lost or refused, and up to
//! [`MAX_EVIDENCE`] non-charge ledger records waiting for their win. Measured (`gavel
//! reconcile`, docs/records.md): 500,000 auctions with a win each, every win open at once (the
//! exchange's file read before the bidder's), peak RSS 180 MB, about 180 bytes per entry;
//! records interleaved in time close most entries as they come. Past
//! [`Reconciler::with_limit`]'s limit of entries ([`DEFAULT_LIMIT`]: about 4 GB) nothing new is
//! tracked, and the reconcile fails as incomplete rather than guess.

mod report;
mod tolerance;
mod track;

pub use report::{
    BidderReport, Books, CampaignReport, Failure, Mismatch, MismatchCounts, MismatchKind,
    NOTICE_KINDS, NOTICE_OUTCOMES, NotWon, NoticeCounts, Report, Seen, Uncharged,
};
pub use tolerance::Tolerance;
pub use track::{MAX_NAMES, TOO_MANY_NAMES};

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{AuctionRecord, LedgerEvent, LedgerRecord, NoticeRecord, Record, Win};
use track::{Fingerprint, Names, Samples, fingerprint};

/// Entries tracked at once by default (see the module's memory note).
pub const DEFAULT_LIMIT: usize = 20_000_000;
/// Mismatches of each kind listed by default.
pub const DEFAULT_LISTED: usize = 10;
/// Non-charge ledger records (reservations, releases, expiries) kept while they wait for their
/// win: they only show which bidders and campaigns the ledger records belong to, which a
/// sample shows as well as all of them.
pub const MAX_EVIDENCE: usize = 1_000_000;
/// Charges of one reservation kept apart for their price check; more are counted and summed.
const MAX_CHARGES_KEPT: usize = 16;
/// The campaign of a ledger record that names none.
const NO_CAMPAIGN: &str = "(none)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sale {
    Sold,
    Dropped,
    Test,
}

/// An exchange win waiting for its charge.
#[derive(Debug)]
struct OpenWin {
    auction: String,
    bid: String,
    bidder: u32,
    told_micros: i64,
    sale: Sale,
    billing_by_seller: bool,
    /// Known when a non-charge ledger record of its reservation joined it.
    campaign: Option<u32>,
}

/// Charges of one reservation waiting for their win.
#[derive(Debug)]
struct OpenCharges {
    auction: String,
    reservation: String,
    node: u32,
    campaign: u32,
    charges: Charges,
}

#[derive(Debug, Default)]
struct Charges {
    count: u64,
    sum_nanos: i128,
    /// The first [`MAX_CHARGES_KEPT`] amounts, each checked against the price told.
    amounts: Vec<i64>,
}

impl Charges {
    fn add(&mut self, nanos: i64) {
        self.count += 1;
        self.sum_nanos += i128::from(nanos);
        if self.amounts.len() < MAX_CHARGES_KEPT {
            self.amounts.push(nanos);
        }
    }
}

/// An `already_committed` record waiting to learn whether a `charged` record of its reservation
/// exists; at the finish, without one, it is the charge.
#[derive(Debug)]
struct Confirmed {
    auction: String,
    reservation: String,
    node: u32,
    campaign: u32,
    amount_nanos: i64,
}

/// A win joined to its first charge: what a later charge is checked against.
#[derive(Debug, Clone, Copy)]
struct Settled {
    bidder: u32,
    campaign: u32,
    told_micros: i64,
    sale: Sale,
}

#[derive(Debug)]
enum Slot {
    Win(Box<OpenWin>),
    Charges(Box<OpenCharges>),
    Settled(Settled),
}

/// An exchange bidder's figures while records come in.
#[derive(Debug, Default)]
struct BidderTally {
    joined: bool,
    books: report::Books,
    dropped_wins: u64,
    test_wins: u64,
    notices: NoticeCounts,
    mismatches: MismatchCounts,
}

/// What a bidder node's ledger said of a campaign apart from charges.
#[derive(Debug, Default, Clone, Copy)]
struct LedgerSide {
    duplicates: u64,
    notices_refused: u64,
    conflicts: u64,
}

/// Joins records as they come; [`finish`](Reconciler::finish) gives the [`Report`].
#[derive(Debug)]
pub struct Reconciler {
    limit: usize,
    bidders: Names,
    campaigns: Names,
    nodes: Names,
    slots: HashMap<Fingerprint, Slot>,
    /// Every auction the exchange recorded.
    auctions: HashSet<Fingerprint>,
    /// (auction, bid) of winners' notices the exchange lost.
    lost: HashSet<Fingerprint>,
    /// (auction, reservation) of notices a bidder refused.
    refused: HashSet<Fingerprint>,
    /// Non-charge ledger records waiting for their win: (node, campaign).
    evidence: HashMap<Fingerprint, (u32, u32)>,
    /// `already_committed` records of reservations not (yet) seen charged.
    confirmed: HashMap<Fingerprint, Confirmed>,
    tallies: HashMap<u32, BidderTally>,
    /// Campaign rows, by (exchange bidder, campaign).
    rows: HashMap<(u32, u32), CampaignReport>,
    /// Duplicates and refusals, by (node, campaign), placed at the finish.
    ledger_side: HashMap<(u32, u32), LedgerSide>,
    /// The exchange bidder each node's records joined first.
    node_bidder: HashMap<u32, u32>,
    samples: Samples,
    seen: Seen,
}

impl Default for Reconciler {
    fn default() -> Reconciler {
        Reconciler::new()
    }
}

impl Reconciler {
    /// [`DEFAULT_LIMIT`] entries, [`DEFAULT_LISTED`] mismatches of each kind listed.
    pub fn new() -> Reconciler {
        Reconciler::with_limit(DEFAULT_LIMIT, DEFAULT_LISTED)
    }

    /// At most `limit` entries tracked at once; `listed` mismatches of each kind listed.
    pub fn with_limit(limit: usize, listed: usize) -> Reconciler {
        Reconciler {
            limit,
            bidders: Names::default(),
            campaigns: Names::default(),
            nodes: Names::default(),
            slots: HashMap::new(),
            auctions: HashSet::new(),
            lost: HashSet::new(),
            refused: HashSet::new(),
            evidence: HashMap::new(),
            confirmed: HashMap::new(),
            tallies: HashMap::new(),
            rows: HashMap::new(),
            ledger_side: HashMap::new(),
            node_bidder: HashMap::new(),
            samples: Samples::new(listed),
            seen: Seen {
                limit: u64::try_from(limit).unwrap_or(u64::MAX),
                ..Seen::default()
            },
        }
    }

    /// Takes one record, in any order.
    pub fn add(&mut self, record: &Record) {
        match record {
            Record::Auction(a) => self.auction(a),
            Record::Notice(n) => self.notice(n),
            Record::Ledger(l) => self.ledger(l),
        }
    }

    fn tracked(&self) -> usize {
        self.slots.len()
            + self.auctions.len()
            + self.lost.len()
            + self.refused.len()
            + self.evidence.len()
            + self.confirmed.len()
    }

    /// Whether one more entry fits; counts the record as over the limit when not.
    fn room(&mut self) -> bool {
        let room = self.tracked() < self.limit;
        if !room {
            self.seen.over_limit += 1;
        }
        room
    }

    fn tally(&mut self, bidder: u32) -> &mut BidderTally {
        self.tallies.entry(bidder).or_default()
    }

    fn row(&mut self, bidder: u32, campaign: u32) -> &mut CampaignReport {
        self.rows.entry((bidder, campaign)).or_default()
    }

    fn auction(&mut self, a: &AuctionRecord) {
        self.seen.auctions += 1;
        let id = fingerprint(&a.id, "");
        if !self.auctions.contains(&id) && self.room() {
            self.auctions.insert(id);
        }
        for win in &a.wins {
            self.win(a, win);
        }
    }

    fn win(&mut self, a: &AuctionRecord, win: &Win) {
        let key = fingerprint(&a.id, &win.bid);
        let vacant = !self.slots.contains_key(&key);
        if !vacant && matches!(self.slots.get(&key), Some(Slot::Win(_) | Slot::Settled(_))) {
            self.seen.duplicate_wins += 1;
            return;
        }
        if vacant && !self.room() {
            return;
        }
        let bidder = self.bidders.ix(&win.bidder);
        let sale = if win.dropped.is_some() {
            Sale::Dropped
        } else if a.test {
            Sale::Test
        } else {
            Sale::Sold
        };
        let tally = self.tally(bidder);
        match sale {
            Sale::Sold => {
                tally.books.won += 1;
                tally.books.told_micros += i128::from(win.charged_micros);
            }
            Sale::Dropped => tally.dropped_wins += 1,
            Sale::Test => tally.test_wins += 1,
        }
        let open = OpenWin {
            auction: a.id.clone(),
            bid: win.bid.clone(),
            bidder,
            told_micros: win.charged_micros,
            sale,
            billing_by_seller: win.billing_by.as_deref() == Some("seller"),
            campaign: None,
        };
        let evidence = self.evidence.remove(&key);
        match self.slots.remove(&key) {
            Some(Slot::Charges(open_charges)) => {
                let OpenCharges {
                    node,
                    campaign,
                    charges,
                    ..
                } = *open_charges;
                let settled = self.settle(&open, node, campaign, &charges);
                self.slots.insert(key, Slot::Settled(settled));
            }
            _ => {
                let mut open = open;
                if let Some((node, campaign)) = evidence {
                    self.joined(bidder, node);
                    open.campaign = Some(campaign);
                }
                self.slots.insert(key, Slot::Win(Box::new(open)));
            }
        }
    }

    fn notice(&mut self, n: &NoticeRecord) {
        self.seen.notices += 1;
        let bidder = self.bidders.ix(&n.bidder);
        self.tally(bidder).notices.add(&n.notice, &n.outcome);
        let charging = matches!(&*n.notice, "win" | "billing" | "markup_fetch");
        if !charging || n.outcome == "sent" {
            return;
        }
        match &n.bid {
            Some(bid) => {
                let key = fingerprint(&n.auction, bid);
                if !self.lost.contains(&key) && self.room() {
                    self.lost.insert(key);
                }
            }
            None => self.seen.unjoinable += 1,
        }
    }

    fn ledger(&mut self, l: &LedgerRecord) {
        self.seen.ledger += 1;
        let joinable = match (&l.auction, &l.reservation) {
            (Some(a), Some(r)) => Some((a.as_str(), r.as_str())),
            _ => None,
        };
        let node = self.nodes.ix(&l.node);
        let campaign = self
            .campaigns
            .ix(l.campaign.as_deref().unwrap_or(NO_CAMPAIGN));
        match l.event {
            LedgerEvent::Refuse => return,
            LedgerEvent::Commit => match l.outcome.as_deref() {
                Some("charged" | "charged_after_release") => {}
                Some("already_committed") => {
                    match joinable {
                        Some((auction, reservation)) => self.already_committed(
                            fingerprint(auction, reservation),
                            Confirmed {
                                auction: auction.to_owned(),
                                reservation: reservation.to_owned(),
                                node,
                                campaign,
                                amount_nanos: l.amount_nanos,
                            },
                        ),
                        None => self.duplicate(node, campaign),
                    }
                    return;
                }
                _ => return,
            },
            LedgerEvent::NoticeRefused => {
                let side = self.ledger_side.entry((node, campaign)).or_default();
                // A sampled record stands for itself and those of its reason left out since.
                side.notices_refused += 1 + l.suppressed;
                if l.reason.as_deref() == Some("conflict") {
                    side.conflicts += 1;
                }
            }
            LedgerEvent::Reserve | LedgerEvent::Release | LedgerEvent::Expire => {}
        }
        let Some((auction, reservation)) = joinable else {
            self.seen.unjoinable += 1;
            return;
        };
        let key = fingerprint(auction, reservation);
        match l.event {
            LedgerEvent::Commit => {
                // A retry's answer held back is a duplicate now that the charge is here.
                if let Some(c) = self.confirmed.remove(&key) {
                    self.duplicate(c.node, c.campaign);
                }
                self.charge(key, auction, reservation, node, campaign, l.amount_nanos);
            }
            LedgerEvent::NoticeRefused => {
                if !self.refused.contains(&key) && self.room() {
                    self.refused.insert(key);
                }
                self.evidence(key, node, campaign);
            }
            _ => self.evidence(key, node, campaign),
        }
    }

    fn duplicate(&mut self, node: u32, campaign: u32) {
        self.ledger_side
            .entry((node, campaign))
            .or_default()
            .duplicates += 1;
    }

    /// A charging notice the ledger answered "charged already": a duplicate when the charge is
    /// known (or another such answer is held), else held until the finish.
    fn already_committed(&mut self, key: Fingerprint, answer: Confirmed) {
        let charged = matches!(
            self.slots.get(&key),
            Some(Slot::Settled(_) | Slot::Charges(_))
        );
        if charged || self.confirmed.contains_key(&key) || !self.room() {
            self.duplicate(answer.node, answer.campaign);
            return;
        }
        self.confirmed.insert(key, answer);
    }

    /// A non-charge ledger record of a reservation: joined to its win, it shows whose ledger
    /// this is.
    fn evidence(&mut self, key: Fingerprint, node: u32, campaign: u32) {
        let bidder = match self.slots.get_mut(&key) {
            Some(Slot::Win(w)) => {
                w.campaign.get_or_insert(campaign);
                Some(w.bidder)
            }
            Some(Slot::Settled(s)) => Some(s.bidder),
            Some(Slot::Charges(_)) => None,
            None => {
                if self.evidence.len() < MAX_EVIDENCE
                    && !self.evidence.contains_key(&key)
                    && self.tracked() < self.limit
                {
                    self.evidence.insert(key, (node, campaign));
                }
                None
            }
        };
        if let Some(bidder) = bidder {
            self.joined(bidder, node);
        }
    }

    fn joined(&mut self, bidder: u32, node: u32) {
        self.tally(bidder).joined = true;
        self.node_bidder.entry(node).or_insert(bidder);
    }

    fn charge(
        &mut self,
        key: Fingerprint,
        auction: &str,
        reservation: &str,
        node: u32,
        campaign: u32,
        nanos: i64,
    ) {
        match self.slots.get_mut(&key) {
            None => {
                if !self.room() {
                    return;
                }
                let mut charges = Charges::default();
                charges.add(nanos);
                let open = OpenCharges {
                    auction: auction.to_owned(),
                    reservation: reservation.to_owned(),
                    node,
                    campaign,
                    charges,
                };
                self.slots.insert(key, Slot::Charges(Box::new(open)));
            }
            Some(Slot::Charges(open)) => open.charges.add(nanos),
            Some(Slot::Win(_)) => {
                let Some(Slot::Win(win)) = self.slots.remove(&key) else {
                    return;
                };
                let mut charges = Charges::default();
                charges.add(nanos);
                let settled = self.settle(&win, node, campaign, &charges);
                self.slots.insert(key, Slot::Settled(settled));
            }
            Some(Slot::Settled(s)) => {
                let s = *s;
                self.joined(s.bidder, node);
                let amount = i128::from(nanos);
                self.tally(s.bidder).books.charged_nanos += amount;
                self.row(s.bidder, s.campaign).books.charged_nanos += amount;
                let ids = (auction, reservation);
                let told = s.told_micros;
                self.mismatch(
                    MismatchKind::DoubleCharge,
                    s.bidder,
                    s.campaign,
                    ids,
                    told,
                    nanos,
                );
                if s.sale == Sale::Sold && nanos != told {
                    self.mismatch(
                        MismatchKind::PriceMismatch,
                        s.bidder,
                        s.campaign,
                        ids,
                        told,
                        nanos,
                    );
                }
            }
        }
    }

    /// A win meets its charges.
    fn settle(&mut self, w: &OpenWin, node: u32, campaign: u32, charges: &Charges) -> Settled {
        let bidder = w.bidder;
        self.joined(bidder, node);
        let told = i128::from(w.told_micros);
        let tally = self.tally(bidder);
        tally.books.charged_nanos += charges.sum_nanos;
        let row = self.row(bidder, campaign);
        row.books.charged_nanos += charges.sum_nanos;
        let ids = (w.auction.as_str(), w.bid.as_str());
        let first = charges.amounts.first().copied().unwrap_or(0);
        match w.sale {
            Sale::Sold => {
                let row = self.row(bidder, campaign);
                row.books.won += 1;
                row.books.charged += 1;
                row.books.told_micros += told;
                row.books.told_charged_micros += told;
                let tally = self.tally(bidder);
                tally.books.charged += 1;
                tally.books.told_charged_micros += told;
                for &amount in &charges.amounts {
                    if amount != w.told_micros {
                        self.mismatch(
                            MismatchKind::PriceMismatch,
                            bidder,
                            campaign,
                            ids,
                            w.told_micros,
                            amount,
                        );
                    }
                }
            }
            Sale::Dropped | Sale::Test => {
                let cause = if w.sale == Sale::Dropped {
                    NotWon::WinDropped
                } else {
                    NotWon::TestWin
                };
                self.mismatch(
                    MismatchKind::ChargedNotWon(cause),
                    bidder,
                    campaign,
                    ids,
                    w.told_micros,
                    first,
                );
            }
        }
        for _ in 1..charges.count {
            self.mismatch(
                MismatchKind::DoubleCharge,
                bidder,
                campaign,
                ids,
                w.told_micros,
                first,
            );
        }
        Settled {
            bidder,
            campaign,
            told_micros: w.told_micros,
            sale: w.sale,
        }
    }

    /// Counts a mismatch of a joined pair on its bidder and campaign, and offers it for listing.
    fn mismatch(
        &mut self,
        kind: MismatchKind,
        bidder: u32,
        campaign: u32,
        (auction, bid): (&str, &str),
        told_micros: i64,
        charged_nanos: i64,
    ) {
        self.tally(bidder).mismatches.count(kind);
        self.row(bidder, campaign).mismatches.count(kind);
        if self.samples.wants(kind, auction, bid) {
            self.samples.offer(Mismatch {
                kind,
                auction: auction.to_owned(),
                bid: bid.to_owned(),
                bidder: Some(self.bidders.name(bidder).to_owned()),
                campaign: Some(self.campaigns.name(campaign).to_owned()),
                told_micros: Some(told_micros),
                charged_nanos: Some(charged_nanos),
            });
        }
    }

    /// What is still open is now a mismatch (or an unaudited bidder's win); the report.
    pub fn finish(mut self, tolerance: &Tolerance) -> Report {
        // Retries' answers with no charge record: each is its reservation's charge.
        let confirmed = std::mem::take(&mut self.confirmed);
        for (key, c) in confirmed {
            self.seen.charged_on_retry += 1;
            self.charge(
                key,
                &c.auction,
                &c.reservation,
                c.node,
                c.campaign,
                c.amount_nanos,
            );
        }
        let audited: Vec<bool> = (0..self.bidders.len())
            .map(|i| {
                let i32_ = u32::try_from(i).unwrap_or(u32::MAX);
                let joined = self.tallies.get(&i32_).is_some_and(|t| t.joined);
                joined || tolerance.requires(self.bidders.name(i32_))
            })
            .collect();
        let slots = std::mem::take(&mut self.slots);
        let mut unattributed: BTreeMap<u32, CampaignReport> = BTreeMap::new();
        for (key, slot) in &slots {
            match slot {
                Slot::Settled(_) => {}
                Slot::Win(w) => {
                    let is_audited = usize::try_from(w.bidder)
                        .ok()
                        .and_then(|i| audited.get(i))
                        .copied()
                        .unwrap_or(false);
                    if w.sale != Sale::Sold || !is_audited {
                        continue;
                    }
                    let cause = if self.lost.contains(key) {
                        Uncharged::NoticeLost
                    } else if self.refused.contains(key) {
                        Uncharged::RefusedByBidder
                    } else if w.billing_by_seller {
                        Uncharged::SellerFires
                    } else {
                        Uncharged::Unexplained
                    };
                    let kind = MismatchKind::WonNotCharged(cause);
                    self.tally(w.bidder).mismatches.count(kind);
                    if let Some(c) = w.campaign {
                        let row = self.row(w.bidder, c);
                        row.books.won += 1;
                        row.books.told_micros += i128::from(w.told_micros);
                        row.mismatches.count(kind);
                    }
                    if self.samples.wants(kind, &w.auction, &w.bid) {
                        self.samples.offer(Mismatch {
                            kind,
                            auction: w.auction.clone(),
                            bid: w.bid.clone(),
                            bidder: Some(self.bidders.name(w.bidder).to_owned()),
                            campaign: w.campaign.map(|c| self.campaigns.name(c).to_owned()),
                            told_micros: Some(w.told_micros),
                            charged_nanos: None,
                        });
                    }
                }
                Slot::Charges(c) => {
                    let recorded = self.auctions.contains(&fingerprint(&c.auction, ""));
                    let kind = if recorded {
                        MismatchKind::ChargedNotWon(NotWon::NoWin)
                    } else {
                        MismatchKind::UnknownAuction
                    };
                    let bidder = self.node_bidder.get(&c.node).copied();
                    let row = match bidder {
                        Some(b) => self.rows.entry((b, c.campaign)).or_default(),
                        None => unattributed.entry(c.campaign).or_default(),
                    };
                    row.mismatches.count(kind);
                    let extra = c.charges.count.saturating_sub(1);
                    row.mismatches.double_charge += extra;
                    if recorded {
                        row.books.charged_nanos += c.charges.sum_nanos;
                    }
                    if let Some(b) = bidder {
                        let tally = self.tally(b);
                        tally.mismatches.count(kind);
                        tally.mismatches.double_charge += extra;
                        if recorded {
                            tally.books.charged_nanos += c.charges.sum_nanos;
                        }
                    }
                    let first = c.charges.amounts.first().copied();
                    let mut listed = vec![kind];
                    if extra > 0 {
                        listed.push(MismatchKind::DoubleCharge);
                    }
                    for kind in listed {
                        if self.samples.wants(kind, &c.auction, &c.reservation) {
                            self.samples.offer(Mismatch {
                                kind,
                                auction: c.auction.clone(),
                                bid: c.reservation.clone(),
                                bidder: bidder.map(|b| self.bidders.name(b).to_owned()),
                                campaign: Some(self.campaigns.name(c.campaign).to_owned()),
                                told_micros: None,
                                charged_nanos: first,
                            });
                        }
                    }
                }
            }
        }
        for ((node, campaign), side) in std::mem::take(&mut self.ledger_side) {
            let row = match self.node_bidder.get(&node).copied() {
                Some(b) => self.rows.entry((b, campaign)).or_default(),
                None => unattributed.entry(campaign).or_default(),
            };
            row.duplicates += side.duplicates;
            row.notices_refused += side.notices_refused;
            row.conflicts += side.conflicts;
        }
        self.report(tolerance, &audited, unattributed)
    }

    fn report(
        mut self,
        tolerance: &Tolerance,
        audited: &[bool],
        unattributed: BTreeMap<u32, CampaignReport>,
    ) -> Report {
        let mut campaigns_of: BTreeMap<u32, Vec<CampaignReport>> = BTreeMap::new();
        for ((bidder, campaign), mut row) in std::mem::take(&mut self.rows) {
            row.campaign = self.campaigns.name(campaign).to_owned();
            campaigns_of.entry(bidder).or_default().push(row);
        }
        let mut totals = MismatchCounts::default();
        let mut bidders = Vec::new();
        let mut tallies = std::mem::take(&mut self.tallies);
        for (i, is_audited) in audited.iter().enumerate() {
            let ix = u32::try_from(i).unwrap_or(u32::MAX);
            let tally = tallies.remove(&ix).unwrap_or_default();
            let mut campaigns = campaigns_of.remove(&ix).unwrap_or_default();
            campaigns.sort_by(|a, b| a.campaign.cmp(&b.campaign));
            let (mut duplicates, mut notices_refused, mut conflicts) = (0, 0, 0);
            for c in &campaigns {
                duplicates += c.duplicates;
                notices_refused += c.notices_refused;
                conflicts += c.conflicts;
            }
            totals.merge(&tally.mismatches);
            bidders.push(BidderReport {
                bidder: self.bidders.name(ix).to_owned(),
                joined: tally.joined,
                audited: *is_audited,
                allowed_uncharged: tolerance.allowed_uncharged(tally.books.won),
                books: tally.books,
                dropped_wins: tally.dropped_wins,
                test_wins: tally.test_wins,
                notices: tally.notices,
                duplicates,
                notices_refused,
                conflicts,
                mismatches: tally.mismatches,
                campaigns,
            });
        }
        bidders.sort_by(|a, b| a.bidder.cmp(&b.bidder));
        let mut unattributed: Vec<CampaignReport> = unattributed
            .into_iter()
            .map(|(campaign, mut row)| {
                row.campaign = self.campaigns.name(campaign).to_owned();
                totals.merge(&row.mismatches);
                row
            })
            .collect();
        unattributed.sort_by(|a, b| a.campaign.cmp(&b.campaign));
        Report {
            bidders,
            unattributed,
            totals,
            listed: self.samples.into_list(),
            seen: self.seen,
            tolerance: tolerance.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
