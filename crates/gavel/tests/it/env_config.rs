//! Configuration from the environment, through real `gavel` processes: a `GAVEL_<SERVER>__...`
//! variable wins over its file (each server's, and the exchange's drain grace in `drain.rs`), a
//! server can be configured by the environment alone, `check-config` shows what is in effect
//! with the variables, a variable the layout does not have is refused by name, and
//! `examples/edge.toml` runs as written and answers `/readyz`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use testkit::TempDir;

fn gavel(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A bidder's file: its campaigns, keys and a listen address the variables replace.
fn bidder_config(dir: &TempDir) -> PathBuf {
    dir.file(
        "campaigns.json",
        r#"[{"id": "c", "budget": {"total": 10}, "bid": {"cpm": 2}, "pacing": "asap",
            "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["a.example"]}]}]"#,
    );
    dir.file(
        "bidder.toml",
        &format!(
            "listen = \"127.0.0.1:9100\"\ncampaigns = \"campaigns.json\"\n{}[http]\nmax_connections = 10\n",
            testkit::secrets::security_toml(dir.path()),
        ),
    )
}

#[test]
fn a_bidder_variable_wins_over_the_file_and_check_config_shows_it() {
    let dir = TempDir::new("env-bidder");
    let config = bidder_config(&dir);
    let file = config.to_str().unwrap();
    let envs = [
        ("GAVEL_BIDDER__HTTP__MAX_CONNECTIONS", "77"),
        ("GAVEL_BIDDER__LISTEN", "localhost:9999"),
        ("GAVEL_BIDDER__LEDGER__CHARGE_ON", "bill"),
    ];
    for args in [
        vec!["bidder", "--config", file, "--check"],
        vec!["check-config", file],
    ] {
        let out = gavel(&args, &envs);
        let shown = text(&out);
        assert!(out.status.success(), "{shown}");
        for line in [
            "max_connections = 77\n",
            "listen = \"127.0.0.1:9999\"\n",
            "charge_on = \"bill\"\n",
        ] {
            assert!(shown.contains(line), "{args:?}: no {line:?} in\n{shown}");
        }
    }
    // Without the variables the file's values are in effect.
    let shown = text(&gavel(&["check-config", file], &[]));
    assert!(shown.contains("max_connections = 10\n"), "{shown}");
    assert!(shown.contains("listen = \"127.0.0.1:9100\"\n"), "{shown}");
}

#[test]
fn a_variable_the_layout_does_not_have_or_of_the_wrong_type_is_refused_by_name() {
    let dir = TempDir::new("env-refused");
    let config = bidder_config(&dir);
    let file = config.to_str().unwrap();
    for (var, value, why) in [
        (
            "GAVEL_BIDDER__LEDGER__REDIS_MODEE",
            "per_bid",
            "unknown field `redis_modee`",
        ),
        (
            "GAVEL_BIDDER__HTTP__MAX_CONNECTIONS",
            "many",
            "invalid type: string \"many\"",
        ),
        (
            "GAVEL_BIDDER__LISTEN",
            "no-such-host.invalid:80",
            "cannot resolve",
        ),
    ] {
        let out = gavel(&["bidder", "--config", file, "--check"], &[(var, value)]);
        let said = text(&out);
        assert!(!out.status.success(), "{var}={value} was taken: {said}");
        assert!(
            said.contains(&format!("{var}: ")) && said.contains(why),
            "{var}={value}: {said}"
        );
    }
    // A key under its old name is read at its new place, and the warning names the new key.
    let out = gavel(
        &["bidder", "--config", file, "--check"],
        &[("GAVEL_BIDDER__HTTP__SHUTDOWN_GRACE_MS", "5000")],
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("http.shutdown_grace_ms has moved: read as http.drain_timeout_ms")
            && said.contains("drain_timeout_ms = 5000"),
        "{said}"
    );
    // A file's own listen names a host the same way.
    let named = dir.file(
        "named.toml",
        &std::fs::read_to_string(&config)
            .unwrap()
            .replace("127.0.0.1:9100", "localhost:9200"),
    );
    let shown = text(&gavel(&["check-config", named.to_str().unwrap()], &[]));
    assert!(shown.contains("listen = \"127.0.0.1:9200\"\n"), "{shown}");
}

#[test]
fn an_exchange_variable_wins_over_the_file() {
    let dir = TempDir::new("env-exchange");
    let config = dir.file(
        "exchange.toml",
        "open_to_all_sellers = true\nlisten = \"localhost:8080\"\n[http]\ndrain_grace_ms = 0\n",
    );
    let file = config.to_str().unwrap();
    let envs = [
        ("GAVEL_EXCHANGE__HTTP__DRAIN_GRACE_MS", "1500"),
        ("GAVEL_EXCHANGE__LISTEN", "0.0.0.0:18080"),
        ("GAVEL_BIDDER__HTTP__DRAIN_GRACE_MS", "not the exchange's"),
    ];
    for args in [
        vec!["exchange", "--config", file, "--check"],
        vec!["check-config", file],
    ] {
        let out = gavel(&args, &envs);
        let shown = text(&out);
        assert!(out.status.success(), "{shown}");
        assert!(shown.contains("drain_grace_ms = 1500\n"), "{shown}");
        assert!(shown.contains("listen = \"0.0.0.0:18080\"\n"), "{shown}");
    }
    let shown = text(&gavel(&["check-config", file], &[]));
    assert!(shown.contains("drain_grace_ms = 0\n"), "{shown}");
    assert!(shown.contains("listen = \"127.0.0.1:8080\"\n"), "{shown}");
}

#[test]
fn an_exchange_configured_by_the_environment_alone() {
    let out = gavel(
        &["exchange", "--check"],
        &[
            ("GAVEL_EXCHANGE__OPEN_TO_ALL_SELLERS", "true"),
            ("GAVEL_EXCHANGE__BIDDERS__0__NAME", "a"),
            (
                "GAVEL_EXCHANGE__BIDDERS__0__ENDPOINT",
                "http://127.0.0.1:9/bid",
            ),
            ("GAVEL_EXCHANGE__BIDDERS__1__NAME", "b"),
            (
                "GAVEL_EXCHANGE__BIDDERS__1__ENDPOINT",
                "http://127.0.0.1:10/bid",
            ),
            ("GAVEL_EXCHANGE__HTTP__DRAIN_TIMEOUT_MS", "2500"),
        ],
    );
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("the environment (no --config): a valid exchange configuration: bidders 2"),
        "{shown}"
    );
    assert!(shown.contains("drain_timeout_ms = 2500\n"), "{shown}");
    // Without a file or the keys it needs, the refusal names what is missing.
    let out = gavel(
        &["exchange", "--check"],
        &[("GAVEL_EXCHANGE__BIDDERS__0__NAME", "a")],
    );
    let said = text(&out);
    assert!(!out.status.success());
    assert!(
        said.contains("GAVEL_EXCHANGE__BIDDERS__0__NAME: bidders[0]: missing field `endpoint`"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_edge_runs_as_written_on_ports_the_environment_gives() {
    let config = examples().join("edge.toml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(["edge", "--config"])
        .arg(&config)
        .envs([
            ("GAVEL_EDGE__LISTEN", "127.0.0.1:0"),
            ("GAVEL_EDGE__ADMIN_LISTEN", "127.0.0.1:0"),
            ("GAVEL_EDGE__HTTP__DRAIN_GRACE_MS", "0"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // "gavel edge listening on http://ADDR (... metrics: http://ADMIN/metrics)"
    let addr: SocketAddr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split([' ', '/']).next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    let admin: SocketAddr = first
        .split("metrics: http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no admin address in {first:?}"));
    assert_ne!(addr.port(), 8090, "the variable's port, not the file's");
    for port in [addr, admin] {
        assert_eq!(
            testkit::http::call(port, "GET", "/readyz", "").await,
            (200, "ready\n".to_owned())
        );
    }
    let page = testkit::http::call(admin, "GET", "/metrics", "").await.1;
    assert!(page.contains("\ngavel_edge_ready 1\n"), "{page}");
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let waited = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(waited.elapsed() < Duration::from_secs(15), "no exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "{exit:?}");
}
