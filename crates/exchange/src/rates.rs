//! The exchange rates in effect: the table of `currency.rates_file`, the last good answer of
//! `currency.rates_url` (fetched every `refresh_s` by [`follow_feed`]), both as the last reload
//! set them ([`RateBook::apply`]), and
//! a trusted seller's own rates in its request. An auction takes a [`Snapshot`] once and
//! converts with it; a table older than `max_age_s` is left out of it, and a conversion that
//! only it could have made says `stale_rates`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use currency::{Converter, Rates};
use openrtb::BidRequest;

use crate::currency_config::CurrencySection;
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

/// Where and how often `currency.rates_url` is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Feed {
    pub(crate) url: String,
    pub(crate) every: Duration,
}

/// The exchange's own tables.
#[derive(Debug)]
pub(crate) struct RateBook {
    pub(crate) file: ArcSwapOption<Dated>,
    pub(crate) url: ArcSwapOption<Dated>,
    pub(crate) max_age_s: AtomicU64,
    /// Fetches of `rates_url` that failed (the last good table stays).
    pub(crate) fetch_failures: AtomicU64,
    /// What [`follow_feed`] fetches: `None` fetches nothing.
    feed: tokio::sync::watch::Sender<Option<Feed>>,
}

impl RateBook {
    /// A book with no tables and no feed, until [`RateBook::apply`].
    pub(crate) fn new() -> RateBook {
        RateBook {
            file: ArcSwapOption::empty(),
            url: ArcSwapOption::empty(),
            max_age_s: AtomicU64::new(0),
            fetch_failures: AtomicU64::new(0),
            feed: tokio::sync::watch::Sender::new(None),
        }
    }

    /// `[currency]` as a load read it: the file's table, the maximum age, and the feed (a new
    /// or changed URL is fetched at once, without the old URL's table).
    pub(crate) fn apply(&self, section: &CurrencySection, file: Option<Arc<Rates>>) {
        self.file.store(file.map(|r| Arc::new(Dated::now(r))));
        self.max_age_s.store(section.max_age_s, Relaxed);
        let feed = section.rates_url.as_ref().map(|url| Feed {
            url: url.clone(),
            every: Duration::from_secs(section.refresh_s),
        });
        self.feed.send_if_modified(|now| {
            if *now == feed {
                return false;
            }
            if now.as_ref().map(|f| &f.url) != feed.as_ref().map(|f| &f.url) {
                self.url.store(None);
            }
            *now = feed;
            true
        });
    }

    /// What [`follow_feed`] follows.
    pub(crate) fn feed(&self) -> tokio::sync::watch::Receiver<Option<Feed>> {
        self.feed.subscribe()
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

/// Fetches the book's feed every `refresh_s` while the book lives, keeping the last good
/// table; a reload that changes the URL or the period takes effect at once, one that removes
/// the URL stops the fetches.
pub(crate) async fn follow_feed(
    book: std::sync::Weak<RateBook>,
    client: Arc<upstream::notice_client::NoticeClient>,
    mut feed: tokio::sync::watch::Receiver<Option<Feed>>,
) {
    let tls = upstream::tls::ClientTls::system().ok();
    loop {
        let current = feed.borrow_and_update().clone();
        if let Some(Feed { url, every }) = current {
            let Some(strong) = book.upgrade() else { return };
            match fetch(&client, tls.as_ref(), &url).await {
                // Unless a reload moved the feed elsewhere meanwhile.
                Ok(rates) if feed.has_changed().is_ok_and(|moved| !moved) => {
                    strong
                        .url
                        .store(Some(Arc::new(Dated::now(Arc::new(rates)))));
                }
                Ok(_) => {}
                Err(e) => {
                    strong.fetch_failures.fetch_add(1, Relaxed);
                    tracing::warn!(url = %url, error = %e, "fetching currency.rates_url failed; the last good rates stay");
                }
            }
            drop(strong);
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                changed = feed.changed() => if changed.is_err() { return },
            }
        } else if feed.changed().await.is_err() {
            // The book is gone.
            return;
        }
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
