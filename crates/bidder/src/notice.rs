//! Win, billing and loss notices: the URLs the bidder puts in its bids and what each does to
//! the ledger when it comes back.
//!
//! A bid's notice URLs carry its reservation id (`r`), its campaign (`c`) and, for win and
//! billing, `price=${AUCTION_PRICE}`, which the exchange replaces with the clearing CPM. The
//! price is read as an exact decimal (`openrtb::query::parse_cpm`) and charged in nanos: one
//! impression at CPM p micros costs p nanos, so nothing is rounded. The ledger makes every
//! notice idempotent by reservation id: a notice delivered twice charges once.

use http::StatusCode;
use ledger::{CommitOutcome, ReleaseOutcome, SettleError};
use openrtb::Price;
use openrtb::query::{parse_cpm, query_pairs};
use pacing::Nanos;

use crate::config::ChargeOn;
use crate::metrics::{NoticeKind, NoticeOutcome};
use ledger::{Ledger, NoticeError};

/// Longest accepted notice query string.
pub const MAX_QUERY_BYTES: usize = 2048;
/// Longest reservation or campaign id in a notice.
const MAX_ID_BYTES: usize = 128;

/// The notice URLs of one bid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeUrls {
    pub nurl: String,
    pub burl: String,
    pub lurl: String,
}

/// Builds the notice URLs of a bid. Ids are checked at load (campaign ids) or generated
/// (reservation ids) from URL-safe characters, so they go in as they are.
pub fn notice_urls(base: &str, reservation: &str, campaign: &str) -> NoticeUrls {
    let ids = format!("r={reservation}&c={}", encode(campaign));
    NoticeUrls {
        nurl: format!("{base}/notice/win?{ids}&price=${{AUCTION_PRICE}}"),
        burl: format!("{base}/notice/bill?{ids}&price=${{AUCTION_PRICE}}"),
        lurl: format!("{base}/notice/loss?{ids}&loss=${{AUCTION_LOSS}}"),
    }
}

/// Percent-encodes everything but unreserved characters (campaign ids are free text).
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
    /// Clearing CPM; required for win and billing notices.
    pub price: Option<Price>,
}

/// Why a notice was refused (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadNotice {
    #[error("query string exceeds {MAX_QUERY_BYTES} bytes")]
    TooLong,
    #[error("r: missing or not a reservation id")]
    Reservation,
    #[error("c: longer than {MAX_ID_BYTES} bytes")]
    Campaign,
    #[error("price: missing or not a decimal CPM (was ${{AUCTION_PRICE}} replaced?)")]
    Price,
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
    let campaign = match get("c") {
        Some(c) if c.len() > MAX_ID_BYTES => return Err(BadNotice::Campaign),
        c => c.map(str::to_owned),
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
        campaign,
        price,
    })
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
            | NoticeOutcome::Duplicate
            | NoticeOutcome::Released
            | NoticeOutcome::Recorded => StatusCode::OK,
            NoticeOutcome::Unknown => StatusCode::NOT_FOUND,
            NoticeOutcome::Expired => StatusCode::GONE,
            NoticeOutcome::AbovePrice => StatusCode::CONFLICT,
            NoticeOutcome::Invalid => StatusCode::BAD_REQUEST,
            NoticeOutcome::LedgerError => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

fn settle_error(e: NoticeError) -> Settled {
    Settled::of(match e {
        NoticeError::Settle(SettleError::UnknownReservation) => NoticeOutcome::Unknown,
        NoticeError::Settle(SettleError::Expired) => NoticeOutcome::Expired,
        // A win after the loss notice released it: nothing left to charge.
        NoticeError::Settle(SettleError::AlreadyReleased) => NoticeOutcome::Duplicate,
        NoticeError::Settle(SettleError::AboveReservation { .. }) => NoticeOutcome::AbovePrice,
        NoticeError::Settle(SettleError::NegativePrice) => NoticeOutcome::Invalid,
        NoticeError::Unavailable(_) => NoticeOutcome::LedgerError,
    })
}

/// Applies a notice to the ledger. With `charge_on = win` both the win and the billing notice
/// commit (whichever comes first charges, the other is a duplicate); with `bill` only billing
/// does, and a win is only recorded.
pub async fn settle(ledger: &Ledger, charge_on: ChargeOn, notice: &Notice) -> Settled {
    let charges = match notice.kind {
        NoticeKind::Win => charge_on == ChargeOn::Win,
        NoticeKind::Bill => true,
        NoticeKind::Loss => false,
    };
    if notice.kind == NoticeKind::Loss {
        return match ledger.release(&notice.reservation).await {
            Ok(ReleaseOutcome::Released(_)) => Settled::of(NoticeOutcome::Released),
            Ok(ReleaseOutcome::AlreadyReleased | ReleaseOutcome::AlreadyCommitted) => {
                Settled::of(NoticeOutcome::Duplicate)
            }
            Err(e) => settle_error(e),
        };
    }
    if !charges {
        return Settled::of(NoticeOutcome::Recorded);
    }
    let price = Nanos::of_impression(notice.price.unwrap_or_default());
    match ledger.commit(&notice.reservation, price).await {
        Ok(CommitOutcome::Charged(n)) => Settled {
            outcome: NoticeOutcome::Charged,
            charged: n,
        },
        Ok(CommitOutcome::AlreadyCommitted(_)) => Settled::of(NoticeOutcome::Duplicate),
        Err(e) => settle_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_round_trip_through_the_parser() {
        let urls = notice_urls("http://127.0.0.1:9100", "n1-2a", "summer sale/1");
        let replaced = urls.nurl.replace("${AUCTION_PRICE}", "1.234567");
        let query = replaced.split_once('?').map_or("", |(_, q)| q);
        let n = parse(NoticeKind::Win, query).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(n.reservation, "n1-2a");
        assert_eq!(n.campaign.as_deref(), Some("summer sale/1"));
        assert_eq!(n.price, Some(Price::from_micros(1_234_567)));
        assert!(urls.lurl.contains("/notice/loss?r=n1-2a"));
        assert!(urls.burl.contains("/notice/bill?"));
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
        let long = format!("r={}", "a".repeat(MAX_QUERY_BYTES));
        assert_eq!(parse(NoticeKind::Loss, &long), Err(BadNotice::TooLong));
        assert!(parse(NoticeKind::Loss, "r=a&loss=${AUCTION_LOSS}").is_ok());
    }

    #[tokio::test]
    async fn a_duplicated_win_charges_once_and_a_loss_releases() {
        let ledger = Ledger::memory(std::time::Duration::from_secs(60));
        let limits = pacing::Limits {
            total: Nanos::from_units(1.0).unwrap_or_default(),
            daily: None,
        };
        let _ = ledger.set_campaigns(&[("c".to_owned(), limits)]).await;
        let far = std::time::Instant::now() + std::time::Duration::from_secs(1);
        for id in ["a", "b"] {
            assert_eq!(ledger.reserve(id, "c", Nanos(2_000_000), far).await, Ok(()));
        }
        let win = parse(NoticeKind::Win, "r=a&c=c&price=1.5").unwrap_or_else(|e| panic!("{e}"));
        let first = settle(&ledger, ChargeOn::Win, &win).await;
        assert_eq!(first.outcome, NoticeOutcome::Charged);
        assert_eq!(first.charged, Nanos(1_500_000));
        let again = settle(&ledger, ChargeOn::Win, &win).await;
        assert_eq!(again.outcome, NoticeOutcome::Duplicate);
        let bill = parse(NoticeKind::Bill, "r=a&price=1.5").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            settle(&ledger, ChargeOn::Win, &bill).await.outcome,
            NoticeOutcome::Duplicate
        );
        let loss = parse(NoticeKind::Loss, "r=b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            settle(&ledger, ChargeOn::Win, &loss).await.outcome,
            NoticeOutcome::Released
        );
        let above = parse(NoticeKind::Win, "r=b&price=3").unwrap_or_else(|e| panic!("{e}"));
        // Released already: nothing to charge.
        assert_eq!(
            settle(&ledger, ChargeOn::Win, &above).await.outcome,
            NoticeOutcome::Duplicate
        );
        let b = ledger.balances(&["c".to_owned()]).await.unwrap_or_default();
        assert_eq!(
            b.first().map(|b| (b.spent, b.reserved)),
            Some((Nanos(1_500_000), Nanos::ZERO))
        );
    }

    #[tokio::test]
    async fn billing_mode_charges_on_the_bill_only() {
        let ledger = Ledger::memory(std::time::Duration::from_secs(60));
        let limits = pacing::Limits {
            total: Nanos::from_units(1.0).unwrap_or_default(),
            daily: None,
        };
        let _ = ledger.set_campaigns(&[("c".to_owned(), limits)]).await;
        let far = std::time::Instant::now() + std::time::Duration::from_secs(1);
        assert_eq!(
            ledger.reserve("a", "c", Nanos(2_000_000), far).await,
            Ok(())
        );
        let win = parse(NoticeKind::Win, "r=a&price=2.5").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            settle(&ledger, ChargeOn::Bill, &win).await.outcome,
            NoticeOutcome::Recorded
        );
        // Above the reserved amount (CPM 2): refused, the reservation stays open.
        let forged = parse(NoticeKind::Bill, "r=a&price=2.5").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            settle(&ledger, ChargeOn::Bill, &forged).await.outcome,
            NoticeOutcome::AbovePrice
        );
        let bill = parse(NoticeKind::Bill, "r=a&price=2").unwrap_or_else(|e| panic!("{e}"));
        let s = settle(&ledger, ChargeOn::Bill, &bill).await;
        assert_eq!(
            (s.outcome, s.charged),
            (NoticeOutcome::Charged, Nanos(2_000_000))
        );
    }
}
