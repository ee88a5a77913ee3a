//! Helpers shared by the tests that run the `gavel` binary as a real process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Lines};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

/// Sends `child` SIGTERM and waits for its exit (`within`, then SIGKILL); how it ended.
pub fn terminate(child: &mut Child, within: Duration) -> ExitStatus {
    if let Ok(Some(status)) = child.try_wait() {
        return status;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut exited = None;
    testkit::time::eventually_blocking(within, || {
        exited = child.try_wait().ok().flatten();
        exited.is_some()
    });
    if let Some(status) = exited {
        return status;
    }
    let _ = child.kill();
    child.wait().expect("reaping a gavel process")
}

/// No drain grace for servers a test stops (the default 5 s would only slow every stop down);
/// the drain test sets its own.
pub const NO_DRAIN_GRACE: [(&str, &str); 3] = [
    ("GAVEL_EXCHANGE__HTTP__DRAIN_GRACE_MS", "0"),
    ("GAVEL_BIDDER__HTTP__DRAIN_GRACE_MS", "0"),
    ("GAVEL_EDGE__HTTP__DRAIN_GRACE_MS", "0"),
];

/// Starts `gavel <subcommand> --config <config> --listen 127.0.0.1:0` and reads the address it
/// listens on from the first line it prints; the rest of its output is left to the caller.
pub fn spawn_listening(
    subcommand: &str,
    config: &Path,
) -> (Child, SocketAddr, Lines<BufReader<ChildStdout>>) {
    let (child, addr, _, lines) = spawn_listening_admin(subcommand, config);
    (child, addr, lines)
}

/// [`spawn_listening`], with the admin address too (`/admin/*`, `/metrics`).
pub fn spawn_listening_admin(
    subcommand: &str,
    config: &Path,
) -> (Child, SocketAddr, SocketAddr, Lines<BufReader<ChildStdout>>) {
    let (child, first, lines) = spawn_listening_with(
        subcommand,
        config,
        &["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
    );
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    (child, addr, admin_addr(&first), lines)
}

/// Starts `gavel <subcommand> --config <config> <args>` and returns it with the first line it
/// prints (a server's, once it listens) and the rest of its output.
pub fn spawn_listening_with(
    subcommand: &str,
    config: &Path,
    args: &[&str],
) -> (Child, String, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .arg(subcommand)
        .arg("--config")
        .arg(config)
        .args(args)
        .envs(NO_DRAIN_GRACE)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    (child, first, lines)
}

/// `gavel ledger create --config FILE`, as an operator runs it before a bidder fleet's first
/// start; panics with its output unless it succeeds.
pub fn create_ledger(config: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(["ledger", "create", "--config"])
        .arg(config)
        .output()
        .expect("run gavel ledger create");
    assert!(
        out.status.success(),
        "gavel ledger create: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The admin address a `gavel exchange` or `gavel bidder` first line names (`admin: http://ADDR/...`).
pub fn admin_addr(first_line: &str) -> SocketAddr {
    first_line
        .split("admin: http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no admin address in {first_line:?}"))
}

/// One `gavel bidder` child process. Dropping it stops it (SIGTERM, then SIGKILL) without
/// checking how it ended; [`BidderProcess::stop`] checks that it ended cleanly.
pub struct BidderProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
}

impl BidderProcess {
    /// Starts `gavel bidder --config <config>` on free loopback ports (bid and admin).
    pub fn start(config: &Path) -> BidderProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
            .args(["bidder", "--config"])
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .envs(NO_DRAIN_GRACE)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn gavel bidder");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        // "gavel bidder listening on http://127.0.0.1:PORT/openrtb2/bid (...)"
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        let admin = admin_addr(&line);
        BidderProcess { child, addr, admin }
    }

    /// Sends SIGTERM and waits for the exit (10 s at most, then SIGKILL); how it ended.
    pub fn terminate(&mut self) -> ExitStatus {
        terminate(&mut self.child, Duration::from_secs(10))
    }

    /// SIGTERM: the bidder hands its leases back and must exit with status 0.
    pub fn stop(&mut self) {
        let status = self.terminate();
        assert!(
            status.success(),
            "gavel bidder on {} ended with {status}",
            self.addr
        );
    }

    /// SIGKILL, as a crash: the bidder must die of that signal, not of anything else first.
    pub fn crash(&mut self) {
        self.child.kill().expect("SIGKILL gavel bidder");
        let status = self.child.wait().expect("reaping gavel bidder");
        assert_eq!(
            status.signal(),
            Some(9),
            "gavel bidder on {} ended with {status}",
            self.addr
        );
    }
}

impl Drop for BidderProcess {
    fn drop(&mut self) {
        self.terminate();
    }
}
