//! A minimal RESP2 codec over one connection (TCP or TLS): commands out as arrays of bulk strings, replies
//! in as [`Value`]s. Every length read from the wire is bounded, so a confused or hostile peer can
//! cost a protocol error, never unbounded memory or a panic.

use super::LedgerError;
use super::transport::{RedisTls, Stream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Longest status, error or header line accepted (Lua error messages can be long-ish).
const MAX_LINE: u64 = 64 * 1024;
/// Largest bulk string accepted; the ledger's replies are a few hundred bytes.
const MAX_BULK: usize = 16 * 1024 * 1024;
/// Largest array accepted (`balances` over many campaigns is the biggest reply).
const MAX_ARRAY: usize = 1 << 20;
/// Deepest nesting accepted; the ledger's replies nest two levels.
const MAX_DEPTH: usize = 8;

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Nil,
    Int(i64),
    Simple(String),
    Bulk(Vec<u8>),
    Array(Vec<Value>),
    /// An error reply (`-ERR ...`): a complete answer, so the connection stays usable.
    Error(String),
}

impl Value {
    /// The value as text, for status strings.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Simple(s) => Some(s),
            Value::Bulk(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The value as an integer (an integer reply, or a bulk string holding one).
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Bulk(_) | Value::Simple(_) => self.as_str().and_then(|s| s.parse().ok()),
            _ => None,
        }
    }
}

/// One open connection. It is only ever reused after a complete request/reply exchange, so a
/// cancelled or failed exchange (timeout, reset) drops it instead of leaving it out of step.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: BufReader<Stream>,
    out: Vec<u8>,
    line: Vec<u8>,
}

impl Conn {
    pub(crate) async fn connect(addr: &str, tls: Option<&RedisTls>) -> Result<Conn, LedgerError> {
        let stream = Stream::connect(addr, tls).await?;
        Ok(Conn {
            stream: BufReader::new(stream),
            out: Vec::with_capacity(512),
            line: Vec::with_capacity(128),
        })
    }

    /// False if the peer has closed the connection while it sat idle: typically Redis was
    /// restarted. Checked before reuse so that the first call after a restart opens a fresh
    /// connection instead of failing on a dead one.
    pub(crate) fn looks_alive(&self) -> bool {
        self.stream.buffer().is_empty() && self.stream.get_ref().looks_alive()
    }

    /// Sends one command and reads its reply.
    pub(crate) async fn request(&mut self, args: &[&[u8]]) -> Result<Value, LedgerError> {
        encode(&mut self.out, args);
        self.stream
            .get_mut()
            .write_all(&self.out)
            .await
            .map_err(io_error)?;
        // TLS buffers inside the session; plain TCP makes this a no-op.
        self.stream.get_mut().flush().await.map_err(io_error)?;
        self.read_value().await
    }

    /// Sends several commands in one write (a pipeline: Redis runs them in order) and reads
    /// their replies, in the same order. One round trip instead of one per command.
    pub(crate) async fn request_many(
        &mut self,
        commands: &[Vec<&[u8]>],
    ) -> Result<Vec<Value>, LedgerError> {
        self.out.clear();
        for args in commands {
            encode_into(&mut self.out, args);
        }
        self.stream
            .get_mut()
            .write_all(&self.out)
            .await
            .map_err(io_error)?;
        // TLS buffers inside the session; plain TCP makes this a no-op.
        self.stream.get_mut().flush().await.map_err(io_error)?;
        let mut replies = Vec::with_capacity(commands.len());
        for _ in commands {
            replies.push(self.read_value().await?);
        }
        Ok(replies)
    }

    async fn read_value(&mut self) -> Result<Value, LedgerError> {
        // Iterative rather than recursive: arrays push a frame, completed values pop into it.
        let mut stack: Vec<(usize, Vec<Value>)> = Vec::new();
        loop {
            let mut value = match self.read_header().await? {
                Header::Value(v) => v,
                Header::Bulk(len) => {
                    let mut buf = vec![0u8; len + 2];
                    self.stream.read_exact(&mut buf).await.map_err(io_error)?;
                    if buf.pop() != Some(b'\n') || buf.pop() != Some(b'\r') {
                        return Err(protocol("bulk string not terminated by CRLF"));
                    }
                    Value::Bulk(buf)
                }
                Header::Array(0) => Value::Array(Vec::new()),
                Header::Array(n) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(protocol("reply nested too deeply"));
                    }
                    stack.push((n, Vec::with_capacity(n.min(64))));
                    continue;
                }
            };
            loop {
                let Some((remaining, items)) = stack.last_mut() else {
                    return Ok(value);
                };
                items.push(value);
                *remaining -= 1;
                if *remaining > 0 {
                    break;
                }
                match stack.pop() {
                    Some((_, items)) => value = Value::Array(items),
                    None => return Err(protocol("reply stack underflow")),
                }
            }
        }
    }

    async fn read_header(&mut self) -> Result<Header, LedgerError> {
        self.line.clear();
        let n = (&mut self.stream)
            .take(MAX_LINE)
            .read_until(b'\n', &mut self.line)
            .await
            .map_err(io_error)?;
        if n == 0 {
            return Err(LedgerError::Unavailable(
                "connection closed by Redis".into(),
            ));
        }
        let Some(body) = self.line.strip_suffix(b"\r\n") else {
            return Err(protocol("reply line not terminated by CRLF or too long"));
        };
        let Some((&kind, rest)) = body.split_first() else {
            return Err(protocol("empty reply line"));
        };
        let text = || String::from_utf8_lossy(rest).into_owned();
        let int = || -> Result<i64, LedgerError> {
            std::str::from_utf8(rest)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| protocol("bad integer in reply"))
        };
        Ok(match kind {
            b'+' => Header::Value(Value::Simple(text())),
            b'-' => Header::Value(Value::Error(text())),
            b':' => Header::Value(Value::Int(int()?)),
            b'$' => match int()? {
                -1 => Header::Value(Value::Nil),
                n => match usize::try_from(n) {
                    Ok(len) if len <= MAX_BULK => Header::Bulk(len),
                    _ => return Err(protocol("bulk length out of bounds")),
                },
            },
            b'*' => match int()? {
                -1 => Header::Value(Value::Nil),
                n => match usize::try_from(n) {
                    Ok(len) if len <= MAX_ARRAY => Header::Array(len),
                    _ => return Err(protocol("array length out of bounds")),
                },
            },
            _ => return Err(protocol("unknown reply type")),
        })
    }
}

enum Header {
    Value(Value),
    Bulk(usize),
    Array(usize),
}

/// Writes `args` as a RESP array of bulk strings into `out` (cleared first).
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.clear();
    encode_into(out, args);
}

/// Appends `args` as a RESP array of bulk strings to `out`.
fn encode_into(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_len(out, b'*', args.len());
    for arg in args {
        push_len(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_len(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn io_error(e: std::io::Error) -> LedgerError {
    LedgerError::Unavailable(format!("redis i/o: {e}"))
}

fn protocol(what: &str) -> LedgerError {
    LedgerError::Protocol(what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, &[b"GET", b"k\r\n"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nk\r\n\r\n");
    }

    #[tokio::test]
    async fn replies_parse_and_bounds_hold() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let replies: [&[u8]; 3] = [
                b"*3\r\n:5\r\n$2\r\nok\r\n*2\r\n$-1\r\n+x\r\n",
                b"-NOSCRIPT nope\r\n",
                b"$99999999999\r\n",
            ];
            let mut buf = [0u8; 256];
            for reply in replies {
                let _ = s.read(&mut buf).await.unwrap();
                s.write_all(reply).await.unwrap();
            }
        });
        let mut conn = Conn::connect(&addr, None).await.unwrap();
        let v = conn.request(&[b"A"]).await.unwrap();
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(5),
                Value::Bulk(b"ok".to_vec()),
                Value::Array(vec![Value::Nil, Value::Simple("x".into())]),
            ])
        );
        assert_eq!(
            conn.request(&[b"B"]).await.unwrap(),
            Value::Error("NOSCRIPT nope".into())
        );
        assert!(matches!(
            conn.request(&[b"C"]).await,
            Err(LedgerError::Protocol(_))
        ));
        drop(conn);
        server.await.unwrap();
    }
}
