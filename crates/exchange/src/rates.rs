//! The exchange rates in effect: the table of `currency.rates_file` (replaced by reloads), the
//! last good answer of `currency.rates_url` (fetched every `refresh_s` by [`follow_url`]), and
//! a trusted seller's own rates in its request. An auction takes a [`Snapshot`] once and
//! converts with it; a table older than `max_age_s` is left out of it, and a conversion that
//! only it could have made says `stale_rates`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use currency::{Converter, Rates};
use openrtb::BidRequest;

use crate::money;

/// A table and the time it speaks for (its `generatedAt`/`dataAsOf`, else when it was read).
#[derive(Debug)]
pub(crate) struct Dated {
    pub(crate) rates: Arc<Rates>,
    pub(crate) as_of_s: i64,
}

impl Dated {
    pub(crate) fn now(rates: Arc<Rates>) -> Dated {
        let as_of_s = rates.as_of().unwrap_or_else(now_s);
        Dated { rates, as_of_s }
    }
}

/// The exchange's own tables.
#[derive(Debug)]
pub(crate) struct RateBook {
    pub(crate) file: ArcSwapOption<Dated>,
    pub(crate) url: ArcSwapOption<Dated>,
    pub(crate) max_age_s: AtomicU64,
    /// Fetches of `rates_url` that failed (the last good table stays).
    pub(crate) fetch_failures: AtomicU64,
}

impl RateBook {
    pub(crate) fn new(file: Option<Arc<Rates>>, max_age_s: u64) -> RateBook {
        RateBook {
            file: ArcSwapOption::from(file.map(|r| Arc::new(Dated::now(r)))),
            url: ArcSwapOption::empty(),
            max_age_s: AtomicU64::new(max_age_s),
            fetch_failures: AtomicU64::new(0),
        }
    }

    /// The tables one auction converts with: the request's own rates when its seller is
    /// trusted with them, then the URL's, then the file's, each only while fresh.
    pub(crate) fn snapshot(&self, request: &BidRequest, trusted: bool) -> Snapshot {
        let max_age = i64::try_from(self.max_age_s.load(Relaxed)).unwrap_or(i64::MAX);
        let now = now_s();
        // Empty until a table is pushed: an exchange without rates allocates nothing here.
        let mut tables = Vec::new();
        if trusted && let Some(own) = request_rates(request) {
            tables.push(Arc::new(own));
        }
        let mut stale = false;
        for dated in [self.url.load_full(), self.file.load_full()]
            .into_iter()
            .flatten()
        {
            if now.saturating_sub(dated.as_of_s) <= max_age {
                tables.push(dated.rates.clone());
            } else {
                stale = true;
            }
        }
        Snapshot { tables, stale }
    }
}

/// The rate tables of one auction.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    tables: Vec<Arc<Rates>>,
    stale: bool,
}

impl Snapshot {
    /// Runs `f` with a converter over these tables.
    pub(crate) fn with<T>(&self, f: impl FnOnce(money::Rates<'_>) -> T) -> T {
        let refs: Vec<&Rates> = self.tables.iter().map(|t| &**t).collect();
        let converter = Converter::new(&refs);
        f(money::Rates {
            converter: &converter,
            stale: self.stale,
        })
    }
}

/// `ext.prebid.currency.rates` of a request, when it holds a table that parses.
fn request_rates(request: &BidRequest) -> Option<Rates> {
    #[derive(serde::Deserialize)]
    struct Ext<'a> {
        #[serde(borrow)]
        prebid: Option<Prebid<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Prebid<'a> {
        #[serde(borrow)]
        currency: Option<CurrencyExt<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct CurrencyExt<'a> {
        #[serde(borrow)]
        rates: Option<&'a serde_json::value::RawValue>,
    }
    let ext = request.ext.as_ref()?;
    let ext: Ext<'_> = serde_json::from_str(ext.get()).ok()?;
    let raw = ext.prebid?.currency?.rates?;
    Rates::from_conversions_json(raw.get().as_bytes()).ok()
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Fetches `url` every `every` into `book.url` until `book` is dropped; a failed fetch or a
/// table that does not parse keeps the last good one, and is logged and counted.
pub(crate) async fn follow_url(
    book: std::sync::Weak<RateBook>,
    client: Arc<upstream::notice_client::NoticeClient>,
    url: String,
    every: Duration,
) {
    let tls = upstream::tls::ClientTls::system().ok();
    loop {
        let Some(strong) = book.upgrade() else { return };
        match fetch(&client, tls.as_ref(), &url).await {
            Ok(rates) => {
                strong
                    .url
                    .store(Some(Arc::new(Dated::now(Arc::new(rates)))));
            }
            Err(e) => {
                strong.fetch_failures.fetch_add(1, Relaxed);
                tracing::warn!(url = %url, error = %e, "fetching currency.rates_url failed; the last good rates stay");
            }
        }
        drop(strong);
        tokio::time::sleep(every).await;
    }
}

async fn fetch(
    client: &upstream::notice_client::NoticeClient,
    tls: Option<&upstream::tls::ClientTls>,
    url: &str,
) -> Result<Rates, String> {
    let endpoint = upstream::endpoint::parse_endpoint(url)?;
    let hosts = upstream::outbound::NoticeHosts::new(&endpoint.host, endpoint.port, &[])?;
    let target = hosts.check(url).map_err(|e| e.label().to_owned())?;
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        client.get(&target, tls, crate::currency_config::MAX_RATES_BYTES),
    )
    .await
    .map_err(|_| "timed out".to_owned())?
    .map_err(|e| e.to_string())?;
    if !answer.status.is_success() {
        return Err(format!("status {}", answer.status));
    }
    Rates::from_json(&answer.body).map_err(|e| e.to_string())
}
