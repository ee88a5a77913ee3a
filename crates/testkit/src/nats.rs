//! A real `nats-server` with JetStream (`-js`) on a free loopback port, its store in a fresh
//! temporary directory; killed on drop. [`NatsServer::kill`] then [`NatsServer::restart`] bring
//! it back on the same port with the same store, as a crash and a restart would.
//!
//! [`NatsServer::start_with_config`] adds server configuration (an `authorization` block: a
//! token, users and passwords, NKey users), and [`publish_raw`] publishes as a hostile client
//! would, with the protocol's own `CONNECT` and `PUB` over a bare TCP connection.
//!
//! A missing `nats-server` makes [`NatsServer::start`] panic with the command that installs
//! it: tests that need NATS must fail, not pass by skipping.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use crate::redis::free_port;
use crate::temp::TempDir;

/// A `nats-server -js` child process, killed (SIGKILL) on drop; its store directory goes with
/// it.
#[derive(Debug)]
pub struct NatsServer {
    child: Option<Child>,
    /// The loopback port clients connect to.
    pub port: u16,
    store: TempDir,
    /// Server configuration beside the store (`-c`), when given.
    config: Option<String>,
}

impl NatsServer {
    /// Starts a server on a free port with a fresh store and waits until it greets a client.
    ///
    /// # Panics
    /// When `nats-server` is not on `PATH` (the message says how to install it), or when no
    /// server could be started after five ports.
    pub async fn start() -> NatsServer {
        NatsServer::start_with_config("").await
    }

    /// [`NatsServer::start`] with `config` as the server's configuration file (the port,
    /// address, JetStream and store still come from the command line).
    ///
    /// # Panics
    /// As [`NatsServer::start`]; also when the server refuses the configuration.
    pub async fn start_with_config(config: &str) -> NatsServer {
        let mut last = String::new();
        for _ in 0..5 {
            let mut server = NatsServer {
                child: None,
                port: free_port(),
                store: TempDir::new("nats-store"),
                config: (!config.is_empty()).then(|| config.to_owned()),
            };
            match server.launch().await {
                Ok(()) => return server,
                // Someone took the port between our probe and the server's bind: try another.
                Err(e) => last = e,
            }
        }
        panic!("could not start nats-server: {last}");
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL: no goodbye to clients, nothing flushed, like a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same store (killing it first if it
    /// runs). The port was ours a moment ago, so a few tries cover a slow release.
    ///
    /// # Panics
    /// When it cannot be started within 10 s.
    pub async fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.launch().await {
                Ok(()) => return,
                Err(e) if Instant::now() >= deadline => {
                    panic!("could not restart nats-server on port {}: {e}", self.port)
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    async fn launch(&mut self) -> Result<(), String> {
        let mut command = Command::new("nats-server");
        // JetStream's storage fixed at 1 GiB, not a share of this host's free disk: a stream
        // that asks for more is refused on every machine, not only on one short of disk.
        let config = format!(
            "jetstream {{ max_file_store: 1GB }}\n{}",
            self.config.as_deref().unwrap_or_default()
        );
        let file = self.store.file("nats.conf", &config);
        command.arg("-c").arg(file);
        let child = command
            .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string()])
            .arg("-sd")
            .arg(self.store.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "nats-server is not on PATH; these tests need a real NATS server with \
                 JetStream. Install it with `apt-get install -y nats-server` (Debian/Ubuntu) \
                 or `brew install nats-server` (macOS)."
            ),
            Err(e) => panic!("cannot run nats-server: {e}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(format!("nats-server exited at start: {status}"));
            }
            // The server greets every client with INFO once it accepts them, which it does
            // only after JetStream is up.
            if greets(self.port).await {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.kill();
        Err("nats-server did not greet a client within 10 s".into())
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Publishes `payload` to `subject` on the server at `port` as a bare client would: the
/// greeting read, then `CONNECT` with `connect` (a JSON object: `{}` for no credentials,
/// `{"auth_token": "..."}`...), `PUB` and `PING`. `Ok` once the server answered `PONG`;
/// `Err` with the server's `-ERR` line (an authorization violation) or what went wrong.
pub async fn publish_raw(
    port: u16,
    connect: &str,
    subject: &str,
    payload: &[u8],
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let mut wire = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false,\"protocol\":1{}}}\r\nPUB {subject} {}\r\n",
            connect
                .trim()
                .strip_prefix('{')
                .and_then(|c| c.strip_suffix('}'))
                .filter(|c| !c.trim().is_empty())
                .map(|c| format!(",{c}"))
                .unwrap_or_default(),
            payload.len()
        )
        .into_bytes();
        wire.extend_from_slice(payload);
        wire.extend_from_slice(b"\r\nPING\r\n");
        s.write_all(&wire).await.map_err(|e| e.to_string())?;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err(format!("closed: {}", String::from_utf8_lossy(&seen).trim()));
            }
            seen.extend_from_slice(buf.get(..n).unwrap_or_default());
            let text = String::from_utf8_lossy(&seen);
            if let Some(err) = text.lines().find(|l| l.starts_with("-ERR")) {
                return Err(err.to_owned());
            }
            if text.lines().any(|l| l.starts_with("PONG")) {
                return Ok(());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), io)
        .await
        .unwrap_or_else(|_| Err("no answer within 5 s".to_owned()))
}

/// Whether a server on `port` sends its `INFO` greeting within a second.
async fn greets(port: u16) -> bool {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).await.ok()?;
        Some(&buf == b"INFO ")
    };
    tokio::time::timeout(Duration::from_secs(1), io)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_killed_server_restarts_on_its_port() {
        let mut server = NatsServer::start().await;
        assert!(greets(server.port).await);
        server.kill();
        assert!(!greets(server.port).await);
        server.restart().await;
        assert!(greets(server.port).await);
        assert!(server.url().ends_with(&server.port.to_string()));
    }
}
