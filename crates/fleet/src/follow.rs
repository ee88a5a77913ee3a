//! Following one key of the bucket while serving: every new revision is handed to the
//! server's own reload path, once, in order.
//!
//! | situation | what happens |
//! | --- | --- |
//! | start, NATS down or the bucket missing | nothing is applied (the local file serves); tried again every `resync_ms` |
//! | a session opens | the latest revision is read at once (catching up on whatever was missed), then a watch pushes each new one |
//! | the watch is quiet for `resync_ms` | the latest revision is read again: a watch lost without a word costs at most that long |
//! | NATS goes away | the read fails, the session ends, a new one starts every `resync_ms` until the server answers; the client reconnects on its own |
//! | a revision the server refuses | not offered again: the next push is |
//! | the key deleted or purged | offered as [`Change::Removed`]: the server goes back to its file |
//!
//! The task ends when the server it follows for is dropped.

use std::sync::{Arc, Weak};

use async_nats::jetstream::context::Context;
use async_nats::jetstream::kv::{self, Entry, Operation};
use futures_util::StreamExt;

use crate::config::FleetSection;
use crate::connect::{Patience, connect, open};
use crate::version::Pushed;

/// A change of the followed key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A document was put.
    Put(Pushed),
    /// The key was deleted or purged at `revision`.
    Removed { revision: u64 },
}

impl Change {
    pub fn revision(&self) -> u64 {
        match self {
            Change::Put(p) => p.revision,
            Change::Removed { revision } => *revision,
        }
    }
}

/// What a session hands on: the owner and what to do with each change.
struct Follower<T, F> {
    owner: Weak<T>,
    apply: F,
    /// The last revision offered (applied or refused): never offered twice.
    seen: Option<u64>,
    /// The last problem logged: logged again only when it changes, not every `resync_ms`
    /// while NATS is away; cleared once the bucket answers.
    last_problem: Option<String>,
}

impl<T, F, Fut> Follower<T, F>
where
    F: Fn(Arc<T>, Change) -> Fut,
    Fut: Future<Output = ()>,
{
    /// Offers `entry` unless it was offered already. False once the owner is gone.
    async fn offer(&mut self, entry: Entry) -> bool {
        if self.seen == Some(entry.revision) {
            return self.owner.strong_count() > 0;
        }
        self.seen = Some(entry.revision);
        let change = match entry.operation {
            Operation::Put => Change::Put(Pushed {
                revision: entry.revision,
                value: entry.value,
            }),
            Operation::Delete | Operation::Purge => Change::Removed {
                revision: entry.revision,
            },
        };
        match self.owner.upgrade() {
            Some(owner) => {
                (self.apply)(owner, change).await;
                true
            }
            None => false,
        }
    }

    /// Reads the latest revision and offers it. False once the owner is gone.
    async fn catch_up(&mut self, store: &kv::Store, key: &str) -> Result<bool, String> {
        match store.entry(key).await {
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

/// Follows `key` of `section.bucket` for `owner`, calling `apply` with each new revision
/// (one at a time, in order), until `owner` is dropped. `name` is the client's name on the
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
            seen: None,
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
