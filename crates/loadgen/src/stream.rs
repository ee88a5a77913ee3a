//! A worker's connection target over TLS, for an `https` URL; the stream itself is `upstream`'s
//! one outbound stream (plain TCP, or TLS over it).

use std::io;
use std::net::SocketAddr;
use std::path::Path;

use rustls_pki_types::ServerName;
pub(crate) use upstream::stream::Stream;

use crate::LoadError;

/// What an `https` target's connections need: the roots its certificate is checked against,
/// and the name it must carry (the URL's host).
#[derive(Debug, Clone)]
pub(crate) struct TlsTarget {
    client: upstream::tls::ClientTls,
    name: ServerName<'static>,
}

impl TlsTarget {
    /// Roots from `ca_file`, or the system's.
    pub fn new(host: &str, ca_file: Option<&Path>) -> Result<TlsTarget, LoadError> {
        let err = |e: upstream::tls::TlsError| LoadError::Tls {
            reason: e.to_string(),
        };
        let client = match ca_file {
            Some(path) => upstream::tls::ClientTls::from_ca_file(path),
            None => upstream::tls::ClientTls::system(),
        }
        .map_err(err)?;
        let name = upstream::tls::server_name(host).map_err(err)?;
        Ok(TlsTarget { client, name })
    }
}

/// Opens a connection to `addr` (TCP_NODELAY), with the TLS handshake when `tls` is given.
pub(crate) async fn connect(addr: SocketAddr, tls: Option<&TlsTarget>) -> io::Result<Stream> {
    let tls = tls.map(|t| (&t.client, t.name.clone()));
    Ok(Stream::connect(addr, tls).await?)
}
