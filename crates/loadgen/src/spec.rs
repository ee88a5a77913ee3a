//! What to run ([`LoadSpec`]) and where to send it ([`Target`]).

use std::net::SocketAddr;
use std::time::Duration;

use http::{HeaderValue, Uri};

use crate::LoadError;

/// Highest accepted request rate, requests per second.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Longest accepted measured duration (and, separately, warm-up).
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Highest accepted number of connections.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Longest accepted per-request timeout: the top of the latency histogram.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);

/// One open-loop run: `rate` requests per second for `warmup + duration`, measured over
/// `duration`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// Target, `http://host[:port][/path]`. Only plain HTTP/1.1; the host may be a name,
    /// resolved once before the run.
    pub url: String,
    /// Offered load, requests per second, `0 < rate <= 1_000_000`.
    pub rate: f64,
    /// Measured window, after the warm-up, `0 < duration <= 1 h`.
    pub duration: Duration,
    /// Keep-alive connections, each carrying one request at a time, `1..=10_000`.
    pub connections: usize,
    /// Per-request budget, counted from the request's *scheduled* send time,
    /// `0 < timeout <= 60 s`.
    pub timeout: Duration,
    /// Load sent before the measured window and excluded from every figure, `<= 1 h`.
    pub warmup: Duration,
}

impl LoadSpec {
    /// A spec with 32 connections, a 2 s timeout and no warm-up.
    pub fn new(url: impl Into<String>, rate: f64, duration: Duration) -> LoadSpec {
        LoadSpec {
            url: url.into(),
            rate,
            duration,
            connections: 32,
            timeout: Duration::from_secs(2),
            warmup: Duration::ZERO,
        }
    }

    /// Checks every field; the error names the first field out of range.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |field: &'static str, reason: String| LoadError::InvalidSpec { field, reason };
        if !self.rate.is_finite() || self.rate <= 0.0 {
            return Err(bad("rate", format!("must be > 0 req/s, got {}", self.rate)));
        }
        if self.rate > MAX_RATE {
            return Err(bad(
                "rate",
                format!("must be <= {MAX_RATE} req/s, got {}", self.rate),
            ));
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
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(bad(
                "timeout",
                format!("must be > 0 and <= 60 s, got {:?}", self.timeout),
            ));
        }
        Target::parse(&self.url)?;
        Ok(())
    }
}

/// A parsed `http://` target: where to connect and what to put in the request line.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Host as it appears in the URL (IPv6 without brackets), for resolution.
    pub host: String,
    pub port: u16,
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
            return Err(bad("missing scheme, expected http://host:port/path"));
        }
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(bad("https is not supported, use http://")),
            Some(other) => return Err(bad(&format!("unsupported scheme `{other}`, use http://"))),
            None => return Err(bad("missing scheme, expected http://host:port/path")),
        }
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
        let port = authority.port_u16().unwrap_or(80);
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
            (|s| s.rate = 0.0, "rate"),
            (|s| s.rate = -1.0, "rate"),
            (|s| s.rate = f64::NAN, "rate"),
            (|s| s.rate = 2e6, "rate"),
            (|s| s.duration = Duration::ZERO, "duration"),
            (|s| s.duration = Duration::from_secs(3601), "duration"),
            (|s| s.warmup = Duration::from_secs(3601), "warmup"),
            (|s| s.connections = 0, "connections"),
            (|s| s.connections = 10_001, "connections"),
            (|s| s.timeout = Duration::ZERO, "timeout"),
            (|s| s.timeout = Duration::from_secs(61), "timeout"),
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
    fn url_forms() {
        let t = Target::parse("http://127.0.0.1:9000/a/b?x=1").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 9000));
        assert_eq!(t.path, "/a/b?x=1");
        assert_eq!(t.host_header, "127.0.0.1:9000");

        let t = Target::parse("http://localhost").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 80));
        assert_eq!(t.path, "/");

        let t = Target::parse("http://[::1]:81/x").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 81));
        assert_eq!(t.host_header, "[::1]:81");
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, why) in [
            ("https://127.0.0.1:1/", "https"),
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
}
