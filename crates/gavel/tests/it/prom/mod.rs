//! Helpers of the Prometheus test: Debian's `prometheus` and `promtool` run as child processes
//! (killed on drop), queries through Prometheus's HTTP API, and the queries a Grafana dashboard
//! JSON holds, with its template variables substituted.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What to install when a tool is missing: the test fails rather than skips.
const INSTALL: &str = "install Debian's `prometheus` package (apt-get install -y prometheus), \
                       which provides both `prometheus` and `promtool`; .ci/run installs it";

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The first line of `tool --version`, or a failure naming the package to install.
pub fn version_of(tool: &str) -> String {
    let out = Command::new(tool)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("`{tool}` cannot run ({e}): {INSTALL}"));
    // promtool and prometheus print their version to stdout (older releases: stderr).
    let text = String::from_utf8_lossy(if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    })
    .into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

/// Runs `promtool <args>` in `dir` and fails the test with its output unless it succeeds.
pub fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("`promtool` cannot run ({e}): {INSTALL}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} failed in {}:\n{text}",
        args.join(" "),
        dir.display()
    );
    text
}

/// A `prometheus` server on a free loopback port, storing into a temporary directory; killed
/// when dropped.
pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
}

impl Prometheus {
    /// Starts `prometheus --config.file <config>` and waits until it says it is ready.
    pub async fn start(config: &Path, data: &Path) -> Prometheus {
        let addr = SocketAddr::from(([127, 0, 0, 1], testkit::free_port()));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("`prometheus` cannot run ({e}): {INSTALL}"));
        let prometheus = Prometheus { child, addr };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(a) = testkit::http::send(addr, "GET", "/-/ready", "").await
                && a.status == 200
            {
                return prometheus;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus on {addr} not ready within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `GET path` on the API; the JSON answer's `data`, or the error Prometheus gave.
    pub async fn api(&self, path: &str) -> Result<Value, String> {
        let answer = testkit::http::send(self.addr, "GET", path, "").await?;
        let body: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| format!("{} answered no JSON ({e})", answer.status))?;
        if body["status"] != "success" {
            return Err(format!(
                "{}: {} {}",
                answer.status, body["errorType"], body["error"]
            ));
        }
        Ok(body["data"].clone())
    }

    /// An instant query: its result vector (or scalar), or Prometheus's error.
    pub async fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let data = self
            .api(&format!("/api/v1/query?query={}", encode(promql)))
            .await?;
        match data["resultType"].as_str() {
            Some("vector" | "matrix") => Ok(data["result"].as_array().cloned().unwrap_or_default()),
            // A scalar or a string is one value.
            Some(_) => Ok(vec![data["result"].clone()]),
            None => Err(format!("no resultType in {data}")),
        }
    }

    /// Waits until every target is up and has been scraped at least `scrapes` times since
    /// this call (by its `lastScrape` moving on).
    pub async fn wait_for_scrapes(&self, targets: usize, scrapes: u32) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen: Vec<(String, String, u32)> = Vec::new();
        loop {
            let data = self.api("/api/v1/targets?state=active").await.unwrap();
            let active = data["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for t in &active {
                let url = t["scrapeUrl"].as_str().unwrap_or_default().to_owned();
                let last = t["lastScrape"].as_str().unwrap_or_default().to_owned();
                let up = t["health"] == "up";
                match seen.iter_mut().find(|(u, _, _)| *u == url) {
                    Some(entry) if entry.1 != last && up => {
                        entry.1 = last;
                        entry.2 += 1;
                    }
                    Some(_) => {}
                    None => seen.push((url, last, 0)),
                }
            }
            if active.len() == targets && seen.iter().all(|(_, _, n)| *n >= scrapes) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "targets not all up and scraped {scrapes} times within 30 s: {active:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` percent-encoded for a query string: everything but the unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One query a dashboard holds: where it is (dashboard, panel or variable) and its PromQL with
/// Grafana's variables substituted.
#[derive(Debug)]
pub struct DashboardQuery {
    pub place: String,
    pub promql: String,
}

/// Grafana's variables as the test evaluates them: every rate over a minute (four 1 s scrapes
/// at least), every instance, bidder, campaign and origin.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "1m")
        .replace("$__range", "1m")
        .replace("${instance}", ".*")
        .replace("$instance", ".*")
        .replace("$bidder", ".*")
        .replace("$campaign", ".*")
        .replace("$origin", ".*")
}

/// Every panel target's `expr` of a dashboard (rows' nested panels included), and for each
/// `label_values(selector, label)` variable, its selector.
pub fn dashboard_queries(file: &Path) -> Vec<DashboardQuery> {
    let text = std::fs::read_to_string(file).unwrap();
    let dashboard: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", file.display()));
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        dashboard["templating"]["list"][0]["name"], "datasource",
        "{name}: the first variable is the data source"
    );
    let mut queries = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        if let Some(nested) = panel["panels"].as_array() {
            panels.extend(nested);
        }
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_else(|| {
                panic!(
                    "{name}: panel {:?} has a target without expr",
                    panel["title"]
                )
            });
            queries.push(DashboardQuery {
                place: format!("{name}: panel {}", panel["title"]),
                promql: substitute(expr),
            });
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let Some(def) = variable["definition"].as_str() else {
            continue;
        };
        let selector = def
            .strip_prefix("label_values(")
            .and_then(|rest| rest.rsplit_once(','))
            .map(|(selector, _)| selector)
            .unwrap_or_else(|| {
                panic!("{name}: variable {def:?} is not label_values(selector, label)")
            });
        queries.push(DashboardQuery {
            place: format!("{name}: variable {}", variable["name"]),
            promql: substitute(selector),
        });
    }
    queries
}

/// The metric names a PromQL expression selects (`gavel_*`), for checking that each exists.
pub fn metric_names(promql: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = promql;
    while let Some(i) = rest.find("gavel_") {
        let tail = rest.get(i..).unwrap_or_default();
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail.get(..end).unwrap_or_default().to_owned();
        if !names.contains(&name) {
            names.push(name);
        }
        rest = tail.get(end..).unwrap_or_default();
    }
    names
}
