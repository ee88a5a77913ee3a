//! Win, billing and loss notices: the URLs the bidder puts in its bids and what each does to
//! the ledger when it comes back.
//!
//! A bid's notice URLs carry its reservation id (`r`), campaign (`c`), imp (`i`), the highest
//! price the notice may charge (`x`, the bid's CPM in micros), an expiry (`e`, Unix seconds) and
//! a token over all of them (`t`, see [`crate::token`]); win and billing notices also carry
//! `price=${AUCTION_PRICE}`, which the exchange replaces with the clearing CPM, read as an exact
//! decimal and charged in nanos (one impression at CPM p micros costs p nanos: nothing is
//! rounded). A notice whose token is missing, wrong or expired, or whose price is above `x`, is
//! refused with 403 before the ledger sees it.
//!
//! What each notice does, in any order and however often it is delivered:
//!
//! | notice | reservation open | already charged | released or expired |
//! | --- | --- | --- | --- |
//! | win or bill (charging) | charged | 200, nothing more (duplicate) | charged, counted `charged_after_release` |
//! | loss | released | 409, the charge stands | 200, nothing |
//! | loss with `loss=0` ("bid won") | nothing (recorded) | nothing | nothing |

use http::StatusCode;
use ledger::{CommitOutcome, ReleaseOutcome, SettleError};
use openrtb::Price;
use openrtb::query::{parse_cpm, query_pairs};
use pacing::{Nanos, Timestamp};

use crate::config::ChargeOn;
use crate::metrics::{NoticeKind, NoticeOutcome, NoticeRefusal};
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
    pub reservation: &'a str,
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
        "r={}&c={}&i={}&x={}&e={}",
        bid.reservation,
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
    pub campaign: Option<String>,
    pub imp: Option<String>,
    /// `x`: the highest price this notice may charge.
    pub max_price: Option<Price>,
    /// `e`: Unix seconds.
    pub expires_at_s: Option<u64>,
    /// `t`: the token.
    pub token: Option<String>,
    /// Clearing CPM; required for win and billing notices.
    pub price: Option<Price>,
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
    #[error("c, i: longer than {MAX_ID_BYTES} bytes")]
    Id,
    #[error("price: missing or not a decimal CPM (was ${{AUCTION_PRICE}} replaced?)")]
    Price,
}

/// Why a well-formed notice was refused (answered 403): nothing changes in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Token(TokenError),
    #[error("price is above the bid")]
    AboveBid,
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
        NoticeKind::Win | NoticeKind::Bill => {
            Some(get("price").and_then(parse_cpm).ok_or(BadNotice::Price)?)
        }
    };
    Ok(Notice {
        kind,
        reservation: reservation.to_owned(),
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

/// Checks a notice before it may touch the ledger: its token (when `keys` are given) and its
/// price against the bid's. Without keys (signing off) a present `x` still caps the price.
pub fn check(keys: Option<&NoticeKeys>, notice: &Notice, now: Timestamp) -> Result<(), Refusal> {
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
        };
        keys.verify(&claims, token, now).map_err(Refusal::Token)?;
    }
    if let (Some(price), Some(max)) = (notice.price, notice.max_price)
        && price > max
    {
        return Err(Refusal::AboveBid);
    }
    Ok(())
}

/// What settling a notice did, for the metric, the answer's status and the campaign's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub outcome: NoticeOutcome,
    /// Newly charged (zero for duplicates and non-charging notices).
    pub charged: Nanos,
}

impl Settled {
    fn of(outcome: NoticeOutcome) -> Settled {
        Settled {
            outcome,
            charged: Nanos::ZERO,
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
            NoticeOutcome::AbovePrice | NoticeOutcome::LossAfterWin => StatusCode::CONFLICT,
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

/// Applies a checked notice to the ledger. With `charge_on = win` both the win and the billing
/// notice commit (whichever comes first charges, the other is a duplicate); with `bill` only
/// billing does, and a win is only recorded.
pub async fn settle(ledger: &Ledger, charge_on: ChargeOn, notice: &Notice) -> Settled {
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
    let price = Nanos::of_impression(notice.price.unwrap_or_default());
    match ledger
        .commit(&notice.reservation, notice.campaign.as_deref(), price)
        .await
    {
        Ok(CommitOutcome::Charged(n)) => Settled {
            outcome: NoticeOutcome::Charged,
            charged: n,
        },
        Ok(CommitOutcome::ChargedAfterRelease(n)) => Settled {
            outcome: NoticeOutcome::ChargedAfterRelease,
            charged: n,
        },
        Ok(CommitOutcome::AlreadyCommitted(_)) => Settled::of(NoticeOutcome::Duplicate),
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
            campaign: "summer sale/1",
            imp: "imp 1",
            max_price: Price::from_micros(2_000_000),
            expires_at_s: 2_000,
        }
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
        assert_eq!(n.price, Some(Price::from_micros(1_234_567)));
        assert_eq!(check(Some(&keys), &n, NOW), Ok(()));
        let loss = received(NoticeKind::Loss, &urls.lurl, "");
        assert_eq!(loss.loss_reason, Some(102));
        assert_eq!(check(Some(&keys), &loss, NOW), Ok(()));
        assert!(urls.burl.contains("/notice/bill?"));
        // Unsigned URLs carry no token.
        assert!(!notice_urls(None, &bid()).nurl.contains("&t="));
    }

    #[test]
    fn forged_replayed_elsewhere_over_priced_and_expired_notices_are_refused() {
        let keys = keys();
        let urls = notice_urls(Some(&keys), &bid());
        let win = received(NoticeKind::Win, &urls.nurl, "1.5");
        let refused = |n: &Notice, now| check(Some(&keys), n, now).err();
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
            price: Some(Price::from_micros(9_000_000)),
            ..win.clone()
        };
        assert_eq!(
            refused(&raised, NOW),
            Some(Refusal::Token(TokenError::BadSignature))
        );
        let above = Notice {
            price: Some(Price::from_micros(2_000_001)),
            ..win.clone()
        };
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
        assert_eq!(check(None, &bare, NOW), Ok(()));
        assert_eq!(check(None, &above, NOW), Err(Refusal::AboveBid));
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
        let limits = pacing::Limits {
            total: Nanos::from_units(1.0).unwrap_or_default(),
            daily: None,
        };
        let _ = ledger.set_campaigns(&[("c".to_owned(), limits)]).await;
        let far = std::time::Instant::now() + std::time::Duration::from_secs(1);
        for id in ids {
            assert_eq!(ledger.reserve(id, "c", Nanos(2_000_000), far).await, Ok(()));
        }
        ledger
    }

    fn notice(kind: NoticeKind, query: &str) -> Notice {
        parse(kind, query).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test]
    async fn a_win_and_a_loss_in_either_order_charge_once() {
        let ledger = ledger_with(&["a", "b", "w"]).await;
        let outcome = |n: Notice| {
            let ledger = &ledger;
            async move { settle(ledger, ChargeOn::Win, &n).await }
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
            settle(&ledger, ChargeOn::Bill, &win).await.outcome,
            NoticeOutcome::Recorded
        );
        // Above the reserved amount (CPM 2): refused, the reservation stays open.
        let forged = notice(NoticeKind::Bill, "r=a&price=2.5");
        assert_eq!(
            settle(&ledger, ChargeOn::Bill, &forged).await.outcome,
            NoticeOutcome::AbovePrice
        );
        let bill = notice(NoticeKind::Bill, "r=a&price=2");
        let s = settle(&ledger, ChargeOn::Bill, &bill).await;
        assert_eq!(
            (s.outcome, s.charged),
            (NoticeOutcome::Charged, Nanos(2_000_000))
        );
    }
}
