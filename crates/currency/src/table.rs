//! [`Rates`]: one table of exchange rates, read from Prebid's currency file or from a
//! request's own rates, checked, and kept ready for lookups that allocate nothing.
//!
//! Each listed rate `from -> to` says how many `to` one `from` buys. A pair listed in one
//! direction serves both (the other is its exact inverse). A pair listed in both directions
//! keeps, for each, the lower of its own rate and the inverse of the other's: when the two
//! agree nothing changes, and when they disagree (0.9 one way, 1.2 back) neither direction
//! can be used to gain on a round trip. A pair not listed at all is converted through one
//! intermediate: the first currency, in alphabetical order, with a rate to both.

use crate::code::{Currency, shown};
use crate::date;
use crate::decimal::RateError;
use crate::document::{self, Cap, Caps, ReadError, Row};
use crate::rate::{Rate, Ratio};

/// Largest document read, in bytes. Prebid's file is about 5 KiB.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Most currencies one table names (ISO 4217 lists about 180).
pub const MAX_CURRENCIES: usize = 256;
/// Most rates one table lists (Prebid's file lists about a hundred: three sources, ~33
/// targets each).
pub const MAX_RATES: usize = 4096;
/// Longest part of a JSON error message repeated in [`RatesError::Json`].
const SHOWN_JSON_ERROR_CHARS: usize = 200;

/// Why a rate table was refused. Every rule names the field, currency or pair at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RatesError {
    #[error("rate table of {size} bytes is over the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("rate table is not JSON of the expected shape: {0}")]
    Json(String),
    #[error("rate table gives `{field}` twice")]
    DuplicateField { field: &'static str },
    #[error("currency file has no `conversions` object")]
    MissingConversions,
    #[error("`{field}` is not a date as the currency file writes it: {value:?}")]
    BadDate { field: &'static str, value: String },
    #[error("currency code {code:?}{} is not three upper-case ASCII letters", place(.within))]
    BadCode {
        code: String,
        /// The source whose object named it, for a target.
        within: Option<Currency>,
    },
    #[error("currency {code} is listed twice as a source of rates")]
    DuplicateSource { code: Currency },
    #[error("rate {from} -> {to} is listed twice")]
    DuplicateRate { from: Currency, to: Currency },
    #[error("rate {from} -> {to} is refused: {problem}")]
    BadRate {
        from: Currency,
        to: Currency,
        problem: RateError,
    },
    #[error("rate {code} -> {code} must be 1")]
    SelfRate { code: Currency },
    #[error("rate table names more than {limit} currencies")]
    TooManyCurrencies { limit: usize },
    #[error("rate table lists more than {limit} rates")]
    TooManyRates { limit: usize },
}

fn place(within: &Option<Currency>) -> String {
    within.map_or(String::new(), |from| format!(" (a target of {from})"))
}

impl RatesError {
    /// A short fixed name of the rule broken, for a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            RatesError::TooLarge { .. } => "too_large",
            RatesError::Json(_) => "json",
            RatesError::DuplicateField { .. } => "duplicate_field",
            RatesError::MissingConversions => "missing_conversions",
            RatesError::BadDate { .. } => "bad_date",
            RatesError::BadCode { .. } => "bad_code",
            RatesError::DuplicateSource { .. } => "duplicate_source",
            RatesError::DuplicateRate { .. } => "duplicate_rate",
            RatesError::BadRate { .. } => "bad_rate",
            RatesError::SelfRate { .. } => "self_rate",
            RatesError::TooManyCurrencies { .. } => "too_many_currencies",
            RatesError::TooManyRates { .. } => "too_many_rates",
        }
    }
}

impl From<ReadError> for RatesError {
    fn from(error: ReadError) -> RatesError {
        match error {
            ReadError::Json(e) => {
                RatesError::Json(e.to_string().chars().take(SHOWN_JSON_ERROR_CHARS).collect())
            }
            ReadError::Cap(Cap::Sources) => RatesError::TooManyCurrencies {
                limit: MAX_CURRENCIES,
            },
            ReadError::Cap(Cap::Rates) => RatesError::TooManyRates { limit: MAX_RATES },
            ReadError::DuplicateField(field) => RatesError::DuplicateField { field },
        }
    }
}

const CAPS: Caps = Caps {
    sources: MAX_CURRENCIES,
    rates: MAX_RATES,
};

/// A checked table of exchange rates. Immutable; cheap to share behind an `Arc`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rates {
    /// Every currency the table names, sorted.
    currencies: Vec<Currency>,
    /// `entries[starts[i]..starts[i + 1]]` are the rates out of `currencies[i]`.
    starts: Vec<usize>,
    /// The rate used for each ordered pair, grouped by source, sorted by target.
    entries: Vec<(Currency, Ratio)>,
    as_of: Option<i64>,
}

impl Rates {
    /// Prebid's currency file: `{"dataAsOf": "YYYY-MM-DD", "generatedAt": RFC 3339,
    /// "conversions": {"USD": {"EUR": 0.9213, ...}, ...}}`. Other top-level keys are ignored.
    pub fn from_json(bytes: &[u8]) -> Result<Rates, RatesError> {
        check_size(bytes)?;
        let doc = document::read_document(bytes, CAPS)?;
        let generated_at = date_field(
            doc.generated_at.as_deref(),
            "generatedAt",
            date::parse_date_time,
        )?;
        let data_as_of = date_field(doc.data_as_of.as_deref(), "dataAsOf", date::parse_date)?;
        let rows = doc.conversions.ok_or(RatesError::MissingConversions)?;
        let mut rates = Rates::from_rows(&rows)?;
        rates.as_of = generated_at.or(data_as_of);
        Ok(rates)
    }

    /// A request's own rates (`ext.prebid.currency.rates`): the `conversions` object alone.
    pub fn from_conversions_json(bytes: &[u8]) -> Result<Rates, RatesError> {
        check_size(bytes)?;
        let rows = document::read_conversions(bytes, CAPS)?;
        Rates::from_rows(&rows)
    }

    /// When the rates were made, in Unix seconds: `generatedAt`, else `dataAsOf` at midnight
    /// UTC, else (a request's rates, or a file with neither) `None`.
    pub fn as_of(&self) -> Option<i64> {
        self.as_of
    }

    /// Every currency the table names, in alphabetical order.
    pub fn currencies(&self) -> &[Currency] {
        &self.currencies
    }

    /// Whether the table has no rate at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many `to` one `from` buys by this table: one for the same currency; the pair's own
    /// rate (see the module docs for a pair listed both ways); else through the first
    /// currency, alphabetically, with a rate to both; else `None`. `rate(a, b)` is `Some`
    /// exactly when `rate(b, a)` is, through the same intermediate.
    pub fn rate(&self, from: Currency, to: Currency) -> Option<Rate> {
        if from == to {
            return Some(Rate::ONE);
        }
        if let Some(direct) = self.direct(from, to) {
            return Some(Rate::from(direct));
        }
        let (out_of_from, out_of_to) = (self.row(from), self.row(to));
        // Both rows are sorted by target: walk them together to the first shared one.
        let (mut i, mut j) = (0, 0);
        while let (Some(&(a, first)), Some(&(b, _))) = (out_of_from.get(i), out_of_to.get(j)) {
            match a.cmp(&b) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                // `to -> a` is listed, so `a -> to` is too: every pair serves both ways.
                std::cmp::Ordering::Equal => {
                    return self
                        .direct(a, to)
                        .map(|second| Rate::through(first, second));
                }
            }
        }
        None
    }

    fn row(&self, from: Currency) -> &[(Currency, Ratio)] {
        let Ok(i) = self.currencies.binary_search(&from) else {
            return &[];
        };
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&start), Some(&end)) => self.entries.get(start..end).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn direct(&self, from: Currency, to: Currency) -> Option<Ratio> {
        let row = self.row(from);
        let i = row.binary_search_by_key(&to, |&(code, _)| code).ok()?;
        row.get(i).map(|&(_, ratio)| ratio)
    }

    /// Checks every code and rate, in document order, then duplicates and counts.
    fn from_rows(rows: &[Row<'_>]) -> Result<Rates, RatesError> {
        let mut sources = Vec::with_capacity(rows.len());
        let mut listed = Vec::new();
        for row in rows {
            let from = Currency::parse(&row.from).map_err(|_| RatesError::BadCode {
                code: shown(&row.from),
                within: None,
            })?;
            sources.push(from);
            for (to, raw) in &row.rates {
                let to = Currency::parse(to).map_err(|_| RatesError::BadCode {
                    code: shown(to),
                    within: Some(from),
                })?;
                let ratio = Ratio::parse(raw.get()).map_err(|problem| RatesError::BadRate {
                    from,
                    to,
                    problem,
                })?;
                if from == to && !ratio.is_one() {
                    return Err(RatesError::SelfRate { code: from });
                }
                listed.push((from, to, ratio));
            }
        }
        sources.sort_unstable();
        if let Some(code) = sources.windows(2).find_map(|w| match *w {
            [a, b] if a == b => Some(a),
            _ => None,
        }) {
            return Err(RatesError::DuplicateSource { code });
        }
        listed.sort_unstable_by_key(|&(from, to, _)| (from, to));
        if let Some((from, to)) = listed.windows(2).find_map(|w| match *w {
            [(a, b, _), (c, d, _)] if (a, b) == (c, d) => Some((a, b)),
            _ => None,
        }) {
            return Err(RatesError::DuplicateRate { from, to });
        }
        let mut currencies: Vec<Currency> = listed
            .iter()
            .flat_map(|&(from, to, _)| [from, to])
            .chain(sources)
            .collect();
        currencies.sort_unstable();
        currencies.dedup();
        if currencies.len() > MAX_CURRENCIES {
            return Err(RatesError::TooManyCurrencies {
                limit: MAX_CURRENCIES,
            });
        }
        // A currency's rate to itself is always one; the listing was only checked.
        listed.retain(|&(from, to, _)| from != to);
        Ok(Rates::index(currencies, &listed))
    }

    /// The rate used for each ordered pair (the module docs' rule), grouped by source.
    fn index(currencies: Vec<Currency>, listed: &[(Currency, Currency, Ratio)]) -> Rates {
        let find = |from: Currency, to: Currency| {
            listed
                .binary_search_by_key(&(from, to), |&(f, t, _)| (f, t))
                .ok()
                .and_then(|i| listed.get(i))
                .map(|&(_, _, ratio)| ratio)
        };
        let mut pairs = Vec::with_capacity(listed.len() * 2);
        for &(from, to, ratio) in listed {
            match find(to, from) {
                // The other direction is listed: it adds its own entry in its turn.
                Some(back) => pairs.push((from, to, ratio.min(back.inverse()))),
                None => {
                    pairs.push((from, to, ratio));
                    pairs.push((to, from, ratio.inverse()));
                }
            }
        }
        pairs.sort_unstable_by_key(|&(from, to, _)| (from, to));
        let mut starts = Vec::with_capacity(currencies.len() + 1);
        let mut next = 0;
        for &code in &currencies {
            starts.push(next);
            next += pairs
                .get(next..)
                .map_or(0, |rest| rest.iter().take_while(|p| p.0 == code).count());
        }
        starts.push(next);
        Rates {
            currencies,
            starts,
            entries: pairs.into_iter().map(|(_, to, r)| (to, r)).collect(),
            as_of: None,
        }
    }
}

fn check_size(bytes: &[u8]) -> Result<(), RatesError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(RatesError::TooLarge {
            size: bytes.len(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    Ok(())
}

/// A date field read by `parse`, when present; present and unreadable is refused.
fn date_field(
    text: Option<&str>,
    field: &'static str,
    parse: fn(&str) -> Option<i64>,
) -> Result<Option<i64>, RatesError> {
    let Some(text) = text else { return Ok(None) };
    parse(text).map(Some).ok_or_else(|| RatesError::BadDate {
        field,
        value: shown(text),
    })
}

#[cfg(test)]
mod tests;
