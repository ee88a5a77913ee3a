//! A simulated DSP fleet: N real OpenRTB 2.6 HTTP bidders on loopback, each with a seeded
//! latency, price and failure profile, counting the win / billing / loss notices it gets back.
//!
//! The exchange's demo and integration tests run these next to the exchange; `gavel sim` serves
//! them standalone. [`start`] binds one listener per [`BidderProfile`] (`127.0.0.1:0`) and
//! spawns its servers on the current Tokio runtime: hyper 1 (full HTTP/1.1, TLS) or, with
//! [`Transport::Lean`], a minimal HTTP/1.1 loop that costs the fleet less CPU in benchmarks.
//! Both give the same answers. [`Fleet`] hands back the endpoints, counter snapshots and
//! recent notices.
//!
//! # A bidder's behaviour
//!
//! `POST` to any path outside `/notice/` is a bid request (body at most 1 MiB, else 413;
//! undecodable, 400). The bidder draws, in order: a fault (HTTP 500 with `error_rate`; hold the
//! request for `hang_ms` then close the connection without a response with `no_answer_rate`; a
//! 200 whose body is not a BidResponse with `garbage_rate`), its latency, then per imp whether
//! it bids (`bid_probability`), its valuation (`price`), whether it bids on a deal
//! (`deal_rate`), and where the markup goes (`markup`). Every answer is delayed by the sampled
//! latency. No bids: 204, or `200 {"id":..,"nbr":8}` with `nbr_on_no_bid`.
//!
//! Bids carry `nurl` / `burl` / `lurl` back to the bidder's own port, with the standard
//! `${AUCTION_*}` macros for the exchange to fill; `GET /notice/win|bill|loss` counts them.
//!
//! # Invariants
//!
//! - **Determinism.** All randomness for a request comes from a small RNG seeded from (fleet
//!   seed, bidder index, FNV-1a hash of the request id and imp ids). The same request gets the
//!   same decision, latency and price regardless of concurrency or arrival order; there is no
//!   thread RNG. (`SmallRng` is Xoshiro256++ on 64-bit targets; a given seed repeats on the
//!   same platform and `rand` version, not necessarily across them.)
//! - **Floors.** The sampled price is the bidder's valuation. An open-auction bid is never
//!   below the imp floor: a valuation under the floor means no bid on that imp (never bidding
//!   above one's value is how a rational buyer behaves), unless the profile sets
//!   `ignore_floor` to misbehave on purpose. A deal bid is never below the deal floor (or the
//!   imp floor if the deal has none): the valuation is raised to it, because the buyer agreed
//!   to that price, and a fixed-price deal (`at = 3`) is bid exactly at its floor. Imps in a
//!   private auction get deal bids only. Floors in a currency other than USD are skipped.
//! - **Money is integer.** Prices are [`openrtb::Price`] micros; notice prices are parsed from
//!   their decimal text without a float, so sums are exact.
//! - **Bounded.** Request bodies (1 MiB), the no-answer hold (`hang_ms` <= 60 s, cut short by
//!   shutdown), sampled latency (<= 60 s) and the notice ring ([`NOTICE_RING_CAPACITY`]) are
//!   all bounded. Counters are lock-free atomics; nothing panics on input.
//! - **Log-normal from quantiles.** `mu = ln(p50)`, `sigma = (ln(p99) - ln(p50)) / 2.3263`;
//!   normals from a hand-written Box–Muller transform (no `rand_distr`).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod accept;
mod bidder;
mod ctx;
mod dist;
mod handlers;
mod lean;
mod notice;
mod profile;
mod server;
mod stats;
mod wire;

pub use dist::{LatencyDist, MAX_LATENCY, PriceDist};
pub use handlers::MAX_BODY_BYTES;
pub use openrtb::query::parse_cpm;
pub use profile::{
    BidderProfile, DEFAULT_HANG_MS, MAX_HANG_MS, MAX_NAME_LEN, Markup, demo_profiles,
    load_profiles, validate_profiles,
};
pub use stats::{BidderStats, NOTICE_RING_CAPACITY, Notice, NoticeKind};

use ctx::BidderCtx;
use stats::NoticeRing;

/// Everything that can go wrong starting a fleet or loading profiles.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A profile value is out of range; names the bidder and the field.
    #[error("bidder `{bidder}`: field `{field}`: {message}")]
    Profile {
        bidder: String,
        field: String,
        message: String,
    },
    /// The profile file is not valid TOML or has unknown / mistyped fields (toml's message
    /// names the key and line).
    #[error("profile file: {0}")]
    Toml(String),
    /// The lean server speaks plain HTTP only.
    #[error("the lean HTTP server does not serve TLS: drop the certificate or the lean server")]
    LeanWithTls,
    #[error("bidder `{bidder}`: cannot bind {addr}: {source}")]
    Bind {
        bidder: String,
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What to start.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// Seeds every bidder's decisions (see the crate docs).
    pub seed: u64,
    /// Address every listener binds, with port 0. Normally 127.0.0.1.
    pub bind: IpAddr,
    pub profiles: Vec<BidderProfile>,
    /// Serve HTTPS with this certificate (endpoints and notice URLs become `https://`).
    pub tls: Option<Arc<http_front::ServerTls>>,
    pub transport: Transport,
}

/// Which HTTP server the bidders run. The answers are the same; the cost is not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// hyper 1: full HTTP/1.1 (chunked bodies, TLS).
    #[default]
    Hyper,
    /// A minimal HTTP/1.1 loop (`Content-Length` bodies, keep-alive, pipelining; no TLS): the
    /// same answers for a fifth less CPU (at fan-out 10 the fleet spends 212-221 µs per auction
    /// against hyper's 251-289; the rest is the kernel's loopback TCP). For benchmarks, where
    /// the fleet shares a core with the load generator.
    Lean,
}

impl FleetConfig {
    /// Loopback (127.0.0.1) fleet.
    pub fn local(seed: u64, profiles: Vec<BidderProfile>) -> Self {
        FleetConfig {
            seed,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            profiles,
            tls: None,
            transport: Transport::Hyper,
        }
    }
}

/// One started bidder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningBidder {
    pub name: String,
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT/openrtb2`: where to POST bid requests.
    pub endpoint: String,
    /// Some of its bids carry no `adm`: their markup is the answer to the win notice, so the
    /// exchange must be told it may fetch it (`fetch_markup`).
    pub markup_on_win_notice: bool,
}

/// A running fleet. Cheap to clone (the state is shared). The servers run until the shutdown
/// future given to [`start`] completes or [`Fleet::shutdown`] is called; dropping the `Fleet`
/// does not stop them.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// In profile order.
    pub bidders: Vec<RunningBidder>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    ctxs: Vec<Arc<BidderCtx>>,
    notices: Arc<NoticeRing>,
    shutdown: Arc<watch::Sender<bool>>,
    listeners: Mutex<Vec<JoinHandle<()>>>,
}

/// Validates the profiles, binds one listener per bidder on `config.bind` port 0 (all are
/// bound before any is served, so an error leaves nothing running), and spawns the servers on
/// the current Tokio runtime. When `shutdown` completes, listeners close, requests in flight
/// are answered at once (sleeps and hangs cut short) and connections close.
pub async fn start(
    config: FleetConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Fleet, SimError> {
    validate_profiles(&config.profiles)?;
    if config.transport == Transport::Lean && config.tls.is_some() {
        return Err(SimError::LeanWithTls);
    }
    let mut listeners = Vec::with_capacity(config.profiles.len());
    for p in &config.profiles {
        let addr = SocketAddr::new(config.bind, 0);
        let listener = TcpListener::bind(addr).await;
        let listener = listener
            .and_then(|l| l.local_addr().map(|a| (l, a)))
            .map_err(|source| SimError::Bind {
                bidder: p.name.clone(),
                addr,
                source,
            })?;
        listeners.push(listener);
    }

    let (tx, rx) = watch::channel(false);
    let tx = Arc::new(tx);
    let notices = Arc::new(NoticeRing::default());
    let mut ctxs = Vec::with_capacity(listeners.len());
    let mut bidders = Vec::with_capacity(listeners.len());
    let mut handles = Vec::with_capacity(listeners.len());
    for (index, (profile, (listener, addr))) in
        config.profiles.into_iter().zip(listeners).enumerate()
    {
        // Notice URLs must be reachable: an unspecified bind address is not a destination.
        let host = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let base_url = format!("{scheme}://{}", SocketAddr::new(host, addr.port()));
        bidders.push(RunningBidder {
            name: profile.name.clone(),
            addr,
            endpoint: format!("{base_url}/openrtb2"),
            markup_on_win_notice: profile.markup != profile::Markup::Inline,
        });
        let ctx = Arc::new(BidderCtx {
            index,
            seed: config.seed,
            profile,
            base_url,
            counters: Default::default(),
            notices: notices.clone(),
            shutdown: rx.clone(),
        });
        handles.push(tokio::spawn(accept::accept_loop(
            listener,
            config.transport,
            config.tls.clone(),
            ctx.clone(),
        )));
        ctxs.push(ctx);
    }
    let signal = tx.clone();
    tokio::spawn(async move {
        shutdown.await;
        signal.send_replace(true);
    });
    tracing::info!(
        bidders = bidders.len(),
        seed = config.seed,
        "simulated bidder fleet started"
    );
    Ok(Fleet {
        bidders,
        shared: Arc::new(Shared {
            ctxs,
            notices,
            shutdown: tx,
            listeners: Mutex::new(handles),
        }),
    })
}

impl Fleet {
    /// A snapshot of every bidder's counters, in profile order.
    pub fn stats(&self) -> Vec<BidderStats> {
        self.shared
            .ctxs
            .iter()
            .map(|c| c.counters.snapshot(&c.profile.name))
            .collect()
    }

    /// The counters of the bidder called `name`.
    pub fn stats_of(&self, name: &str) -> Option<BidderStats> {
        let ctx = self.shared.ctxs.iter().find(|c| c.profile.name == name)?;
        Some(ctx.counters.snapshot(name))
    }

    /// The last [`NOTICE_RING_CAPACITY`] notices received by any bidder, oldest first.
    pub fn notices(&self) -> Vec<Notice> {
        self.shared.notices.snapshot()
    }

    /// The profiles the fleet runs, in order.
    pub fn profiles(&self) -> Vec<BidderProfile> {
        self.shared.ctxs.iter().map(|c| c.profile.clone()).collect()
    }

    /// A `[[bidders]]` section for the exchange configuration (name, endpoint,
    /// max_connections, and `fetch_markup` for a bidder that serves markup on the win notice),
    /// one block per bidder, blank-line separated. Its notices go to its own endpoint's host
    /// and port, the exchange's default allowlist.
    pub fn exchange_bidders_toml(&self, max_connections: u32) -> String {
        self.exchange_bidders_toml_as(max_connections, None)
    }

    /// [`Fleet::exchange_bidders_toml`], each bidder with a `gvl_vendor_id`, counted from
    /// `first_vendor_id` in fleet order, when given (the demo's vendor list has them).
    pub fn exchange_bidders_toml_as(
        &self,
        max_connections: u32,
        first_vendor_id: Option<u16>,
    ) -> String {
        let mut out = String::new();
        for (i, b) in self.bidders.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&format!(
                "[[bidders]]\nname = {}\nendpoint = {}\nmax_connections = {max_connections}\n",
                toml_string(&b.name),
                toml_string(&b.endpoint),
            ));
            if b.markup_on_win_notice {
                out.push_str("fetch_markup = true\n");
            }
            if let Some(first) = first_vendor_id
                && let Some(id) = u16::try_from(i).ok().and_then(|i| first.checked_add(i))
            {
                out.push_str(&format!("gvl_vendor_id = {id}\n"));
            }
        }
        out
    }

    /// Signals shutdown (as if the future given to [`start`] had completed). Idempotent.
    pub fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
    }

    /// Resolves once shutdown has been signalled and every listener has closed (its port is
    /// free). Connections finishing their last answer may outlive it briefly.
    pub async fn stopped(&self) {
        let handles = {
            let mut guard = telemetry::locks::lock(&self.shared.listeners);
            std::mem::take(&mut *guard)
        };
        if handles.is_empty() {
            // Another caller took the handles; at least wait for the signal.
            ctx::shutdown_signalled(self.shared.shutdown.subscribe()).await;
            return;
        }
        for h in handles {
            let _ = h.await;
        }
    }
}

/// A TOML basic string (quotes, backslashes and control characters escaped).
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
