//! What one simulated bidder's servers and handlers share: its settings, counters and the fleet's
//! shutdown signal. Apart from them so that the handlers and both servers (`server`, `lean`)
//! read it without reading each other.

use std::sync::Arc;

use tokio::sync::watch;

use crate::profile::BidderProfile;
use crate::stats::{Counters, NoticeRing};

/// Everything one bidder's handlers share.
#[derive(Debug)]
pub(crate) struct BidderCtx {
    pub index: usize,
    pub seed: u64,
    pub profile: BidderProfile,
    /// `http://127.0.0.1:PORT`, the prefix of the notice URLs put in bids.
    pub base_url: String,
    pub counters: Counters,
    pub notices: Arc<NoticeRing>,
    pub shutdown: watch::Receiver<bool>,
}

/// Resolves once fleet shutdown is signalled (or the signal can no longer come).
pub(crate) async fn shutdown_signalled(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}
