//! TLS towards bidders and notice hosts (rustls with ring). A bidder trusts the system's roots
//! unless its configuration names a CA file; notice hosts are verified the same way as their
//! bidder. Built when the configuration loads: a missing or empty CA file is a config error.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// Why a TLS client could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("no system root certificates found ({errors} errors); name a ca_file")]
    NoSystemRoots { errors: usize },
    /// The CA file could not be read, or holds no certificate (the reason names the file).
    #[error("{0}")]
    CaFile(String),
    #[error("CA file {file}: {reason}")]
    Certificate { file: String, reason: String },
    #[error("TLS setup: {0}")]
    Setup(String),
    #[error("{name:?} is not a TLS server name: {reason}")]
    ServerName { name: String, reason: String },
}

/// The message, for a caller that keys it (`bidders[0].ca_file: ...`).
impl From<TlsError> for String {
    fn from(e: TlsError) -> String {
        e.to_string()
    }
}

/// What verifies a peer's certificate.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
    /// Where the roots came from, for logs and errors.
    source: Arc<str>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("roots", &self.source)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ClientTls {
    /// Same roots, same verifier: what a reload compares to keep a bidder's pool.
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for ClientTls {}

impl ClientTls {
    /// The system's trusted roots (`SSL_CERT_FILE`/`SSL_CERT_DIR` or the distribution's
    /// bundle), read once per process.
    ///
    /// # Errors
    /// A message when the system has no usable root certificate.
    pub fn system() -> Result<ClientTls, TlsError> {
        static SYSTEM: OnceLock<Result<ClientTls, TlsError>> = OnceLock::new();
        SYSTEM
            .get_or_init(|| {
                let found = rustls_native_certs::load_native_certs();
                let mut roots = RootCertStore::empty();
                let (added, _ignored) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(TlsError::NoSystemRoots {
                        errors: found.errors.len(),
                    });
                }
                ClientTls::with_roots(roots, "system roots", ALPN_HTTP1)
            })
            .clone()
    }

    /// Trusts only the PEM certificates in `ca_file`.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or holds no certificate.
    pub fn from_ca_file(ca_file: &Path) -> Result<ClientTls, TlsError> {
        ClientTls::with_roots(
            ca_roots(ca_file)?,
            &ca_file.display().to_string(),
            ALPN_HTTP1,
        )
    }

    /// Trusts only the PEM certificates in `ca_file`, for a protocol other than HTTP (Redis):
    /// no ALPN protocol is offered.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or holds no certificate.
    pub fn from_ca_file_without_alpn(ca_file: &Path) -> Result<ClientTls, TlsError> {
        let source = format!("{} (no ALPN)", ca_file.display());
        ClientTls::with_roots(ca_roots(ca_file)?, &source, &[])
    }

    fn with_roots(
        roots: RootCertStore,
        source: &str,
        alpn: &[&[u8]],
    ) -> Result<ClientTls, TlsError> {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Setup(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
            source: Arc::from(source),
        })
    }

    /// Runs the handshake over `tcp`, expecting `server_name` in the peer's certificate.
    pub async fn connect(
        &self,
        server_name: ServerName<'static>,
        tcp: TcpStream,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector.connect(server_name, tcp).await
    }
}

/// What the HTTP pools offer: HTTP/1.1 only, they speak nothing else.
const ALPN_HTTP1: &[&[u8]] = &[b"http/1.1"];

/// The PEM certificates of `ca_file` as trusted roots.
fn ca_roots(ca_file: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in settings::read_certificates(ca_file).map_err(TlsError::CaFile)? {
        roots.add(cert).map_err(|e| TlsError::Certificate {
            file: ca_file.display().to_string(),
            reason: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// `host` as a TLS server name (a DNS name or an IP address).
///
/// # Errors
/// A message when it is neither.
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(host.to_owned()).map_err(|e| TlsError::ServerName {
        name: host.to_owned(),
        reason: e.to_string(),
    })
}
