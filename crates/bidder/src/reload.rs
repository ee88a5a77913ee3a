//! Campaign changes while serving: the file is read, validated and indexed aside (on a blocking
//! thread: 100,000 campaigns take a while to index), then swapped in with one atomic pointer
//! store. A file that fails leaves the last good set serving; the failure is logged and
//! counted (`gavel_bidder_campaign_reloads_total{outcome="failed"}`).
//!
//! Reloads run when the file changes (`Bidder::watch`, over `settings::follow`), on
//! `POST /admin/reload`, and on SIGHUP (the binary calls `Bidder::reload`).
//!
//! With `[fleet]`, the campaign set may come from a NATS key-value bucket instead
//! (`fleet_doc`, docs/fleet.md): each new signed revision is indexed aside and swapped in the
//! same way, or refused as a whole (`gavel_bidder_config_push_refused_total{reason}`: unsigned,
//! forged, older, invalid). While a pushed revision is in force it wins: a change of the file
//! is logged and not applied. Deleting the key changes nothing: no signature vouches for it.
//! A pushed set may lower a budget the ledger holds, never raise one
//! ([`ledger::LimitsFrom::Push`]): a raise waits for the budget writer and shows as a conflict.
//!
//! The price keys (`security.price_key_file`) follow the same rules: read again when their
//! file changes and on SIGHUP or `POST /admin/reload`; a file that fails keeps the keys in
//! force (`gavel_bidder_price_key_reloads_total{outcome="failed"}`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use campaigns::limits::MAX_FILE_BYTES;
use campaigns::{CampaignError, CampaignSet, Format, Snapshot};
use units::Timestamp;

use ledger::LimitsFrom;

use crate::config::BidderConfig;
use crate::limits_check::LimitsView;
use crate::metrics::{ReloadFailure, ReloadOutcome};
use crate::prices::PriceKeys;
use crate::state::State;

/// Overrides `security.price_key_file`: the price keys, separated by commas.
pub const PRICE_KEYS_ENV: &str = "GAVEL_PRICE_KEYS";

/// The price keys `security` names (its file, or [`PRICE_KEYS_ENV`]), each at least
/// [`settings::MIN_SECRET_BYTES`] bytes, at most [`price_token::MAX_KEYS`]; an error naming the
/// setting otherwise. Blocking (reads a small file).
pub(crate) fn load_price_keys(config: &BidderConfig) -> Result<PriceKeys, settings::Invalid> {
    let s = &config.front.security;
    const FILE_KEY: &str = "security.price_key_file";
    let from_env = std::env::var(PRICE_KEYS_ENV).ok().filter(|v| !v.is_empty());
    let (name, keys) = match (&s.price_key_file, from_env) {
        (Some(_), Some(_)) => {
            return Err(settings::Invalid::new(
                FILE_KEY,
                format!("is set, and so is the environment variable {PRICE_KEYS_ENV}; use one"),
            ));
        }
        (Some(path), None) => (
            FILE_KEY,
            settings::read_key_file(FILE_KEY, path)
                .map_err(|e| settings::Invalid::new(FILE_KEY, e.to_string()))?,
        ),
        (None, Some(value)) => (PRICE_KEYS_ENV, settings::split_key_list(&value)),
        (None, None) => (FILE_KEY, Vec::new()),
    };
    if keys.len() > price_token::MAX_KEYS {
        return Err(settings::Invalid::new(
            name,
            format!(
                "holds {} keys; at most {}",
                keys.len(),
                price_token::MAX_KEYS
            ),
        ));
    }
    if s.price_key_file.is_some() && keys.is_empty() {
        return Err(settings::Invalid::new(name, "holds no key"));
    }
    let mut ring = Vec::with_capacity(keys.len());
    for (n, key) in keys.iter().enumerate() {
        let secret = settings::Secret::new(key.as_bytes(), &format!("{name} (key {})", n + 1))?;
        ring.push(price_token::PriceKey::new(secret.expose()));
    }
    if s.require_price_token && ring.is_empty() {
        return Err(settings::Invalid::new(
            "security.require_price_token",
            format!("is true, which needs a price key: set {FILE_KEY} or {PRICE_KEYS_ENV}"),
        ));
    }
    Ok(PriceKeys::new(ring, s.require_price_token))
}

/// Reads the price keys again; on any error the keys in force stay. The ids now accepted.
pub(crate) async fn reload_price_keys(state: &State) -> Result<Vec<String>, settings::Invalid> {
    let config = state.config.clone();
    let loaded = tokio::task::spawn_blocking(move || load_price_keys(&config))
        .await
        .unwrap_or_else(|e| {
            Err(settings::Invalid::new(
                "security.price_key_file",
                format!("loading the price keys stopped: {e}"),
            ))
        });
    match loaded {
        Ok(keys) => {
            let ids = keys.ids();
            state.prices.store(Arc::new(keys));
            state.metrics.price_key_reloads.inc(ReloadOutcome::Applied);
            tracing::info!(keys = ?ids, "price keys applied");
            Ok(ids)
        }
        Err(e) => {
            state.metrics.price_key_reloads.inc(ReloadOutcome::Failed);
            tracing::error!(error = %e, "price keys refused; the keys in force stay");
            Err(e)
        }
    }
}

/// Why a campaign set (the file, or a pushed one) could not be loaded: the counted reason and
/// the message naming the file and the campaign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LoadError {
    pub why: ReloadFailure,
    pub message: String,
}

/// Why a reload left the campaigns in force serving.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadError {
    /// The campaign file, or the pushed set, was refused.
    #[error("{0}")]
    Campaigns(#[from] LoadError),
    /// A revision of the fleet's key that is not a document this node takes.
    #[error("fleet revision {revision} refused: {refusal}")]
    Refused {
        revision: u64,
        refusal: fleet::Refusal,
    },
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
    build(move || read_set(&path), previous, interval).await
}

/// [`load`] for a pushed campaign set.
async fn load_pushed(
    value: bytes::Bytes,
    previous: Option<Arc<Snapshot>>,
    interval: Duration,
) -> Result<Snapshot, LoadError> {
    let read = move || {
        crate::fleet_doc::campaign_set(&value).map_err(|e| LoadError {
            why: ReloadFailure::of_kind(e.kind()),
            message: e.to_string(),
        })
    };
    build(read, previous, interval).await
}

/// Reads a set with `read`, then indexes it and builds its snapshot, on a blocking thread.
async fn build(
    read: impl FnOnce() -> Result<CampaignSet, LoadError> + Send + 'static,
    previous: Option<Arc<Snapshot>>,
    interval: Duration,
) -> Result<Snapshot, LoadError> {
    let build = move || {
        let set = read()?;
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
/// stays. While a pushed set is in force the file is not applied (the bucket wins).
pub(crate) async fn reload(state: &State) -> Result<usize, ReloadError> {
    let _one_at_a_time = state.reload_lock.lock().await;
    if let Some(pushed) = state.metrics.served.pushed() {
        tracing::warn!(
            file = %state.config.campaigns.display(),
            revision = pushed.revision,
            "fleet revision {} is in force and wins over the campaign file: the file was not applied",
            pushed.revision
        );
        return Ok(state.snapshot.load().states.len());
    }
    reload_file(state).await
}

/// Applies a change of the fleet bucket's key (what the `[fleet]` follower hands over): a
/// signed campaign set. A revision the follower refused (unsigned, forged, older, a deletion)
/// is counted and logged here. On any error the set in force keeps serving.
pub(crate) async fn apply_pushed(
    state: &State,
    change: fleet::Change,
) -> Result<usize, ReloadError> {
    let _one_at_a_time = state.reload_lock.lock().await;
    let pushed = match change {
        fleet::Change::Put(pushed) => pushed,
        fleet::Change::Refused { revision, refusal } => {
            state.metrics.config_push_refused.inc(refusal.reason());
            // Anyone reaching NATS can put revisions by the thousand: a few lines a second,
            // all counted.
            static LIMIT: http_front::log_limit::LogLimit = http_front::log_limit::LogLimit::new(5);
            if let Some(suppressed) = LIMIT.admit_now() {
                tracing::error!(revision, reason = refusal.reason().label(), error = %refusal, suppressed, "fleet revision refused; the campaigns in force keep serving");
            }
            return Err(ReloadError::Refused { revision, refusal });
        }
    };
    let interval = Duration::from_millis(state.config.pacing.control_interval_ms);
    let previous = Some(state.snapshot.load_full());
    let snapshot = match load_pushed(pushed.value.clone(), previous, interval).await {
        Ok(snapshot) => snapshot,
        Err(e) => {
            state.metrics.reload_failed(e.why);
            state
                .metrics
                .config_push_refused
                .inc(fleet::PushRefused::Invalid);
            tracing::error!(revision = pushed.revision, error = %e.message, reason = e.why.label(), "pushed campaign set refused; the campaigns in force keep serving");
            return Err(e.into());
        }
    };
    let revision = pushed.revision;
    let count = install(state, snapshot, LimitsFrom::Push).await;
    state.metrics.served.push_applied(pushed, Timestamp::now());
    tracing::info!(revision, campaigns = count, "pushed campaign set applied");
    Ok(count)
}

/// Reads the campaign file and swaps it in; the caller holds the reload lock.
async fn reload_file(state: &State) -> Result<usize, ReloadError> {
    let path = &state.config.campaigns;
    let interval = Duration::from_millis(state.config.pacing.control_interval_ms);
    let snapshot = match load(path, Some(state.snapshot.load_full()), interval).await {
        Ok(snapshot) => snapshot,
        Err(e) => {
            state.metrics.reload_failed(e.why);
            tracing::error!(file = %path.display(), error = %e.message, reason = e.why.label(), "campaign file refused; the last good campaigns keep serving");
            return Err(e.into());
        }
    };
    let count = install(state, snapshot, LimitsFrom::Own).await;
    state.metrics.served.file_applied(Timestamp::now());
    tracing::info!(file = %path.display(), campaigns = count, "campaign file applied");
    Ok(count)
}

/// Who the limits of the set in force come from: what the pacing tick's retry writes them as.
pub(crate) fn limits_from(state: &State) -> LimitsFrom {
    if state.limits_pushed.load(Relaxed) {
        LimitsFrom::Push
    } else {
        LimitsFrom::Own
    }
}

/// Swaps a validated, indexed set in; how many campaigns now serve.
async fn install(state: &State, snapshot: Snapshot, from: LimitsFrom) -> usize {
    state.limits_pushed.store(from == LimitsFrom::Push, Relaxed);
    // Budgets first, so that no new campaign bids before the ledger knows its limits. If the
    // ledger cannot be told (Redis down), the new set still serves: its campaigns' reservations
    // are refused until the pacing tick, which retries, gets the limits through.
    match state.ledger.set_campaigns(&snapshot.limits(), from).await {
        Ok(statuses) => {
            state.limits_written_once.store(true, Relaxed);
            note_limits(state, statuses)
        }
        Err(e) => {
            tracing::warn!(error = %e, "campaign limits not yet written to the ledger; retrying on the next tick");
            state.limits_pending.store(true, Relaxed);
        }
    }
    let count = snapshot.states.len();
    state.metrics.campaigns.set(count as u64);
    state.snapshot.store(Arc::new(snapshot));
    state.metrics.reload(ReloadOutcome::Applied);
    count
}

/// Records what the ledger holds beside the campaign file: the gauges, the admin page, and one
/// warning whenever the campaigns in conflict or missing change (not at every check).
pub(crate) fn note_limits(state: &State, statuses: Vec<ledger::LimitsStatus>) {
    let view = LimitsView::of(statuses);
    state
        .metrics
        .limit_conflicts
        .set(view.conflicts.len() as u64);
    state.metrics.limits_missing.set(view.missing.len() as u64);
    let before = state.limits.load();
    if view.changed_from(&before) {
        if !view.conflicts.is_empty() {
            tracing::warn!(
                campaigns = view.conflicts.len(),
                first = %LimitsView::named(&view.conflicts),
                role = ?state.ledger.limits_role(),
                "campaign limits in the ledger differ from the campaign file; the ledger's stand \
                 (another writer changed them, or this instance follows): fix the file, or change \
                 them with PUT /admin/campaigns/<id>/limits"
            );
        }
        if !view.missing.is_empty() {
            tracing::warn!(
                campaigns = view.missing.len(),
                first = %LimitsView::named(&view.missing),
                "campaigns the ledger does not hold are not bid on (no budget of record) until their writer writes them"
            );
        }
        if view.conflicts.is_empty() && view.missing.is_empty() {
            tracing::info!("campaign limits agree with the ledger");
        }
    }
    state.limits.store(Arc::new(view));
}

/// Reads the limits of record back and compares them with the campaign file in force (a
/// follower picks up a writer's change here); a ledger that does not answer leaves the last
/// comparison.
pub(crate) async fn check_limits(state: &State) {
    let snapshot = state.snapshot.load_full();
    match state.ledger.limits_status(&snapshot.limits()).await {
        Ok(statuses) => note_limits(state, statuses),
        Err(e) => {
            tracing::debug!(error = %e, "limits of record not read; the last comparison stays")
        }
    }
}

/// Follows the campaign file and the price key file, reloading each on its changes, and with
/// `[fleet]` the bucket's key, until the bidder is dropped.
pub(crate) fn watch(state: &Arc<State>) {
    if let Some(section) = &state.config.rtb.fleet {
        fleet::follow(
            Arc::downgrade(state),
            section.clone(),
            section.key_or(crate::fleet_doc::DEFAULT_KEY).to_owned(),
            "gavel-bidder",
            |state, change| async move {
                let _ = apply_pushed(&state, change).await;
            },
        );
    }
    let path = state.config.campaigns.clone();
    settings::follow(Arc::downgrade(state), path, |state| async move {
        let _ = reload(&state).await;
    });
    if let Some(path) = state.config.front.security.price_key_file.clone() {
        settings::follow(Arc::downgrade(state), path, |state| async move {
            let _ = reload_price_keys(&state).await;
        });
    }
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
