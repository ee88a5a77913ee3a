//! What a running exchange keeps of its configuration, and what a reload swaps in. The state
//! keeps a [`Running`]: the configuration without its live sections (`Config<Omitted>`), so
//! nothing can read a bidder list that a reload has since replaced, and a reload names every
//! fixed key that differs by comparing two such values, with no list of sections kept by hand.

use std::path::PathBuf;
use std::sync::Arc;

use openrtb::Price;

use crate::config::{Config, Endpoint, Live, Omitted, ResolvedBidder, Validated};
use crate::sellers::Sellers;

/// The live sections as a load resolved them: what a reload swaps in.
#[derive(Debug, Clone)]
pub struct LiveSet {
    pub live: Live,
    /// Each bidder of `live.bidders`, in order, with what its configuration resolved to.
    pub bidders: Vec<ResolvedBidder>,
    /// Sellers and their keys, read when the file was loaded.
    pub sellers: Arc<Sellers>,
    /// The Global Vendor List (`privacy.gvl_file`), read at load: TCF is enforced with it.
    pub gvl: Option<Arc<consent::gvl::VendorList>>,
    /// The rates of `currency.rates_file`, read at load.
    pub rates: Option<Arc<currency::Rates>>,
}

/// What a running exchange keeps of its configuration: the sections fixed at start.
#[derive(Debug, Clone)]
pub struct Running {
    pub config: Config<Omitted>,
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    pub second_price_increment: Price,
    /// The listener's certificate, when `[tls]` is set.
    pub listener_tls: Option<Arc<http_front::ServerTls>>,
    /// The `[cache]` store's address, resolved at load.
    pub cache_endpoint: Option<Endpoint>,
    /// The writer key sent to the `[cache]` store, read at load.
    pub cache_key: Option<settings::Secret>,
}

impl Running {
    /// What the server accepts from client connections.
    pub fn limits(&self) -> http_front::Limits {
        self.config.front.http.limits()
    }
}

impl Validated {
    /// What the exchange keeps while it runs, and what a reload would swap in.
    pub fn split(self) -> (Running, LiveSet) {
        let Validated {
            config,
            source,
            second_price_increment,
            bidders,
            sellers,
            listener_tls,
            cache_endpoint,
            cache_key,
            gvl,
            rates,
        } = self;
        let (config, live) = config.split();
        let running = Running {
            config,
            source,
            second_price_increment,
            listener_tls,
            cache_endpoint,
            cache_key,
        };
        let live = LiveSet {
            live,
            bidders,
            sellers,
            gvl,
            rates,
        };
        (running, live)
    }
}
