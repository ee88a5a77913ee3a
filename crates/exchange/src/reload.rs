//! Changing the bidder list while serving. The configuration file is read, parsed and
//! validated aside (on a blocking thread: validation resolves bidder hosts), the next
//! `Roster` is built from it and swapped in with one atomic store; auctions already running
//! finish with the roster they started with. A file that fails at any step leaves the last good
//! configuration serving: the reason is logged and counted in
//! `gavel_exchange_config_reloads_total{outcome="unreadable"|"invalid"}`.
//!
//! The live sections ([`crate::config::Live`]: `[[bidders]]`, `[[sellers]]` with their keys, so
//! a key is rotated without a restart, `open_to_all_sellers`, `[privacy]`, `[currency]`) take
//! effect. The fixed ones size things built once at start (the listener, pools' limits, the
//! admission gate, the notice workers); a reload that changes them still applies the live
//! ones, and names the fixed keys that wait for a restart.
//!
//! Reloads run when the file changes ([`Exchange::watch`], over `settings::follow`) and when
//! asked (the binary calls [`Exchange::reload`] on SIGHUP).
//!
//! With `[fleet]`, the bidders and sellers may come from a document pushed to a NATS
//! key-value bucket instead (`fleet_doc`, docs/fleet.md): each new signed revision is one more
//! reload through the same path, the pushed lists in place of the file's, refused as a whole
//! (`gavel_exchange_config_push_refused_total{reason}`: unsigned, forged, older, naming a
//! secret the node does not allow, invalid) or applied as a whole. While a pushed revision is
//! in force it wins: a change of the file still applies the file's other sections, never its
//! lists. Deleting the key changes nothing: no signature vouches for a deletion.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::config::{Config, ConfigError, Live, Omitted, Validated};
use crate::fleet_doc::{DEFAULT_KEY, RosterDocument};
use crate::outcome::ReloadOutcome;
use crate::roster::{Roster, RosterChange};
use crate::running::LiveSet;
use crate::sellers::Sellers;
use crate::state::{Exchange, State};

/// What an applied reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    pub bidders: RosterChange,
    /// Sections whose new values were not applied: they wait for a restart.
    pub restart_needed: Vec<String>,
}

/// Why a reload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadError {
    /// The file could not be read (its message names the path).
    #[error("{0}")]
    Unreadable(settings::ReadError),
    #[error("{path} refused: {reason}")]
    Invalid { path: String, reason: String },
    #[error("this exchange was configured from text, not a file: there is nothing to reload")]
    NoFile,
    /// A revision of the fleet's key that is not a document this node takes.
    #[error("fleet revision {revision} refused: {refusal}")]
    Refused {
        revision: u64,
        refusal: fleet::Refusal,
    },
}

impl ReloadError {
    fn outcome(&self) -> ReloadOutcome {
        match self {
            ReloadError::Unreadable(_) | ReloadError::NoFile => ReloadOutcome::Unreadable,
            ReloadError::Invalid { .. } | ReloadError::Refused { .. } => ReloadOutcome::Invalid,
        }
    }

    /// Why a pushed revision did not serve, for `gavel_exchange_config_push_refused_total`.
    fn push_reason(&self) -> fleet::PushRefused {
        match self {
            ReloadError::Refused { refusal, .. } => refusal.reason(),
            _ => fleet::PushRefused::Invalid,
        }
    }
}

/// A seller kept by name keeps counting where it was.
fn carry_seller_counts(old: &Sellers, new: &Sellers) {
    use std::sync::atomic::Ordering::Relaxed;
    for seller in new.iter() {
        if let Some(before) = old.named(&seller.name) {
            seller
                .requests
                .store(before.requests.load(Relaxed), Relaxed);
        }
    }
    if let (Some(before), Some(now)) = (old.anonymous(), new.anonymous()) {
        now.requests.store(before.requests.load(Relaxed), Relaxed);
    }
}

/// The keys of `new` that differ from what runs: the fixed sections ([`Running`]) only a
/// restart applies. `[section]` for a top-level table, `key` for a top-level value; in key
/// order. A section added to [`Config`] later is compared without anyone listing it.
pub fn restart_only_changes(running: &Config<Omitted>, new: &Config<Omitted>) -> Vec<String> {
    let (Ok(running), Ok(new)) = (serde_json::to_value(running), serde_json::to_value(new)) else {
        // Not reachable (a configuration always serializes): say so rather than claim nothing.
        return vec!["(configuration not comparable)".to_owned()];
    };
    let empty = serde_json::Map::new();
    let (a, b) = (
        running.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|key| a.get(*key) != b.get(*key))
        .map(|key| {
            if [a.get(key), b.get(key)]
                .into_iter()
                .flatten()
                .any(Value::is_object)
            {
                format!("[{key}]")
            } else {
                key.clone()
            }
        })
        .collect()
}

/// Reads and validates the file at `path`, with a pushed document's bidders and sellers in
/// place of the file's when given (blocking: call it off the runtime's threads).
fn load(path: &Path, pushed: Option<&RosterDocument>) -> Result<Validated, ReloadError> {
    Config::load_with(path, |config| match pushed {
        Some(doc) => doc.over(config),
        None => config,
    })
    .map_err(|e| match e {
        ConfigError::Read(e) => ReloadError::Unreadable(e),
        e => ReloadError::Invalid {
            path: path.display().to_string(),
            reason: e.to_string(),
        },
    })
}

/// Where a reload takes the bidders and sellers from.
#[derive(Debug, Clone)]
enum Lists {
    /// The pushed revision in force, if any, else the file's (a file change, SIGHUP).
    InForce,
    /// A new revision from the fleet bucket.
    Pushed(fleet::Pushed),
}

/// What a reload validates: the file (or, for an exchange built from text, the configuration
/// it runs), with `pushed`'s lists in place of its own. Blocking.
fn load_lists(
    source: Option<&Path>,
    running: &Config,
    pushed: Option<(u64, &RosterDocument)>,
) -> Result<Validated, ReloadError> {
    // `running`: the fixed sections with the live ones in force, for an exchange built from
    // text.
    match (source, pushed) {
        (Some(path), pushed) => load(path, pushed.map(|(_, doc)| doc)),
        (None, Some((revision, doc))) => {
            doc.over(running.clone())
                .validate()
                .map_err(|e| ReloadError::Invalid {
                    path: format!("fleet revision {revision}"),
                    reason: e.to_string(),
                })
        }
        (None, None) => running
            .clone()
            .validate()
            .map_err(|e| ReloadError::Invalid {
                path: "the running configuration".to_owned(),
                reason: e.to_string(),
            }),
    }
}

impl Exchange {
    /// Reloads the bidder list from the file the configuration was loaded from (what SIGHUP
    /// does); on any error the last good configuration keeps serving.
    pub async fn reload(&self) -> Result<ReloadReport, ReloadError> {
        if self.state.config.source.is_none() && self.state.metrics.served.pushed().is_none() {
            return Err(ReloadError::NoFile);
        }
        reload(&self.state, Lists::InForce, None).await
    }

    /// Reloads the bidder list from the configuration file at `path`; on any error the last
    /// good configuration keeps serving.
    pub async fn reload_from(&self, path: &Path) -> Result<ReloadReport, ReloadError> {
        reload(&self.state, Lists::InForce, Some(path)).await
    }

    /// Applies a change of the fleet bucket's key (what the `[fleet]` follower hands over):
    /// a signed document's bidders and sellers in place of the file's. A revision the follower
    /// refused (unsigned, forged, older, a deletion) is counted and logged here. On any error
    /// the configuration in force keeps serving.
    pub async fn apply_pushed(&self, change: fleet::Change) -> Result<ReloadReport, ReloadError> {
        match change {
            fleet::Change::Put(pushed) => reload(&self.state, Lists::Pushed(pushed), None).await,
            fleet::Change::Refused { revision, refusal } => {
                let e = ReloadError::Refused { revision, refusal };
                let origin = format!("fleet revision {revision}");
                Err(refused(&self.state, Pushed::Yes, &origin, e))
            }
        }
    }

    /// Follows the file the configuration was loaded from, and the key files it names,
    /// reloading on each change, until the exchange is dropped. Does nothing for a
    /// configuration built from text.
    /// With `[fleet]`, also follows the bucket's key (`exchange.roster` unless `fleet.key`
    /// says otherwise), from NATS whenever it is there.
    pub fn watch(&self) {
        if let Some(section) = &self.state.config.config.rtb.fleet {
            fleet::follow(
                Arc::downgrade(&self.state),
                section.clone(),
                section.key_or(DEFAULT_KEY).to_owned(),
                "gavel-exchange",
                |state, change| async move {
                    let _ = Exchange { state }.apply_pushed(change).await;
                },
            );
        }
        if let Some(tls) = &self.state.config.listener_tls {
            http_front::ServerTls::watch(tls);
        }
        if self.state.config.source.is_none() {
            return;
        }
        // The list is the latest good configuration's: a reload that names new key files
        // starts following them.
        settings::follow_files(
            Arc::downgrade(&self.state),
            |state: &State| state.watched.load().to_vec(),
            |state| async move {
                let _ = Exchange { state }.reload().await;
            },
        );
    }
}

/// One reload: `path` in place of the file the configuration came from, when given.
async fn reload(
    state: &State,
    lists: Lists,
    path: Option<&Path>,
) -> Result<ReloadReport, ReloadError> {
    let _one_at_a_time = state.reload_lock.lock().await;
    let served = &state.metrics.served;
    let pushed = match &lists {
        Lists::InForce => served.pushed(),
        Lists::Pushed(p) => Some(p.clone()),
    };
    let source = path
        .map(Path::to_path_buf)
        .or_else(|| state.config.source.clone());
    let origin = match (&lists, &source) {
        (Lists::Pushed(p), _) => format!("fleet revision {}", p.revision),
        (_, Some(path)) => path.display().to_string(),
        (_, None) => "the running configuration".to_owned(),
    };
    let dir = source.as_deref().and_then(Path::parent);
    let allowed = state.config.config.rtb.fleet.as_ref();
    let doc = match &pushed {
        None => None,
        Some(p) => match RosterDocument::parse(&p.value)
            .and_then(|doc| doc.check_secrets(allowed, dir).map(|()| doc))
        {
            Ok(doc) => Some((p.revision, doc)),
            Err(e) => {
                let e = ReloadError::Invalid {
                    path: format!("fleet revision {}", p.revision),
                    reason: e.to_string(),
                };
                return Err(refused(state, lists.pushed(), &origin, e));
            }
        },
    };
    let running = state
        .config
        .config
        .clone()
        .with_live(Live::clone(&state.live.load()));
    // Loading looks hosts up, and so do the warnings: both off the runtime's threads.
    let loaded = match tokio::task::spawn_blocking(move || {
        load_lists(
            source.as_deref(),
            &running,
            doc.as_ref().map(|(r, d)| (*r, d)),
        )
        .inspect(|v| {
            for w in crate::warnings::warnings(v) {
                tracing::warn!("{w}");
            }
        })
    })
    .await
    {
        Ok(result) => result,
        Err(e) => Err(ReloadError::Unreadable(settings::ReadError::Io {
            path: origin.clone(),
            reason: format!("loading stopped: {e}"),
        })),
    };
    let validated = match loaded {
        Ok(v) => v,
        Err(e) => return Err(refused(state, lists.pushed(), &origin, e)),
    };
    let watched = validated.watched_files();
    let (mut fixed, live) = validated.split();
    if let Err(e) = fixed
        .config
        .front
        .keep_overrides(&state.config.config.front)
    {
        let e = ReloadError::Invalid {
            path: origin.clone(),
            reason: format!("with the command line's addresses: {e}"),
        };
        return Err(refused(state, lists.pushed(), &origin, e));
    }
    let report = ReloadReport {
        bidders: apply(state, live),
        restart_needed: restart_only_changes(&state.config.config, &fixed.config),
    };
    state.watched.store(Arc::new(watched));
    state.metrics.config_reloads.inc(ReloadOutcome::Applied);
    let now = units::Timestamp::now();
    match (lists, &pushed) {
        (Lists::Pushed(p), _) => served.push_applied(p, now),
        (Lists::InForce, None) => served.file_applied(now),
        (Lists::InForce, Some(p)) => tracing::info!(
            revision = p.revision,
            "fleet revision {} is in force and wins over the file: the file's other sections were applied, its [[bidders]] and [[sellers]] were not",
            p.revision
        ),
    }
    let b = &report.bidders;
    tracing::info!(
        from = %origin,
        added = ?b.added,
        removed = ?b.removed,
        changed = ?b.changed,
        unchanged = b.unchanged,
        "configuration applied"
    );
    if !report.restart_needed.is_empty() {
        tracing::warn!(sections = ?report.restart_needed, "these sections changed; they take effect at the next restart");
    }
    Ok(report)
}

/// Whether a refused reload was a pushed revision's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pushed {
    Yes,
    No,
}

impl Lists {
    fn pushed(&self) -> Pushed {
        match self {
            Lists::Pushed(_) => Pushed::Yes,
            Lists::InForce => Pushed::No,
        }
    }
}

/// Counts and logs a refused reload; the error, to return.
fn refused(state: &State, pushed: Pushed, origin: &str, e: ReloadError) -> ReloadError {
    state.metrics.config_reloads.inc(e.outcome());
    if pushed == Pushed::Yes {
        state.metrics.config_push_refused.inc(e.push_reason());
        // Anyone reaching NATS can put revisions by the thousand: a few lines a second, all
        // counted.
        static LIMIT: http_front::log_limit::LogLimit = http_front::log_limit::LogLimit::new(5);
        if let Some(suppressed) = LIMIT.admit_now() {
            tracing::error!(from = %origin, reason = e.push_reason().label(), error = %e, suppressed, "pushed configuration refused; the configuration in force keeps serving");
        }
    } else {
        tracing::error!(from = %origin, reason = e.outcome().label(), error = %e, "configuration refused; the last good configuration keeps serving");
    }
    e
}

/// Swaps in the live sections of a load: the roster, the sellers, privacy, the rates.
fn apply(state: &State, new: LiveSet) -> RosterChange {
    let previous = state.roster.load();
    let (roster, change) = Roster::build(&new, &state.pool_settings, &previous, Instant::now());
    state.metrics.set_bidders(Arc::new(roster.table()));
    state.roster.store(Arc::new(roster));
    carry_seller_counts(&state.sellers.load(), &new.sellers);
    state.metrics.set_sellers(new.sellers.clone());
    state.sellers.store(new.sellers.clone());
    state
        .privacy
        .store(Arc::new(crate::state::PrivacyNow::of(&new)));
    state.rates.apply(&new.live.currency, new.rates.clone());
    state.live.store(Arc::new(new.live));
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed sections of `text`, parsed (validation would read the sellers' keys).
    fn fixed(text: &str) -> Config<Omitted> {
        settings::parse_text::<Config>(text, &settings::EnvOverlay::default())
            .unwrap()
            .split()
            .0
    }

    #[test]
    fn sections_that_need_a_restart_are_named() {
        let base = "open_to_all_sellers = true\n[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:1/\"\n";
        let running = fixed(base);
        let other = fixed(
            "node = \"n2\"\nlisten = \"127.0.0.1:1\"\nopen_to_all_sellers = true\n[http]\nmax_body_bytes = 1000\n\
             [breaker]\nprobes = 5\n[admission]\nmode = \"off\"\n",
        );
        assert_eq!(
            restart_only_changes(&running, &other),
            ["[admission]", "[breaker]", "[http]", "listen", "node"]
        );
    }

    /// Every fixed section is compared, with no list to forget one in: `[records]` was once
    /// left out and its changes silently waited for a restart. The live sections are not.
    #[test]
    fn every_fixed_section_is_named_and_no_live_one() {
        let base = "open_to_all_sellers = true\n[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:1/\"\n";
        let running = fixed(base);
        let live = fixed(
            "[currency]\nmax_age_s = 60\nrates_url = \"https://rates.example/r.json\"\n\
             [privacy]\ngdpr_default = true\n\
             [[bidders]]\nname = \"b\"\nendpoint = \"http://127.0.0.1:2/\"\n\
             [[sellers]]\nname = \"s\"\nkey_env = \"GAVEL_UNSET_FOR_THIS_TEST\"\n",
        );
        assert!(restart_only_changes(&running, &live).is_empty());
        let every = fixed(
            "open_to_all_sellers = true\nadmin_listen = \"127.0.0.1:9\"\n\
             [records]\ndir = \"/elsewhere\"\n[upstream]\ndrain_ms = 7\n[auction]\nmax_imps = 3\n\
             [schain]\nsid = \"x\"\n[notices]\nworkers = 3\n[deadline]\nmax_tmax_ms = 900\n\
             [security]\naudit_log = \"a.log\"\n",
        );
        assert_eq!(
            restart_only_changes(&running, &every),
            [
                "admin_listen",
                "[auction]",
                "[deadline]",
                "[notices]",
                "[records]",
                "[schain]",
                "[security]",
                "[upstream]"
            ]
        );
    }

    #[test]
    fn unreadable_and_invalid_files_say_why() {
        let dir = std::env::temp_dir().join(format!("gavel-reload-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = load(&dir.join("missing.toml"), None).unwrap_err();
        assert_eq!(missing.outcome(), ReloadOutcome::Unreadable);
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "[[bidders]]\nname = \"a\"\nendpoint = \"ftp://x/\"\n").unwrap();
        let e = load(&bad, None).unwrap_err();
        assert_eq!(e.outcome(), ReloadOutcome::Invalid);
        assert!(e.to_string().contains("bidders[0].endpoint"), "{e}");
        let huge = dir.join("huge.toml");
        std::fs::write(&huge, vec![b'#'; crate::config::MAX_CONFIG_BYTES + 1]).unwrap();
        assert!(load(&huge, None).unwrap_err().to_string().contains("limit"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
