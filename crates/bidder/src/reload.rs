//! Campaign changes while serving: the file is read, validated and indexed aside (on a blocking
//! thread: 100,000 campaigns take a while to index), then swapped in with one atomic pointer
//! store. A file that fails leaves the last good set serving; the failure is logged and
//! counted (`gavel_bidder_campaign_reloads_total{outcome="failed"}`).
//!
//! Reloads run when the file changes (`Bidder::watch`, over `settings::follow`), on
//! `POST /admin/reload`, and on SIGHUP (the binary calls `Bidder::reload`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use campaigns::limits::MAX_FILE_BYTES;
use campaigns::{CampaignError, CampaignSet, Format, Snapshot};
use pacing::Timestamp;

use crate::metrics::{ReloadFailure, ReloadOutcome};
use crate::state::State;

/// Why a campaign file could not be loaded.
#[derive(Debug)]
pub(crate) struct LoadError {
    pub(crate) why: ReloadFailure,
    pub(crate) message: String,
}

/// Reads the campaign file at `path` (JSON or TOML by its extension, at most
/// [`MAX_FILE_BYTES`]), then parses, validates and indexes it. Blocking.
fn read_set(path: &Path) -> Result<CampaignSet, LoadError> {
    let Some(format) = Format::from_path(path) else {
        let e = CampaignError::UnknownFormat {
            file: path.to_owned(),
        };
        return Err(LoadError {
            why: ReloadFailure::Format,
            message: e.to_string(),
        });
    };
    let limit = usize::try_from(MAX_FILE_BYTES).unwrap_or(usize::MAX);
    let bytes = settings::read_bounded_bytes(path, limit).map_err(|e| LoadError {
        why: match e {
            settings::ReadError::TooLarge { .. } => ReloadFailure::TooLarge,
            settings::ReadError::Io { .. } | settings::ReadError::NotText { .. } => {
                ReloadFailure::Io
            }
        },
        message: e.to_string(),
    })?;
    CampaignSet::from_bytes(format, &bytes).map_err(|e| LoadError {
        why: ReloadFailure::of_kind(e.kind()),
        message: e.to_string(),
    })
}

/// Loads, validates and indexes the campaign file and builds its snapshot (keeping the running
/// state of campaigns in `previous`), all on a blocking thread: 100,000 campaigns take a while,
/// and the runtime's threads must keep answering bids meanwhile.
pub(crate) async fn load(
    path: &Path,
    previous: Option<Arc<Snapshot>>,
    interval: Duration,
) -> Result<Snapshot, LoadError> {
    let path = path.to_owned();
    let build = move || {
        let set = read_set(&path)?;
        Ok(Snapshot::build(
            set,
            previous.as_deref(),
            Timestamp::now(),
            interval,
        ))
    };
    match tokio::task::spawn_blocking(build).await {
        Ok(result) => result,
        Err(e) => Err(LoadError {
            why: ReloadFailure::Stopped,
            message: format!("loading campaigns stopped: {e}"),
        }),
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
            state.metrics.reload_failed(e.why);
            tracing::error!(file = %path.display(), error = %e.message, reason = e.why.label(), "campaign reload refused; the last good campaigns keep serving");
            return Err(e.message);
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

/// Follows the campaign file, reloading it on each change, until the bidder is dropped.
pub(crate) fn watch(state: &Arc<State>) {
    let path = state.config.campaigns.clone();
    settings::follow(Arc::downgrade(state), path, |state| async move {
        let _ = reload(&state).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAMPAIGN_JSON: &str = r#"[{"id": "c1", "budget": {"total": 1}, "bid": {"cpm": 2},
        "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "x"}]}]"#;
    const CAMPAIGN_TOML: &str = "[[campaign]]\nid = \"c1\"\nbudget = { total = 1 }\n\
        bid = { cpm = 2 }\ncreatives = [{ id = \"cr\", w = 300, h = 250, adm = \"x\" }]\n";

    #[test]
    fn files_load_by_extension_and_failures_say_why() {
        let dir = testkit::TempDir::new("bidder-read-set");
        let json = dir.file("c.JSON", CAMPAIGN_JSON);
        let toml = dir.file("c.toml", CAMPAIGN_TOML);
        let a = read_set(&json).map_err(|e| e.message);
        let b = read_set(&toml).map_err(|e| e.message);
        assert_eq!(
            a.as_ref().map(CampaignSet::campaigns),
            b.as_ref().map(CampaignSet::campaigns)
        );
        assert_eq!(a.map(|s| s.len()), Ok(1));
        let why = |name: &str| read_set(&dir.join(name)).err().map(|e| e.why);
        dir.file("c.yaml", CAMPAIGN_JSON);
        assert_eq!(why("c.yaml"), Some(ReloadFailure::Format));
        assert_eq!(why("missing.json"), Some(ReloadFailure::Io));
        dir.file("bad.json", &CAMPAIGN_JSON.replace("\"c1\"", "\"\""));
        let bad = read_set(&dir.join("bad.json")).err();
        assert_eq!(bad.as_ref().map(|e| e.why), Some(ReloadFailure::Invalid));
        assert!(
            bad.is_some_and(|e| e.message.starts_with("campaigns[0].id")),
            "the message names the field"
        );
    }
}
