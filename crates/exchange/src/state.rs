//! The shared state of a running exchange and its handle, [`Exchange`], with the wiring that
//! builds them. Everything an auction, a reload or a background task reads is here; nothing
//! here calls back into them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use admission::{Admission, DeadlinePolicy};
use arc_swap::ArcSwap;
use auction::AuctionConfig;
use http_front::{ConnStats, Door};
use journal::Journal;

use crate::config::{Live, Validated};
use crate::metrics::Metrics;
use crate::notices::{Notifier, QueueSettings};
use crate::rates::RateBook;
use crate::roster::{PoolSettings, Roster};
use crate::running::{LiveSet, Running};
use crate::sellers::Sellers;
use upstream::notice_client::{ClientSettings, NoticeClient};

/// Shared state of a running exchange; immutable but for atomics.
#[derive(Debug)]
pub(crate) struct State {
    /// The sections fixed at start; the live ones are in `roster`, `sellers`, `privacy` and
    /// `rates`, as the last reload left them.
    pub(crate) config: Running,
    pub(crate) policy: DeadlinePolicy,
    pub(crate) auction: AuctionConfig,
    /// The live sections as the last reload applied them (the roster, sellers, privacy and
    /// rates are built from them).
    pub(crate) live: ArcSwap<Live>,
    /// The bidders now.
    pub(crate) roster: ArcSwap<Roster>,
    /// The sellers and their keys now (a reload replaces them: key rotation).
    pub(crate) sellers: ArcSwap<Sellers>,
    /// What a reload builds the roster with: the startup values, which only a restart changes.
    pub(crate) pool_settings: PoolSettings,
    /// Serializes reloads (the watcher and SIGHUP) so two never race to swap.
    pub(crate) reload_lock: tokio::sync::Mutex<()>,
    /// The files the watcher follows: the last good configuration's `watched_files`.
    pub(crate) watched: ArcSwap<Vec<std::path::PathBuf>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) notifier: Notifier,
    pub(crate) notice_client: Arc<NoticeClient>,
    /// The `[cache]` store, when configured.
    pub(crate) markup_cache: Option<crate::markup_cache::MarkupCache>,
    /// Auction requests come in through it.
    pub(crate) door: Door,
    /// Which pages may call the auction endpoint from a browser (`[cors]`).
    pub(crate) cors: http_front::cors::Cors,
    pub(crate) connections: Arc<ConnStats>,
    /// Draining (`/readyz` 503) once the stop signal came.
    pub(crate) readiness: Arc<http_front::Readiness>,
    /// The vendor list and GDPR default now (a reload replaces them).
    pub(crate) privacy: ArcSwap<PrivacyNow>,
    /// The exchange rates now.
    pub(crate) rates: Arc<RateBook>,
    /// Where auction records go (`[records]`); off unless started with one.
    pub(crate) journal: Journal,
    auction_seq: AtomicU64,
    /// Makes auction ids unique across restarts of the same node.
    id_prefix: String,
}

/// What privacy enforcement reads besides the request: replaced as a whole by a reload.
#[derive(Debug)]
pub(crate) struct PrivacyNow {
    /// With it, TCF is enforced.
    pub(crate) gvl: Option<Arc<consent::gvl::VendorList>>,
    pub(crate) gdpr_default: bool,
}

impl PrivacyNow {
    pub(crate) fn of(set: &LiveSet) -> PrivacyNow {
        PrivacyNow {
            gvl: set.gvl.clone(),
            gdpr_default: set.live.privacy.gdpr_default,
        }
    }
}

impl State {
    pub(crate) fn next_auction_id(&self) -> String {
        let n = self.auction_seq.fetch_add(1, Relaxed);
        format!("{}-{n:x}", self.id_prefix)
    }
}

/// A configured exchange, ready to serve.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub(crate) state: Arc<State>,
}

impl Exchange {
    /// Builds pools, starts the notice workers and the admission controller; must run inside a
    /// tokio runtime. The configuration file, if it came from one, is followed once
    /// [`Exchange::watch`] is called.
    pub fn new(config: Validated) -> Exchange {
        Exchange::with_journal(config, Journal::off())
    }

    /// As [`Exchange::new`], writing an auction record per auction and a notice record per
    /// notice to `journal` (started by the caller from `[records]`, which owns its writer
    /// and flushes it at shutdown).
    pub fn with_journal(config: Validated, journal: Journal) -> Exchange {
        let watched = config.watched_files();
        let (running, live) = config.split();
        let c = &running.config;
        let metrics = Arc::new(Metrics::new(Vec::new()));
        let pool_settings = PoolSettings::new(&c.upstream, &c.breaker, metrics.clone());
        let (roster, _) = Roster::build(&live, &pool_settings, &Roster::default(), Instant::now());
        metrics.set_bidders(Arc::new(roster.table()));
        metrics.set_sellers(live.sellers.clone());
        let n = &c.notices;
        let notice_client = Arc::new(NoticeClient::new(ClientSettings {
            allow_private_addresses: n.allow_private_addresses,
            idle_timeout: Duration::from_millis(n.idle_timeout_ms),
            max_idle_per_host: n.max_idle_per_host,
        }));
        let notifier = Notifier::start(
            QueueSettings {
                queue: n.queue,
                workers: n.workers,
                timeout: Duration::from_millis(n.timeout_ms),
                max_attempts: n.max_attempts,
                retry_base: Duration::from_millis(n.retry_base_ms),
                batch_max: n.batch_max,
                batch_linger: Duration::from_millis(n.batch_linger_ms),
            },
            notice_client.clone(),
            journal.clone(),
        );
        let admission = Arc::new(Admission::new(c.admission()));
        tokio::spawn(Admission::run_controller(Arc::downgrade(&admission)));
        let door = Door::new(c.max_body_bytes(), c.front.http.read_timeout(), admission);
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let markup_cache = match (&c.cache, &running.cache_endpoint) {
            (Some(cache), Some(endpoint)) => Some(crate::markup_cache::MarkupCache::new(
                cache,
                endpoint.clone(),
                running.cache_key.as_ref(),
            )),
            _ => None,
        };
        let rates = Arc::new(RateBook::new());
        rates.apply(&live.live.currency, live.rates.clone());
        tokio::spawn(crate::rates::follow_feed(
            Arc::downgrade(&rates),
            notice_client.clone(),
            rates.feed(),
        ));
        let state = State {
            privacy: ArcSwap::from_pointee(PrivacyNow::of(&live)),
            live: ArcSwap::from_pointee(live.live),
            rates,
            journal,
            markup_cache,
            policy: c.rtb.deadline.policy(),
            auction: AuctionConfig {
                second_price_increment: running.second_price_increment,
            },
            id_prefix: format!("{}-{started_ms:x}", c.node()),
            roster: ArcSwap::from_pointee(roster),
            sellers: ArcSwap::new(live.sellers.clone()),
            pool_settings,
            reload_lock: tokio::sync::Mutex::new(()),
            watched: ArcSwap::from_pointee(watched),
            metrics,
            notifier,
            notice_client,
            door,
            cors: http_front::cors::Cors::new(&c.cors),
            connections: Arc::new(ConnStats::default()),
            readiness: Arc::new(http_front::Readiness::new()),
            auction_seq: AtomicU64::new(0),
            config: running,
        };
        Exchange {
            state: Arc::new(state),
        }
    }
}
