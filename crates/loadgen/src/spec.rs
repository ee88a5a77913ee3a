//! What to run ([`LoadSpec`]) and where to send it ([`Target`]).

use std::net::SocketAddr;
use std::time::Duration;

use http::{HeaderValue, Uri};

use crate::LoadError;
use crate::http_options::HttpOptions;
use crate::schedule::Segment;

/// Highest accepted request rate, requests per second.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Longest accepted measured duration (and, separately, warm-up).
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Highest accepted number of connections.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Longest accepted per-request timeout: the top of the latency histogram.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// Most rate steps in one run (each has its own histogram in the report).
pub const MAX_STEPS: usize = 100;

/// How requests arrive. Every open-loop form fixes each request's send time in advance and
/// measures its latency from that time; the closed loop is there to compare with tools that
/// wait for an answer before sending the next request (wrk, ab).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Open loop: `0 < rate <= 1_000_000` requests per second throughout.
    Rate(f64),
    /// Open loop: `from`, `from + step`, `from + 2·step`, ... while `<= to` (or, when `to` is
    /// below `from`, `from - step`, ... while `>= to`: an overload followed by the recovery),
    /// each rate held for an equal share of the measured window (at most [`MAX_STEPS`] steps).
    /// The warm-up, if any, runs at `from`. The report gives each step its own figures.
    Steps { from: f64, to: f64, step: f64 },
    /// Open loop: the rate moves linearly from `from` to `to` across the measured window. The
    /// warm-up, if any, runs at `from`.
    Ramp { from: f64, to: f64 },
    /// Closed loop: each connection sends its next request as soon as the previous answer has
    /// ended, so the rate is whatever the target sustains. Latency is then service time:
    /// a stalled target slows the sender instead of showing in the percentiles.
    Closed,
}

impl Arrivals {
    /// The rates of a [`Arrivals::Steps`] plan (empty for the other forms).
    pub fn step_rates(&self) -> Vec<f64> {
        let Arrivals::Steps { from, to, step } = *self else {
            return Vec::new();
        };
        if !(from > 0.0 && to > 0.0 && step > 0.0) {
            return Vec::new();
        }
        let signed = if to >= from { step } else { -step };
        // Tolerate rounding in `to`: 0.1:0.3:0.1 has three steps.
        let n = ((to - from).abs() / step + 1e-9).floor() as usize + 1;
        (0..n.min(MAX_STEPS + 1))
            .map(|k| from + signed * k as f64)
            .collect()
    }

    /// Highest rate of an open-loop plan; `None` for the closed loop.
    pub fn peak_rate(&self) -> Option<f64> {
        match *self {
            Arrivals::Rate(r) => Some(r),
            Arrivals::Steps { .. } => self.step_rates().into_iter().reduce(f64::max),
            Arrivals::Ramp { from, to } => Some(from.max(to)),
            Arrivals::Closed => None,
        }
    }

    /// One line for reports: `open loop, 5000/s`, `open loop, steps 1000..5000 by 1000/s`...
    pub fn describe(&self) -> String {
        match *self {
            Arrivals::Rate(r) => format!("open loop, {}/s", num(r)),
            Arrivals::Steps { from, to, step } => {
                format!(
                    "open loop, steps {}..{} by {}/s",
                    num(from),
                    num(to),
                    num(step)
                )
            }
            Arrivals::Ramp { from, to } => {
                format!("open loop, ramp {}/s to {}/s", num(from), num(to))
            }
            Arrivals::Closed => "closed loop".to_owned(),
        }
    }
}

/// `5000` rather than `5000.0`; `12.5` as is.
pub(crate) fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// What to check in each answer, beyond its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseCheck {
    /// Status only; bodies are read and discarded.
    #[default]
    None,
    /// Every 200 answer must be a valid OpenRTB 2.6 `BidResponse` (decoded in full, at most
    /// 1 MiB); 204 and other statuses are not checked. Counted in `Report::check`.
    BidResponse,
}

/// A measured stretch with its own figures: one per rate step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PhasePlan {
    /// Offered rate of the step.
    pub rate: f64,
    /// Start, from the start of the measured window.
    pub start: Duration,
    pub length: Duration,
}

/// One run: requests arrive as `arrivals` says for `warmup + duration`, and the figures cover
/// the last `duration`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// Target, `http://host[:port][/path]` or `https://...` (HTTP/1.1, over TLS checked
    /// against the system's roots or [`HttpOptions::ca_file`]); the host may be a name,
    /// resolved once before the run.
    pub url: String,
    /// How requests arrive: a constant rate, rate steps, a ramp (open loop), or closed loop.
    pub arrivals: Arrivals,
    /// Measured window, after the warm-up, `0 < duration <= 1 h`. Rate steps share it
    /// equally.
    pub duration: Duration,
    /// Keep-alive connections opened before the clock starts, each carrying one request at a
    /// time, `1..=10_000`. In closed loop, exactly these carry the run.
    pub connections: usize,
    /// Open loop: the most connections the run may open, one more each time a request comes
    /// due with every connection busy (`connections..=10_000`). `None`: enough for every
    /// request of a timeout's worth at the peak rate (`peak rate × timeout`), within what the
    /// process's open-file limit allows; see [`LoadSpec::max_connections_for`]. Closed loop
    /// takes none (or exactly `connections`).
    pub max_connections: Option<usize>,
    /// Per-request budget, counted from the request's *scheduled* send time,
    /// `0 < timeout <= 60 s`.
    pub timeout: Duration,
    /// Load sent before the measured window and excluded from every figure, `<= 1 h`.
    pub warmup: Duration,
    /// Rate of the warm-up (open loop only); `None` warms up at the plan's first rate. An
    /// overload step can then start on connections already open and a target already warm,
    /// as traffic rises on a live exchange, instead of on a fresh connection storm.
    pub warmup_rate: Option<f64>,
    /// What to check in answers beyond their status.
    pub check: ResponseCheck,
    /// Sent as the `Authorization` header of every request (`Bearer <seller key>` for a
    /// Gavel exchange with `[[sellers]]`). At most 1024 visible ASCII characters.
    pub authorization: Option<String>,
    /// Method, extra headers and TLS roots (default: POST, none, the system's roots).
    pub http: HttpOptions,
}

impl LoadSpec {
    /// An open-loop spec at a constant `rate` with 32 connections at the start (more on
    /// demand), a 2 s timeout, no warm-up and no response check.
    pub fn new(url: impl Into<String>, rate: f64, duration: Duration) -> LoadSpec {
        LoadSpec {
            url: url.into(),
            arrivals: Arrivals::Rate(rate),
            duration,
            connections: 32,
            max_connections: None,
            timeout: Duration::from_secs(2),
            warmup: Duration::ZERO,
            warmup_rate: None,
            check: ResponseCheck::None,
            authorization: None,
            http: HttpOptions::default(),
        }
    }

    /// Checks every field; the error names the first field out of range.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |field: &'static str, reason: String| LoadError::InvalidSpec { field, reason };
        if let Some(a) = &self.authorization
            && (a.is_empty()
                || a.len() > 1024
                || !a.bytes().all(|b| b == b' ' || b.is_ascii_graphic()))
        {
            return Err(bad(
                "authorization",
                "must be 1..=1024 visible ASCII characters".to_owned(),
            ));
        }
        self.http
            .prepared_headers()
            .map_err(|reason| bad("headers", reason))?;
        if self.http.ca_file.is_some() && !self.url.starts_with("https://") {
            return Err(bad(
                "ca_file",
                "is for https:// URLs only; this one is not".to_owned(),
            ));
        }
        let rate_ok = |r: f64| r.is_finite() && r > 0.0 && r <= MAX_RATE;
        let rate_err = |what: &str, r: f64| {
            bad(
                "rate",
                format!("{what} must be > 0 and <= {MAX_RATE} req/s, got {r}"),
            )
        };
        match self.arrivals {
            Arrivals::Rate(r) if !rate_ok(r) => return Err(rate_err("the rate", r)),
            Arrivals::Ramp { from, to } => {
                for (what, r) in [("the ramp's start", from), ("the ramp's end", to)] {
                    if !rate_ok(r) {
                        return Err(rate_err(what, r));
                    }
                }
            }
            Arrivals::Steps { from, to, step } => {
                for (what, r) in [("the first step", from), ("the last step", to)] {
                    if !rate_ok(r) {
                        return Err(rate_err(what, r));
                    }
                }
                if !(step.is_finite() && step > 0.0) {
                    return Err(bad("rate", format!("the step must be > 0, got {step}")));
                }
                let n = self.arrivals.step_rates().len();
                if n > MAX_STEPS {
                    return Err(bad(
                        "rate",
                        format!("at most {MAX_STEPS} steps, {from}..{to} by {step} has more"),
                    ));
                }
            }
            _ => {}
        }
        match (self.warmup_rate, self.arrivals) {
            (Some(_), Arrivals::Closed) => {
                return Err(bad(
                    "warmup_rate",
                    "a warm-up rate needs an open-loop plan".to_owned(),
                ));
            }
            (Some(r), _) if !rate_ok(r) => {
                return Err(bad(
                    "warmup_rate",
                    format!("must be > 0 and <= {MAX_RATE} req/s, got {r}"),
                ));
            }
            _ => {}
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return Err(bad(
                "duration",
                format!("must be > 0 and <= 1 h, got {:?}", self.duration),
            ));
        }
        if self.warmup > MAX_DURATION {
            return Err(bad(
                "warmup",
                format!("must be <= 1 h, got {:?}", self.warmup),
            ));
        }
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return Err(bad(
                "connections",
                format!("must be in 1..={MAX_CONNECTIONS}, got {}", self.connections),
            ));
        }
        match (self.max_connections, self.arrivals) {
            (Some(max), Arrivals::Closed) if max != self.connections => {
                return Err(bad(
                    "max_connections",
                    format!(
                        "a closed loop runs on exactly its {} connections; {max} is open loop's",
                        self.connections
                    ),
                ));
            }
            (Some(max), _) if max < self.connections || max > MAX_CONNECTIONS => {
                return Err(bad(
                    "max_connections",
                    format!(
                        "must be in {}..={MAX_CONNECTIONS} (at least the {} opened at the start), got {max}",
                        self.connections, self.connections
                    ),
                ));
            }
            _ => {}
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(bad(
                "timeout",
                format!("must be > 0 and <= 60 s, got {:?}", self.timeout),
            ));
        }
        Target::parse(&self.url)?;
        Ok(())
    }

    /// The cap on an open-loop run's connections: `max_connections` when given; otherwise
    /// enough for every request of one timeout at the peak rate (each holds a connection at
    /// most that long, plus the drain of a late answer, which the margin absorbs), at most
    /// `fd_budget` (what the open-file limit leaves) and [`MAX_CONNECTIONS`], and never below
    /// `connections`.
    pub fn max_connections_for(&self, fd_budget: usize) -> usize {
        if let Some(max) = self.max_connections {
            return max;
        }
        let peak = self.arrivals.peak_rate().unwrap_or(0.0);
        let in_a_timeout = (peak * self.timeout.as_secs_f64()).ceil();
        let wanted = if in_a_timeout >= MAX_CONNECTIONS as f64 {
            MAX_CONNECTIONS
        } else {
            in_a_timeout as usize
        };
        wanted.min(fd_budget).max(self.connections)
    }

    /// The open-loop schedule (warm-up first) and the measured phases that get their own
    /// figures; `None` for the closed loop.
    pub(crate) fn plan(&self) -> Option<(Vec<Segment>, Vec<PhasePlan>)> {
        let first = match self.arrivals {
            Arrivals::Rate(r) => r,
            Arrivals::Steps { from, .. } | Arrivals::Ramp { from, .. } => from,
            Arrivals::Closed => return None,
        };
        let mut segments = Vec::new();
        if !self.warmup.is_zero() {
            segments.push(Segment::Constant {
                rate: self.warmup_rate.unwrap_or(first),
                length: self.warmup,
            });
        }
        let mut phases = Vec::new();
        match self.arrivals {
            Arrivals::Rate(rate) => segments.push(Segment::Constant {
                rate,
                length: self.duration,
            }),
            Arrivals::Ramp { from, to } => segments.push(Segment::Ramp {
                from,
                to,
                length: self.duration,
            }),
            Arrivals::Steps { .. } => {
                let rates = self.arrivals.step_rates();
                let n = rates.len().max(1) as u32;
                for (k, rate) in rates.into_iter().enumerate() {
                    // Boundaries from the total, so the steps add up to `duration` exactly.
                    let start = self.duration * k as u32 / n;
                    let end = self.duration * (k as u32 + 1) / n;
                    let length = end - start;
                    segments.push(Segment::Constant { rate, length });
                    phases.push(PhasePlan {
                        rate,
                        start,
                        length,
                    });
                }
            }
            Arrivals::Closed => {}
        }
        Some((segments, phases))
    }
}

/// A parsed `http://` or `https://` target: where to connect and what to put in the request
/// line.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Host as it appears in the URL (IPv6 without brackets), for resolution (and the name the
    /// certificate must carry over TLS).
    pub host: String,
    pub port: u16,
    /// `https`.
    pub tls: bool,
    /// Value of the `Host` header: the URL's authority.
    pub host_header: HeaderValue,
    /// Origin-form request target: path and query.
    pub path: Uri,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, LoadError> {
        let bad = |reason: &str| LoadError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        if !url.contains("://") {
            return Err(bad(
                "missing scheme, expected http:// or https://host:port/path",
            ));
        }
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => {
                return Err(bad(&format!(
                    "unsupported scheme `{other}`, use http:// or https://"
                )));
            }
            None => return Err(bad("missing scheme, expected http://host:port/path")),
        };
        let authority = uri.authority().ok_or_else(|| bad("missing host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("credentials in the URL are not supported"));
        }
        let host = authority.host();
        if host.is_empty() {
            return Err(bad("missing host"));
        }
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
            .to_owned();
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if port == 0 {
            return Err(bad("port 0 is not a valid target"));
        }
        let host_header = HeaderValue::from_str(authority.as_str())
            .map_err(|_| bad("host is not a valid Host header"))?;
        let pq = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let pq = if pq.is_empty() { "/" } else { pq };
        let path: Uri = pq
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        Ok(Target {
            host,
            port,
            tls,
            host_header,
            path,
        })
    }

    /// Resolves the host once; the first address wins.
    pub async fn resolve(&self) -> Result<SocketAddr, LoadError> {
        let err = |source| LoadError::Resolve {
            host: self.host.clone(),
            source,
        };
        let mut addrs = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(err)?;
        addrs.next().ok_or_else(|| {
            err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no address",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec() -> LoadSpec {
        LoadSpec::new(
            "http://127.0.0.1:8080/openrtb2/auction",
            100.0,
            Duration::from_secs(1),
        )
    }

    fn field_of(s: &LoadSpec) -> &'static str {
        match s.validate() {
            Err(LoadError::InvalidSpec { field, .. }) => field,
            other => panic!("expected InvalidSpec, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid() {
        spec().validate().unwrap();
    }

    #[test]
    fn each_field_is_named() {
        type Mutation = fn(&mut LoadSpec);
        let cases: Vec<(Mutation, &str)> = vec![
            (|s| s.arrivals = Arrivals::Rate(0.0), "rate"),
            (|s| s.arrivals = Arrivals::Rate(-1.0), "rate"),
            (|s| s.arrivals = Arrivals::Rate(f64::NAN), "rate"),
            (|s| s.arrivals = Arrivals::Rate(2e6), "rate"),
            (
                |s| {
                    s.arrivals = Arrivals::Steps {
                        from: 500.0,
                        to: 0.0,
                        step: 100.0,
                    }
                },
                "rate",
            ),
            (
                |s| {
                    s.arrivals = Arrivals::Steps {
                        from: 1.0,
                        to: 1000.0,
                        step: 1.0,
                    }
                },
                "rate",
            ),
            (
                |s| {
                    s.arrivals = Arrivals::Steps {
                        from: 1.0,
                        to: 10.0,
                        step: 0.0,
                    }
                },
                "rate",
            ),
            (
                |s| {
                    s.arrivals = Arrivals::Ramp {
                        from: 0.0,
                        to: 10.0,
                    }
                },
                "rate",
            ),
            (|s| s.duration = Duration::ZERO, "duration"),
            (|s| s.duration = Duration::from_secs(3601), "duration"),
            (|s| s.warmup = Duration::from_secs(3601), "warmup"),
            (|s| s.connections = 0, "connections"),
            (|s| s.connections = 10_001, "connections"),
            (|s| s.timeout = Duration::ZERO, "timeout"),
            (|s| s.timeout = Duration::from_secs(61), "timeout"),
            (|s| s.max_connections = Some(31), "max_connections"),
            (
                |s| s.http.headers = vec![("Host".to_owned(), "x".to_owned())],
                "headers",
            ),
            (|s| s.http.ca_file = Some("ca.pem".into()), "ca_file"),
            (|s| s.max_connections = Some(10_001), "max_connections"),
            (
                |s| {
                    s.arrivals = Arrivals::Closed;
                    s.max_connections = Some(64);
                },
                "max_connections",
            ),
        ];
        for (mutate, field) in cases {
            let mut s = spec();
            mutate(&mut s);
            assert_eq!(field_of(&s), field);
            let msg = s.validate().unwrap_err().to_string();
            assert!(msg.contains(field), "{msg}");
        }
    }

    #[test]
    fn the_connection_cap_covers_a_timeout_at_the_peak_rate_within_the_limits() {
        let mut s = spec();
        // 100/s for 2 s: 200 requests can be in flight at once.
        assert_eq!(s.max_connections_for(10_000), 200);
        assert_eq!(s.max_connections_for(150), 150, "the open-file budget");
        assert_eq!(
            s.max_connections_for(10),
            32,
            "never below the first connections"
        );
        s.arrivals = Arrivals::Ramp {
            from: 10.0,
            to: 1_000_000.0,
        };
        assert_eq!(s.max_connections_for(usize::MAX), MAX_CONNECTIONS);
        s.max_connections = Some(40);
        assert_eq!(s.max_connections_for(10), 40, "given, it is taken as it is");
        s.validate().unwrap();
    }

    #[test]
    fn url_forms() {
        let t = Target::parse("http://127.0.0.1:9000/a/b?x=1").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 9000));
        assert_eq!(t.path, "/a/b?x=1");
        assert_eq!(t.host_header, "127.0.0.1:9000");

        let t = Target::parse("http://localhost").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 80));
        assert_eq!(t.path, "/");

        let t = Target::parse("https://localhost/x").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.tls), ("localhost", 443, true));
        assert!(!Target::parse("http://localhost/x").unwrap().tls);

        let t = Target::parse("http://[::1]:81/x").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 81));
        assert_eq!(t.host_header, "[::1]:81");
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, why) in [
            ("127.0.0.1:8080/x", "scheme"),
            ("ftp://h/x", "scheme"),
            ("http://u:p@h/x", "credentials"),
            ("http://h:0/", "port"),
            ("not a url", "bad URL"),
        ] {
            let msg = Target::parse(url).unwrap_err().to_string();
            assert!(msg.contains(why), "{url}: {msg}");
            assert!(msg.contains(url), "{url}: {msg}");
        }
    }

    #[test]
    fn step_plans() {
        let a = Arrivals::Steps {
            from: 1000.0,
            to: 5000.0,
            step: 1000.0,
        };
        assert_eq!(a.step_rates(), vec![1000.0, 2000.0, 3000.0, 4000.0, 5000.0]);
        assert_eq!(a.peak_rate(), Some(5000.0));
        let b = Arrivals::Steps {
            from: 0.1,
            to: 0.3,
            step: 0.1,
        };
        assert_eq!(b.step_rates().len(), 3);
        // Falling steps: an overload, then the recovery at a lower rate.
        let down = Arrivals::Steps {
            from: 5000.0,
            to: 500.0,
            step: 4500.0,
        };
        assert_eq!(down.step_rates(), vec![5000.0, 500.0]);
        assert_eq!(down.peak_rate(), Some(5000.0));

        let mut s = spec();
        s.arrivals = a;
        s.duration = Duration::from_secs(10);
        s.warmup = Duration::from_secs(1);
        let (segments, phases) = s.plan().unwrap();
        assert_eq!(segments.len(), 6, "warm-up and five steps");
        assert_eq!(
            segments[0],
            Segment::Constant {
                rate: 1000.0,
                length: Duration::from_secs(1)
            }
        );
        assert_eq!(phases.len(), 5);
        assert_eq!(phases[4].start, Duration::from_secs(8));
        let total: Duration = phases.iter().map(|p| p.length).sum();
        assert_eq!(total, Duration::from_secs(10));

        // A warm-up at its own rate, then the steps as before.
        s.warmup_rate = Some(250.0);
        let (segments, phases) = s.plan().unwrap();
        assert_eq!(
            segments[0],
            Segment::Constant {
                rate: 250.0,
                length: Duration::from_secs(1)
            }
        );
        assert_eq!(
            segments[1],
            Segment::Constant {
                rate: 1000.0,
                length: Duration::from_secs(2)
            }
        );
        assert_eq!(phases.len(), 5);

        s.warmup_rate = None;
        s.arrivals = Arrivals::Closed;
        assert!(s.plan().is_none());
    }

    #[test]
    fn a_warmup_rate_is_checked_and_needs_an_open_loop() {
        let mut s = spec();
        for bad in [0.0, -1.0, f64::NAN, 2e6] {
            s.warmup_rate = Some(bad);
            assert_eq!(field_of(&s), "warmup_rate", "{bad}");
        }
        s.warmup_rate = Some(50.0);
        s.validate().unwrap();
        s.arrivals = Arrivals::Closed;
        assert_eq!(field_of(&s), "warmup_rate");
    }
}
