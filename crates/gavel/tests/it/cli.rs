//! The `gavel` binary as a user runs it: real processes, real sockets on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use testkit::TempDir;

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
        // What was refused at the door is reported (its counts depend on the machine's load).
        "at the door       ",
        "skipped pool/brk/qps",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

#[test]
fn exchange_refuses_a_bad_config_naming_the_key() {
    let dir = TempDir::new("cli");
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
}

#[test]
fn edge_refuses_a_bad_config_naming_the_key_and_serves_a_good_one() {
    let dir = TempDir::new("cli-edge");
    let path = dir.join("edge.toml");
    for (text, key) in [
        (
            "[[origins]]\nname = \"cdn\"\nurl = \"https://x\"\n",
            "origins[0].url",
        ),
        ("[memory]\nmax_byte = 1\n", "max_byte"),
        ("[disk]\ndir = \"d\"\nmax_bytes = 0\n", "disk.max_bytes"),
    ] {
        std::fs::write(&path, text).unwrap();
        let (ok, _, stderr) = run(&["edge", "--config", path.to_str().unwrap()]);
        assert!(!ok, "{text}");
        assert!(stderr.contains(key), "{text}: {stderr}");
    }
    // A good file: it starts, says where, and answers its health check.
    std::fs::write(&path, "[store]\nmax_puts = 3\n").unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let (mut child, line) = start_listening(&[
        "edge",
        "--config",
        path.to_str().unwrap(),
        "--listen",
        &listen,
    ]);
    assert!(
        line.contains(&format!("gavel edge listening on http://127.0.0.1:{port}")),
        "{line}"
    );
    let (status, body) = testkit::http::call_blocking(
        format!("127.0.0.1:{port}").parse().unwrap(),
        "GET",
        "/healthz",
        "",
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((status, body.as_str()), (200, "ok\n"));
}

#[test]
fn sim_writes_a_bidders_section_the_exchange_accepts() {
    let dir = TempDir::new("sim");
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
    // A complete configuration for a local exchange, as the README uses it.
    let config = exchange::Config::from_toml(&section).unwrap();
    assert!(
        config.config.live.open_to_all_sellers && config.config.notices.allow_private_addresses
    );
    assert_eq!(config.config.live.bidders.len(), 2);
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
    // The lean server has no TLS: asking for both is refused, not half done.
    let (ok, _, stderr) = run(&[
        "sim",
        "--lean-http",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("--lean-http") && stderr.contains("--tls-cert"),
        "{stderr}"
    );
}

#[test]
fn load_reports_an_slo_share_and_writes_json_against_a_live_exchange() {
    // An exchange with no bidders answers every valid request 204 at once, to its one seller,
    // whose key the load generator reads from the environment.
    let dir = TempDir::new("load");
    let key = "cli-test-seller-0123456789abcdef";
    std::fs::write(dir.join("seller.key"), format!("{key}\n")).unwrap();
    let config = dir.join("exchange.toml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\n[[sellers]]\nname = \"cli\"\nkey_file = \"seller.key\"\n"
        ),
    )
    .unwrap();
    let mut exchange = gavel()
        .args(["exchange", "--config", config.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The exchange prints its address once it listens.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(exchange.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(
        line.contains("listening"),
        "exchange did not start: {line:?}"
    );
    let url = format!("http://127.0.0.1:{port}/openrtb2/auction");
    let json = dir.join("out.json");
    // Without the key every request is refused, before the exchange reads a body.
    let (_, refused, _) = run(&["load", "--url", &url, "--rate", "50", "--duration", "200ms"]);
    assert!(refused.contains("401: 10"), "{refused}");
    let out = gavel()
        .env("GAVEL_TEST_SELLER_KEY", key)
        .args([
            "load",
            // Shared cores stall now and then; the figures, not the gate, are checked here.
            "--allow-limited",
            "--seller-key-env",
            "GAVEL_TEST_SELLER_KEY",
            "--url",
            &url,
            "--rate",
            "200",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            // An SLO no loopback answer misses, even on a loaded machine: this checks the
            // report's arithmetic, not the machine's speed.
            "--slo",
            "10s",
            "--json",
            json.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (ok, stdout, stderr) = (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    exchange.kill().unwrap();
    let _ = exchange.wait();
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("204: 200"),
        "warm-up requests are left out of the figures:\n{stdout}"
    );
    assert!(stdout.contains("within 10s: 100.000%"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["sent"], 200);
    assert_eq!(report["slo"]["share"], 1.0);
    for key in ["p50", "p90", "p99", "p999", "p9999", "max"] {
        assert!(report["latency_ms"][key].is_number(), "latency_ms.{key}");
    }
}

/// `gavel baseline` on a free port of 127.0.0.1, killed when dropped.
struct Baseline {
    child: std::process::Child,
    url: String,
}

impl Baseline {
    fn start() -> Baseline {
        Baseline::with(&[])
    }

    fn with(extra: &[&str]) -> Baseline {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["baseline", "--listen", &listen];
        args.extend_from_slice(extra);
        let (child, line) = start_listening(&args);
        assert!(
            line.contains("listening"),
            "baseline did not start: {line:?}"
        );
        Baseline {
            child,
            url: format!("http://127.0.0.1:{port}/"),
        }
    }
}

impl Drop for Baseline {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `gavel ARGS` and returns it with the first line it printed (servers print where they
/// listen once they do).
fn start_listening(args: &[&str]) -> (std::process::Child, String) {
    let mut child = gavel()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (child, line)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status code of one POST of `{}` to `url` (`http://127.0.0.1:PORT/`), on its own
/// connection.
fn post_status(url: &str) -> u16 {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}

/// `gavel baseline --bidders`: 204 once every bidder answered; a bidder that cannot be
/// reached makes it 502, so a floor that lost calls never counts as capacity.
#[test]
fn baseline_fans_out_and_fails_a_request_whose_bidders_did_not_all_answer() {
    let dir = TempDir::new("floor");
    let live = dir.join("live.toml");
    let mut sim = gavel()
        .args([
            "sim",
            "--bidders",
            "2",
            "--duration",
            "60s",
            "--write-bidders",
        ])
        .arg(&live)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(sim.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("wrote the [[bidders]]") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "sim ended"
        );
    }
    let floor = Baseline::with(&["--bidders", live.to_str().unwrap()]);
    assert_eq!(post_status(&floor.url), 204);
    drop(floor);

    // The same two bidders and one on a port nobody listens on.
    let dead = dir.join("dead.toml");
    let section = std::fs::read_to_string(&live).unwrap();
    std::fs::write(
        &dead,
        format!(
            "{section}\n[[bidders]]\nname = \"gone\"\nendpoint = \"http://127.0.0.1:{}/\"\n",
            free_port()
        ),
    )
    .unwrap();
    let floor = Baseline::with(&["--bidders", dead.to_str().unwrap()]);
    assert_eq!(post_status(&floor.url), 502);
    drop(floor);
    let _ = sim.kill();
    let _ = sim.wait();
}

#[test]
fn load_steps_write_json_and_an_html_report() {
    let server = Baseline::start();
    let dir = TempDir::new("steps");
    let (json, html) = (dir.join("steps.json"), dir.join("steps.html"));
    let (ok, stdout, stderr) = run(&[
        "load",
        // Shared cores stall now and then; the figures, not the gate, are checked here.
        "--allow-limited",
        "--url",
        &server.url,
        "--rate",
        "200:400:200",
        "--step-duration",
        "500ms",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("sent 300"), "{stdout}");
    assert!(stdout.contains("offered/s"), "{stdout}");
    // stderr is not a terminal here: no progress line.
    assert!(!stderr.contains("req/s"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["steps"].as_array().unwrap().len(), 2);
    assert_eq!(report["steps"][1]["rate_offered"], 400.0);
    assert_eq!(report["status"]["no_content_204"], 300);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..100]);
    assert_eq!(page.matches("<svg").count(), 3);
    assert!(page.contains(&server.url));
    assert!(page.contains("Rate steps"));
    // Parameters read as words, not as Rust's debug output.
    assert!(page.contains("status only"), "no check named");
    assert!(!page.contains("None"), "a parameter shows Rust's None");
}

#[test]
fn load_finds_capacity_up_to_the_ceiling() {
    let server = Baseline::start();
    let dir = TempDir::new("capacity");
    let json = dir.join("capacity.json");
    let (ok, stdout, stderr) = run(&[
        "load",
        "--url",
        &server.url,
        "--find-capacity",
        // A p99 bound no loopback answer misses on a loaded machine: the search is checked,
        // not the machine's speed.
        "--slo-p99",
        "5s",
        "--rate",
        "100",
        "--max-rate",
        "400",
        "--duration",
        "300ms",
        "--warmup",
        "1ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("capacity: 400/s"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["capacity"], 400.0);
    assert_eq!(report["trials"].as_array().unwrap().len(), 3);
    assert_eq!(report["at_capacity"]["sent"], 120);
}

#[test]
fn load_closed_loop_and_flag_conflicts() {
    let server = Baseline::start();
    let (ok, stdout, stderr) = run(&[
        "load",
        "--url",
        &server.url,
        "--closed-loop",
        "--connections",
        "2",
        "--duration",
        "300ms",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("closed loop"), "{stdout}");
    for (args, flag) in [
        (
            vec!["--closed-loop", "--find-capacity", "--slo-p99", "5ms"],
            "--find-capacity",
        ),
        (vec!["--find-capacity"], "--slo-p99"),
        (vec!["--rate", "100:50:0"], "step"),
        (vec!["--step-duration", "1s"], "--step-duration"),
        (vec!["--warmup-rate", "50"], "--warmup"),
        (
            vec!["--warmup", "1s", "--warmup-rate", "0"],
            "--warmup-rate",
        ),
    ] {
        let mut all = vec!["load", "--url", server.url.as_str()];
        all.extend(args);
        let (ok, _, stderr) = run(&all);
        assert!(!ok, "{all:?} was accepted");
        assert!(stderr.contains(flag), "{all:?}: {stderr}");
    }
}
