//! Command-line definitions. Every value has a bound, checked by clap or by the command, with a
//! message that names the flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "gavel",
    version,
    about = "Gavel: an OpenRTB 2.6 exchange, simulated DSPs and an open-loop load generator"
)]
pub struct Cli {
    /// Runtime worker threads (default: one per core).
    #[arg(long, global = true, value_parser = clap::value_parser!(u16).range(1..=256).map(usize::from))]
    pub threads: Option<usize>,
    /// Log level: error, warn (default), info, debug, trace. Logs go to stderr.
    #[arg(long, global = true)]
    pub log: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the exchange server.
    Exchange(ExchangeArgs),
    /// Run a fleet of simulated DSPs on loopback.
    Sim(SimArgs),
    /// Drive an HTTP endpoint with open-loop load and report latency percentiles.
    Load(LoadArgs),
    /// Exchange, simulated DSPs and the load generator in one process; prints a report.
    Demo(DemoArgs),
    /// A bare HTTP server that reads each body and answers 204: the request-response ceiling
    /// of this machine, the baseline of the end-to-end benchmarks.
    #[command(hide = true)]
    Baseline(BaselineArgs),
}

#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
}

#[derive(Debug, Args)]
pub struct ExchangeArgs {
    /// Exchange configuration (TOML; see docs/config.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Listen address; overrides `listen` in the file.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Number of bidders with the built-in demo profiles (ignored with --profiles).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=200).map(usize::from))]
    pub bidders: usize,
    /// Bidder profiles (TOML, [[bidder]] tables; see docs/sim.md).
    #[arg(long)]
    pub profiles: Option<PathBuf>,
    /// Seed of every random decision.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Write a [[bidders]] section for the exchange config here.
    #[arg(long)]
    pub write_bidders: Option<PathBuf>,
    /// Stop after this long (e.g. 30s, 5m); default: until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Target URL (http only), e.g. http://127.0.0.1:8080/openrtb2/auction.
    #[arg(long)]
    pub url: String,
    /// Requests per second, on a fixed schedule.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// How long to send (e.g. 10s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Connections (each carries one request at a time).
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Request bodies: a file of JSON lines, one JSON document, or a directory of *.json.
    /// Default: built-in seeded OpenRTB 2.6 requests.
    #[arg(long)]
    pub requests: Option<PathBuf>,
    /// Seed of the built-in request generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// tmax written into generated requests, in milliseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub tmax: u32,
    /// Give up on a request this long after its scheduled send time.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Send for this long first and leave it out of every figure (e.g. 2s).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Also report the share of requests answered within this latency (e.g. 100ms).
    #[arg(long, value_parser = parse_duration)]
    pub slo: Option<Duration>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Auctions per second offered by the load generator.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Length of the load (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Simulated bidders.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=100).map(usize::from))]
    pub bidders: usize,
    /// Seed of bidders and requests: the same seed gives the same auctions.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// tmax of the generated requests, in milliseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(10..=10_000))]
    pub tmax: u32,
}

/// Parses `250ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 10s or 2m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}; use ms, s, m or h"
            ));
        }
    };
    if !(secs.is_finite() && secs > 0.0 && secs <= 24.0 * 3600.0) {
        return Err(format!("{text:?}: must be more than 0 and at most 24h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bounds() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("48h").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
