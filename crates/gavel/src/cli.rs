//! Command-line definitions. Every value has a bound, checked by clap or by the command, with a
//! message that names the flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};

use crate::logging::LogFormat;

/// Seed of every command that draws at random (generated requests, simulated bidders): the
/// same default everywhere, so `gavel demo`, `gavel sim` and `gavel load` agree unless told.
pub const DEFAULT_SEED: u64 = 7;
/// Most simulated bidders a command starts (`sim --bidders`, `demo --bidders`).
const MAX_SIM_BIDDERS: u16 = 100;
/// Range of `--tmax` in milliseconds, wherever it is taken: above the exchange's 10 ms answer
/// margin, and within the 10 s an auction can sensibly wait.
const TMAX_MS: std::ops::RangeInclusive<i64> = 20..=10_000;

#[derive(Debug, Parser)]
#[command(
    name = "gavel",
    version,
    about = "Gavel: an OpenRTB 2.6 exchange, a bidder, simulated DSPs and an open-loop load generator"
)]
pub struct Cli {
    /// Runtime worker threads (default: one per core).
    #[arg(long, global = true, value_parser = clap::value_parser!(u16).range(1..=256).map(usize::from))]
    pub threads: Option<usize>,
    /// What is logged on stderr: a level (`error`, `warn`, `info`, `debug`, `trace`, `off`)
    /// and per-module levels, e.g. `info,exchange=debug,ledger=warn`.
    #[arg(
        long,
        global = true,
        env = "GAVEL_LOG",
        default_value = crate::logging::DEFAULT_FILTER,
        value_name = "FILTER",
        value_parser = crate::logging::parse_filter
    )]
    pub log: crate::logging::LogFilter,
    /// How log lines are written: `text` (coloured only on a terminal) or `json` (one object
    /// per line).
    #[arg(long, global = true, env = "GAVEL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the exchange server.
    Exchange(ExchangeArgs),
    /// Run a bidder (DSP) serving campaigns from a file, with a budget ledger.
    Bidder(BidderArgs),
    /// Run a fleet of simulated DSPs on loopback.
    Sim(SimArgs),
    /// Run the creative edge: a Prebid-Cache-compatible markup store and a caching asset proxy.
    Edge(EdgeArgs),
    /// Drive an HTTP endpoint with open-loop load and report latency percentiles.
    Load(Box<LoadArgs>),
    /// Exchange, simulated DSPs and the load generator in one process; prints a report.
    Demo(DemoArgs),
    /// Check a configuration file (and its campaign file) without starting anything.
    CheckConfig(CheckConfigArgs),
    /// A bidder fleet's shared Redis ledger: create it (once, audited), or show its state.
    Ledger(LedgerArgs),
    /// Configuration pushed to a fleet over NATS KV (docs/fleet.md): push a roster or a
    /// campaign set, validated as a server would, or show the revision the bucket holds.
    Config(ConfigArgs),
    /// Check the exchange's books against the bidders': wins against ledger charges, the
    /// price each bidder was told against what it charged, notices lost, duplicated or refused.
    ///
    /// Exits 0 when the books agree within the tolerance, 1 on a mismatch beyond it, 2 when a
    /// record file cannot be read (naming the file and line).
    Reconcile(ReconcileArgs),
    /// Benchmark tool: a bare HTTP server, the ceiling and floor the exchange is measured by.
    ///
    /// Without `--bidders`, it reads each body and answers 204: the request-response ceiling of
    /// this machine. With `--bidders`, it also does the I/O of an auction and nothing else: the
    /// floor of the exchange's design (BENCHMARKS.md).
    Baseline(BaselineArgs),
    /// Re-run recorded auctions under a configuration's auction rules (no network) and show
    /// every impression whose winner or price would change, with revenue and spend totals.
    Replay(ReplayArgs),
    /// One HTTP GET (a container healthcheck, with no shell or curl): exits 0 on a 2xx answer,
    /// 1 otherwise, saying why on stderr.
    Probe(ProbeArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// What to GET: `http://HOST:PORT/PATH`, e.g. `http://127.0.0.1:8080/readyz`. Without it,
    /// `http://127.0.0.1:$GAVEL_HEALTH_PORT/healthz` (the image's HEALTHCHECK).
    pub url: Option<String>,
    /// How long the whole probe may take, connecting included.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub timeout_ms: u64,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The exchange configuration whose rules apply: `[auction] second_price_increment`, each
    /// seller's `floor_multiplier`, the bidders' order. Validated as the exchange does (exit 2).
    #[arg(long)]
    pub config: PathBuf,
    /// Auction record files (`*.ndjson`, `*.ndjson.gz`) or directories of them, read in name
    /// order; other records (notices, ledger events) are passed over.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// One JSON document (every change, then the totals) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Show at most this many changed auctions; the totals still cover every record.
    #[arg(long)]
    pub limit: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub action: ConfigAction,
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Validate FILE exactly as the servers of `--kind` would (refused: exit 1, naming the
    /// problem, nothing pushed), sign it with the operator's key, create the bucket if missing
    /// (ten revisions kept per key), put it, and print the new revision, serial and digest.
    Push {
        #[command(flatten)]
        target: FleetTarget,
        /// The operator's Ed25519 private key (PEM, from `gavel config keygen` or `openssl
        /// genpkey -algorithm ed25519`); nodes take only documents signed by a key in their
        /// `fleet.trusted_keys_file`.
        #[arg(long, value_name = "FILE", env = "GAVEL_FLEET_SIGNING_KEY")]
        signing_key: PathBuf,
        /// Validate the roster over this exchange configuration (its sections, its directory
        /// for seller key files) rather than over the defaults. Exchange only.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// `exchange`: `[[bidders]]` and `[[sellers]]` TOML; `bidder`: a campaign file, JSON
        /// or TOML.
        file: PathBuf,
    },
    /// Print the latest revision of the key, its digest and size, and its signed serial and
    /// signer (or `unsigned`); exit 1 when it holds nothing.
    Show {
        #[command(flatten)]
        target: FleetTarget,
    },
    /// Make an Ed25519 key pair for signing pushes: the private key in FILE (mode 0600, never
    /// overwritten) and the public key in FILE.pub, for every node's `fleet.trusted_keys_file`.
    Keygen {
        /// Where the private key goes; the public key goes beside it with `.pub` added.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// The bucket and key `gavel config` works on: the `[fleet]` section's, as flags.
#[derive(Debug, Args)]
pub struct FleetTarget {
    /// NATS server (`fleet.nats_url`).
    #[arg(long, value_name = "URL", env = "GAVEL_FLEET_NATS")]
    pub nats: String,
    /// Key-value bucket (`fleet.bucket`).
    #[arg(long, value_name = "NAME", default_value = fleet::config::DEFAULT_BUCKET)]
    pub bucket: String,
    /// Which servers the document is for; it picks the default key and the validation.
    #[arg(long, value_enum)]
    pub kind: FleetKind,
    /// Key (`fleet.key`). Default `exchange.roster` or `bidder.campaigns` by `--kind`.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// CA certificate (PEM) for a `tls://` server (`fleet.ca_file`).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// File holding the NATS token (`fleet.token_file`); else `GAVEL_FLEET_TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// NATS user (`fleet.user`), with --password-file.
    #[arg(long, value_name = "NAME", requires = "password_file")]
    pub user: Option<String>,
    /// File holding the NATS user's password (`fleet.password_file`).
    #[arg(long, value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
    /// File holding an NKey seed (`fleet.nkey_seed_file`).
    #[arg(long, value_name = "FILE")]
    pub nkey_seed_file: Option<PathBuf>,
    /// NATS credentials file (`fleet.creds_file`).
    #[arg(long, value_name = "FILE")]
    pub creds_file: Option<PathBuf>,
    /// Client certificate (`fleet.client_cert_file`), with --client-key-file.
    #[arg(long, value_name = "FILE", requires = "client_key_file")]
    pub client_cert_file: Option<PathBuf>,
    /// The client certificate's key (`fleet.client_key_file`).
    #[arg(long, value_name = "FILE", requires = "client_cert_file")]
    pub client_key_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetKind {
    Exchange,
    Bidder,
}

#[derive(Debug, Args)]
pub struct LedgerArgs {
    #[command(subcommand)]
    pub action: LedgerAction,
}

#[derive(Debug, Subcommand)]
pub enum LedgerAction {
    /// Create the ledger in the Redis a bidder configuration names, before the fleet's first
    /// start. A bidder never creates one itself: an empty Redis may be one that lost its data.
    /// Refused when Redis holds no ledger but one lived there (this host's marker in
    /// `ledger.state_dir`, or keys under the prefix), unless --after-loss. Audited in
    /// `security.audit_log`.
    Create {
        /// Bidder configuration (its `[ledger]`, `GAVEL_REDIS_URL` and `[security]`).
        #[arg(long)]
        config: PathBuf,
        /// The Redis lost a ledger and no backup will bring it back: create a new one anyway.
        /// Every campaign starts again from zero spend.
        #[arg(long)]
        after_loss: bool,
        /// Create it even though this host cannot write the ledger's marker
        /// (`ledger.state_dir`): a later loss of Redis's data then leaves no evidence here, and
        /// only the keys left in Redis can stop a second `create` from reopening every budget.
        #[arg(long)]
        no_marker: bool,
    },
    /// Whether the Redis a bidder configuration names holds a ledger, and if not, the evidence
    /// that one lived there. Exits 0 when a ledger is open, 1 otherwise.
    Status {
        /// Bidder configuration.
        #[arg(long)]
        config: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// Record files (`*.ndjson`, `*.ndjson.gz`) or directories of them: the exchange's and
    /// the bidders', together or apart.
    #[arg(required_unless_present = "nats", value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
    /// Also read the records of a NATS JetStream stream (`records.sink = "nats"`), from its
    /// first message to its last at the time of the call, after the files.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// The stream `--nats` reads (`records.nats_stream`).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "GAVEL_RECORDS",
        requires = "nats"
    )]
    pub stream: String,
    /// Wins an audited bidder may leave uncharged, per million of its wins.
    #[arg(long, value_name = "PPM", default_value_t = 0,
        value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub tolerance_ppm: u32,
    /// Wins an audited bidder may leave uncharged, however few its wins (a bidder passes
    /// within either limit).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub tolerance: u64,
    /// A bidder whose books must be checked: without ledger records joined to its wins it
    /// fails the reconcile (others without any are listed and pass). Repeatable.
    #[arg(long = "require-bidder", value_name = "NAME")]
    pub require_bidders: Vec<String>,
    /// A charge for an auction these records do not hold (another exchange's, or outside the
    /// window read) fails the reconcile instead of being counted apart.
    #[arg(long)]
    pub fail_unknown_auctions: bool,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The file to check: an exchange, bidder or edge configuration, or simulated bidder
    /// profiles.
    pub file: PathBuf,
    /// What the file configures (default: told by its keys; see docs/config.md).
    #[arg(long, value_enum)]
    pub kind: Option<ConfigKind>,
}

/// What a configuration file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigKind {
    /// `gavel exchange --config`.
    Exchange,
    /// `gavel bidder --config` (its campaign file is checked too).
    Bidder,
    /// `gavel edge --config`.
    Edge,
    /// `gavel sim --profiles`.
    Sim,
}

#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// Listen address (`host:port`; a host name is resolved once, IPv4 first).
    #[arg(long, default_value = "127.0.0.1:8090", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// An exchange configuration: each request is also sent, as a small pre-encoded bid
    /// request, to every one of its `[[bidders]]` over the exchange's own per-bidder pools,
    /// and answered once every answer is read (or `--bidder-timeout` passed).
    #[arg(long)]
    pub bidders: Option<PathBuf>,
    /// How long the fan-out waits for its bidders, in milliseconds (1..=10000; with --bidders).
    #[arg(long, requires = "bidders", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub bidder_timeout: Option<u64>,
}

#[derive(Debug, Args)]
pub struct EdgeArgs {
    /// Edge configuration (TOML; see docs/edge.md). Without it, the configuration is the
    /// defaults and the `GAVEL_<SERVER>__...` variables (docs/config.md); with it, those
    /// variables are laid over the file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address (`host:port`); overrides `listen` in the file.
    #[arg(long, value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Admin address of `/metrics` (`host:port`); overrides `admin_listen` in the file
    /// (loopback unless `security.admin_remote = true`).
    #[arg(long, value_parser = parse_listen)]
    pub admin_listen: Option<SocketAddr>,
    /// Check the configuration, print the values in effect and exit (nothing is started).
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, Args)]
pub struct BidderArgs {
    /// Bidder configuration (TOML; see docs/bidder.md). Without it, the configuration is the
    /// defaults and the `GAVEL_<SERVER>__...` variables (docs/config.md); with it, those
    /// variables are laid over the file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address (`host:port`); overrides `listen` in the file.
    #[arg(long, value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Admin address (`host:port`); overrides `admin_listen` in the file (loopback unless
    /// `security.admin_remote = true`).
    #[arg(long, value_parser = parse_listen)]
    pub admin_listen: Option<SocketAddr>,
    /// Check the configuration and its campaign file, print the values in effect and exit
    /// (nothing is started, Redis is not contacted).
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, Args)]
pub struct ExchangeArgs {
    /// Exchange configuration (TOML; see docs/config.md). Without it, the configuration is the
    /// defaults and the `GAVEL_<SERVER>__...` variables (docs/config.md); with it, those
    /// variables are laid over the file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address (`host:port`); overrides `listen` in the file.
    #[arg(long, value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Admin address (`host:port`); overrides `admin_listen` in the file (loopback unless
    /// `security.admin_remote = true`).
    #[arg(long, value_parser = parse_listen)]
    pub admin_listen: Option<SocketAddr>,
    /// Check the configuration, print the values in effect and exit (nothing is started).
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Number of bidders with the built-in demo profiles (1..=100; default 10). Not with
    /// --profiles, whose file says how many.
    #[arg(long, conflicts_with = "profiles", value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_SIM_BIDDERS)).map(usize::from))]
    pub bidders: Option<usize>,
    /// Bidder profiles (TOML, [[bidders]] tables; see docs/sim.md).
    #[arg(long)]
    pub profiles: Option<PathBuf>,
    /// Seed of every random decision.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Write a `[[bidders]]` section for the exchange config here.
    #[arg(long)]
    pub write_bidders: Option<PathBuf>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve with a minimal HTTP/1.1 server instead of hyper: the same answers for a fifth less
    /// CPU, for benchmarks where the fleet shares a core. No TLS, no chunked request bodies.
    #[arg(long, conflicts_with = "tls_cert")]
    pub lean_http: bool,
    /// Stop after this long (e.g. 30s, 5m); default: until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

#[derive(Debug, Args)]
#[command(after_help = LOAD_EXAMPLES)]
pub struct LoadArgs {
    /// Target URL, http:// or https://, e.g. http://127.0.0.1:8080/openrtb2/auction.
    #[arg(long)]
    pub url: String,
    /// Method of every request: GET, POST or HEAD. GET and HEAD send no body unless
    /// --requests gives one (GET only).
    #[arg(long, value_enum, ignore_case = true, default_value_t = MethodArg::Post)]
    pub method: MethodArg,
    /// An extra header of every request, `Name: value` (repeatable, at most 32). Not Host,
    /// Content-Length, Transfer-Encoding, Connection or another the client sets itself.
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = loadgen::parse_header)]
    pub headers: Vec<(String, String)>,
    /// For an https:// URL: trust only the PEM CA certificates in this file (a private CA).
    /// Default: the system's roots.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Requests per second on a fixed schedule (open loop; default 1000), or rate steps
    /// FROM:TO:STEP (e.g. 1000:5000:1000), each step lasting --step-duration. With
    /// --find-capacity, the first rate tried. Not with --closed-loop or --ramp, which set the
    /// rate themselves.
    #[arg(long, value_parser = parse_rate, conflicts_with_all = ["closed_loop", "ramp"])]
    pub rate: Option<RateArg>,
    /// Length of each rate step (default: --duration).
    #[arg(long, value_parser = parse_duration)]
    pub step_duration: Option<Duration>,
    /// Ramp the rate linearly FROM:TO (e.g. 500:5000) across --duration instead of a fixed rate.
    #[arg(long, value_parser = parse_ramp, conflicts_with_all = ["closed_loop", "find_capacity", "step_duration"])]
    pub ramp: Option<(f64, f64)>,
    /// Closed loop, for comparison with wrk: every connection sends its next request as soon
    /// as the previous answer ends. Latency is then service time and hides queueing.
    #[arg(long, conflicts_with_all = ["find_capacity", "step_duration"])]
    pub closed_loop: bool,
    /// How long to measure (e.g. 10s, 500ms, 2m); with --find-capacity, each trial's length
    /// (default there: 5s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Connections opened before the clock starts, each carrying one request at a time. In
    /// closed loop, exactly these carry the run; in open loop, more are opened when a request
    /// comes due with every one busy, up to --max-connections.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=10_000).map(usize::from))]
    pub connections: usize,
    /// Open loop: the most connections the run may open (--connections..=10000). Default:
    /// enough for every request of one --timeout at the peak rate, within the open-file
    /// limit. Set it equal to --connections for a fixed pool. The report says when this
    /// limited the run.
    #[arg(long, conflicts_with = "closed_loop", value_parser = clap::value_parser!(u16).range(1..=10_000).map(usize::from))]
    pub max_connections: Option<usize>,
    /// Request bodies: a file of JSON lines, one JSON document, or a directory of *.json.
    /// Default: built-in seeded OpenRTB 2.6 requests. A body's `tmax` is its deadline: still
    /// waiting for a connection then, it is dropped unsent.
    #[arg(long)]
    pub requests: Option<PathBuf>,
    /// Seed of the built-in request generator (not with --requests).
    #[arg(long, default_value_t = DEFAULT_SEED, conflicts_with = "requests")]
    pub seed: u64,
    /// tmax written into generated requests, in milliseconds (20..=10000; not with
    /// --requests, whose bodies carry their own).
    #[arg(long, default_value_t = 100, conflicts_with = "requests", value_parser = clap::value_parser!(u32).range(TMAX_MS))]
    pub tmax: u32,
    /// Give up on a request this long after its scheduled send time (at most 60s).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Send for this long first and leave it out of every figure (e.g. 2s; default 0, or 1s
    /// per trial with --find-capacity).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Rate of the warm-up, when it should differ from the first measured rate (e.g. half of
    /// an overload step, so that the step starts on open connections).
    #[arg(long, requires = "warmup", conflicts_with_all = ["closed_loop", "find_capacity"])]
    pub warmup_rate: Option<f64>,
    /// Report the share of requests answered within this latency, and fail (exit 3) when it
    /// is below the share given after it (default 99%): `100ms` or `100ms:99.9%`. Not with
    /// --find-capacity, whose pass mark is --slo-p99.
    #[arg(long, value_parser = |t: &str| loadgen::gate::Slo::parse(t).map_err(|e| e.to_string()), conflicts_with = "find_capacity")]
    pub slo: Option<loadgen::gate::Slo>,
    /// Fail the run (exit 3) when this holds: METRIC OP VALUE, e.g. 'p99>50ms', 'errors>1%',
    /// 'dropped>0', 'rps<900' (repeatable, at most 32). Metrics: p50 p90 p99 p99.9 p99.99 max
    /// (a duration), errors dropped timeouts (a count or a percentage of the requests due), rps
    /// (answered per second); OP: > >= < <=. Not with --find-capacity.
    #[arg(long, value_name = "EXPR", value_parser = |t: &str| loadgen::gate::Threshold::parse(t).map_err(|e| e.to_string()), conflicts_with = "find_capacity")]
    pub fail_if: Vec<loadgen::gate::Threshold>,
    /// Do not fail (exit 4) when the generator's connections or CPU limited the run; the
    /// report still leads with the finding (a shared CI runner stalls now and then).
    #[arg(long)]
    pub allow_limited: bool,
    /// Report every verdict but exit 0 whatever they say (a benchmark that overloads on
    /// purpose). Errors that stop the run still exit non-zero.
    #[arg(long)]
    pub report_only: bool,
    /// Check every 200 answer: bid-response (must decode as an OpenRTB 2.6 BidResponse).
    #[arg(long, value_enum)]
    pub check: Option<CheckArg>,
    /// Environment variable holding a seller key, sent as `Authorization: Bearer <key>` (an
    /// exchange with [[sellers]] answers 401 without one). Read from the environment so the
    /// key stays out of the process list.
    #[arg(long)]
    pub seller_key_env: Option<String>,
    /// Search for the highest rate whose p99 stays within --slo-p99 with at least
    /// --min-success answered 2xx.
    #[arg(long, requires = "slo_p99")]
    pub find_capacity: bool,
    /// The p99 latency a rate must keep to pass (with --find-capacity), e.g. 10ms.
    #[arg(long, value_parser = parse_duration, requires = "find_capacity")]
    pub slo_p99: Option<Duration>,
    /// Share of requests, in percent, that must be answered 2xx for a rate to pass (with
    /// --find-capacity; default 99.9).
    #[arg(long, value_parser = parse_percent, requires = "find_capacity")]
    pub min_success: Option<f64>,
    /// Highest rate --find-capacity may try (default 200000).
    #[arg(long, value_parser = |t: &str| positive_rate(t, "--max-rate"), requires = "find_capacity")]
    pub max_rate: Option<f64>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write a self-contained HTML report with plots here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// No live progress line (it is shown only when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
}

const LOAD_EXAMPLES: &str = "Examples:
  gavel load --url http://127.0.0.1:8080/openrtb2/auction --rate 5000 --duration 30s --warmup 5s --html run.html
  gavel load --url http://127.0.0.1:8080/openrtb2/auction --rate 1000:5000:1000 --step-duration 10s --json steps.json
  gavel load --url http://127.0.0.1:8080/openrtb2/auction --find-capacity --slo-p99 10ms
  gavel load --url http://127.0.0.1:8090/ --closed-loop --connections 16 --duration 10s
  gavel load --url https://127.0.0.1:8090/assets/logo.png --method GET --ca-file ca.pem --rate 2000 \
             --fail-if 'p99>20ms' --fail-if 'errors>0.1%' --fail-if 'dropped>0'

Exit status: 0 passed; 1 the run could not be made (unreachable host, unreadable file, ...);
2 usage; 3 --slo or a --fail-if missed (with --find-capacity: no rate passed); 4 the
generator's connections or CPU limited the run (LIMITED); 5 nothing was answered. The most
fundamental applies (5, then 4, then 3); every reason is one line on stderr.";

/// `--rate`: one rate, or steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateArg {
    Fixed(f64),
    Steps { from: f64, to: f64, step: f64 },
}

/// `--method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodArg {
    #[value(name = "GET")]
    Get,
    #[value(name = "POST")]
    Post,
    #[value(name = "HEAD")]
    Head,
}

/// `--check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckArg {
    BidResponse,
}

fn positive_rate(text: &str, what: &str) -> Result<f64, String> {
    let r: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{what} {text:?} is not a number"))?;
    if !(r.is_finite() && r > 0.0 && r <= loadgen::MAX_RATE) {
        return Err(format!(
            "{what} must be more than 0 and at most {} per second, got {text}",
            loadgen::MAX_RATE
        ));
    }
    Ok(r)
}

/// Parses `5000` or `1000:5000:1000` (from, to, step; rising, or falling when `to` is below
/// `from`; at most 100 steps).
pub fn parse_rate(text: &str) -> Result<RateArg, String> {
    let parts: Vec<&str> = text.split(':').collect();
    match parts.as_slice() {
        [one] => positive_rate(one, "the rate").map(RateArg::Fixed),
        [from, to, step] => {
            let (from, to) = (
                positive_rate(from, "the first step")?,
                positive_rate(to, "the last step")?,
            );
            let step = positive_rate(step, "the step")?;
            let steps = ((to - from).abs() / step + 1e-9).floor() + 1.0;
            if steps > loadgen::MAX_STEPS as f64 {
                return Err(format!(
                    "{text} has {steps} steps, at most {} are allowed",
                    loadgen::MAX_STEPS
                ));
            }
            Ok(RateArg::Steps { from, to, step })
        }
        _ => Err(format!(
            "{text:?}: expected a rate (5000) or steps FROM:TO:STEP (1000:5000:1000)"
        )),
    }
}

/// Parses `FROM:TO` rates of a ramp.
pub fn parse_ramp(text: &str) -> Result<(f64, f64), String> {
    match text.split(':').collect::<Vec<_>>().as_slice() {
        [from, to] => Ok((
            positive_rate(from, "the ramp's start")?,
            positive_rate(to, "the ramp's end")?,
        )),
        _ => Err(format!("{text:?}: expected FROM:TO, e.g. 500:5000")),
    }
}

/// Parses a percentage in 0..=100 into a share 0..=1.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{text:?} is not a percentage"))?;
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("{text}: must be within 0 and 100"));
    }
    Ok(p / 100.0)
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Auctions per second offered by the load generator.
    #[arg(long, default_value = "1000", value_parser = |t: &str| positive_rate(t, "the rate"))]
    pub rate: f64,
    /// Length of the load (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Simulated bidders (1..=100).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_SIM_BIDDERS)).map(usize::from))]
    pub bidders: usize,
    /// Seed of bidders and requests: the same seed gives the same auctions.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// tmax of the generated requests, in milliseconds (20..=10000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(TMAX_MS))]
    pub tmax: u32,
}

/// Parses a listen address, `host:port`: an IP address as is, or a name resolved now (its
/// first IPv4 address, else its first address).
pub fn parse_listen(text: &str) -> Result<SocketAddr, settings::ListenError> {
    settings::resolve_listen(text)
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
    fn rates_parse_as_one_or_steps() {
        assert_eq!(parse_rate("5000"), Ok(RateArg::Fixed(5000.0)));
        assert_eq!(
            parse_rate("1000:5000:1000"),
            Ok(RateArg::Steps {
                from: 1000.0,
                to: 5000.0,
                step: 1000.0
            })
        );
        for (bad, why) in [
            ("0", "more than 0"),
            ("abc", "not a number"),
            ("5000:1000:0", "more than 0"),
            ("1:1000:1", "at most 100"),
            ("1:2", "expected"),
            ("1e7", "at most"),
        ] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(parse_ramp("500:5000"), Ok((500.0, 5000.0)));
        assert!(parse_ramp("500").is_err());
        assert!((parse_percent("99.9").unwrap() - 0.999).abs() < 1e-12);
        assert!(parse_percent("101").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
