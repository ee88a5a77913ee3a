//! A real `redis-server` on a free loopback port, killed on drop; no persistence unless asked
//! ([`RedisOptions::data_dir`]).
//!
//! A missing `redis-server` makes [`RedisServer::start`] panic with the command that installs
//! it: tests that need Redis must fail, not pass by skipping.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A `redis-server` child process, killed (SIGKILL) on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    /// The loopback port it listens on (plain TCP; with a password, [`RedisServer::raw`]
    /// authenticates first).
    pub port: u16,
    /// The TLS port, when started with [`RedisOptions::tls`].
    pub tls_port: Option<u16>,
    password: Option<String>,
}

/// How to run a server beyond the defaults: `requirepass`, a TLS port.
#[derive(Clone, Debug, Default)]
pub struct RedisOptions {
    pub password: Option<String>,
    pub tls: Option<crate::tls::TlsFiles>,
    /// Persistence (append-only file, fsync on every write) in this directory, so that a
    /// restart on the same port keeps the data; `None`: none, a restart starts empty.
    pub data_dir: Option<std::path::PathBuf>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    ///
    /// # Panics
    /// When `redis-server` is not on `PATH` (the message says how to install it), or when no
    /// server could be started after five ports.
    pub async fn start() -> RedisServer {
        RedisServer::start_with(&RedisOptions::default()).await
    }

    /// [`RedisServer::start`] with a password and/or a TLS port.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub async fn start_with(options: &RedisOptions) -> RedisServer {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            match RedisServer::launch(port, options).await {
                Ok(server) => return server,
                // Someone took the port between our probe and Redis's bind: try another.
                Err(e) => last = e,
            }
        }
        panic!("could not start redis-server: {last}");
    }

    /// Starts a server on `port` (e.g. the port of one killed earlier, to simulate a restart).
    ///
    /// # Panics
    /// When `redis-server` is not on `PATH`.
    pub async fn start_on(port: u16) -> Result<RedisServer, String> {
        RedisServer::launch(port, &RedisOptions::default()).await
    }

    /// [`RedisServer::start_on`] with options (a restart of a persistent server: same port,
    /// same `data_dir`).
    ///
    /// # Panics
    /// When `redis-server` is not on `PATH`.
    pub async fn start_on_with(port: u16, options: &RedisOptions) -> Result<RedisServer, String> {
        RedisServer::launch(port, options).await
    }

    async fn launch(port: u16, options: &RedisOptions) -> Result<RedisServer, String> {
        let mut extra: Vec<String> = Vec::new();
        if let Some(password) = &options.password {
            extra.extend(["--requirepass".into(), password.clone()]);
        }
        let tls_port = options.tls.as_ref().map(|_| free_port());
        if let (Some(tls), Some(tls_port)) = (&options.tls, tls_port) {
            extra.extend(tls_args(tls, tls_port));
        }
        let appendonly = match &options.data_dir {
            Some(dir) => {
                extra.extend([
                    "--dir".into(),
                    dir.display().to_string(),
                    "--appendfsync".into(),
                    "always".into(),
                ]);
                "yes"
            }
            None => "no",
        };
        let child = Command::new("redis-server")
            .args(&extra)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--appendonly",
                appendonly,
                "--loglevel",
                "warning",
                "--protected-mode",
                "no",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH; these tests need a real Redis. \
                 Install it with `apt-get install -y redis-server` (Debian/Ubuntu) \
                 or `brew install redis` (macOS)."
            ),
            Err(e) => panic!("cannot run redis-server: {e}"),
        };
        let mut server = RedisServer {
            child: Some(child),
            port,
            tls_port,
            password: options.password.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = server.child.as_mut().map(Child::try_wait) {
                server.child = None;
                return Err(format!("redis-server exited at start: {status}"));
            }
            if server.raw("PING").await.starts_with("+PONG") {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err("redis-server did not answer PING within 10 s".into())
    }

    /// `127.0.0.1:<port>`, as the ledger's `RedisConfig::addr` wants it.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL: no goodbye to clients, like a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends one raw command (space-separated, no quoting) and returns the raw RESP reply, or
    /// an empty string if the server did not answer within 2 s.
    pub async fn raw(&self, command: &str) -> String {
        raw_command(self.port, self.password.as_deref(), command)
            .await
            .unwrap_or_default()
    }

    /// `127.0.0.1:<tls port>`, when started with TLS.
    pub fn tls_addr(&self) -> Option<String> {
        self.tls_port.map(|p| format!("127.0.0.1:{p}"))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port that was free a moment ago (the OS picked it; the listener is dropped).
/// `redis-server`'s arguments for a TLS port serving `tls`'s certificate (clients need none).
pub(crate) fn tls_args(tls: &crate::tls::TlsFiles, tls_port: u16) -> Vec<String> {
    let path = |p: &std::path::Path| p.display().to_string();
    vec![
        "--tls-port".into(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        path(&tls.cert),
        "--tls-key-file".into(),
        path(&tls.key),
        "--tls-ca-cert-file".into(),
        path(&tls.ca),
        "--tls-auth-clients".into(),
        "no".into(),
    ]
}

pub fn free_port() -> u16 {
    match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(addr) => addr.port(),
        Err(e) => panic!("cannot bind a loopback port: {e}"),
    }
}

/// RESP encoding of one command.
fn encode(parts: &[&str]) -> String {
    let mut out = format!("*{}\r\n", parts.len());
    for p in parts {
        out.push_str(&format!("${}\r\n{p}\r\n", p.len()));
    }
    out
}

async fn raw_command(port: u16, password: Option<&str>, command: &str) -> Option<String> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let mut buf = vec![0u8; 64 * 1024];
        if let Some(password) = password {
            s.write_all(encode(&["AUTH", password]).as_bytes())
                .await
                .ok()?;
            let n = s.read(&mut buf).await.ok()?;
            if !buf.get(..n)?.starts_with(b"+OK") {
                return Some(String::from_utf8_lossy(buf.get(..n)?).into_owned());
            }
        }
        let parts: Vec<&str> = command.split(' ').collect();
        s.write_all(encode(&parts).as_bytes()).await.ok()?;
        let n = s.read(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(buf.get(..n)?).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .ok()
        .flatten()
}
