//! Where a bidder (or any upstream) is called: an `http(s)://host[:port]/path` URL taken apart
//! once, at load time, into what a pool needs, and its host looked up.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::outbound::Scheme;
use crate::tls::ClientTls;

/// A bidder endpoint split into what the connection pool needs.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub scheme: Scheme,
    /// Host as written (lower case, no brackets): what TLS expects and notice URLs may name.
    pub host: String,
    pub port: u16,
    /// The address the host resolved to when the file loaded; `None` when it did not resolve
    /// (the bidder is skipped until it does: the exchange looks again every
    /// `upstream.dns_refresh_ms`, and the pool follows the address it finds).
    pub addr: Option<SocketAddr>,
    /// Value of the `Host` header.
    pub authority: String,
    /// Path and query sent in the request line.
    pub path: String,
    /// Set for `https` endpoints.
    pub tls: Option<EndpointTls>,
}

/// Two endpoints are the same target whatever their hosts resolved to when they were read: a
/// reload that only sees a new address keeps the bidder's pool (and moves it to the address).
impl PartialEq for Endpoint {
    fn eq(&self, other: &Endpoint) -> bool {
        self.scheme == other.scheme
            && self.host == other.host
            && self.port == other.port
            && self.authority == other.authority
            && self.path == other.path
            && self.tls == other.tls
    }
}

impl Eq for Endpoint {}

impl Endpoint {
    /// Whether the host is an IP literal (nothing to look up, ever).
    pub fn is_literal(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok()
    }
}

/// Why an upstream URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("{url:?} is not a URL: {reason}")]
    NotUrl { url: String, reason: String },
    #[error("{url:?}: no scheme, expected http(s)://host:port/path")]
    NoScheme { url: String },
    #[error("{url:?}: scheme {scheme:?} is not supported, use http or https")]
    Scheme { url: String, scheme: String },
    #[error("{url:?}: no host")]
    NoHost { url: String },
    #[error("{url:?}: empty host")]
    EmptyHost { url: String },
    #[error("{url:?}: credentials in the URL are not supported")]
    Credentials { url: String },
}

/// Why a host has no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("cannot resolve {host}: {reason}")]
    Lookup { host: String, reason: String },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
}

/// The message, for a caller that keys it (`bidders[0].endpoint: ...`).
impl From<EndpointError> for String {
    fn from(e: EndpointError) -> String {
        e.to_string()
    }
}

impl From<ResolveError> for String {
    fn from(e: ResolveError) -> String {
        e.to_string()
    }
}

/// Looks `host` up (blocking; call it off the runtime's threads): its first address with
/// `port`, or why there is none.
///
/// # Errors
/// [`ResolveError`]: the lookup failed, or found nothing.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, ResolveError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| ResolveError::Lookup {
            host: host.to_owned(),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| ResolveError::NoAddress {
            host: host.to_owned(),
        })
}

/// How an `https` endpoint is verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointTls {
    pub client: ClientTls,
    /// Sent as SNI and expected in the certificate: `tls_server_name`, else the host.
    pub server_name: rustls_pki_types::ServerName<'static>,
}

/// Parses `http(s)://host[:port]/path` and resolves the host (blocking; call at load time
/// only). A host that does not resolve leaves `addr` empty; [`resolve`] says why.
///
/// # Errors
/// [`EndpointError`]: not a URL, not http(s), no host, or credentials in it.
pub fn parse_endpoint(url: &str) -> Result<Endpoint, EndpointError> {
    let owned = || url.to_owned();
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| EndpointError::NotUrl {
            url: owned(),
            reason: e.to_string(),
        })?;
    let scheme = match uri.scheme_str() {
        Some(s) => Scheme::parse(Some(s)).ok_or_else(|| EndpointError::Scheme {
            url: owned(),
            scheme: s.to_owned(),
        })?,
        None => return Err(EndpointError::NoScheme { url: owned() }),
    };
    let authority = uri
        .authority()
        .ok_or_else(|| EndpointError::NoHost { url: owned() })?
        .clone();
    let host = authority.host();
    if host.is_empty() {
        return Err(EndpointError::EmptyHost { url: owned() });
    }
    if authority.as_str().contains('@') {
        return Err(EndpointError::Credentials { url: owned() });
    }
    let port = authority.port_u16().unwrap_or(scheme.default_port());
    let host_for_lookup = host.trim_start_matches('[').trim_end_matches(']');
    let addr = resolve(host_for_lookup, port).ok();
    // The request line needs origin form: `http://h:1?q` has an empty path, which becomes "/".
    let path = match (uri.path(), uri.query()) {
        ("", None) => "/".to_owned(),
        ("", Some(q)) => format!("/?{q}"),
        (p, None) => p.to_owned(),
        (p, Some(q)) => format!("{p}?{q}"),
    };
    Ok(Endpoint {
        scheme,
        host: host_for_lookup.to_ascii_lowercase(),
        port,
        addr,
        authority: authority.as_str().to_owned(),
        path,
        tls: None,
    })
}
