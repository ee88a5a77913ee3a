//! Helpers shared by the tests that run the `gavel` binary as a real process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Lines};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

/// Starts `gavel <subcommand> --config <config> --listen 127.0.0.1:0` and reads the address it
/// listens on from the first line it prints; the rest of its output is left to the caller.
pub fn spawn_listening(
    subcommand: &str,
    config: &Path,
) -> (Child, SocketAddr, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .arg(subcommand)
        .arg("--config")
        .arg(config)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    (child, addr, lines)
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
