//! The log and `/metrics` an operator gets from a real `gavel exchange` process: with
//! `--log-format json` (here through `GAVEL_LOG_FORMAT`) every line on stderr is a JSON object;
//! as text to a pipe, no line carries an ANSI escape; at the default level the admin audit
//! line, a bidder paused by an operator and a configuration applied are all there, naming the
//! bidder. `/metrics` says which build runs and what the process uses. A bad `--log` filter is
//! refused naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader, Read as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use testkit::TempDir;
use testkit::http::{call_blocking, call_blocking_as};
use testkit::secrets::ADMIN_TOKEN;

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Runs `gavel exchange` with `args` and `envs` through one admin action and one SIGHUP,
/// then SIGTERM; returns its stderr and a `/metrics` page scraped while it ran.
fn exchange_session(args: &[&str], envs: &[(&str, &str)]) -> (String, String) {
    let dir = TempDir::new("logs");
    let config = dir.join("exchange.toml");
    // A bidder on a port nobody listens on: no auction is sent, only its name matters.
    std::fs::write(
        &config,
        format!(
            "open_to_all_sellers = true\n{}[[bidders]]\nname = \"dsp-one\"\n\
             endpoint = \"http://127.0.0.1:9/bid\"\n",
            testkit::secrets::admin_toml(dir.path())
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .arg("exchange")
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("GAVEL_LOG")
        .env_remove("GAVEL_LOG_FORMAT")
        .envs(common::NO_DRAIN_GRACE)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let admin: SocketAddr = common::admin_addr(&first);

    let (status, metrics) = call_blocking(admin, "GET", "/metrics", "");
    assert_eq!(status, 200, "{metrics}");
    let (status, body) = call_blocking_as(
        admin,
        "POST",
        "/admin/bidders/dsp-one/disable",
        Some(ADMIN_TOKEN),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let before = call_blocking(admin, "GET", "/metrics", "").1;
    signal(&child, "HUP");
    let applied = "gavel_exchange_config_reloads_total{outcome=\"applied\"} 1";
    assert!(
        testkit::time::eventually_blocking(Duration::from_secs(10), || {
            call_blocking(admin, "GET", "/metrics", "")
                .1
                .contains(applied)
        }),
        "no reload applied; before: {before}"
    );
    signal(&child, "TERM");
    let exit = child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
    (reader.join().unwrap(), metrics)
}

#[test]
fn json_logs_are_one_object_per_line_with_the_operator_events_at_the_default_level() {
    let (stderr, _) = exchange_session(&[], &[("GAVEL_LOG_FORMAT", "json")]);
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    for line in &lines {
        for key in ["timestamp", "level", "target"] {
            assert!(line[key].is_string(), "no {key}: {line}");
        }
        assert!(line["fields"]["message"].is_string(), "no message: {line}");
    }
    let find = |message: &str| -> &Value {
        lines
            .iter()
            .find(|l| l["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} in {stderr}"))
    };
    let audit = find("admin action");
    assert_eq!(audit["level"], "INFO");
    assert_eq!(audit["target"], "gavel::audit");
    assert_eq!(
        audit["fields"]["what"],
        "POST /admin/bidders/dsp-one/disable"
    );
    let paused = find("bidder paused by an operator: not called until enabled");
    assert_eq!(paused["fields"]["bidder"], "dsp-one");
    assert_eq!(paused["level"], "WARN");
    let applied = find("configuration applied");
    assert_eq!(applied["level"], "INFO");
    assert_eq!(applied["target"], "exchange::reload");
}

#[test]
fn text_logs_to_a_pipe_carry_no_escape_codes() {
    let (stderr, _) = exchange_session(&["--log-format", "text"], &[]);
    assert!(!stderr.contains("\x1b["), "{stderr}");
    for expected in [
        "gavel::audit",
        "admin action",
        "dsp-one",
        "configuration applied",
    ] {
        assert!(stderr.contains(expected), "no {expected:?} in {stderr}");
    }
}

#[test]
fn a_filter_keeps_what_it_names_and_drops_the_rest() {
    // Audit lines off, the reload's line kept: the filter is per module.
    let (stderr, _) = exchange_session(&["--log", "info,gavel::audit=off"], &[]);
    assert!(!stderr.contains("admin action"), "{stderr}");
    assert!(stderr.contains("configuration applied"), "{stderr}");
}

/// The value of the one sample of `name` (any labels), parsed.
fn sample(page: &str, name: &str) -> f64 {
    let line = page
        .lines()
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']))
        })
        .unwrap_or_else(|| panic!("no {name} in {page}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn metrics_say_which_build_runs_and_what_the_process_uses() {
    let (_, page) = exchange_session(&["--log", "warn"], &[]);
    let build = page
        .lines()
        .find(|l| l.starts_with("gavel_build_info{"))
        .unwrap_or_else(|| panic!("no gavel_build_info in {page}"));
    assert!(
        build.starts_with(&format!(
            "gavel_build_info{{version=\"{}\"",
            env!("CARGO_PKG_VERSION")
        )),
        "{build}"
    );
    assert!(build.contains("rustc=\"1."), "{build}");
    assert!(build.ends_with("} 1"), "{build}");
    if cfg!(target_os = "linux") {
        assert!(
            sample(&page, "process_resident_memory_bytes") > 1e6,
            "{page}"
        );
        let open = sample(&page, "process_open_fds");
        assert!(open >= 3.0, "{page}");
        assert!(sample(&page, "process_max_fds") >= open, "{page}");
        assert!(sample(&page, "process_cpu_seconds_total") >= 0.0, "{page}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = sample(&page, "process_start_time_seconds");
        assert!(
            started > now - 600.0 && started <= now + 1.0,
            "{started} vs {now}"
        );
    }
}

#[test]
fn a_bad_filter_is_refused_naming_it() {
    for (args, env, named) in [
        (vec!["--log", "info,exchange=loud"], None, "loud"),
        (vec![], Some("verbose"), "verbose"),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gavel"));
        cmd.args(&args).args(["check-config", "/nonexistent.toml"]);
        cmd.env_remove("GAVEL_LOG");
        if let Some(v) = env {
            cmd.env("GAVEL_LOG", v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("--log") && stderr.contains(named),
            "{stderr}"
        );
    }
}
