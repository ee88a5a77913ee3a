//! The byte stream under a Redis connection: plain TCP, or TLS (`rediss://`) with rustls,
//! trusting only the CA certificates the operator names.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use super::LedgerError;

/// TLS towards Redis: the CA certificates to trust and the name the server's certificate must
/// carry. Built once at start ([`RedisTls::from_ca_file`]); a bad file is a startup error.
#[derive(Clone)]
pub struct RedisTls {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl RedisTls {
    /// Trusts the PEM certificates in `ca_file` and expects `server_name` (the host of the
    /// URL: a DNS name or an IP address) in the server's certificate.
    ///
    /// # Errors
    /// A message naming the file or the name when the file cannot be read, holds no
    /// certificate, or the name is not a valid server name.
    pub fn from_ca_file(ca_file: &Path, server_name: &str) -> Result<RedisTls, String> {
        let shown = ca_file.display();
        let mut roots = RootCertStore::empty();
        for cert in settings::read_certificates(ca_file)? {
            roots
                .add(cert)
                .map_err(|e| format!("CA file {shown}: {e}"))?;
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| format!("{server_name:?} is not a TLS server name: {e}"))?;
        Ok(RedisTls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

/// A connection's stream.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Dials `addr`, with a TLS handshake when `tls` is set. A failed handshake is
    /// [`LedgerError::Refused`]: it will not fix itself.
    pub(crate) async fn connect(addr: &str, tls: Option<&RedisTls>) -> Result<Stream, LedgerError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| LedgerError::Unavailable(format!("connect {addr}: {e}")))?;
        // Requests are single small writes answered before the next one: Nagle only adds delay.
        tcp.set_nodelay(true)
            .map_err(|e| LedgerError::Unavailable(format!("set_nodelay: {e}")))?;
        let Some(tls) = tls else {
            return Ok(Stream::Plain(tcp));
        };
        match tls.connector.connect(tls.server_name.clone(), tcp).await {
            Ok(stream) => Ok(Stream::Tls(Box::new(stream))),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(LedgerError::Refused(format!(
                "TLS handshake with {addr}: {e}"
            ))),
            Err(e) => Err(LedgerError::Unavailable(format!(
                "TLS handshake with {addr}: {e}"
            ))),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
