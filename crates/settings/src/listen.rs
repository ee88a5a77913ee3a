//! `listen` addresses as files and flags write them: an IP address and port as is, or a host
//! name and port resolved when the configuration is read (`localhost:8080`). A name that
//! resolves to several addresses binds its first IPv4 address, else its first address: the
//! same rule as the `--listen` flags, so a file and a flag never mean two different sockets.

use core::net::SocketAddr;
use std::net::ToSocketAddrs as _;

/// The longest `host:port` accepted (a DNS name is at most 253 bytes, plus the port).
pub const MAX_LISTEN_BYTES: usize = 300;

/// Why a `listen` address was refused; each names the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    #[error("a listen address of {len} bytes; at most {MAX_LISTEN_BYTES}")]
    TooLong { len: usize },
    #[error("{text:?} has no port; expected host:port, e.g. 127.0.0.1:8080")]
    NoPort { text: String },
    #[error("{text:?} is not host:port with a port 0..=65535, e.g. localhost:8080")]
    Malformed { text: String },
    #[error("cannot resolve {text:?}: {reason}")]
    Unresolved { text: String, reason: String },
    #[error("{text:?} resolves to no address")]
    NoAddress { text: String },
}

/// `text` as a socket address: `ip:port` (`[v6]:port`) as is, `host:port` looked up now.
///
/// # Errors
/// No port, too long, not resolvable, or resolving to nothing; each names the text.
pub fn resolve_listen(text: &str) -> Result<SocketAddr, ListenError> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if text.len() > MAX_LISTEN_BYTES {
        return Err(ListenError::TooLong { len: text.len() });
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(ListenError::NoPort {
            text: text.to_owned(),
        });
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(ListenError::Malformed {
            text: text.to_owned(),
        });
    }
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| ListenError::Unresolved {
            text: text.to_owned(),
            reason: e.to_string(),
        })?
        .collect();
    first_choice(&addrs).ok_or_else(|| ListenError::NoAddress {
        text: text.to_owned(),
    })
}

/// Which of a name's addresses is bound: the first IPv4 one, else the first.
fn first_choice(addrs: &[SocketAddr]) -> Option<SocketAddr> {
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
}

/// Serde's side of [`resolve_listen`], for `#[serde(deserialize_with = ...)]` on a
/// `SocketAddr` field: the refusal names the text and why.
///
/// # Errors
/// What [`resolve_listen`] refuses, as the deserializer's error.
pub fn deserialize_listen<'de, D>(deserializer: D) -> Result<SocketAddr, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
    resolve_listen(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_pass_as_they_are_and_names_are_looked_up() {
        assert_eq!(
            resolve_listen("0.0.0.0:8080"),
            Ok("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(resolve_listen("[::1]:9"), Ok("[::1]:9".parse().unwrap()));
        // localhost is in every /etc/hosts; its IPv4 address is preferred.
        let local = resolve_listen("localhost:8080").unwrap();
        assert!(local.ip().is_loopback(), "{local}");
        assert!(local.is_ipv4(), "{local}");
        assert_eq!(local.port(), 8080);
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let e = resolve_listen("localhost").unwrap_err();
        assert!(matches!(e, ListenError::NoPort { .. }), "{e}");
        assert!(e.to_string().contains("has no port"), "{e}");
        let e = resolve_listen("localhost:http").unwrap_err();
        assert!(e.to_string().contains("port 0..=65535"), "{e}");
        let e = resolve_listen(":80").unwrap_err();
        assert!(matches!(e, ListenError::Malformed { .. }), "{e}");
        let e = resolve_listen("no-such-host.invalid:80").unwrap_err();
        assert!(matches!(e, ListenError::Unresolved { .. }), "{e}");
        assert!(e.to_string().starts_with("cannot resolve"), "{e}");
        let e = resolve_listen(&format!("{}:80", "a".repeat(400))).unwrap_err();
        assert_eq!(e, ListenError::TooLong { len: 403 });
        assert!(e.to_string().contains("at most 300"), "{e}");
    }

    #[test]
    fn the_first_ipv4_address_wins_else_the_first() {
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        let v4: SocketAddr = "127.0.0.2:1".parse().unwrap();
        let v4b: SocketAddr = "127.0.0.3:1".parse().unwrap();
        assert_eq!(first_choice(&[v6, v4, v4b]), Some(v4));
        assert_eq!(first_choice(&[v6]), Some(v6));
        assert_eq!(first_choice(&[]), None);
    }
}
