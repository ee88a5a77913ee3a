//! The shared state of a running bidder and its handle, [`Bidder`]. Everything a request, a
//! notice, a reload or a background task reads is here; nothing here calls back into them.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use arc_swap::ArcSwap;
use campaigns::Snapshot;
use ledger::Ledger;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::{BidderConfig, ChargeOn};
use crate::metrics::Metrics;
use crate::prices::PriceKeys;
use crate::token::NoticeKeys;

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
    /// Signs and checks notice URLs; `None` only with `security.sign_notices = false`.
    pub(crate) keys: Option<NoticeKeys>,
    /// The price keys in force and whether a price token is required (replaced on reload).
    pub(crate) prices: ArcSwap<PriceKeys>,
    /// How long a bid's notice URLs stay valid (reservation TTL plus grace).
    pub(crate) notice_lifetime: Duration,
    /// The admin endpoints' token check and audit log.
    pub(crate) admin: http_front::AdminDoor,
    /// Where this instance records the id of the Redis ledger it has open (Redis modes with a
    /// `ledger.state_dir`).
    pub(crate) marker: Option<crate::ledger_open::Marker>,
    /// The ledger id last written to the marker (tried once per id).
    pub(crate) marker_recorded: std::sync::Mutex<Option<String>>,
    /// Seeds each thread's id generator (itself seeded from the OS at start).
    pub(crate) id_seeds: std::sync::Mutex<StdRng>,
    /// Serializes reloads (the watcher and the admin call) so two never race to swap.
    pub(crate) reload_lock: tokio::sync::Mutex<()>,
    /// Records of notices refused before the ledger: at most one a second per reason.
    pub(crate) refusal_samples: crate::ledger_record::RefusalSamples,
    /// The ledger has not yet been told the limits of the campaigns in force.
    pub(crate) limits_pending: AtomicBool,
    /// The campaigns in force were pushed to the fleet: their limits never raise a budget the
    /// ledger holds (`ledger::LimitsFrom::Push`).
    pub(crate) limits_pushed: AtomicBool,
    /// The ledger has been told the campaigns' limits at least once (`/readyz` waits for it;
    /// a later failed write leaves the last limits in force, so it does not turn back).
    pub(crate) limits_written_once: AtomicBool,
    /// Draining (`/readyz` 503) once the stop signal came.
    pub(crate) readiness: Arc<http_front::Readiness>,
    /// The campaign file's limits beside the ledger's, as last compared (`reload::note_limits`).
    pub(crate) limits: ArcSwap<crate::limits_check::LimitsView>,
    /// Bid requests come in through it (notices do not: they have their own gate below).
    pub(crate) door: http_front::Door,
    /// Notices being handled now (their own gate: `max_notices_in_flight`).
    pub(crate) notices_in_flight: std::sync::atomic::AtomicUsize,
    pub(crate) connections: Arc<http_front::ConnStats>,
    /// Where ledger records go (`[records]`); off unless started with one.
    pub(crate) journal: journal::Journal,
}

thread_local! {
    /// A cryptographic generator per thread (ChaCha12), seeded once from `State::id_seeds`:
    /// reservation ids must not be guessable, and a syscall per bid would cost more than the
    /// rest of the id.
    static IDS: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

impl State {
    /// A reservation id: `{node}-` and 128 random bits in hex. Unguessable, and unique across
    /// instances and restarts without any coordination.
    pub(crate) fn next_reservation_id(&self) -> String {
        let bits = IDS.with(|cell| {
            let mut cell = cell.borrow_mut();
            let rng = cell.get_or_insert_with(|| {
                let mut seeds = telemetry::locks::lock(&self.id_seeds);
                StdRng::from_rng(&mut *seeds)
            });
            (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
        });
        format!("{}-{bits:032x}", self.node)
    }
}

/// A running bidder.
#[derive(Debug, Clone)]
pub struct Bidder {
    pub(crate) state: Arc<State>,
}
