//! The Redis client: a small pool of RESP2 connections, each call bounded by a deadline, with
//! reconnection by construction (a connection that failed or timed out is dropped; the next call
//! dials a new one, so a restarted Redis is picked up without restarting the process).

use std::time::Duration;

use upstream::conn_pool::ConnPool;

use super::LedgerError;
use super::conn::{Conn, Dial};
use super::error::classify_error;
use super::resp::Value;
use super::transport::RedisTls;

/// A Lua script with its SHA-1, run with `EVALSHA` and re-sent with `EVAL` when Redis answers
/// `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static str,
    pub(crate) sha: String,
}

impl Script {
    pub(crate) fn new(body: &'static str) -> Script {
        Script {
            body,
            sha: redis::Script::new(body).get_hash().to_owned(),
        }
    }

    #[cfg(test)]
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }
}

/// A script call ready to send: the script, then the key count, the keys and the arguments.
pub(crate) type ScriptCall<'a> = (&'a Script, Vec<&'a [u8]>);

#[derive(Debug)]
pub(crate) struct Client {
    dial: Dial,
    /// Caps open connections (a call waiting for one still counts against its deadline) and
    /// keeps the idle ones.
    conns: ConnPool<Conn>,
}

impl Client {
    pub(crate) fn new(
        addr: String,
        auth: Option<(Option<String>, String)>,
        db: u32,
        max_connections: usize,
        tls: Option<RedisTls>,
    ) -> Client {
        let max = max_connections.max(1);
        Client {
            dial: Dial {
                addr,
                auth,
                db,
                tls,
            },
            conns: ConnPool::new(max, None),
        }
    }

    /// One command, bounded by `timeout` end to end (waiting for a connection, dialling,
    /// writing, reading). Error replies come back as [`Value::Error`].
    pub(crate) async fn call(
        &self,
        args: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        tokio::time::timeout(timeout, self.call_unbounded(args))
            .await
            .map_err(|_| LedgerError::Timeout)?
    }

    /// Runs `script` with `tail` (the key count, the keys, then the arguments), bounded by
    /// `timeout`. A `NOSCRIPT` answer means
    /// the script did not run, so sending the body with `EVAL` cannot apply it twice.
    pub(crate) async fn eval(
        &self,
        script: &Script,
        tail: &[&[u8]],
        timeout: Duration,
    ) -> Result<Value, LedgerError> {
        tokio::time::timeout(timeout, async {
            let mut args: Vec<&[u8]> = Vec::with_capacity(tail.len() + 2);
            args.push(b"EVALSHA");
            args.push(script.sha.as_bytes());
            args.extend_from_slice(tail);
            let reply = self.call_unbounded(&args).await?;
            if let Value::Error(msg) = &reply
                && msg.starts_with("NOSCRIPT")
            {
                args[0] = b"EVAL";
                args[1] = script.body.as_bytes();
                return self.call_unbounded(&args).await.and_then(script_reply);
            }
            script_reply(reply)
        })
        .await
        .map_err(|_| LedgerError::Timeout)?
    }

    /// Runs several scripts in one round trip (pipelined on one connection; Redis runs them in
    /// order, each atomically, other clients' commands possibly in between), bounded by
    /// `timeout` as a whole. The outer error is the transport: any of the scripts may or may not
    /// have run. The inner ones are per script (its error reply). Scripts answered `NOSCRIPT`
    /// did not run: each is loaded once (`SCRIPT LOAD`) and they are sent again, after the others
    /// (a second round trip).
    pub(crate) async fn eval_pipeline(
        &self,
        calls: &[ScriptCall<'_>],
        timeout: Duration,
    ) -> Result<Vec<Result<Value, LedgerError>>, LedgerError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        tokio::time::timeout(timeout, async {
            let commands: Vec<Vec<&[u8]>> = calls
                .iter()
                .map(|(script, tail)| {
                    let mut args: Vec<&[u8]> = Vec::with_capacity(tail.len() + 2);
                    args.push(b"EVALSHA");
                    args.push(script.sha.as_bytes());
                    args.extend_from_slice(tail);
                    args
                })
                .collect();
            let mut replies = self.exchange(&commands).await?;
            let missing: Vec<usize> = replies
                .iter()
                .enumerate()
                .filter(|(_, r)| matches!(r, Value::Error(msg) if msg.starts_with("NOSCRIPT")))
                .map(|(i, _)| i)
                .collect();
            if !missing.is_empty() {
                // Each missing script loaded once (not its body sent with every call), then the
                // calls again by hash, in one more round trip.
                let mut loads: Vec<&Script> = Vec::new();
                for &i in &missing {
                    if let Some((script, _)) = calls.get(i)
                        && !loads.iter().any(|l| l.sha == script.sha)
                    {
                        loads.push(script);
                    }
                }
                let mut retry: Vec<Vec<&[u8]>> = loads
                    .iter()
                    .map(|script| vec![&b"SCRIPT"[..], b"LOAD", script.body.as_bytes()])
                    .collect();
                retry.extend(missing.iter().filter_map(|&i| commands.get(i).cloned()));
                let again = self.exchange(&retry).await?;
                for (i, reply) in missing.into_iter().zip(again.into_iter().skip(loads.len())) {
                    if let Some(slot) = replies.get_mut(i) {
                        *slot = reply;
                    }
                }
            }
            Ok(replies.into_iter().map(script_reply).collect())
        })
        .await
        .map_err(|_| LedgerError::Timeout)?
    }

    /// Several plain commands in one round trip, bounded by `timeout` as a whole; error
    /// replies come back as [`Value::Error`].
    pub(crate) async fn call_many(
        &self,
        commands: &[Vec<&[u8]>],
        timeout: Duration,
    ) -> Result<Vec<Value>, LedgerError> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        tokio::time::timeout(timeout, self.exchange(commands))
            .await
            .map_err(|_| LedgerError::Timeout)?
    }

    /// A pipeline of commands on one connection (see [`Conn::request_many`]).
    async fn exchange(&self, commands: &[Vec<&[u8]>]) -> Result<Vec<Value>, LedgerError> {
        let _permit = self
            .conns
            .permit()
            .await
            .map_err(|_| LedgerError::Unavailable("client closed".into()))?;
        let mut conn = match self.take_idle() {
            Some(conn) => conn,
            None => self.dial().await?,
        };
        // As in `call_unbounded`: back to the pool only after every reply was read.
        let replies = conn.request_many(commands).await?;
        self.put_idle(conn);
        Ok(replies)
    }

    async fn call_unbounded(&self, args: &[&[u8]]) -> Result<Value, LedgerError> {
        let _permit = self
            .conns
            .permit()
            .await
            .map_err(|_| LedgerError::Unavailable("client closed".into()))?;
        let mut conn = match self.take_idle() {
            Some(conn) => conn,
            None => self.dial().await?,
        };
        // If this future is dropped (deadline) or fails, `conn` is dropped with it: a connection
        // whose reply was not fully read never goes back to the pool.
        let reply = conn.request(args).await?;
        self.put_idle(conn);
        Ok(reply)
    }

    async fn dial(&self) -> Result<Conn, LedgerError> {
        Conn::connect(&self.dial).await
    }

    fn take_idle(&self) -> Option<Conn> {
        self.conns.take(Conn::looks_alive)
    }

    fn put_idle(&self, conn: Conn) {
        self.conns.put(conn);
    }
}

/// Turns a script's error reply into a transport error; other replies pass through.
pub(crate) fn script_reply(reply: Value) -> Result<Value, LedgerError> {
    match reply {
        Value::Error(msg) => Err(classify_error(msg)),
        other => Ok(other),
    }
}
