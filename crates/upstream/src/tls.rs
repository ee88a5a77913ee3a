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
    pub fn system() -> Result<ClientTls, String> {
        static SYSTEM: OnceLock<Result<ClientTls, String>> = OnceLock::new();
        SYSTEM
            .get_or_init(|| {
                let found = rustls_native_certs::load_native_certs();
                let mut roots = RootCertStore::empty();
                let (added, _ignored) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(format!(
                        "no system root certificates found ({} errors); name a ca_file",
                        found.errors.len()
                    ));
                }
                ClientTls::with_roots(roots, "system roots", ALPN_HTTP1)
            })
            .clone()
    }

    /// Trusts only the PEM certificates in `ca_file`.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or holds no certificate.
    pub fn from_ca_file(ca_file: &Path) -> Result<ClientTls, String> {
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
    pub fn from_ca_file_without_alpn(ca_file: &Path) -> Result<ClientTls, String> {
        let source = format!("{} (no ALPN)", ca_file.display());
        ClientTls::with_roots(ca_roots(ca_file)?, &source, &[])
    }

    fn with_roots(roots: RootCertStore, source: &str, alpn: &[&[u8]]) -> Result<ClientTls, String> {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
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
fn ca_roots(ca_file: &Path) -> Result<RootCertStore, String> {
    let shown = ca_file.display();
    let mut roots = RootCertStore::empty();
    for cert in settings::read_certificates(ca_file)? {
        roots
            .add(cert)
            .map_err(|e| format!("CA file {shown}: {e}"))?;
    }
    Ok(roots)
}

/// `host` as a TLS server name (a DNS name or an IP address).
///
/// # Errors
/// A message when it is neither.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))
}
