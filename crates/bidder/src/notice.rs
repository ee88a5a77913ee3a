//! Win, billing and loss notices: the URLs the bidder puts in its bids and what each does to
//! the ledger when it comes back.
//!
//! A bid's notice URLs carry its reservation id (`r`, also the bid's id), the auction it was
//! bid in (`a`), campaign (`c`), imp (`i`), the highest price the notice may charge (`x`, the
//! bid's CPM in micros), an expiry (`e`, Unix seconds) and a token over all of them (`t`, see
//! [`crate::token`]); win and billing notices also carry `price=${AUCTION_PRICE}`, which the
//! exchange replaces with the clearing CPM (an exact decimal, charged in nanos: one impression
//! at CPM p micros costs p nanos, nothing is rounded) or with a price token it sealed for this
//! bid ([`crate::prices`]). A notice whose token is missing, wrong or expired, whose price is
//! not accepted, or whose price is above `x`, is refused with 403 before the ledger sees it.
//!
//! What each notice does, in any order and however often it is delivered (answers: 204 for
//! the 200 rows, the others with `{"error": label}`):
//!
//! | notice | reservation open | already charged | released or expired |
//! | --- | --- | --- | --- |
//! | win or bill (charging) | charged | 204, nothing more (duplicate); 409 `conflict` if its price differs | charged, counted `charged_after_release` |
//! | loss | released | 409 `loss_after_win`, the charge stands | 204, nothing |
//! | loss with `loss=0` ("bid won") | nothing (recorded) | nothing | nothing |
//!
//! A second charging notice for a reservation with another price than the first is a
//! `conflict`: the first charge stands, and it is counted and logged with both prices, never
//! passed off as a duplicate (one of the two notices was tampered with, or the exchange and
//! the seller disagree).
// A request or notice path: each step stays short enough to read at once (clippy.toml).
#![warn(clippy::too_many_lines)]

use http::StatusCode;
use ledger::{CommitOutcome, ReleaseOutcome, SettleError};
use openrtb::Price;
use openrtb::query::{parse_cpm, query_pairs};
use units::{Nanos, Timestamp};

use crate::config::ChargeOn;
use crate::metrics::{NoticeKind, NoticeOutcome, NoticeRefusal};
use crate::prices::{NoticePrice, PriceKeys, PriceRefusal};
use crate::token::{Claims, NoticeKeys, TokenError};
use ledger::{Ledger, NoticeError};

/// Longest accepted notice query string.
pub const MAX_QUERY_BYTES: usize = 2048;
/// Longest reservation, campaign or imp id in a notice (the bidder answers 400 to a request
/// with a longer imp id, so its notices always fit).
pub const MAX_ID_BYTES: usize = 128;

/// The notice URLs of one bid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeUrls {
    pub nurl: String,
    pub burl: String,
    pub lurl: String,
}

/// What a bid's notice URLs say about it.
#[derive(Debug, Clone, Copy)]
pub struct BidNotice<'a> {
    /// Base URL of this bidder (`public_url`).
    pub base: &'a str,
    /// The reservation id, which is also the bid's id.
    pub reservation: &'a str,
    /// `BidRequest.id`: the auction a price token must be bound to.
    pub auction: &'a str,
    pub campaign: &'a str,
    pub imp: &'a str,
    /// The bid's price: no notice may charge more.
    pub max_price: Price,
    /// Unix seconds after which its notices are refused.
    pub expires_at_s: u64,
}

/// Builds the notice URLs of a bid, each with its own token when `keys` are given (signing
/// on). Reservation ids are generated from URL-safe characters and go in as they are.
pub fn notice_urls(keys: Option<&NoticeKeys>, bid: &BidNotice<'_>) -> NoticeUrls {
    let common = format!(
        "r={}&a={}&c={}&i={}&x={}&e={}",
        bid.reservation,
        encode(bid.auction),
        encode(bid.campaign),
        encode(bid.imp),
        bid.max_price.micros(),
        bid.expires_at_s
    );
    let url = |kind: NoticeKind, path: &str, tail: &str| {
        let token = keys.map(|k| {
            let claims = Claims {
                kind,
                reservation: bid.reservation,
                campaign: bid.campaign,
                imp: bid.imp,
                max_price: bid.max_price,
                expires_at_s: bid.expires_at_s,
                auction: Some(bid.auction),
            };
            format!("&t={}", k.sign(&claims))
        });
        format!(
            "{}/notice/{path}?{common}{}&{tail}",
            bid.base,
            token.unwrap_or_default()
        )
    };
    NoticeUrls {
        nurl: url(NoticeKind::Win, "win", "price=${AUCTION_PRICE}"),
        burl: url(NoticeKind::Bill, "bill", "price=${AUCTION_PRICE}"),
        lurl: url(NoticeKind::Loss, "loss", "loss=${AUCTION_LOSS}"),
    }
}

/// Percent-encodes everything but unreserved characters (campaign and imp ids are free text).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A notice as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub reservation: String,
    /// `a`: the auction the bid was made in.
    pub auction: Option<String>,
    pub campaign: Option<String>,
    pub imp: Option<String>,
    /// `x`: the highest price this notice may charge.
    pub max_price: Option<Price>,
    /// `e`: Unix seconds.
    pub expires_at_s: Option<u64>,
    /// `t`: the token.
    pub token: Option<String>,
    /// Clearing CPM, plain or as a price token; required for win and billing notices.
    pub price: Option<NoticePrice>,
    /// `loss`: the exchange's loss reason; 0 means the bid won.
    pub loss_reason: Option<i64>,
}

/// Why a notice could not be read (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadNotice {
    #[error("query string exceeds {MAX_QUERY_BYTES} bytes")]
    TooLong,
    #[error("r: missing or not a reservation id")]
    Reservation,
    #[error("a, c, i: longer than {MAX_ID_BYTES} bytes")]
    Id,
    #[error(
        "price: missing, or neither a decimal CPM nor a price token (was ${{AUCTION_PRICE}} replaced?)"
    )]
    Price,
}

/// Why a well-formed notice was refused (answered 403): nothing changes in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Token(TokenError),
    #[error("price is above the bid")]
    AboveBid,
    #[error("{0}")]
    Price(PriceRefusal),
}

impl Refusal {
    /// Its metric label.
    pub const fn metric(self) -> NoticeRefusal {
        match self {
            Refusal::Token(TokenError::Missing) => NoticeRefusal::MissingToken,
            Refusal::Token(TokenError::Malformed) => NoticeRefusal::MalformedToken,
            Refusal::Token(TokenError::BadSignature) => NoticeRefusal::BadSignature,
            Refusal::Token(TokenError::Expired) => NoticeRefusal::Expired,
            Refusal::AboveBid => NoticeRefusal::AboveBid,
            Refusal::Price(p) => p.metric(),
        }
    }
}

/// Parses a notice's query string.
pub fn parse(kind: NoticeKind, query: &str) -> Result<Notice, BadNotice> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(BadNotice::TooLong);
    }
    let pairs = query_pairs(query);
    let get = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let reservation = get("r")
        .filter(|r| {
            !r.is_empty()
                && r.len() <= MAX_ID_BYTES
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        })
        .ok_or(BadNotice::Reservation)?;
    let id = |key: &str| match get(key) {
        Some(v) if v.len() > MAX_ID_BYTES => Err(BadNotice::Id),
        v => Ok(v.map(str::to_owned)),
    };
    let price = match kind {
        NoticeKind::Loss => None,
        NoticeKind::Win | NoticeKind::Bill => Some(notice_price(get("price"))?),
    };
    Ok(Notice {
        kind,
        reservation: reservation.to_owned(),
        auction: id("a")?,
        campaign: id("c")?,
        imp: id("i")?,
        max_price: get("x")
            .and_then(|x| x.parse::<i64>().ok())
            .map(Price::from_micros),
        expires_at_s: get("e").and_then(|e| e.parse().ok()),
        token: get("t").map(str::to_owned),
        price,
        loss_reason: get("loss").and_then(|l| l.parse().ok()),
    })
}

/// A `price` value: a price token (checked later, against the bid) or a decimal CPM.
fn notice_price(text: Option<&str>) -> Result<NoticePrice, BadNotice> {
    match text {
        Some(t) if price_token::is_token(t) => {
            if t.len() > price_token::MAX_TOKEN_CHARS {
                return Err(BadNotice::Price);
            }
            Ok(NoticePrice::Token(t.to_owned()))
        }
        Some(t) => parse_cpm(t).map(NoticePrice::Plain).ok_or(BadNotice::Price),
        None => Err(BadNotice::Price),
    }
}

/// What a notice is checked against before it may touch the ledger.
#[derive(Debug, Clone, Copy)]
pub struct Checks<'a> {
    /// The notice keys; `None` with signing off.
    pub keys: Option<&'a NoticeKeys>,
    /// The price keys and whether a price token is required.
    pub prices: &'a PriceKeys,
    /// The bidder's currency: a price token is bound to it.
    pub currency: &'a str,
}

/// Checks a notice before it may touch the ledger: its token (when signing), its price (plain
/// or a price token, as `prices` accept) and that price against the bid's. Without notice keys
/// (signing off) a present `x` still caps the price. The price to charge, for win and billing
/// notices.
pub fn check(
    checks: &Checks<'_>,
    notice: &Notice,
    now: Timestamp,
) -> Result<Option<Price>, Refusal> {
    let keys = checks.keys;
    if let Some(keys) = keys {
        let token = notice.token.as_deref();
        // A notice missing a signed field is not one this bidder made.
        let (Some(campaign), Some(imp), Some(max_price), Some(expires_at_s)) = (
            notice.campaign.as_deref(),
            notice.imp.as_deref(),
            notice.max_price,
            notice.expires_at_s,
        ) else {
            return Err(Refusal::Token(if token.is_none() {
                TokenError::Missing
            } else {
                TokenError::BadSignature
            }));
        };
        let claims = Claims {
            kind: notice.kind,
            reservation: &notice.reservation,
            campaign,
            imp,
            max_price,
            expires_at_s,
            auction: notice.auction.as_deref(),
        };
        keys.verify(&claims, token, now).map_err(Refusal::Token)?;
    }
    let Some(price) = &notice.price else {
        return Ok(None);
    };
    let bound = price_token::Binding {
        auction: notice.auction.as_deref().unwrap_or(""),
        imp: notice.imp.as_deref().unwrap_or(""),
        bid: &notice.reservation,
        currency: checks.currency,
    };
    let price = checks
        .prices
        .resolve(price, &bound, now.0 / 1000)
        .map_err(Refusal::Price)?;
    if let Some(max) = notice.max_price
        && price > max
    {
        return Err(Refusal::AboveBid);
    }
    Ok(Some(price))
}

/// What settling a notice did, for the metric, the answer's status and the campaign's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub outcome: NoticeOutcome,
    /// Newly charged (zero for duplicates and non-charging notices).
    pub charged: Nanos,
    /// For a `conflict`: what the first notice charged (this one asked for another price).
    pub earlier: Option<Nanos>,
}

impl Settled {
    fn of(outcome: NoticeOutcome) -> Settled {
        Settled {
            outcome,
            charged: Nanos::ZERO,
            earlier: None,
        }
    }

    /// The HTTP status the notice is answered with.
    pub fn status(self) -> StatusCode {
        match self.outcome {
            NoticeOutcome::Charged
            | NoticeOutcome::ChargedAfterRelease
            | NoticeOutcome::Duplicate
            | NoticeOutcome::Released
            | NoticeOutcome::Recorded => StatusCode::OK,
            NoticeOutcome::Unknown => StatusCode::NOT_FOUND,
            NoticeOutcome::AbovePrice | NoticeOutcome::LossAfterWin | NoticeOutcome::Conflict => {
                StatusCode::CONFLICT
            }
            NoticeOutcome::Refused => StatusCode::FORBIDDEN,
            NoticeOutcome::Invalid => StatusCode::BAD_REQUEST,
            NoticeOutcome::LedgerError => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

fn settle_error(e: NoticeError) -> Settled {
    Settled::of(match e {
        NoticeError::Settle(SettleError::UnknownReservation) => NoticeOutcome::Unknown,
        NoticeError::Settle(SettleError::AboveReservation { .. }) => NoticeOutcome::AbovePrice,
        NoticeError::Settle(SettleError::NegativePrice) => NoticeOutcome::Invalid,
        NoticeError::Unavailable(_) => NoticeOutcome::LedgerError,
    })
}

/// Applies a checked notice to the ledger at `price` (what [`check`] returned). With
/// `charge_on = win` both the win and the billing notice commit (whichever comes first
/// charges, the other is a duplicate, or a conflict if its price differs); with `bill` only
/// billing does, and a win is only recorded.
pub async fn settle(
    ledger: &Ledger,
    charge_on: ChargeOn,
    notice: &Notice,
    price: Option<Price>,
) -> Settled {
    let charges = match notice.kind {
        NoticeKind::Win => charge_on == ChargeOn::Win,
        NoticeKind::Bill => true,
        NoticeKind::Loss => false,
    };
    if notice.kind == NoticeKind::Loss {
        if notice.loss_reason == Some(0) {
            // "Bid won" (OpenRTB loss reason 0): the winner's own loss URL, nothing to release.
            return Settled::of(NoticeOutcome::Recorded);
        }
        return match ledger
            .release(&notice.reservation, notice.campaign.as_deref())
            .await
        {
            Ok(ReleaseOutcome::Released(_)) => Settled::of(NoticeOutcome::Released),
            Ok(ReleaseOutcome::AlreadyReleased) => Settled::of(NoticeOutcome::Duplicate),
            // A loss never erases a win.
            Ok(ReleaseOutcome::AlreadyCommitted) => Settled::of(NoticeOutcome::LossAfterWin),
            Err(e) => settle_error(e),
        };
    }
    if !charges {
        return Settled::of(NoticeOutcome::Recorded);
    }
    let price = Nanos::of_impression(price.unwrap_or_default());
    match ledger
        .commit(&notice.reservation, notice.campaign.as_deref(), price)
        .await
    {
        Ok(CommitOutcome::Charged(n)) => Settled {
            charged: n,
            ..Settled::of(NoticeOutcome::Charged)
        },
        Ok(CommitOutcome::ChargedAfterRelease(n)) => Settled {
            charged: n,
            ..Settled::of(NoticeOutcome::ChargedAfterRelease)
        },
        Ok(CommitOutcome::AlreadyCommitted(earlier)) if earlier == price => {
            Settled::of(NoticeOutcome::Duplicate)
        }
        Ok(CommitOutcome::AlreadyCommitted(earlier)) => Settled {
            earlier: Some(earlier),
            ..Settled::of(NoticeOutcome::Conflict)
        },
        Err(e) => settle_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::NoticeKey;

    fn keys() -> NoticeKeys {
        let secret = settings::Secret::new(&[7; 32], "k").unwrap_or_else(|e| panic!("{e}"));
        NoticeKeys::new(
            NoticeKey::new(&secret).unwrap_or_else(|| panic!("key")),
            None,
        )
    }

    const NOW: Timestamp = Timestamp(1_000_000);

    fn bid() -> BidNotice<'static> {
        BidNotice {
            base: "http://127.0.0.1:9100",
            reservation: "n1-2a",
            auction: "gavel-1 2a",
            campaign: "summer sale/1",
            imp: "imp 1",
            max_price: Price::from_micros(2_000_000),
            expires_at_s: 2_000,
        }
    }

    static PLAIN: PriceKeys = PriceKeys::PLAIN;

    fn signed(keys: &NoticeKeys) -> Checks<'_> {
        Checks {
            keys: Some(keys),
            prices: &PLAIN,
            currency: "USD",
        }
    }

    const UNSIGNED: Checks<'static> = Checks {
        keys: None,
        prices: &PLAIN,
        currency: "USD",
    };

    fn plain(micros: i64) -> Option<NoticePrice> {
        Some(NoticePrice::Plain(Price::from_micros(micros)))
    }

    /// The notice the exchange would send for `url`, with its macros replaced.
    fn received(kind: NoticeKind, url: &str, price: &str) -> Notice {
        let replaced = url
            .replace("${AUCTION_PRICE}", price)
            .replace("${AUCTION_LOSS}", "102");
        let query = replaced.split_once('?').map_or("", |(_, q)| q);
        parse(kind, query).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn signed_urls_round_trip_through_the_parser_and_the_check() {
        let keys = keys();
        let urls = notice_urls(Some(&keys), &bid());
        let n = received(NoticeKind::Win, &urls.nurl, "1.234567");
        assert_eq!(n.reservation, "n1-2a");
        assert_eq!(n.campaign.as_deref(), Some("summer sale/1"));
        assert_eq!(n.imp.as_deref(), Some("imp 1"));
        assert_eq!(n.auction.as_deref(), Some("gavel-1 2a"));
        assert_eq!(n.price, plain(1_234_567));
        assert_eq!(
            check(&signed(&keys), &n, NOW),
            Ok(Some(Price::from_micros(1_234_567)))
        );
        let loss = received(NoticeKind::Loss, &urls.lurl, "");
        assert_eq!(loss.loss_reason, Some(102));
        assert_eq!(check(&signed(&keys), &loss, NOW), Ok(None));
        assert!(urls.burl.contains("/notice/bill?"));
        // Unsigned URLs carry no token.
        assert!(!notice_urls(None, &bid()).nurl.contains("&t="));
    }

    #[test]
    fn forged_replayed_elsewhere_over_priced_and_expired_notices_are_refused() {
        let keys = keys();
        let urls = notice_urls(Some(&keys), &bid());
        let win = received(NoticeKind::Win, &urls.nurl, "1.5");
        let refused = |n: &Notice, now| check(&signed(&keys), n, now).err();
        // The loss URL's token used as a win, the win's for another reservation.
        let as_win = received(
            NoticeKind::Win,
            &urls.lurl.replace("loss=", "price=1&l="),
            "",
        );
        assert_eq!(
            refused(&as_win, NOW),
            Some(Refusal::Token(TokenError::BadSignature))
        );
        let other = Notice {
            reservation: "n1-2b".into(),
            ..win.clone()
        };
        assert_eq!(
            refused(&other, NOW),
            Some(Refusal::Token(TokenError::BadSignature))
        );
        let raised = Notice {
            max_price: Some(Price::from_micros(9_000_000)),
            price: plain(9_000_000),
            ..win.clone()
        };
        assert_eq!(
            refused(&raised, NOW),
            Some(Refusal::Token(TokenError::BadSignature))
        );
        let above = Notice {
            price: plain(2_000_001),
            ..win.clone()
        };
        // The auction is signed too: a URL moved to another auction's token is forged.
        let elsewhere = Notice {
            auction: Some("gavel-1-2b".into()),
            ..win.clone()
        };
        assert_eq!(
            refused(&elsewhere, NOW),
            Some(Refusal::Token(TokenError::BadSignature))
        );
        assert_eq!(refused(&above, NOW), Some(Refusal::AboveBid));
        assert_eq!(
            refused(&win, Timestamp(2_000_000)),
            Some(Refusal::Token(TokenError::Expired))
        );
        let bare = parse(NoticeKind::Win, "r=n1-2a&price=1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            refused(&bare, NOW),
            Some(Refusal::Token(TokenError::Missing))
        );
        // Signing off: the bare notice passes, a present cap still holds.
        assert_eq!(
            check(&UNSIGNED, &bare, NOW),
            Ok(Some(Price::from_micros(1_000_000)))
        );
        assert_eq!(check(&UNSIGNED, &above, NOW), Err(Refusal::AboveBid));
        assert_eq!(Refusal::AboveBid.metric().label(), "above_bid");
        assert_eq!(
            Refusal::Token(TokenError::Expired).metric().label(),
            "expired"
        );
    }

    #[test]
    fn bad_notices_name_the_parameter() {
        assert_eq!(
            parse(NoticeKind::Win, "r=a&price=${AUCTION_PRICE}"),
            Err(BadNotice::Price)
        );
        assert_eq!(parse(NoticeKind::Bill, "r=a"), Err(BadNotice::Price));
        assert_eq!(
            parse(NoticeKind::Win, "price=1"),
            Err(BadNotice::Reservation)
        );
        assert_eq!(
            parse(NoticeKind::Loss, "r=a%20b"),
            Err(BadNotice::Reservation)
        );
        assert_eq!(
            parse(NoticeKind::Win, "r=a&price=-1"),
            Err(BadNotice::Price)
        );
        let long_imp = format!("r=a&i={}", "i".repeat(MAX_ID_BYTES + 1));
        assert_eq!(parse(NoticeKind::Loss, &long_imp), Err(BadNotice::Id));
        let long = format!("r={}", "a".repeat(MAX_QUERY_BYTES));
        assert_eq!(parse(NoticeKind::Loss, &long), Err(BadNotice::TooLong));
        assert!(parse(NoticeKind::Loss, "r=a&loss=${AUCTION_LOSS}").is_ok());
    }

    async fn ledger_with(ids: &[&str]) -> Ledger {
        let ledger = Ledger::memory(std::time::Duration::from_secs(60));
        let limits = units::Limits {
            total: Nanos::from_units(1.0).unwrap_or_default(),
            daily: None,
        };
        let _ = ledger
            .set_campaigns(&[("c".to_owned(), limits)], ledger::LimitsFrom::Own)
            .await;
        let far = std::time::Instant::now() + std::time::Duration::from_secs(1);
        for id in ids {
            assert_eq!(ledger.reserve(id, "c", Nanos(2_000_000), far).await, Ok(()));
        }
        ledger
    }

    fn notice(kind: NoticeKind, query: &str) -> Notice {
        parse(kind, query).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Checks an unsigned notice (plain prices accepted) and settles it at its price.
    async fn checked_settle(ledger: &Ledger, charge_on: ChargeOn, n: &Notice) -> Settled {
        let price = check(&UNSIGNED, n, NOW).unwrap_or_else(|e| panic!("{e}"));
        settle(ledger, charge_on, n, price).await
    }

    #[tokio::test]
    async fn a_win_and_a_loss_in_either_order_charge_once() {
        let ledger = ledger_with(&["a", "b", "w"]).await;
        let outcome = |n: Notice| {
            let ledger = &ledger;
            async move { checked_settle(ledger, ChargeOn::Win, &n).await }
        };
        // Win then loss: charged once, the loss refused.
        let first = outcome(notice(NoticeKind::Win, "r=a&price=1.5")).await;
        assert_eq!(
            (first.outcome, first.charged),
            (NoticeOutcome::Charged, Nanos(1_500_000))
        );
        assert_eq!(
            outcome(notice(NoticeKind::Win, "r=a&price=1.5"))
                .await
                .outcome,
            NoticeOutcome::Duplicate
        );
        assert_eq!(
            outcome(notice(NoticeKind::Bill, "r=a&price=1.5"))
                .await
                .outcome,
            NoticeOutcome::Duplicate
        );
        let late_loss = outcome(notice(NoticeKind::Loss, "r=a&loss=102")).await;
        assert_eq!(late_loss.outcome, NoticeOutcome::LossAfterWin);
        assert_eq!(late_loss.status(), StatusCode::CONFLICT);
        // Loss then win: released, then charged after the release.
        assert_eq!(
            outcome(notice(NoticeKind::Loss, "r=b")).await.outcome,
            NoticeOutcome::Released
        );
        let after = outcome(notice(NoticeKind::Win, "r=b&price=0.5")).await;
        assert_eq!(
            (after.outcome, after.charged),
            (NoticeOutcome::ChargedAfterRelease, Nanos(500_000))
        );
        // The winner's own loss URL ("bid won") releases nothing.
        assert_eq!(
            outcome(notice(NoticeKind::Loss, "r=w&loss=0"))
                .await
                .outcome,
            NoticeOutcome::Recorded
        );
        let b = ledger.balances(&["c".to_owned()]).await.unwrap_or_default();
        assert_eq!(
            b.first().map(|b| (b.spent, b.reserved)),
            Some((Nanos(2_000_000), Nanos(2_000_000)))
        );
    }

    #[tokio::test]
    async fn billing_mode_charges_on_the_bill_only() {
        let ledger = ledger_with(&["a"]).await;
        let win = notice(NoticeKind::Win, "r=a&price=2.5");
        assert_eq!(
            checked_settle(&ledger, ChargeOn::Bill, &win).await.outcome,
            NoticeOutcome::Recorded
        );
        // Above the reserved amount (CPM 2): refused, the reservation stays open.
        let forged = notice(NoticeKind::Bill, "r=a&price=2.5");
        assert_eq!(
            checked_settle(&ledger, ChargeOn::Bill, &forged)
                .await
                .outcome,
            NoticeOutcome::AbovePrice
        );
        let bill = notice(NoticeKind::Bill, "r=a&price=2");
        let s = checked_settle(&ledger, ChargeOn::Bill, &bill).await;
        assert_eq!(
            (s.outcome, s.charged),
            (NoticeOutcome::Charged, Nanos(2_000_000))
        );
    }

    #[tokio::test]
    async fn a_second_charge_at_another_price_is_a_conflict_not_a_duplicate() {
        let ledger = ledger_with(&["a"]).await;
        let first = checked_settle(
            &ledger,
            ChargeOn::Win,
            &notice(NoticeKind::Bill, "r=a&price=0"),
        )
        .await;
        assert_eq!(
            (first.outcome, first.charged),
            (NoticeOutcome::Charged, Nanos(0))
        );
        let real = checked_settle(
            &ledger,
            ChargeOn::Win,
            &notice(NoticeKind::Win, "r=a&price=1.2"),
        )
        .await;
        assert_eq!(
            (real.outcome, real.charged, real.earlier),
            (NoticeOutcome::Conflict, Nanos::ZERO, Some(Nanos(0)))
        );
        assert_eq!(real.status(), StatusCode::CONFLICT);
        assert_eq!(real.outcome.label(), "conflict");
        // The same price again is a plain duplicate.
        let again = checked_settle(
            &ledger,
            ChargeOn::Win,
            &notice(NoticeKind::Win, "r=a&price=0"),
        )
        .await;
        assert_eq!(again.outcome, NoticeOutcome::Duplicate);
    }

    #[test]
    fn a_sealed_price_is_checked_against_the_signed_auction_imp_and_bid() {
        let keys = keys();
        let shared = price_token::PriceKey::new(&[9; 32]);
        let prices = PriceKeys::new(vec![shared.clone()], true);
        let checks = Checks {
            keys: Some(&keys),
            prices: &prices,
            currency: "USD",
        };
        let urls = notice_urls(Some(&keys), &bid());
        let bound = price_token::Binding {
            auction: "gavel-1 2a",
            imp: "imp 1",
            bid: "n1-2a",
            currency: "USD",
        };
        let token = shared.seal(Price::from_micros(1_100_000), &bound, 5_000);
        let win = received(NoticeKind::Win, &urls.nurl, &token);
        assert_eq!(
            check(&checks, &win, NOW),
            Ok(Some(Price::from_micros(1_100_000)))
        );
        // Plain prices are refused when a token is required, whatever their value.
        for price in ["0", "1.1", "2"] {
            let plain = received(NoticeKind::Bill, &urls.burl, price);
            assert_eq!(
                check(&checks, &plain, NOW),
                Err(Refusal::Price(PriceRefusal::Cleartext)),
                "{price}"
            );
        }
        // A token made for another bid of the same auction does not move to this one.
        let other = shared.seal(
            Price::from_micros(1),
            &price_token::Binding {
                bid: "n1-2b",
                ..bound
            },
            5_000,
        );
        let moved = received(NoticeKind::Win, &urls.nurl, &other);
        assert_eq!(
            check(&checks, &moved, NOW),
            Err(Refusal::Price(PriceRefusal::Token(
                price_token::TokenError::Forged
            )))
        );
        // A token above the bid is refused like a plain one (the exchange never makes one).
        let dear = shared.seal(Price::from_micros(2_000_001), &bound, 5_000);
        let above = received(NoticeKind::Win, &urls.nurl, &dear);
        assert_eq!(check(&checks, &above, NOW), Err(Refusal::AboveBid));
        assert_eq!(
            parse(
                NoticeKind::Win,
                &format!("r=a&price=gp1.{}", "1".repeat(100))
            ),
            Err(BadNotice::Price)
        );
    }
}
