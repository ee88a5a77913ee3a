//! TLS on a server's listener (rustls with ring): a certificate chain and its key read from PEM
//! files, and read again when either file changes, so a renewed certificate is served without a
//! restart. A renewal that fails to load (half-written, key not matching) is logged and counted,
//! and the last good certificate keeps serving.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use tokio::net::TcpStream;

use crate::certificate::CertificateError;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A listener's certificate, reloadable.
pub struct ServerTls {
    cert_file: PathBuf,
    key_file: PathBuf,
    acceptor: Mutex<TlsAcceptor>,
    /// Reloads that replaced the certificate, and that were refused (the old one kept).
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads the PEM certificate chain and private key.
    ///
    /// # Errors
    /// The file at fault, and why.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<ServerTls, CertificateError> {
        Ok(ServerTls {
            acceptor: Mutex::new(acceptor(cert_file, key_file)?),
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
        })
    }

    /// Reads both files again; on any error the current certificate stays.
    ///
    /// # Errors
    /// Why the new files were refused.
    pub fn reload(&self) -> Result<(), CertificateError> {
        match acceptor(&self.cert_file, &self.key_file) {
            Ok(new) => {
                *telemetry::locks::lock(&self.acceptor) = new;
                self.reloads.fetch_add(1, Relaxed);
                tracing::info!(cert = %self.cert_file.display(), "TLS certificate reloaded");
                Ok(())
            }
            Err(e) => {
                self.reload_failures.fetch_add(1, Relaxed);
                tracing::error!(error = %e, "TLS certificate reload refused; the current one keeps serving");
                Err(e)
            }
        }
    }

    /// Follows both files, reloading on each settled change, until `this` is dropped.
    pub fn watch(this: &Arc<ServerTls>) {
        for path in [this.cert_file.clone(), this.key_file.clone()] {
            settings::follow(Arc::downgrade(this), path, |tls| async move {
                let _ = tls.reload();
            });
        }
    }

    /// The acceptor of the certificate now (test servers use it too).
    pub fn acceptor(&self) -> TlsAcceptor {
        telemetry::locks::lock(&self.acceptor).clone()
    }
}

fn acceptor(cert_file: &Path, key_file: &Path) -> Result<TlsAcceptor, CertificateError> {
    Ok(TlsAcceptor::from(crate::certificate::server_config(
        cert_file, key_file,
    )?))
}

/// How a listener ends TLS: one certificate, or one per server name.
#[derive(Debug, Clone)]
pub enum Tls {
    Single(Arc<ServerTls>),
    Sni(Arc<crate::sni::SniCerts>),
}

impl Tls {
    /// The handshake on an accepted connection.
    ///
    /// # Errors
    /// The handshake failed, or no certificate serves the name the client asked for.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        match self {
            Tls::Single(tls) => tls.acceptor().accept(stream).await,
            Tls::Sni(certs) => certs.accept(stream).await,
        }
    }
}
