//! The one byte stream of Gavel's outbound connections (bidders, notice hosts, Redis, the load
//! generator's targets): plain TCP, or TLS over it. One `match` per read or write, so that a
//! plain connection costs what it did before TLS existed.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio_rustls::client::TlsStream;

use crate::tls::ClientTls;

/// One connection's stream.
#[derive(Debug)]
pub enum Stream {
    Plain(TcpStream),
    /// Boxed: a TLS session is several KB, a plain stream a few words.
    Tls(Box<TlsStream<TcpStream>>),
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The TCP connection (or setting `TCP_NODELAY` on it) failed.
    #[error("connect: {0}")]
    Connect(io::Error),
    /// The TLS handshake failed. [`io::ErrorKind::InvalidData`] is the peer's certificate or
    /// protocol refused: it will not fix itself by trying again.
    #[error("TLS handshake: {0}")]
    Tls(io::Error),
}

impl From<ConnectError> for io::Error {
    fn from(e: ConnectError) -> io::Error {
        match e {
            ConnectError::Connect(e) | ConnectError::Tls(e) => e,
        }
    }
}

impl Stream {
    /// Dials `addr` with `TCP_NODELAY` (every caller sends small, latency-bound requests:
    /// Nagle would only add delay), then runs the TLS handshake when `tls` names the verifier
    /// and the name the peer's certificate must carry.
    ///
    /// # Errors
    /// [`ConnectError`]: which of the two steps failed.
    pub async fn connect(
        addr: impl ToSocketAddrs,
        tls: Option<(&ClientTls, ServerName<'static>)>,
    ) -> Result<Stream, ConnectError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(ConnectError::Connect)?;
        tcp.set_nodelay(true).map_err(ConnectError::Connect)?;
        match tls {
            None => Ok(Stream::Plain(tcp)),
            Some((client, name)) => {
                let session = client.connect(name, tcp).await.map_err(ConnectError::Tls)?;
                Ok(Stream::Tls(Box::new(session)))
            }
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
