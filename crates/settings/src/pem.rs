//! PEM certificate files, read the same way wherever a CA is trusted (Redis over TLS, HTTPS
//! bidders and notice hosts).

use std::path::Path;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// Every certificate in the PEM file at `path`.
///
/// # Errors
/// A message naming the file when it cannot be read, holds a malformed block, or holds no
/// certificate.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read CA file {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("CA file {shown}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("CA file {shown} holds no certificate"));
    }
    Ok(certs)
}
