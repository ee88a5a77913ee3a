//! Following one key of the bucket while serving: every new revision is checked (signed by a
//! trusted key for this bucket and key, newer than the last taken) and handed to the server's
//! own reload path, once, in order; a refused one is handed over as refused, for the server
//! to count and log.
//!
//! | situation | what happens |
//! | --- | --- |
//! | start, NATS down or the bucket missing | nothing is applied (the local file serves); tried again every `resync_ms` |
//! | a session opens | the latest revision is read at once (catching up on whatever was missed), then a watch pushes each new one |
//! | the first read of a process | the newest signed document (highest serial) of the key's history is taken; the latest revision, if another (a forgery, a deletion, an old document put again), is refused: a restart does not lose the last good push to them |
//! | the watch is quiet for `resync_ms` | the latest revision is read again: a watch lost without a word costs at most that long |
//! | NATS goes away | the read fails, the session ends, a new one starts every `resync_ms` until the server answers; the client reconnects on its own |
//! | an unsigned, wrongly signed, misplaced or older document, or one whose serial is more than ten minutes ahead of this clock | [`Change::Refused`]; the server keeps what it serves |
//! | the first read, and the trusted keys or the key's history cannot be read | nothing is taken (the order of documents is unknown): logged, tried again every `resync_ms` |
//! | the key deleted or purged | [`Change::Refused`] ([`Refusal::Removed`]): nothing signed it |
//! | a revision the server refuses | not offered again: the next push is |
//!
//! The order of documents is their signed serial, not the bucket's revision: anyone who can
//! publish can put an old signed document again as a new revision. The newest serial taken is
//! kept while the process runs; a restarted node starts from the newest signed document in the
//! key's history (the bucket keeps ten revisions: ten forged puts after the operator's last
//! push push it out of the history, which NATS credentials are there to prevent).
//!
//! The task ends when the server it follows for is dropped.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_nats::jetstream::context::Context;
use async_nats::jetstream::kv::{self, Entry, Operation};
use futures_util::StreamExt;

use crate::config::FleetSection;
use crate::connect::{Patience, connect, open};
use crate::keys::TrustedKeys;
use crate::signed::{Opened, Place, Refusal};
use crate::version::Pushed;

/// Most history entries read when looking back for the newest signed document: a bucket made
/// by `gavel config push` keeps ten; one that keeps far more is refused, not half read.
const MAX_HISTORY: usize = 1024;
/// Bound on reading the key's history (ten values of up to 1 MiB each).
const HISTORY_TIMEOUT: Duration = Duration::from_secs(10);

/// A change of the followed key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A signed document, newer than any taken before.
    Put(Pushed),
    /// A revision refused before it reached the server: the configuration in force stays.
    Refused { revision: u64, refusal: Refusal },
}

impl Change {
    pub fn revision(&self) -> u64 {
        match self {
            Change::Put(p) => p.revision,
            Change::Refused { revision, .. } => *revision,
        }
    }
}

/// What a session hands on: the owner and what to do with each change.
struct Follower<T, F> {
    owner: Weak<T>,
    apply: F,
    bucket: String,
    key: String,
    /// `fleet.trusted_keys_file`, read at every revision (keys rotate without a restart).
    trusted_keys: Option<PathBuf>,
    /// The last revision offered (applied or refused): never offered twice.
    seen: Option<u64>,
    /// The newest serial taken: an older or equal one is refused.
    newest: Option<u64>,
    /// The last problem logged: logged again only when it changes, not every `resync_ms`
    /// while NATS is away; cleared once the bucket answers.
    last_problem: Option<String>,
}

impl<T, F, Fut> Follower<T, F>
where
    F: Fn(Arc<T>, Change) -> Fut,
    Fut: Future<Output = ()>,
{
    fn place(&self) -> Place<'_> {
        Place {
            bucket: &self.bucket,
            key: &self.key,
        }
    }

    /// The change `entry` makes, its serial checked against the newest taken.
    async fn change_of(&mut self, entry: &Entry) -> Change {
        let opened = match load_trusted(self.trusted_keys.clone()).await {
            Ok(trusted) => judge(entry, self.place(), &trusted),
            Err(refusal) => Err(refusal),
        };
        self.taken(entry.revision, opened)
    }

    /// `opened` as a change of `revision`: taken if newer than the newest taken, and not from
    /// the future (a serial far ahead of this clock would pin every later push as stale).
    fn taken(&mut self, revision: u64, opened: Result<Opened, Refusal>) -> Change {
        let opened = opened.and_then(|o| match self.newest {
            Some(newest) if o.serial <= newest => Err(Refusal::Stale {
                serial: o.serial,
                newest,
            }),
            _ => not_ahead(o),
        });
        match opened {
            Ok(o) => {
                self.newest = Some(o.serial);
                Change::Put(Pushed {
                    revision,
                    serial: o.serial,
                    signer: o.signer,
                    value: o.document,
                })
            }
            Err(refusal) => Change::Refused { revision, refusal },
        }
    }

    /// Hands `change` to the owner. False once the owner is gone.
    async fn hand(&mut self, change: Change) -> bool {
        match self.owner.upgrade() {
            Some(owner) => {
                (self.apply)(owner, change).await;
                true
            }
            None => false,
        }
    }

    /// Offers `entry` unless it was offered already. False once the owner is gone.
    async fn offer(&mut self, entry: Entry) -> bool {
        if self.seen == Some(entry.revision) {
            return self.owner.strong_count() > 0;
        }
        self.seen = Some(entry.revision);
        let change = self.change_of(&entry).await;
        self.hand(change).await
    }

    /// The first read of a process: the newest signed document of the key's history (the
    /// bucket's revisions are not the documents' order: anyone who can publish can put an old
    /// signed document last). The latest revision, when it is not that one, is handed over
    /// first as refused, to be counted.
    async fn first_offer(&mut self, store: &kv::Store, entry: Entry) -> Result<bool, String> {
        // Fail closed: without the trusted keys or the history, the order of documents cannot
        // be known; nothing is taken and the session is tried again after `resync_ms`.
        let trusted = load_trusted(self.trusted_keys.clone())
            .await
            .map_err(|e| e.to_string())?;
        let best = newest_in_history(store, self.place(), &trusted).await?;
        self.seen = Some(entry.revision);
        let latest = judge(&entry, self.place(), &trusted).and_then(not_ahead);
        let Some((revision, best)) = best.filter(|(revision, _)| *revision != entry.revision)
        else {
            let change = self.taken(entry.revision, latest);
            return Ok(self.hand(change).await);
        };
        let refusal = match latest {
            Err(refusal) => refusal,
            Ok(older) if older.serial <= best.serial => Refusal::Stale {
                serial: older.serial,
                newest: best.serial,
            },
            // The history ended before the latest (a put meanwhile): take the latest.
            latest @ Ok(_) => {
                let change = self.taken(entry.revision, latest);
                return Ok(self.hand(change).await);
            }
        };
        tracing::warn!(
            target: "fleet",
            bucket = %self.bucket,
            key = %self.key,
            latest = entry.revision,
            taken = revision,
            serial = best.serial,
            "the latest revision is refused ({refusal}); taking the newest signed document of the key's history"
        );
        let refused = Change::Refused {
            revision: entry.revision,
            refusal,
        };
        if !self.hand(refused).await {
            return Ok(false);
        }
        let change = self.taken(revision, Ok(best));
        Ok(self.hand(change).await)
    }

    /// Reads the latest revision and offers it. False once the owner is gone.
    async fn catch_up(&mut self, store: &kv::Store, key: &str) -> Result<bool, String> {
        match store.entry(key).await {
            Ok(Some(entry)) if self.seen.is_none() => self.first_offer(store, entry).await,
            Ok(Some(entry)) => Ok(self.offer(entry).await),
            Ok(None) => Ok(self.owner.strong_count() > 0),
            Err(e) => Err(format!("reading {key:?}: {e}")),
        }
    }

    /// One session: open the bucket, catch up, then follow the watch (and read the latest
    /// revision whenever it is quiet for `resync`). Ends with `Ok` when the owner is gone.
    async fn session(
        &mut self,
        js: &Context,
        section: &FleetSection,
        key: &str,
    ) -> Result<(), String> {
        let store = open(js, &section.bucket).await.map_err(|e| e.to_string())?;
        let mut watch = store
            .watch(key)
            .await
            .map_err(|e| format!("watching {key:?}: {e}"))?;
        if !self.catch_up(&store, key).await? {
            return Ok(());
        }
        if self.last_problem.take().is_some() {
            tracing::info!(target: "fleet", bucket = %section.bucket, key, "the bucket answers again");
        }
        loop {
            let alive = match tokio::time::timeout(section.resync(), watch.next()).await {
                Ok(Some(Ok(entry))) => self.offer(entry).await,
                Ok(Some(Err(e))) => return Err(format!("watch of {key:?}: {e}")),
                Ok(None) => return Err(format!("watch of {key:?} ended")),
                Err(_quiet) => self.catch_up(&store, key).await?,
            };
            if !alive {
                return Ok(());
            }
        }
    }
}

/// The trusted keys, read now (a small file, off the runtime's threads).
async fn load_trusted(path: Option<PathBuf>) -> Result<TrustedKeys, Refusal> {
    let Some(path) = path else {
        return Err(Refusal::NoTrustedKeys(
            "fleet.trusted_keys_file is not set".to_owned(),
        ));
    };
    tokio::task::spawn_blocking(move || TrustedKeys::load(&path))
        .await
        .map_err(|e| Refusal::NoTrustedKeys(e.to_string()))?
        .map_err(|e| Refusal::NoTrustedKeys(e.to_string()))
}

/// `opened`, unless its serial is more than [`crate::signed::MAX_SERIAL_AHEAD_MS`] ahead of
/// this clock.
fn not_ahead(opened: Opened) -> Result<Opened, Refusal> {
    let now_ms = units::Timestamp::now().millis();
    if opened.serial > now_ms.saturating_add(crate::signed::MAX_SERIAL_AHEAD_MS) {
        return Err(Refusal::Ahead {
            serial: opened.serial,
            now_ms,
        });
    }
    Ok(opened)
}

/// What `entry` is, checked, without the order of serials.
fn judge(entry: &Entry, place: Place<'_>, trusted: &TrustedKeys) -> Result<Opened, Refusal> {
    match entry.operation {
        Operation::Put => crate::signed::open(&entry.value, place, trusted),
        Operation::Delete | Operation::Purge => Err(Refusal::Removed),
    }
}

/// The signed document with the highest serial among the key's history, and its revision.
async fn newest_in_history(
    store: &kv::Store,
    place: Place<'_>,
    trusted: &TrustedKeys,
) -> Result<Option<(u64, Opened)>, String> {
    let read = async {
        let mut best: Option<(u64, Opened)> = None;
        let mut history = store
            .history(place.key)
            .await
            .map_err(|e| format!("reading the history of {:?}: {e}", place.key))?;
        let mut n = 0;
        while let Some(entry) = history.next().await {
            let entry =
                entry.map_err(|e| format!("reading the history of {:?}: {e}", place.key))?;
            n += 1;
            if n > MAX_HISTORY {
                return Err(format!(
                    "the history of {:?} holds more than {MAX_HISTORY} revisions: give the \
                     bucket a shorter history (gavel config push makes it keep {})",
                    place.key,
                    crate::connect::HISTORY
                ));
            }
            // A serial from the future is never the newest (`taken` refuses it).
            if let Ok(opened) = judge(&entry, place, trusted).and_then(not_ahead)
                && best.as_ref().is_none_or(|(_, b)| opened.serial > b.serial)
            {
                best = Some((entry.revision, opened));
            }
        }
        Ok(best)
    };
    tokio::time::timeout(HISTORY_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the history of {:?} was not read within {HISTORY_TIMEOUT:?}",
                place.key
            ))
        })
}

/// Follows `key` of `section.bucket` for `owner`, calling `apply` with each new revision
/// (one at a time, in order; checked against `section.trusted_keys_file`), until `owner` is
/// dropped. `name` is the client's name on the
/// NATS server (`gavel-exchange`...).
pub fn follow<T, F, Fut>(
    owner: Weak<T>,
    section: FleetSection,
    key: String,
    name: &'static str,
    apply: F,
) -> tokio::task::JoinHandle<()>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, Change) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut follower = Follower {
            owner,
            apply,
            bucket: section.bucket.clone(),
            key: key.clone(),
            trusted_keys: section.trusted_keys_file.clone(),
            seen: None,
            newest: None,
            last_problem: None,
        };
        let mut js: Option<Context> = None;
        while follower.owner.strong_count() > 0 {
            let outcome = match &js {
                Some(js) => follower.session(js, &section, &key).await,
                None => match connect(&section, name, Patience::Forever).await {
                    Ok(context) => {
                        js = Some(context);
                        continue;
                    }
                    Err(e) => Err(e.to_string()),
                },
            };
            match outcome {
                Ok(()) => return,
                Err(problem) => {
                    if follower.last_problem.as_ref() != Some(&problem) {
                        tracing::warn!(
                            target: "fleet",
                            bucket = %section.bucket,
                            key = %key,
                            "{problem}; the configuration in force keeps serving, trying again every {} ms",
                            section.resync_ms
                        );
                        follower.last_problem = Some(problem);
                    }
                }
            }
            tokio::time::sleep(section.resync()).await;
        }
    })
}
