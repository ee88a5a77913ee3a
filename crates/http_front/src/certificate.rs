//! A server's TLS configuration from a certificate chain and key in PEM files: the one place
//! that sets the protocol versions and ALPN, for a single certificate and for per-name ones.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;

/// A server configuration (HTTP/1.1, the safe default protocol versions) for the PEM
/// certificate chain and key in these files.
///
/// # Errors
/// A message naming the file at fault.
pub(crate) fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| format!("cannot read certificate file {}: {e}", cert_file.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("certificate file {}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "certificate file {} holds no certificate",
            cert_file.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| format!("key file {}: {e}", key_file.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "{} and {} do not make a certificate and its key: {e}",
                cert_file.display(),
                key_file.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
