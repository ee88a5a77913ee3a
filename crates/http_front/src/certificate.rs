//! A server's TLS configuration from a certificate chain and key in PEM files: the one place
//! that sets the protocol versions and ALPN, for a single certificate and for per-name ones.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;

/// Why a certificate and its key were refused; each names the file at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    #[error("cannot read certificate file {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("certificate file {path}: {reason}")]
    BadCertificate { path: String, reason: String },
    #[error("certificate file {path} holds no certificate")]
    NoCertificate { path: String },
    #[error("key file {path}: {reason}")]
    BadKey { path: String, reason: String },
    #[error("{cert} and {key} do not make a certificate and its key: {reason}")]
    Mismatch {
        cert: String,
        key: String,
        reason: String,
    },
    /// rustls refused its own defaults (not expected).
    #[error("TLS setup: {0}")]
    Setup(String),
    /// A directory of certificates per name could not be read.
    #[error("cannot read the directory {path}: {reason}")]
    Directory { path: String, reason: String },
}

/// A server configuration (HTTP/1.1, the safe default protocol versions) for the PEM
/// certificate chain and key in these files.
///
/// # Errors
/// The file at fault, and why.
pub(crate) fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<ServerConfig>, CertificateError> {
    let cert = || cert_file.display().to_string();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| CertificateError::Unreadable {
            path: cert(),
            reason: e.to_string(),
        })?
        .collect::<Result<_, _>>()
        .map_err(|e| CertificateError::BadCertificate {
            path: cert(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertificateError::NoCertificate { path: cert() });
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| CertificateError::BadKey {
        path: key_file.display().to_string(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CertificateError::Setup(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| CertificateError::Mismatch {
            cert: cert(),
            key: key_file.display().to_string(),
            reason: e.to_string(),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
