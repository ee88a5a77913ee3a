//! One connection to Redis, spoken through the `redis` crate: our stream (TCP, or TLS with the
//! operator's CA only) under its RESP codec, `AUTH` and `SELECT` at connect. The client uses
//! each connection for one exchange at a time and drops it after any failure, timeout or
//! cancellation (dropping it closes the socket), so a connection never goes back to the pool
//! out of step.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo, RedisError};

use super::LedgerError;
use super::resp::{Value, error_text};
use super::transport::{self, RedisTls};

/// How to open a connection: where, and who we are.
#[derive(Debug)]
pub(crate) struct Dial {
    pub(crate) addr: String,
    /// `(user, password)`; no user is the default user.
    pub(crate) auth: Option<(Option<String>, String)>,
    pub(crate) db: u32,
    pub(crate) tls: Option<RedisTls>,
}

pub(crate) struct Conn {
    redis: MultiplexedConnection,
    /// The task driving the socket: it ends when the peer closes it.
    driver: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closes the socket now, with whatever was in flight: a connection dropped mid-exchange
        // (a timeout, a cancelled call) is never read again.
        self.driver.abort();
    }
}

impl Conn {
    pub(crate) async fn connect(dial: &Dial) -> Result<Conn, LedgerError> {
        let stream = transport::connect(&dial.addr, dial.tls.as_ref()).await?;
        // Nothing is sent on connect but AUTH and SELECT when configured (no CLIENT SETINFO):
        // one round trip less, and a server that never answers costs the caller's deadline only.
        let mut info = RedisConnectionInfo::default()
            .set_db(i64::from(dial.db))
            .set_skip_set_lib_name();
        if let Some((user, password)) = &dial.auth {
            info = info.set_password(password);
            if let Some(user) = user {
                info = info.set_username(user);
            }
        }
        // The caller bounds every exchange end to end; the crate's own timeouts would be a
        // second, different clock.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let (redis, driver) = MultiplexedConnection::new_with_config(&info, stream, config)
            .await
            .map_err(|e| match e.code() {
                // The password is never echoed: Redis's message names the problem.
                Some(code) => super::error::classify_error(error_text(code, e.detail())),
                None => transport_error(&e),
            })?;
        Ok(Conn {
            redis,
            driver: tokio::spawn(driver),
        })
    }

    /// False once the peer closed the connection while it sat idle.
    pub(crate) fn looks_alive(&self) -> bool {
        !self.driver.is_finished()
    }

    /// One command; an error reply is a [`Value::Error`].
    pub(crate) async fn request(&mut self, args: &[&[u8]]) -> Result<Value, LedgerError> {
        match self.redis.send_packed_command(&command(args)).await {
            Ok(v) => Ok(Value::from_redis(v)),
            Err(e) => match e.code() {
                Some(code) => Ok(Value::Error(error_text(code, e.detail()))),
                None => Err(transport_error(&e)),
            },
        }
    }

    /// Several commands in one write, their replies in order (a pipeline: one round trip).
    pub(crate) async fn request_many(
        &mut self,
        commands: &[Vec<&[u8]>],
    ) -> Result<Vec<Value>, LedgerError> {
        let mut pipe = redis::pipe();
        for args in commands {
            pipe.add_command(command(args));
        }
        let replies = self
            .redis
            .send_packed_commands(&pipe, 0, commands.len())
            .await
            .map_err(|e| transport_error(&e))?;
        if replies.len() != commands.len() {
            return Err(LedgerError::Protocol(format!(
                "pipeline of {} commands answered {} replies",
                commands.len(),
                replies.len()
            )));
        }
        Ok(replies.into_iter().map(Value::from_redis).collect())
    }
}

fn command(args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}

/// A failure that is not an error reply: the connection is unusable. A reply that does not
/// parse is a protocol error (not Redis, or a bug); anything else (refused, reset, closed) is
/// Redis unavailable.
fn transport_error(e: &RedisError) -> LedgerError {
    match e.kind() {
        redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => {
            LedgerError::Protocol(format!("redis reply: {e}"))
        }
        redis::ErrorKind::AuthenticationFailed => LedgerError::Refused(e.to_string()),
        _ => LedgerError::Unavailable(format!("redis i/o: {e}")),
    }
}
