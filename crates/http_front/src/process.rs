//! What every server's `/metrics` says about the process itself, whatever the server:
//! `gavel_build_info` (which build runs) and the process metrics Prometheus' client libraries
//! export under the same names (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, `process_max_fds`, `process_start_time_seconds`), so the usual dashboards
//! and alerts work unchanged.
//!
//! The process figures are read from `/proc/self` at each scrape (three small reads and a
//! directory listing, a scrape every few seconds at most). Where `/proc` is missing (not Linux)
//! or a read fails, the figure is left out: a scrape never fails for it.
//!
//! The build is a fact of the process, not of a server, so it is set once, by the binary
//! ([`set_build_info`], with what its build script learned); a server run from a test reports
//! the crate version alone.

use std::sync::OnceLock;

/// Which build runs: the `gavel_build_info` labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// The workspace version (`CARGO_PKG_VERSION`).
    pub version: &'static str,
    /// The commit it was built from, when the build could ask git.
    pub git_sha: Option<&'static str>,
    /// The compiler's version, e.g. `1.88.0`.
    pub rustc: Option<&'static str>,
}

static BUILD: OnceLock<BuildInfo> = OnceLock::new();

/// Sets the build every server of this process reports; the first call wins.
pub fn set_build_info(info: BuildInfo) {
    let _ = BUILD.set(info);
}

/// The build this process reports.
pub fn build_info() -> &'static BuildInfo {
    BUILD.get_or_init(|| BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        git_sha: None,
        rustc: None,
    })
}

/// Appends `gavel_build_info` and the process metrics to a Prometheus text page.
pub fn render(out: &mut String) {
    render_build_info(out, build_info());
    telemetry::family(
        out,
        "gavel_lock_poisoned_total",
        "counter",
        "Locks taken over after a panic poisoned them (the data is kept and the work done).",
    );
    telemetry::sample(
        out,
        "gavel_lock_poisoned_total",
        &[],
        telemetry::locks::poisoned_total(),
    );
    if let Some(figures) = read::figures() {
        render_figures(out, &figures);
    }
}

/// Keeps a label value to the characters a version, a commit or a compiler version use, so
/// that it never needs escaping (a build script's output is not trusted to be tidy).
fn label_safe(value: &str) -> String {
    value
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
        .take(64)
        .collect()
}

fn render_build_info(out: &mut String, info: &BuildInfo) {
    let version = label_safe(info.version);
    let sha = info.git_sha.map(label_safe);
    let rustc = info.rustc.map(label_safe);
    let mut labels = vec![("version", version.as_str())];
    if let Some(sha) = &sha {
        labels.push(("git_sha", sha));
    }
    if let Some(rustc) = &rustc {
        labels.push(("rustc", rustc));
    }
    telemetry::family(
        out,
        "gavel_build_info",
        "gauge",
        "Always 1; its labels say which build runs.",
    );
    telemetry::sample(out, "gavel_build_info", &labels, 1);
}

/// The process's figures at one moment; each is absent when it could not be read.
#[derive(Debug, Clone, PartialEq)]
struct Figures {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<u64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
    start_time_seconds: Option<f64>,
}

fn render_figures(out: &mut String, f: &Figures) {
    let families: [(&str, &str, &str, Option<String>); 5] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            f.cpu_seconds.map(|v| v.to_string()),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            f.resident_bytes.map(|v| v.to_string()),
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            f.open_fds.map(|v| v.to_string()),
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            f.max_fds.map(|v| v.to_string()),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            f.start_time_seconds.map(|v| v.to_string()),
        ),
    ];
    for (name, kind, help, value) in families {
        if let Some(value) = value {
            telemetry::single(out, name, kind, help, value);
        }
    }
}

// Read only on Linux; the parsers stay tested everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// The fields of `/proc/self/stat` these metrics read, in the units the kernel gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    /// User and system CPU time, in clock ticks.
    cpu_ticks: u64,
    /// When the process started, in clock ticks after boot.
    start_ticks: u64,
    /// Resident set size, in pages.
    rss_pages: u64,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// Parses `/proc/<pid>/stat` (proc(5)). The command name (field 2) sits in parentheses and may
/// hold spaces and parentheses itself, so the fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, after_name) = text.rsplit_once(')')?;
    // Field 3 (state) is the first after the name: field n is at index n - 3.
    let fields: Vec<&str> = after_name.split_ascii_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n.checked_sub(3)?)?.parse().ok() };
    Some(Stat {
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
        rss_pages: field(24)?,
    })
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// The boot time (`btime`, seconds since the epoch) in `/proc/stat`.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(target_os = "linux")]
mod read {
    use std::io::Read as _;
    use std::sync::OnceLock;

    use super::{Figures, parse_boot_time, parse_stat};

    /// Most bytes read of a `/proc` file: `/proc/self/stat` is a line; `btime` comes after
    /// one line per CPU in `/proc/stat`, well within this on machines of thousands of CPUs.
    const MAX_PROC_BYTES: u64 = 256 * 1024;

    fn read_head(path: &str) -> Option<String> {
        let mut text = String::new();
        std::fs::File::open(path)
            .ok()?
            .take(MAX_PROC_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    }

    /// Seconds since the epoch at boot: it never changes, so it is read once.
    fn boot_time() -> Option<u64> {
        static BOOT: OnceLock<Option<u64>> = OnceLock::new();
        *BOOT.get_or_init(|| read_head("/proc/stat").as_deref().and_then(parse_boot_time))
    }

    pub(super) fn figures() -> Option<Figures> {
        let ticks = rustix::param::clock_ticks_per_second();
        let stat = read_head("/proc/self/stat").as_deref().and_then(parse_stat);
        let per_tick = |t: u64| (ticks > 0).then(|| t as f64 / ticks as f64);
        let page = u64::try_from(rustix::param::page_size()).unwrap_or(0);
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|dir| dir.count() as u64);
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        Some(Figures {
            cpu_seconds: stat.and_then(|s| per_tick(s.cpu_ticks)),
            resident_bytes: stat.and_then(|s| s.rss_pages.checked_mul(page)),
            open_fds,
            max_fds,
            start_time_seconds: stat
                .and_then(|s| Some(boot_time()? as f64 + per_tick(s.start_ticks)?)),
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod read {
    pub(super) fn figures() -> Option<super::Figures> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real line, with a command name made to confuse a naive split.
    const STAT: &str = "4242 (gav el) (x)) S 1 4242 4242 0 -1 4194560 9100 0 3 0 \
                        250 75 0 0 20 0 9 0 123456 987654321 5120 18446744073709551615 \
                        1 1 0 0 0 0 0 4096 17990 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        assert_eq!(
            parse_stat(STAT),
            Some(Stat {
                cpu_ticks: 325,
                start_ticks: 123_456,
                rss_pages: 5120,
            })
        );
        assert_eq!(parse_stat("4242 (gavel) S 1 2"), None, "too short");
        assert_eq!(parse_stat("no parenthesis at all"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn boot_time_is_the_btime_line() {
        let text = "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 99\nbtime 1700000000\nprocesses 12\n";
        assert_eq!(parse_boot_time(text), Some(1_700_000_000));
        assert_eq!(parse_boot_time("cpu 1 2\n"), None);
    }

    #[test]
    fn build_info_names_what_it_knows_and_nothing_unsafe() {
        let mut out = String::new();
        render_build_info(
            &mut out,
            &BuildInfo {
                version: "0.1.0",
                git_sha: Some("abc123\"}\n"),
                rustc: None,
            },
        );
        assert!(
            out.ends_with("gavel_build_info{version=\"0.1.0\",git_sha=\"abc123\"} 1\n"),
            "{out}"
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_has_figures_and_they_are_plausible() {
        let f = read::figures().expect("figures on linux");
        assert!(f.resident_bytes.is_some_and(|b| b > 1024 * 1024), "{f:?}");
        // stdin, stdout, stderr and the directory being listed, at least.
        assert!(f.open_fds.is_some_and(|n| n >= 3), "{f:?}");
        assert!(
            f.max_fds.is_some_and(|n| n >= f.open_fds.unwrap_or(0)),
            "{f:?}"
        );
        assert!(f.cpu_seconds.is_some_and(|s| s >= 0.0), "{f:?}");
        // Started after 2020 and not in the future.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        assert!(
            f.start_time_seconds
                .is_some_and(|t| t > 1_577_836_800.0 && t <= now + 1.0),
            "{f:?}"
        );
    }
}
