//! The byte stream under a Redis connection: `upstream`'s one outbound stream, plain TCP or
//! TLS (`rediss://`) trusting only the CA certificates the operator names.

use std::io;
use std::path::Path;

use rustls_pki_types::ServerName;
use upstream::stream::{ConnectError, Stream};
use upstream::tls::ClientTls;

use super::LedgerError;

/// TLS towards Redis: the CA certificates to trust and the name the server's certificate must
/// carry. Built once at start ([`RedisTls::from_ca_file`]); a bad file is a startup error.
#[derive(Clone, Debug)]
pub struct RedisTls {
    client: ClientTls,
    server_name: ServerName<'static>,
}

impl RedisTls {
    /// Trusts the PEM certificates in `ca_file` and expects `server_name` (the host of the
    /// URL: a DNS name or an IP address) in the server's certificate.
    ///
    /// # Errors
    /// The file cannot be read or holds no certificate, or the name is not a server name.
    pub fn from_ca_file(
        ca_file: &Path,
        server_name: &str,
    ) -> Result<RedisTls, upstream::tls::TlsError> {
        Ok(RedisTls {
            client: ClientTls::from_ca_file_without_alpn(ca_file)?,
            server_name: upstream::tls::server_name(server_name)?,
        })
    }
}

/// Dials `addr`, with a TLS handshake when `tls` is set. A handshake the server's certificate
/// fails is [`LedgerError::Refused`]: it will not fix itself.
pub(crate) async fn connect(addr: &str, tls: Option<&RedisTls>) -> Result<Stream, LedgerError> {
    let tls = tls.map(|t| (&t.client, t.server_name.clone()));
    Stream::connect(addr, tls).await.map_err(|e| match e {
        ConnectError::Connect(e) => LedgerError::Unavailable(format!("connect {addr}: {e}")),
        ConnectError::Tls(e) if e.kind() == io::ErrorKind::InvalidData => {
            LedgerError::Refused(format!("TLS handshake with {addr}: {e}"))
        }
        ConnectError::Tls(e) => LedgerError::Unavailable(format!("TLS handshake with {addr}: {e}")),
    })
}
