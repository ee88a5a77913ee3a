//! The creative edge (`gavel edge`): the cache tier between a winning bid and the page.
//!
//! | route | what |
//! | --- | --- |
//! | `POST /cache`, `GET /cache?uuid=` | the markup store, compatible with Prebid Cache (`store.rs`) |
//! | `GET\|HEAD /assets/{origin}/{path}` | the asset proxy: memory and disk tiers, one fill per herd, streamed (`proxy.rs`, `fill.rs`) |
//! | `/healthz` | liveness |
//! | `/metrics`, `/healthz` on `admin_listen` | Prometheus text (never on the public port) |
//!
//! Pure parts: `freshness` (lifetimes), `conditional` (ETag, Range), `policy` (which tier),
//! `lru`, `rate` (token buckets), `record` (the disk format). `writers` decides who may put
//! into the store and how fast. The rest owns sockets, files and time (through
//! [`Clock`], so tests move time by hand). See docs/edge.md.

pub mod answer;
pub mod asset_path;
pub mod assets;
pub mod body;
pub mod clock;
pub mod conditional;
pub mod config;
pub mod disk;
pub mod fill;
pub mod flight;
pub mod freshness;
pub mod lru;
pub mod memory;
pub mod metrics;
pub mod negative;
pub mod object;
pub mod origin;
pub mod policy;
pub mod proxy;
pub mod rate;
pub mod record;
mod server;
pub mod store;
pub mod writers;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, ConfigError};
pub use metrics::Metrics;

/// Why the edge did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("disk tier {dir}: {reason}")]
    Disk { dir: String, reason: String },
    #[error("tls.cert_dir: {0}")]
    Tls(http_front::CertificateError),
    #[error("{0}")]
    Admin(#[from] http_front::AdminError),
}

/// A configured edge, ready to serve.
#[derive(Debug, Clone)]
pub struct Edge {
    state: Arc<server::State>,
    limits: http_front::Limits,
}

impl Edge {
    /// Builds the edge: opens and indexes the disk tier, reads the certificate directory.
    ///
    /// # Errors
    /// The disk tier or the certificate directory cannot be used.
    pub fn new(config: &Config, clock: Arc<dyn Clock>) -> Result<Edge, StartError> {
        let metrics = Arc::new(Metrics::default());
        let assets = assets::Assets::new(config, metrics, clock).map_err(|e| StartError::Disk {
            dir: config
                .disk
                .as_ref()
                .map(|d| d.dir.display().to_string())
                .unwrap_or_default(),
            reason: e.to_string(),
        })?;
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(
                http_front::SniCerts::open(
                    &t.cert_dir,
                    t.max_certs,
                    Duration::from_secs(t.check_interval_s),
                )
                .map_err(StartError::Tls)?,
            )),
            None => None,
        };
        let state = server::State {
            assets: Arc::new(assets),
            store: store::MarkupStore::new(config.store.clone()),
            writers: writers::Writers::new(&config.store),
            conns: Arc::new(http_front::ConnStats::default()),
            max_request_bytes: config.max_request_bytes(),
            read_timeout: config.front.http.read_timeout(),
            tls,
            admin: http_front::AdminDoor::open(&config.front.security)?,
            readiness: Arc::new(http_front::Readiness::new()),
        };
        Ok(Edge {
            state: Arc::new(state),
            limits: config.http_limits(),
        })
    }

    /// Serves on `listener` until `shutdown` completes, then (not ready from then on) lets
    /// answers in flight finish (within `http.drain_timeout_ms`).
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        let tls = self.state.tls.clone().map(http_front::Tls::Sni);
        let readiness = self.state.readiness.clone();
        http_front::serve_with_tls(
            listener,
            tls,
            async move {
                shutdown.await;
                readiness.start_draining();
            },
            self.limits,
            self.state.conns.clone(),
            move |request, peer: SocketAddr| server::route(state.clone(), request, peer),
        )
        .await;
    }

    /// Serves `/metrics` and `/healthz` on `listener` (bound to `admin_listen`) until
    /// `shutdown` completes.
    pub async fn serve_admin(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let state = self.state.clone();
        http_front::serve(
            listener,
            shutdown,
            http_front::admin::admin_limits(self.limits),
            Arc::new(http_front::ConnStats::default()),
            move |request, peer: SocketAddr| server::admin_route(state.clone(), request, peer),
        )
        .await;
    }

    /// Whether the edge is draining; the binary starts the drain on its stop signal.
    pub fn readiness(&self) -> Arc<http_front::Readiness> {
        self.state.readiness.clone()
    }

    /// Why `/readyz` answers 503 now, or `None` when it answers 200.
    pub fn not_ready(&self) -> Option<String> {
        server::not_ready(&self.state)
    }

    /// Connection counters of the public listener (open connections while draining).
    pub fn connections(&self) -> &http_front::ConnStats {
        &self.state.conns
    }

    /// The counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.state.assets.common.metrics
    }

    /// The disk file of an object key (`{origin}/{path}`), when there is a disk tier (tests
    /// corrupt it on purpose).
    pub fn disk_file_of(&self, key: &str) -> Option<std::path::PathBuf> {
        self.state.assets.disk.as_ref().map(|d| d.file_of(key))
    }

    /// Fetches counted for an origin, by outcome label.
    pub fn origin_fetches(&self, origin: &str, outcome: metrics::Fetch) -> u64 {
        self.state
            .assets
            .origins
            .get(origin)
            .map_or(0, |o| o.stats.fetches.get(outcome))
    }
}
