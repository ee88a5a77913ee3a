//! Currencies in the auction: floors into the auction currency when a request arrives and into
//! each bidder's currency before it is called (rounded up: a floor never drops), bids into the
//! auction currency (rounded down: a bid never grows) and a winner's clearing price back into
//! its bid's currency for its notices (rounded down: never charged more than it cleared at).
//! Pure: the rate tables in effect are passed in.

use currency::{Converter, Currency, Round};
use openrtb::{BidRequest, Price};

/// The rate tables one auction converts with, in order of preference (a trusted seller's own
/// rates, then the exchange's), and whether a table was left out for being too old.
#[derive(Debug, Clone, Copy)]
pub struct Rates<'a> {
    pub converter: &'a Converter<'a>,
    /// A table exists but is older than `currency.max_age_s`: a conversion that finds no
    /// rate says `stale_rates`, not `no_rate`.
    pub stale: bool,
}

/// Why an amount could not be converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoConversion {
    /// No rate between the two currencies in any table.
    NoRate,
    /// Only tables older than their maximum age had one.
    StaleRates,
    /// A currency code that is not ISO-4217 shaped.
    BadCurrency,
    /// The result would not fit.
    Overflow,
}

impl NoConversion {
    /// The rejection label of a bid that cannot be converted.
    pub fn label(self) -> &'static str {
        match self {
            NoConversion::NoRate => "no_rate",
            NoConversion::StaleRates => "stale_rates",
            NoConversion::BadCurrency => "bad_currency",
            NoConversion::Overflow => "unconvertible_price",
        }
    }
}

impl Rates<'_> {
    /// `price` in `from`, in `to`, rounded as `round` says. The same currency is the identity.
    pub fn convert(
        &self,
        price: Price,
        from: &str,
        to: &str,
        round: Round,
    ) -> Result<Price, NoConversion> {
        if from == to {
            return Ok(price);
        }
        let (Ok(from), Ok(to)) = (Currency::parse(from), Currency::parse(to)) else {
            return Err(NoConversion::BadCurrency);
        };
        match self.converter.convert(price.micros(), from, to, round) {
            Ok(micros) => Ok(Price::from_micros(micros)),
            Err(currency::ConvertError::NoRate { .. }) if self.stale => {
                Err(NoConversion::StaleRates)
            }
            Err(currency::ConvertError::NoRate { .. }) => Err(NoConversion::NoRate),
            Err(_) => Err(NoConversion::Overflow),
        }
    }
}

/// Rewrites every imp and deal floor of `request` into `to` (rounded up) and names `to` as
/// their currency and as the only bid currency (`cur`). A floor absent stays absent; a floor
/// whose currency is absent is in USD, as the spec says. On error the request is left as it
/// was, and the error says why.
pub fn floors_to(
    request: &mut BidRequest,
    to: &str,
    rates: &Rates<'_>,
) -> Result<(), NoConversion> {
    // Convert everything first, then write: a failure half-way leaves nothing half done.
    let mut converted = Vec::new();
    for imp in &request.imp {
        let from = imp.bidfloorcur.as_deref().unwrap_or("USD");
        converted.push(match imp.bidfloor {
            Some(f) => Some(rates.convert(f, from, to, Round::Up)?),
            None => None,
        });
        for deal in imp.pmp.iter().flat_map(|p| p.deals.iter().flatten()) {
            let from = deal.bidfloorcur.as_deref().unwrap_or("USD");
            converted.push(match deal.bidfloor {
                Some(f) => Some(rates.convert(f, from, to, Round::Up)?),
                None => None,
            });
        }
    }
    let mut next = converted.into_iter();
    for imp in &mut request.imp {
        let floor = next.next().flatten();
        if imp.bidfloor.is_some() || imp.bidfloorcur.is_some() {
            imp.bidfloor = floor;
            imp.bidfloorcur = floor.map(|_| to.to_owned());
        }
        for deal in imp
            .pmp
            .iter_mut()
            .flat_map(|p| p.deals.iter_mut().flatten())
        {
            let floor = next.next().flatten();
            if deal.bidfloor.is_some() || deal.bidfloorcur.is_some() {
                deal.bidfloor = floor;
                deal.bidfloorcur = floor.map(|_| to.to_owned());
            }
        }
    }
    Ok(())
}

/// Whether any floor of `request` is in another currency than `to`.
pub fn floors_outside(request: &BidRequest, to: &str) -> bool {
    let other = |floor: Option<Price>, cur: Option<&str>| {
        floor.is_some_and(|f| f.is_positive()) && cur.unwrap_or("USD") != to
    };
    request.imp.iter().any(|imp| {
        other(imp.bidfloor, imp.bidfloorcur.as_deref())
            || imp
                .pmp
                .iter()
                .flat_map(|p| p.deals.iter().flatten())
                .any(|d| other(d.bidfloor, d.bidfloorcur.as_deref()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> currency::Rates {
        currency::Rates::from_json(br#"{"conversions":{"USD":{"EUR":0.9213}}}"#).unwrap()
    }

    fn request(body: &str) -> BidRequest {
        BidRequest::from_slice(body.as_bytes()).unwrap()
    }

    #[test]
    fn floors_round_up_bids_round_down() {
        let t = table();
        let tables = [&t];
        let converter = Converter::new(&tables);
        let rates = Rates {
            converter: &converter,
            stale: false,
        };
        let micros = |m| Price::from_micros(m);
        // 1.000001 USD = 0.9213009213 EUR: a floor becomes 0.921301, a bid 0.921300.
        assert_eq!(
            rates.convert(micros(1_000_001), "USD", "EUR", Round::Up),
            Ok(micros(921_301))
        );
        assert_eq!(
            rates.convert(micros(1_000_001), "USD", "EUR", Round::Down),
            Ok(micros(921_300))
        );
        assert_eq!(
            rates.convert(micros(5), "USD", "USD", Round::Up),
            Ok(micros(5))
        );
        assert_eq!(
            rates.convert(micros(5), "USD", "JPY", Round::Up),
            Err(NoConversion::NoRate)
        );
        assert_eq!(
            rates.convert(micros(5), "USD", "usd", Round::Up),
            Err(NoConversion::BadCurrency)
        );
        let stale = Rates {
            converter: &converter,
            stale: true,
        };
        assert_eq!(
            stale.convert(micros(5), "USD", "JPY", Round::Up),
            Err(NoConversion::StaleRates)
        );
    }

    #[test]
    fn every_floor_moves_to_the_currency_or_none_does() {
        let t = table();
        let tables = [&t];
        let converter = Converter::new(&tables);
        let rates = Rates {
            converter: &converter,
            stale: false,
        };
        let mut r = request(
            r#"{"id":"r","imp":[{"id":"1","bidfloor":1.0,"banner":{"w":1,"h":1},
                "pmp":{"deals":[{"id":"d","bidfloor":2.0,"bidfloorcur":"EUR"}]}},
                {"id":"2","banner":{"w":1,"h":1}}]}"#,
        );
        assert!(floors_outside(&r, "EUR"));
        floors_to(&mut r, "EUR", &rates).unwrap();
        assert!(!floors_outside(&r, "EUR"));
        assert_eq!(r.imp[0].bidfloor, Some(Price::from_micros(921_300)));
        assert_eq!(r.imp[0].bidfloorcur.as_deref(), Some("EUR"));
        let deal = &r.imp[0].pmp.as_ref().unwrap().deals.as_ref().unwrap()[0];
        assert_eq!(
            deal.bidfloor,
            Some(Price::from_micros(2_000_000)),
            "already EUR"
        );
        assert_eq!(r.imp[1].bidfloor, None, "no floor stays no floor");

        let mut r = request(
            r#"{"id":"r","imp":[{"id":"1","bidfloor":1.0,"banner":{"w":1,"h":1}},
                {"id":"2","bidfloor":1.0,"bidfloorcur":"GBP","banner":{"w":1,"h":1}}]}"#,
        );
        let before = r.clone();
        assert_eq!(floors_to(&mut r, "EUR", &rates), Err(NoConversion::NoRate));
        assert_eq!(r, before, "nothing half done");
    }
}
