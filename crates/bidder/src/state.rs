//! The shared state of a running bidder and its handle, [`Bidder`]. Everything a request, a
//! notice, a reload or a background task reads is here; nothing here calls back into them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use arc_swap::ArcSwap;
use campaigns::Snapshot;
use ledger::Ledger;

use crate::config::{BidderConfig, ChargeOn};
use crate::metrics::Metrics;

/// Shared state of a running bidder.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: BidderConfig,
    /// How a request's `tmax` becomes its deadline (`[deadline]`).
    pub(crate) deadline: admission::DeadlinePolicy,
    pub(crate) node: String,
    pub(crate) public_url: String,
    pub(crate) snapshot: ArcSwap<Snapshot>,
    pub(crate) ledger: Ledger,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) charge_on: ChargeOn,
    pub(crate) seq: AtomicU64,
    /// Serializes reloads (the watcher and the admin call) so two never race to swap.
    pub(crate) reload_lock: tokio::sync::Mutex<()>,
    /// The ledger has not yet been told the limits of the campaigns in force.
    pub(crate) limits_pending: AtomicBool,
    /// Bid requests come in through it (notices do not: they enter its gate first).
    pub(crate) door: edge::Door,
    pub(crate) connections: Arc<edge::ConnStats>,
}

impl State {
    /// A reservation id unique across instances: `{node}-{sequence}`.
    pub(crate) fn next_reservation_id(&self) -> String {
        format!("{}-{:x}", self.node, self.seq.fetch_add(1, Relaxed))
    }
}

/// A running bidder.
#[derive(Debug, Clone)]
pub struct Bidder {
    pub(crate) state: Arc<State>,
}
