//! The `gavel` binary as a user runs it: real processes, real sockets on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn gavel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gavel"))
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = gavel().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn demo_runs_end_to_end_and_reports() {
    let (ok, stdout, stderr) = run(&["demo", "--duration", "1s", "--rate", "50", "--bidders", "3"]);
    assert!(ok, "demo failed: {stderr}");
    for needle in [
        "auctions          50 sent",
        "within tmax",
        "fill rate",
        "latency (client)",
        "win notices",
        "atlas",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

#[test]
fn exchange_refuses_a_bad_config_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("gavel-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[[bidders]]\nname = \"a\"\nendpoint = \"ftp://x/\"\n",
    )
    .unwrap();
    let (ok, _, stderr) = run(&["exchange", "--config", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("bidders[0].endpoint"), "{stderr}");
    std::fs::write(&path, "[auction]\nno_such_key = 1\n").unwrap();
    let (ok, _, stderr) = run(&["exchange", "--config", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("no_such_key"), "{stderr}");
    let (ok, _, stderr) = run(&[
        "exchange",
        "--config",
        dir.join("missing.toml").to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(stderr.contains("missing.toml"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_writes_a_bidders_section_the_exchange_accepts() {
    let dir = std::env::temp_dir().join(format!("gavel-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bidders.toml");
    let (ok, stdout, stderr) = run(&[
        "sim",
        "--bidders",
        "2",
        "--duration",
        "200ms",
        "--write-bidders",
        path.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("http://127.0.0.1:"), "{stdout}");
    let section = std::fs::read_to_string(&path).unwrap();
    let config = exchange::Config::from_toml(&section).unwrap();
    assert_eq!(config.config.bidders.len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_are_named() {
    let (ok, _, stderr) = run(&["demo", "--rate", "0"]);
    assert!(!ok);
    assert!(stderr.contains("--rate"), "{stderr}");
    let (ok, _, stderr) = run(&[
        "load",
        "--url",
        "http://127.0.0.1:9/",
        "--duration",
        "10 parsecs",
    ]);
    assert!(!ok);
    assert!(stderr.contains("10 parsecs"), "{stderr}");
    let (ok, _, stderr) = run(&["load", "--url", "ftp://127.0.0.1/", "--duration", "1s"]);
    assert!(!ok);
    assert!(stderr.to_lowercase().contains("url"), "{stderr}");
}
