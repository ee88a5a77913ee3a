//! Where the exchange may connect on a bidder's word. Notice and markup URLs come from bidders'
//! answers, so each is checked twice before a connection: its host and port against the
//! bidder's allowlist (its endpoint's host and port, plus `notice_hosts`), then every address
//! the name resolves to against the ranges no bidder may point the exchange at (loopback,
//! private, link-local and cloud metadata, ...) unless `notices.allow_private_addresses` says
//! otherwise. The connection then goes to the checked address, never to a second lookup.
//!
//! Pure: parsing and decisions only; the notice client does the lookup and the connecting.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::HashMap;

/// How the exchange talks to a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http = 0,
    Https = 1,
}

impl Scheme {
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    pub fn parse(scheme: Option<&str>) -> Option<Scheme> {
        match scheme? {
            s if s.eq_ignore_ascii_case("http") => Some(Scheme::Http),
            s if s.eq_ignore_ascii_case("https") => Some(Scheme::Https),
            _ => None,
        }
    }
}

/// A checked notice URL: where to connect and what to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// Lower case, without IPv6 brackets: what is resolved and what TLS expects.
    pub host: String,
    pub port: u16,
    /// `host[:port]` as the URL wrote it: the `Host` header, and the connection cache's key
    /// together with the scheme.
    pub authority: String,
    /// Origin-form request target.
    pub path_and_query: String,
}

/// Values kept per notice host (scheme and authority), looked up from a [`Target`] without
/// building a key: the notice queues and the connection cache, both reached once per notice.
#[derive(Debug)]
pub struct ByOrigin<T> {
    /// Index 0: `http`, 1: `https`; keyed by authority.
    maps: [HashMap<String, T>; 2],
}

impl<T> Default for ByOrigin<T> {
    fn default() -> Self {
        ByOrigin {
            maps: [HashMap::new(), HashMap::new()],
        }
    }
}

impl<T> ByOrigin<T> {
    fn map(&self, scheme: Scheme) -> &HashMap<String, T> {
        &self.maps[scheme as usize]
    }

    pub fn get(&self, target: &Target) -> Option<&T> {
        self.map(target.scheme).get(target.authority.as_str())
    }

    pub fn get_mut(&mut self, target: &Target) -> Option<&mut T> {
        self.maps[target.scheme as usize].get_mut(target.authority.as_str())
    }

    /// The value for `target`'s host, inserted from `new` if absent.
    pub fn entry(&mut self, target: &Target, new: impl FnOnce() -> T) -> &mut T {
        self.maps[target.scheme as usize]
            .entry(target.authority.clone())
            .or_insert_with(new)
    }

    pub fn contains(&self, target: &Target) -> bool {
        self.get(target).is_some()
    }

    /// Hosts held.
    pub fn len(&self) -> usize {
        self.maps.iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        self.maps.iter_mut().for_each(HashMap::clear);
    }

    /// Keeps the hosts whose value `keep` says to keep.
    pub fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        for map in &mut self.maps {
            map.retain(|_, v| keep(v));
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.maps.iter().flat_map(HashMap::values)
    }
}

/// Why the exchange will not call a URL. Labels are bounded (metrics, logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("not an absolute http(s) URL")]
    BadUrl,
    #[error("host {0} is not among the bidder's notice hosts")]
    HostNotAllowed(String),
    #[error("{0} is in a range the exchange does not call (loopback, private, link-local, ...)")]
    Address(IpAddr),
    #[error("{0} resolves to no address")]
    NoAddress(String),
}

telemetry::labelled_counters! {
    /// A [`Refusal`] without its detail: the bounded label it is counted under.
    NoticeRefusal {
        BadUrl => "bad_url",
        HostNotAllowed => "host_not_allowed",
        Address => "address",
        NoAddress => "no_address",
    }
}

impl Refusal {
    pub fn reason(&self) -> NoticeRefusal {
        match self {
            Refusal::BadUrl => NoticeRefusal::BadUrl,
            Refusal::HostNotAllowed(_) => NoticeRefusal::HostNotAllowed,
            Refusal::Address(_) => NoticeRefusal::Address,
            Refusal::NoAddress(_) => NoticeRefusal::NoAddress,
        }
    }

    pub fn label(&self) -> &'static str {
        self.reason().label()
    }
}

/// One allowed notice host: a name or address, with the one port allowed (or the scheme's
/// default port when none is written).
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedHost {
    host: String,
    port: Option<u16>,
}

/// The hosts one bidder's notice URLs may name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoticeHosts {
    allowed: Vec<AllowedHost>,
}

/// Most `notice_hosts` one bidder may list.
pub const MAX_NOTICE_HOSTS: usize = 32;

/// Why a bidder's `notice_hosts` were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoticeHostsError {
    #[error("at most {MAX_NOTICE_HOSTS} notice hosts")]
    TooMany,
    #[error("{0:?} is not a host or host:port")]
    NotAHost(String),
}

impl From<NoticeHostsError> for String {
    fn from(e: NoticeHostsError) -> String {
        e.to_string()
    }
}

impl NoticeHosts {
    /// The endpoint's own host and port, then each of `extra` (`host` or `host:port`).
    ///
    /// # Errors
    /// Too many entries, or the entry that is not a host.
    pub fn new(
        endpoint_host: &str,
        endpoint_port: u16,
        extra: &[String],
    ) -> Result<Self, NoticeHostsError> {
        if extra.len() > MAX_NOTICE_HOSTS {
            return Err(NoticeHostsError::TooMany);
        }
        let mut allowed = vec![AllowedHost {
            host: normalize_host(endpoint_host),
            port: Some(endpoint_port),
        }];
        for entry in extra {
            allowed.push(parse_allowed(entry)?);
        }
        Ok(NoticeHosts { allowed })
    }

    /// Checks `url`'s scheme, host and port; the addresses are checked after the lookup
    /// ([`address_allowed`]).
    ///
    /// # Errors
    /// [`Refusal::BadUrl`] or [`Refusal::HostNotAllowed`].
    pub fn check(&self, url: &str) -> Result<Target, Refusal> {
        let uri: http::Uri = url.parse().map_err(|_| Refusal::BadUrl)?;
        let scheme = Scheme::parse(uri.scheme_str()).ok_or(Refusal::BadUrl)?;
        let authority = uri.authority().ok_or(Refusal::BadUrl)?;
        // Credentials in a notice URL are never sent anywhere.
        if authority.as_str().contains('@') {
            return Err(Refusal::BadUrl);
        }
        let host = normalize_host(authority.host());
        if host.is_empty() {
            return Err(Refusal::BadUrl);
        }
        let port = authority.port_u16().unwrap_or(scheme.default_port());
        let allowed = self
            .allowed
            .iter()
            .any(|a| a.host == host && a.port.unwrap_or(scheme.default_port()) == port);
        if !allowed {
            return Err(Refusal::HostNotAllowed(format!("{host}:{port}")));
        }
        Ok(Target {
            scheme,
            host,
            port,
            authority: authority.as_str().to_owned(),
            path_and_query: uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
        })
    }
}

impl NoticeHosts {
    /// Whether `url`'s scheme, host and port pass, looking only at what precedes the path: a
    /// URL whose path or query still holds macros (`${AUCTION_PRICE}`) is judged the same
    /// as after substitution.
    pub fn allows_host_of(&self, url: &str) -> bool {
        let Some((scheme, rest)) = url.split_once("://") else {
            return false;
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let origin = format!("{scheme}://{}/", rest.get(..end).unwrap_or_default());
        self.check(&origin).is_ok()
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

fn parse_allowed(entry: &str) -> Result<AllowedHost, NoticeHostsError> {
    let bad = || NoticeHostsError::NotAHost(entry.to_owned());
    if entry.is_empty() || entry.contains(['/', '@', '?', '#', ' ']) {
        return Err(bad());
    }
    let authority: http::uri::Authority = entry.parse().map_err(|_| bad())?;
    let host = normalize_host(authority.host());
    if host.is_empty() {
        return Err(bad());
    }
    Ok(AllowedHost {
        host,
        port: authority.port_u16(),
    })
}

/// May the exchange connect to `ip` for a notice? Public unicast addresses yes; loopback,
/// private, shared (CGNAT), link-local (which holds the cloud metadata service), documentation,
/// benchmark, multicast, reserved and unspecified ranges only when `allow_private` is set.
/// IPv4 embedded in IPv6 (mapped, NAT64, 6to4) is judged as the IPv4 address it carries.
pub fn address_allowed(ip: IpAddr, allow_private: bool) -> bool {
    allow_private || is_public(ip)
}

fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0                                  // "this network"
        || a == 10                                        // private
        || (a == 100 && (64..128).contains(&b))           // shared address space (CGNAT)
        || a == 127                                       // loopback
        || (a == 169 && b == 254)                         // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))            // private
        || (a == 192 && b == 0 && c == 0)                 // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)                 // documentation
        || (a == 192 && b == 88 && c == 99)               // 6to4 relay anycast
        || (a == 192 && b == 168)                         // private
        || (a == 198 && (18..20).contains(&b))            // benchmarking
        || (a == 198 && b == 51 && c == 100)              // documentation
        || (a == 203 && b == 0 && c == 113)               // documentation
        || a >= 224; // multicast, reserved, broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00                      // unique local (fd00:ec2::254 among them)
        || (s[0] & 0xffc0) == 0xfe80                      // link-local
        || (s[0] & 0xffc0) == 0xfec0                      // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00                      // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8)             // documentation
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0) // discard
        || (s[0] == 0x2001 && s[1] < 0x0200)              // IETF protocol assignments, Teredo
        || s[0] == 0; // other reserved space under ::/16 (IPv4-compatible and the like)
    !refused
}

/// The IPv4 address an IPv6 address stands for, if it is one of the forms that carry one:
/// IPv4-mapped (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:ab:cd::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let from = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some(from(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(from(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(from(s[1], s[2]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(extra: &[&str]) -> NoticeHosts {
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        NoticeHosts::new("dsp.example", 8443, &extra).unwrap()
    }

    #[test]
    fn only_the_endpoint_and_listed_hosts_pass() {
        let h = hosts(&["notices.dsp.example", "track.dsp.example:9000"]);
        let ok = |url: &str| h.check(url).map(|t| (t.host, t.port));
        assert_eq!(
            ok("https://dsp.example:8443/win?p=1"),
            Ok(("dsp.example".into(), 8443))
        );
        assert_eq!(
            ok("http://NOTICES.dsp.example/w"),
            Ok(("notices.dsp.example".into(), 80))
        );
        assert_eq!(
            ok("https://notices.dsp.example/w"),
            Ok(("notices.dsp.example".into(), 443))
        );
        assert_eq!(
            ok("http://track.dsp.example:9000/"),
            Ok(("track.dsp.example".into(), 9000))
        );
        for refused in [
            "https://dsp.example/win",        // endpoint host, other port
            "http://dsp.example:9999/win",    // endpoint host, other port
            "http://notices.dsp.example:81/", // listed host, other port
            "http://track.dsp.example/",      // listed with a port, default port used
            "http://169.254.169.254/latest/meta-data/",
            "http://localhost:8443/",
            "http://evil.example/?dsp.example:8443",
        ] {
            assert!(
                matches!(h.check(refused), Err(Refusal::HostNotAllowed(_))),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_url_with_macros_is_judged_by_its_origin() {
        let h = hosts(&[]);
        assert!(h.allows_host_of("https://dsp.example:8443/win?p=${AUCTION_PRICE}&x={y}"));
        assert!(h.allows_host_of("https://dsp.example:8443"));
        assert!(!h.allows_host_of("https://other.example/win?p=${AUCTION_PRICE}"));
        assert!(!h.allows_host_of("dsp.example:8443/win"));
        assert!(!h.allows_host_of("https://${HOST}/win"));
    }

    #[test]
    fn odd_urls_are_refused_before_any_lookup() {
        let h = hosts(&[]);
        for bad in [
            "",
            "/relative",
            "ftp://dsp.example:8443/",
            "file:///etc/passwd",
            "http://user:pw@dsp.example:8443/",
            "gopher://dsp.example:8443/",
            "http:// /",
        ] {
            assert_eq!(h.check(bad), Err(Refusal::BadUrl), "{bad:?}");
        }
    }

    #[test]
    fn the_target_keeps_the_request_line() {
        let t = hosts(&[])
            .check("https://dsp.example:8443/n?id=1&p=0.5")
            .unwrap();
        assert_eq!(t.scheme, Scheme::Https);
        assert_eq!(t.authority, "dsp.example:8443");
        assert_eq!(t.path_and_query, "/n?id=1&p=0.5");
        let t = hosts(&[]).check("https://dsp.example:8443").unwrap();
        assert_eq!(t.path_and_query, "/");
    }

    #[test]
    fn bad_allowlist_entries_are_named() {
        for bad in ["", "http://x", "x/y", "a b", "u@h"] {
            let e = NoticeHosts::new("h", 80, &[bad.to_owned()]).unwrap_err();
            assert_eq!(e, NoticeHostsError::NotAHost(bad.to_owned()));
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        let many = vec!["h".to_owned(); MAX_NOTICE_HOSTS + 1];
        assert_eq!(
            NoticeHosts::new("h", 80, &many).unwrap_err(),
            NoticeHostsError::TooMany
        );
    }

    #[test]
    fn internal_ranges_are_refused_unless_allowed() {
        for internal in [
            "127.0.0.1",
            "127.9.9.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            let ip: IpAddr = internal.parse().unwrap();
            assert!(!address_allowed(ip, false), "{internal} must be refused");
            assert!(address_allowed(ip, true), "{internal} allowed when asked");
        }
        for public in [
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = public.parse().unwrap();
            assert!(address_allowed(ip, false), "{public} is public");
        }
    }
}
