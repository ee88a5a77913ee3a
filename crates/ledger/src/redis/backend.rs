//! [`Backend`]: the one way the ledger's operations reach Redis, whichever Redis it is: our own
//! pooled client for one primary (`client.rs`), or the `redis` crate's cluster client for Redis
//! Cluster (`cluster.rs`). The per-bid and lease code is written once against it.
//!
//! Every method is bounded by the caller's deadline; error replies of scripts are transport
//! errors ([`LedgerError`]), those of plain commands come back as [`Value::Error`] for the
//! caller to read.

use std::time::Duration;

use super::LedgerError;
use super::client::{Client, ScriptCall};
use super::cluster::ClusterClient;
use super::resp::Value;

/// One primary of the store, to send a command that is not about a key (`SCAN`, `SCRIPT
/// LOAD`): on a cluster, a slot the primary serves (the cluster client routes by slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Primary {
    /// The one Redis.
    Single,
    /// The primary serving this slot.
    Serving(u16),
}

#[derive(Debug)]
pub(crate) enum Backend {
    Single(Client),
    /// Boxed: the cluster client's state is large, and a handle holds one backend.
    Cluster(Box<ClusterClient>),
}

impl Backend {
    /// One plain command (routed by its key on a cluster; `PING` goes to any node).
    pub(crate) async fn call(
        &self,
        args: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        match self {
            Backend::Single(c) => c.call(args, timeout).await,
            Backend::Cluster(c) => c.call(args, timeout).await,
        }
    }

    /// Several plain commands, bounded by `timeout` as a whole, replies in order.
    pub(crate) async fn call_many(
        &self,
        commands: &[Vec<&[u8]>],
        timeout: Duration,
    ) -> Result<Vec<Value>, LedgerError> {
        match self {
            Backend::Single(c) => c.call_many(commands, timeout).await,
            Backend::Cluster(c) => c.call_many(commands, timeout).await,
        }
    }

    /// One script call (`EVALSHA`, `EVAL` after `NOSCRIPT`).
    pub(crate) async fn eval(
        &self,
        script: &super::client::Script,
        tail: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        match self {
            Backend::Single(c) => c.eval(script, tail, timeout).await,
            Backend::Cluster(c) => c.eval(script, tail, timeout).await,
        }
    }

    /// Several script calls, bounded by `timeout` as a whole: answers per call, in order; the
    /// outer error is the transport (any call may or may not have run).
    pub(crate) async fn eval_batch(
        &self,
        calls: &[ScriptCall<'_>],
        timeout: Duration,
    ) -> Result<Vec<Result<Value, LedgerError>>, LedgerError> {
        match self {
            Backend::Single(c) => c.eval_pipeline(calls, timeout).await,
            Backend::Cluster(c) => c.eval_batch(calls, timeout).await,
        }
    }

    /// The primaries, one route each.
    pub(crate) async fn primaries(&self, timeout: Duration) -> Result<Vec<Primary>, LedgerError> {
        match self {
            Backend::Single(_) => Ok(vec![Primary::Single]),
            Backend::Cluster(c) => Ok(c
                .primary_slots(timeout)
                .await?
                .into_iter()
                .map(Primary::Serving)
                .collect()),
        }
    }

    /// One plain command on `primary`.
    pub(crate) async fn call_on(
        &self,
        primary: Primary,
        args: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        match (self, primary) {
            (Backend::Single(c), _) => c.call(args, timeout).await,
            (Backend::Cluster(c), Primary::Serving(slot)) => c.call_on(slot, args, timeout).await,
            (Backend::Cluster(c), Primary::Single) => c.call(args, timeout).await,
        }
    }
}
