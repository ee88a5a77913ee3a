//! Campaign changes while serving: the file is read, validated and indexed aside (on a blocking
//! thread: 100,000 campaigns take a while to index), then swapped in with one atomic pointer
//! store. A file that fails leaves the last good set serving; the failure is logged and
//! counted (`gavel_bidder_campaign_reloads_total{outcome="failed"}`).
//!
//! The watcher polls the file's modification time and length: portable, no extra dependency,
//! and a reload within the poll interval is soon enough for campaign edits.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use pacing::Timestamp;

use crate::campaign::CampaignSet;
use crate::metrics::ReloadOutcome;
use crate::runtime::Snapshot;
use crate::server::State;

/// How often the watcher looks at the campaign file.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Loads, validates and indexes the campaign file and builds its snapshot (keeping the running
/// state of campaigns in `previous`), all on a blocking thread: 100,000 campaigns take a while,
/// and the runtime's threads must keep answering bids meanwhile.
pub(crate) async fn load(
    path: &Path,
    previous: Option<Arc<Snapshot>>,
    interval: Duration,
) -> Result<Snapshot, String> {
    let path = path.to_owned();
    let build = move || {
        let set = CampaignSet::load(&path).map_err(|e| e.to_string())?;
        Ok(Snapshot::build(
            set,
            previous.as_deref(),
            Timestamp::now(),
            interval,
        ))
    };
    match tokio::task::spawn_blocking(build).await {
        Ok(result) => result,
        Err(e) => Err(format!("loading campaigns stopped: {e}")),
    }
}

/// Reloads the campaign file; returns how many campaigns now serve, or why the last good set
/// stays.
pub(crate) async fn reload(state: &State) -> Result<usize, String> {
    let _one_at_a_time = state.reload_lock.lock().await;
    let path = &state.config.campaigns;
    let interval = Duration::from_millis(state.config.pacing.control_interval_ms);
    let snapshot = match load(path, Some(state.snapshot.load_full()), interval).await {
        Ok(snapshot) => snapshot,
        Err(e) => {
            state.metrics.reload(ReloadOutcome::Failed);
            tracing::error!(file = %path.display(), error = %e, "campaign reload refused; the last good campaigns keep serving");
            return Err(e);
        }
    };
    // Budgets first, so that no new campaign bids before the ledger knows its limits. If the
    // ledger cannot be told (Redis down), the new set still serves: its campaigns' reservations
    // are refused until the pacing tick, which retries, gets the limits through.
    if let Err(e) = state.ledger.set_campaigns(&snapshot.limits()).await {
        tracing::warn!(error = %e, "campaign limits not yet written to the ledger; retrying on the next tick");
        state.limits_pending.store(true, Relaxed);
    }
    let count = snapshot.states.len();
    state.metrics.campaigns.store(count as u64, Relaxed);
    state.snapshot.store(Arc::new(snapshot));
    state.metrics.reload(ReloadOutcome::Applied);
    tracing::info!(file = %path.display(), campaigns = count, "campaigns reloaded");
    Ok(count)
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Watches the campaign file until the bidder is dropped.
pub(crate) async fn watch(state: Weak<State>) {
    let mut last = state.upgrade().and_then(|s| stamp(&s.config.campaigns));
    loop {
        tokio::time::sleep(POLL_INTERVAL).await;
        let Some(state) = state.upgrade() else { return };
        let now = stamp(&state.config.campaigns);
        if now.is_some() && now != last {
            last = now;
            let _ = reload(&state).await;
        }
    }
}
