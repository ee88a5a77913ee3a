//! The live bidder list. An auction reads one `Roster` from start to end; a reload builds the
//! next one aside and swaps it in atomically, so an auction never sees half of each.
//!
//! A bidder is known by its name across reloads. What it has learned carries over when the
//! reload leaves the part it depends on unchanged: its metrics always (counters continue under
//! the same label), its connection pool while the endpoint and connection cap stay, its circuit
//! breaker while the endpoint stays, its rate cap while `max_qps` stays. A replaced pool is not
//! closed: calls in flight hold it and finish; its idle connections close when it is dropped.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::breaker::{Breaker, BreakerConfig, RateCap};
use crate::config::{BidderConfig, Endpoint, ResolvedBidder};
use crate::metrics::{BidderMetrics, BidderTable, Metrics};
use crate::notices::NoticeRoute;
use crate::outcome::BidderIx;
use crate::running::LiveSet;
use crate::settle::{BidderView, Lineup};
use crate::typical::{TypicalAnswer, clock_ms};
use upstream::outbound::NoticeHosts;
use upstream::pool::BidderPool;

/// One configured bidder with its own pool, breaker and optional rate cap.
#[derive(Debug)]
pub(crate) struct Bidder {
    pub(crate) name: String,
    pub(crate) enabled: bool,
    /// Set by an operator (`POST /admin/bidders/{name}/disable`): not called while set. Kept
    /// across reloads by name, apart from `enabled`, which is the file's.
    pub(crate) paused: Arc<AtomicBool>,
    pub(crate) max_connections: u32,
    pub(crate) max_qps: Option<u32>,
    pub(crate) pool: Arc<BidderPool>,
    /// Short critical sections only (a few comparisons), never held across an await.
    pub(crate) breaker: Arc<Mutex<Breaker>>,
    pub(crate) rate_cap: Option<Arc<Mutex<RateCap>>>,
    pub(crate) metrics: Arc<BidderMetrics>,
    /// How long it typically takes to answer; kept across reloads by name, as its metrics.
    pub(crate) typical: Arc<TypicalAnswer>,
    /// Where its notices may go (its metrics count them).
    pub(crate) notices: Arc<NoticeRoute>,
    /// A winning bid without `adm` may have its markup fetched from `nurl`.
    pub(crate) fetch_markup: bool,
    /// The key its clearing prices are sealed with (`price_key_file`), if it has one.
    pub(crate) price_key: Option<price_token::PriceKey>,
    /// How it wants its requests: version, encoding, vendor id, currency.
    pub(crate) wants: Wants,
}

/// What shapes the request a bidder is sent (its `openrtb_version`, `gzip`, `gvl_vendor_id`
/// and `currency`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wants {
    pub(crate) version: crate::config::OpenRtbVersion,
    pub(crate) gzip: bool,
    pub(crate) vendor_id: Option<u16>,
    pub(crate) currency: Option<String>,
}

impl Wants {
    fn of(config: &BidderConfig) -> Wants {
        Wants {
            version: config.openrtb_version,
            gzip: config.gzip,
            vendor_id: config.gvl_vendor_id,
            currency: config.currency.clone(),
        }
    }
}

/// The bidders of one configuration, in file order. An auction names each by its
/// [`BidderIx`] here.
#[derive(Debug, Default)]
pub(crate) struct Roster {
    bidders: Vec<Bidder>,
}

/// What a reload did to the bidder list, by bidder name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RosterChange {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Kept, with a new endpoint, connection cap, `max_qps`, `enabled`, notice hosts, CA,
    /// `fetch_markup` or price key.
    pub changed: Vec<String>,
    /// Kept exactly as they were.
    pub unchanged: usize,
}

impl RosterChange {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The settings a roster is built with that only a restart changes, and the metrics its
/// bidders count in.
#[derive(Debug, Clone)]
pub(crate) struct PoolSettings {
    /// `[upstream]`, restart-only; each bidder's pool adds its `max_connections`.
    pub(crate) upstream: upstream::UpstreamSection,
    pub(crate) breaker: BreakerConfig,
    pub(crate) metrics: Arc<Metrics>,
}

impl PoolSettings {
    pub(crate) fn new(
        upstream: &upstream::UpstreamSection,
        breaker: &BreakerConfig,
        metrics: Arc<Metrics>,
    ) -> PoolSettings {
        PoolSettings {
            upstream: *upstream,
            breaker: breaker.clone(),
            metrics,
        }
    }
}

impl Roster {
    /// Builds the roster of a loaded configuration's bidders, taking over from `previous`
    /// what each kept bidder may keep.
    pub(crate) fn build(
        validated: &LiveSet,
        settings: &PoolSettings,
        previous: &Roster,
        now: Instant,
    ) -> (Roster, RosterChange) {
        let mut change = RosterChange::default();
        let mut bidders = Vec::with_capacity(validated.bidders.len());
        for resolved in &validated.bidders {
            let ResolvedBidder {
                config,
                endpoint,
                notice_hosts: hosts,
                tls,
                price_key,
            } = resolved;
            let old = previous.bidders.iter().find(|b| b.name == config.name);
            let mut bidder = Bidder::carried_over(config, endpoint, settings, old, now);
            bidder.price_key = price_key.clone();
            // A kept pool follows the address this load found (a new pool starts with it).
            if let Some(addr) = endpoint.addr {
                bidder.pool.set_addr(addr);
            }
            bidder.notices = Arc::new(NoticeRoute {
                bidder: config.name.clone(),
                hosts: hosts.clone(),
                tls: tls.clone(),
                tally: settings.metrics.notice_tally(bidder.metrics.clone()),
            });
            match old {
                None => change.added.push(config.name.clone()),
                Some(old) if old.same_settings(&bidder) => change.unchanged += 1,
                Some(_) => change.changed.push(config.name.clone()),
            }
            bidders.push(bidder);
        }
        change.removed = previous
            .bidders
            .iter()
            .filter(|old| !validated.bidders.iter().any(|b| b.config.name == old.name))
            .map(|old| old.name.clone())
            .collect();
        (Roster { bidders }, change)
    }

    pub(crate) fn get(&self, ix: BidderIx) -> Option<&Bidder> {
        self.bidders.get(ix.index())
    }

    /// Every bidder with its place, in file order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (BidderIx, &Bidder)> {
        self.bidders
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((BidderIx::nth(i)?, b)))
    }

    pub(crate) fn named(&self, name: &str) -> Option<&Bidder> {
        self.bidders.iter().find(|b| b.name == name)
    }

    /// Names and metrics of these bidders, for `/metrics` (the counters are shared, not
    /// copied).
    pub(crate) fn table(&self) -> BidderTable {
        BidderTable {
            bidders: self
                .bidders
                .iter()
                .map(|b| (b.name.clone(), b.metrics.clone()))
                .collect(),
        }
    }

    /// How long the fastest enabled bidder typically takes to answer: less time left than
    /// this, and no bidder can be expected to answer. Zero while any enabled bidder has no
    /// recent figure (it may be fast).
    pub(crate) fn fastest_typical_answer(&self) -> Duration {
        let now_ms = clock_ms();
        self.bidders
            .iter()
            .filter(|b| b.serving())
            .map(|b| b.typical.get(now_ms).unwrap_or(Duration::ZERO))
            .min()
            .unwrap_or(Duration::ZERO)
    }
}

impl Lineup for Roster {
    fn view(&self, ix: BidderIx) -> Option<BidderView<'_>> {
        self.get(ix).map(Bidder::view)
    }
}

impl Bidder {
    /// Enabled in the file and not paused by an operator: auctions call it.
    pub(crate) fn serving(&self) -> bool {
        self.enabled && !self.paused.load(Relaxed)
    }

    /// What settlement reads of it.
    pub(crate) fn view(&self) -> BidderView<'_> {
        BidderView {
            name: &self.name,
            markup_hosts: self.fetch_markup.then_some(&self.notices.hosts),
            price_key: self.price_key.as_ref(),
        }
    }

    fn carried_over(
        config: &BidderConfig,
        endpoint: &Endpoint,
        settings: &PoolSettings,
        old: Option<&Bidder>,
        now: Instant,
    ) -> Bidder {
        let metrics: Arc<BidderMetrics> = old.map_or_else(Arc::default, |o| o.metrics.clone());
        let same_endpoint = old.filter(|o| o.pool.endpoint() == endpoint);
        let pool = same_endpoint
            .filter(|o| o.max_connections == config.max_connections && o.wants.gzip == config.gzip)
            .map_or_else(
                || {
                    Arc::new(
                        BidderPool::new(
                            endpoint.clone(),
                            settings.upstream.pool_limits(config.max_connections),
                            metrics.connections_busy.cell(),
                        )
                        .accept_gzip(config.gzip),
                    )
                },
                |o| o.pool.clone(),
            );
        // A breaker judges an endpoint: a new address starts with a clean record.
        let breaker = same_endpoint.map_or_else(
            || Arc::new(Mutex::new(Breaker::new(settings.breaker.clone(), now))),
            |o| o.breaker.clone(),
        );
        let rate_cap = match old {
            Some(o) if o.max_qps == config.max_qps => o.rate_cap.clone(),
            _ => config
                .max_qps
                .map(|q| Arc::new(Mutex::new(RateCap::new(q, now)))),
        };
        Bidder {
            notices: Arc::new(NoticeRoute {
                bidder: config.name.clone(),
                hosts: NoticeHosts::default(),
                tls: None,
                tally: settings.metrics.notice_tally(metrics.clone()),
            }),
            typical: old.map_or_else(Arc::default, |o| o.typical.clone()),
            fetch_markup: config.fetch_markup,
            price_key: None,
            wants: Wants::of(config),
            name: config.name.clone(),
            enabled: config.enabled,
            paused: old.map_or_else(Arc::default, |o| o.paused.clone()),
            max_connections: config.max_connections,
            max_qps: config.max_qps,
            pool,
            breaker,
            rate_cap,
            metrics,
        }
    }

    fn same_settings(&self, other: &Bidder) -> bool {
        self.enabled == other.enabled
            && self.max_connections == other.max_connections
            && self.max_qps == other.max_qps
            && self.pool.endpoint() == other.pool.endpoint()
            && self.fetch_markup == other.fetch_markup
            && self.wants == other.wants
            && self.price_key == other.price_key
            && self.notices.hosts == other.notices.hosts
            && self.notices.tls == other.notices.tls
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn roster_of(text: &str, previous: &Roster) -> (Roster, RosterChange) {
        let v = Config::from_toml(&format!("open_to_all_sellers = true\n{text}")).unwrap();
        let metrics = Arc::new(Metrics::new(Vec::new()));
        let settings = PoolSettings::new(&v.config.upstream, &v.config.breaker, metrics);
        Roster::build(&v.split().1, &settings, previous, Instant::now())
    }

    fn bidder(name: &str, port: u16, extra: &str) -> String {
        format!("[[bidders]]\nname = {name:?}\nendpoint = \"http://127.0.0.1:{port}/\"\n{extra}\n")
    }

    #[test]
    fn kept_bidders_keep_what_their_settings_allow() {
        let (first, change) = roster_of(
            &[
                bidder("a", 1, ""),
                bidder("b", 2, ""),
                bidder("c", 3, "max_qps = 10"),
                bidder("d", 4, ""),
            ]
            .concat(),
            &Roster::default(),
        );
        assert_eq!(change.added, ["a", "b", "c", "d"]);
        first.bidders[0].metrics.requests.add(7);

        // a unchanged; b moves to a new port; c gets a new cap; d is removed; e is new.
        let (second, change) = roster_of(
            &[
                bidder("e", 5, ""),
                bidder("a", 1, ""),
                bidder("b", 9, ""),
                bidder("c", 3, "max_qps = 20"),
            ]
            .concat(),
            &first,
        );
        let names: Vec<&str> = second.iter().map(|(_, b)| b.name.as_str()).collect();
        assert_eq!(names, ["e", "a", "b", "c"]);
        assert_eq!(change.added, ["e"]);
        assert_eq!(change.removed, ["d"]);
        assert_eq!(change.changed, ["b", "c"]);
        assert_eq!(change.unchanged, 1);

        let (a0, a1) = (&first.bidders[0], &second.bidders[1]);
        assert!(Arc::ptr_eq(&a0.pool, &a1.pool));
        assert!(Arc::ptr_eq(&a0.breaker, &a1.breaker));
        assert!(Arc::ptr_eq(&a0.metrics, &a1.metrics));
        assert_eq!(second.bidders[1].metrics.requests.get(), 7);

        let (b0, b1) = (&first.bidders[1], &second.bidders[2]);
        assert!(
            !Arc::ptr_eq(&b0.pool, &b1.pool),
            "a new endpoint, a new pool"
        );
        assert!(!Arc::ptr_eq(&b0.breaker, &b1.breaker));
        assert!(Arc::ptr_eq(&b0.metrics, &b1.metrics));

        let (c0, c1) = (&first.bidders[2], &second.bidders[3]);
        assert!(Arc::ptr_eq(&c0.pool, &c1.pool));
        let (Some(cap0), Some(cap1)) = (&c0.rate_cap, &c1.rate_cap) else {
            panic!("c has a rate cap")
        };
        assert!(!Arc::ptr_eq(cap0, cap1));
    }

    #[test]
    fn a_new_connection_cap_means_a_new_pool_but_the_same_breaker() {
        let (first, _) = roster_of(&bidder("a", 1, ""), &Roster::default());
        let (second, change) = roster_of(&bidder("a", 1, "max_connections = 8"), &first);
        assert_eq!(change.changed, ["a"]);
        assert!(!Arc::ptr_eq(
            &first.bidders[0].pool,
            &second.bidders[0].pool
        ));
        assert!(Arc::ptr_eq(
            &first.bidders[0].breaker,
            &second.bidders[0].breaker
        ));
        let (third, change) = roster_of(&bidder("a", 1, "max_connections = 8"), &second);
        assert!(change.is_empty() && change.unchanged == 1);
        assert!(Arc::ptr_eq(&second.bidders[0].pool, &third.bidders[0].pool));
    }
}
