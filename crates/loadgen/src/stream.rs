//! A worker's byte stream: plain TCP, or TLS over it for an `https` target. One `match` per
//! read or write, so that a plain-HTTP run costs what it did before TLS existed.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::LoadError;

/// One connection's stream.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    /// Boxed: a TLS session is several KB, a plain stream a few words.
    Tls(Box<TlsStream<TcpStream>>),
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

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
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
        let err = |reason: String| LoadError::Tls { reason };
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
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    match tls {
        None => Ok(Stream::Plain(tcp)),
        Some(t) => {
            let session = t.client.connect(t.name.clone(), tcp).await?;
            Ok(Stream::Tls(Box::new(session)))
        }
    }
}
