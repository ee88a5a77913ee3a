//! A lean HTTP/1.1 client connection for the fan-out: one request at a time on a kept-alive
//! stream, driven by the task that awaits the answer (the auction's), with no task, channel or
//! header map per connection or call. The request head is encoded once per bidder
//! ([`RequestHead`]); a call writes it and the shared body with vectored writes and reads the
//! answer into the connection's own buffer.
//!
//! What it speaks of HTTP/1.1 (RFC 9112): a status line and headers (`httparse`), a body framed
//! by `Content-Length`, `chunked`, or the end of the connection; interim 1xx answers skipped;
//! `Connection: close` and HTTP/1.0 honoured (the connection is not kept); `Content-Encoding`
//! read as identity, gzip or other, and the body handed on as it came (decoding is the pool's).
//! Anything else is a protocol error and the connection is dropped. The parsing is pure and
//! tested below.

use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest response head accepted.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most response headers accepted.
const MAX_HEADERS: usize = 64;
/// Read buffer kept per connection (it grows for a larger answer, within the limit).
const READ_CHUNK: usize = 8 * 1024;

/// Any stream a connection runs on: TCP, or TLS over TCP.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Why a call on a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum H1Error {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection before any byte of an answer: on a reused connection the
    /// request may never have been read, so it is safe to send again on a fresh one.
    #[error("connection closed before an answer")]
    ClosedBeforeAnswer,
    #[error("malformed answer: {0}")]
    Protocol(&'static str),
    #[error("response body larger than {0} bytes")]
    TooLarge(usize),
}

/// The request line and fixed headers of one bidder's POSTs, encoded once.
#[derive(Debug, Clone)]
pub(crate) struct RequestHead(Bytes);

/// The headers a pool adds to its POSTs beyond the fixed ones.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeadFields<'a> {
    /// `Authorization: Bearer {token}` (a checked secret: visible ASCII, so it cannot break the
    /// head; any other token is left out).
    pub(crate) token: Option<&'a str>,
    /// `Accept-Encoding: gzip`: the peer may answer gzip-encoded.
    pub(crate) accept_gzip: bool,
    /// `Content-Encoding: gzip`: the body sent is gzip-encoded.
    pub(crate) gzip_body: bool,
}

impl RequestHead {
    /// The head of a POST of JSON to `path` at `authority`, with the headers `fields` asks for.
    pub(crate) fn post_with(path: &str, authority: &str, fields: HeadFields<'_>) -> RequestHead {
        let auth = fields
            .token
            .filter(|t| t.bytes().all(|b| b.is_ascii_graphic()))
            .map(|t| format!("authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let accept = if fields.accept_gzip {
            "accept-encoding: gzip\r\n"
        } else {
            ""
        };
        let coding = if fields.gzip_body {
            "content-encoding: gzip\r\n"
        } else {
            ""
        };
        RequestHead(Bytes::from(format!(
            "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
             {coding}{accept}{auth}x-openrtb-version: 2.6\r\ncontent-length: "
        )))
    }
}

/// How an answer's body is encoded (its `Content-Encoding`, RFC 9110 §8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentCoding {
    /// None named, or only `identity`: the body as it is.
    Identity,
    /// `gzip` (or its old alias `x-gzip`), once.
    Gzip,
    /// Anything else (`br`, `deflate`, `zstd`, gzip twice, ...): not spoken here.
    Unsupported,
}

impl ContentCoding {
    /// The coding after one more comma-separated `token` of a `Content-Encoding` value (codings
    /// are listed in the order they were applied, across repeated header lines).
    fn then(self, token: &[u8]) -> ContentCoding {
        let token = token.trim_ascii();
        if token.is_empty() || token.eq_ignore_ascii_case(b"identity") {
            self
        } else if self == ContentCoding::Identity
            && (token.eq_ignore_ascii_case(b"gzip") || token.eq_ignore_ascii_case(b"x-gzip"))
        {
            ContentCoding::Gzip
        } else {
            ContentCoding::Unsupported
        }
    }
}

/// A complete answer.
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    /// As it came: still encoded when `coding` says so.
    pub body: Bytes,
    pub coding: ContentCoding,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
}

/// One kept-alive connection.
pub(crate) struct Conn {
    io: Box<dyn Io>,
    buf: BytesMut,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

impl Conn {
    pub(crate) fn new(io: Box<dyn Io>) -> Conn {
        Conn {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
        }
    }

    /// POSTs `body` and reads the whole answer, its body at most `max_body` bytes.
    pub(crate) async fn post(
        &mut self,
        head: &RequestHead,
        body: &Bytes,
        max_body: usize,
    ) -> Result<Response, H1Error> {
        let length = format!("{}\r\n\r\n", body.len());
        let parts = &mut [head.0.as_ref(), length.as_bytes(), body.as_ref()];
        write_all(&mut self.io, parts).await.map_err(closed_or_io)?;
        self.read_response(max_body).await
    }

    /// Writes GETs of every `path_and_query` from `authority` at once (HTTP/1.1 pipelining;
    /// GETs are idempotent, so a batch cut short may be sent again); read the answers, in
    /// order, with [`Conn::read_answer`]. Each target must be valid in a request line (no
    /// spaces or control bytes).
    pub(crate) async fn send_gets(
        &mut self,
        paths_and_queries: &[&str],
        authority: &str,
    ) -> Result<(), H1Error> {
        let visible = |s: &str| !s.is_empty() && s.bytes().all(|b| b > b' ' && b != 0x7f);
        if !visible(authority) || !paths_and_queries.iter().all(|p| visible(p)) {
            return Err(H1Error::Protocol("request target or host not printable"));
        }
        let mut heads = String::new();
        for pq in paths_and_queries {
            heads.push_str("GET ");
            heads.push_str(pq);
            heads.push_str(" HTTP/1.1\r\nhost: ");
            heads.push_str(authority);
            heads.push_str("\r\n\r\n");
        }
        write_all(&mut self.io, &mut [heads.as_bytes()])
            .await
            .map_err(closed_or_io)
    }

    /// Reads the next whole answer, its body at most `max_body` bytes.
    pub(crate) async fn read_answer(&mut self, max_body: usize) -> Result<Response, H1Error> {
        self.read_response(max_body).await
    }

    async fn read_response(&mut self, max_body: usize) -> Result<Response, H1Error> {
        let mut any_byte = !self.buf.is_empty();
        let head = loop {
            match parse_head(&self.buf)? {
                Some(head) if head.status.is_informational() => {
                    self.buf.advance(head.len);
                }
                Some(head) => break head,
                None => {
                    if self.buf.len() > MAX_HEAD_BYTES {
                        return Err(H1Error::Protocol("head too large"));
                    }
                    let read = self.fill().await.map_err(|e| match e {
                        H1Error::Io(io) if !any_byte => closed_or_io(io),
                        other => other,
                    })?;
                    if read == 0 {
                        return Err(if any_byte {
                            H1Error::Protocol("closed inside the head")
                        } else {
                            H1Error::ClosedBeforeAnswer
                        });
                    }
                    any_byte = true;
                }
            }
        };
        self.buf.advance(head.len);
        let body = match head.framing {
            Framing::Empty => Bytes::new(),
            Framing::Length(n) => {
                if n > max_body {
                    return Err(H1Error::TooLarge(max_body));
                }
                while self.buf.len() < n {
                    if self.fill().await? == 0 {
                        return Err(H1Error::Protocol("closed inside the body"));
                    }
                }
                self.buf.split_to(n).freeze()
            }
            Framing::Chunked => self.read_chunked(max_body).await?,
            Framing::UntilClose => {
                while self.fill().await? > 0 {
                    if self.buf.len() > max_body {
                        return Err(H1Error::TooLarge(max_body));
                    }
                }
                self.buf.split().freeze()
            }
        };
        // Bytes beyond the answer belong to the next answer of a pipelined batch; with no
        // request outstanding they are garbage, and `idle_clean` keeps such a connection out
        // of the pools.
        let keep_alive = head.keep_alive && head.framing != Framing::UntilClose;
        Ok(Response {
            status: head.status,
            body,
            coding: head.coding,
            keep_alive,
        })
    }

    async fn read_chunked(&mut self, max_body: usize) -> Result<Bytes, H1Error> {
        let mut body = BytesMut::new();
        loop {
            match parse_chunk(&self.buf)? {
                Some(Chunk::Data { header, size }) => {
                    if body.len() + size > max_body {
                        return Err(H1Error::TooLarge(max_body));
                    }
                    while self.buf.len() < header + size + 2 {
                        if self.fill().await? == 0 {
                            return Err(H1Error::Protocol("closed inside a chunk"));
                        }
                    }
                    if &self.buf[header + size..header + size + 2] != b"\r\n" {
                        return Err(H1Error::Protocol("chunk without its CRLF"));
                    }
                    body.extend_from_slice(&self.buf[header..header + size]);
                    self.buf.advance(header + size + 2);
                }
                Some(Chunk::Last { len }) => {
                    self.buf.advance(len);
                    return Ok(body.freeze());
                }
                None => {
                    if self.buf.len() > MAX_HEAD_BYTES {
                        return Err(H1Error::Protocol("chunk header or trailers too large"));
                    }
                    if self.fill().await? == 0 {
                        return Err(H1Error::Protocol("closed inside the chunked body"));
                    }
                }
            }
        }
    }

    /// Whether nothing unread is left: a connection going back to a pool must be.
    pub(crate) fn idle_clean(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reads what the stream has into the buffer; 0 at its end.
    async fn fill(&mut self) -> Result<usize, H1Error> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        Ok(self.io.read_buf(&mut self.buf).await?)
    }
}

/// A connection reset or broken before any answer came: the peer had closed it.
fn closed_or_io(e: std::io::Error) -> H1Error {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
            H1Error::ClosedBeforeAnswer
        }
        _ => H1Error::Io(e),
    }
}

/// Writes every slice in order, resuming after partial writes.
async fn write_all(io: &mut Box<dyn Io>, parts: &mut [&[u8]]) -> std::io::Result<()> {
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<IoSlice<'_>> = parts[first..].iter().map(|p| IoSlice::new(p)).collect();
        let mut written = io.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while first < parts.len() && written >= parts[first].len() {
            written -= parts[first].len();
            first += 1;
        }
        if first < parts.len() {
            parts[first] = &parts[first][written..];
        }
    }
    io.flush().await
}

/// How an answer's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(usize),
    Chunked,
    UntilClose,
}

/// A parsed response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    status: StatusCode,
    /// Bytes of the head, blank line included.
    len: usize,
    framing: Framing,
    keep_alive: bool,
    coding: ContentCoding,
}

/// The head at the start of `buf`, or `None` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, H1Error> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(H1Error::Protocol("too many headers")),
        Err(_) => return Err(H1Error::Protocol("bad status line or header")),
    };
    let status = response
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or(H1Error::Protocol("bad status code"))?;
    let mut keep_alive = response.version == Some(1);
    let mut length = None;
    let mut chunked = false;
    let mut coding = ContentCoding::Identity;
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(H1Error::Protocol("bad content-length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(H1Error::Protocol("conflicting content-length"));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Only `chunked` is asked for (no TE header is sent), and it must come last.
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or_default();
            if !last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return Err(H1Error::Protocol("unsupported transfer-encoding"));
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("content-encoding") {
            coding = h
                .value
                .split(|b| *b == b',')
                .fold(coding, ContentCoding::then);
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|b| *b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && response.version == Some(0) {
                    keep_alive = true;
                }
            }
        }
    }
    let framing = if status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || status.is_informational()
    {
        Framing::Empty
    } else if chunked {
        // A message with both is read as chunked and the connection not kept (RFC 9112 §6.3).
        if length.is_some() {
            keep_alive = false;
        }
        Framing::Chunked
    } else {
        length.map_or(Framing::UntilClose, Framing::Length)
    };
    Ok(Some(Head {
        status,
        len,
        framing,
        keep_alive,
        coding,
    }))
}

/// One piece of a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// `size` bytes of data after a `header` of that many bytes (size line and CRLF).
    Data { header: usize, size: usize },
    /// The last chunk and its trailers, `len` bytes in all.
    Last { len: usize },
}

/// The chunk at the start of `buf`, or `None` while its size line (or, for the last chunk, its
/// trailers) is incomplete.
fn parse_chunk(buf: &[u8]) -> Result<Option<Chunk>, H1Error> {
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &buf[..eol];
    let digits = line
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(H1Error::Protocol("bad chunk size"));
    }
    let size = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| usize::from_str_radix(d, 16).ok())
        .ok_or(H1Error::Protocol("bad chunk size"))?;
    let header = eol + 2;
    if size > 0 {
        return Ok(Some(Chunk::Data { header, size }));
    }
    // Trailers, if any, end with an empty line.
    let mut at = header;
    loop {
        let Some(end) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        if end == 0 {
            return Ok(Some(Chunk::Last { len: at + 2 }));
        }
        at += end + 2;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn heads_say_their_framing_and_whether_the_connection_stays() {
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n");
        assert_eq!(
            (h.status, h.framing, h.keep_alive),
            (StatusCode::OK, Framing::Length(12), true)
        );
        assert_eq!(h.len, 39);
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(h.framing, Framing::Empty);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 1\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n");
        assert!(!h.keep_alive, "HTTP/1.0 closes unless asked");
        let h = head("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 1\r\n\r\n");
        assert!(h.keep_alive);
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.framing, Framing::UntilClose);
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false));
        let h = head("HTTP/1.1 100 Continue\r\n\r\n");
        assert!(h.status.is_informational());
    }

    #[test]
    fn the_content_coding_is_read_across_header_lines_in_order() {
        use ContentCoding::{Gzip, Identity, Unsupported};
        for (headers, want) in [
            ("", Identity),
            ("content-encoding: gzip\r\n", Gzip),
            ("Content-Encoding: GZIP\r\n", Gzip),
            ("content-encoding: x-gzip\r\n", Gzip),
            ("content-encoding: identity\r\n", Identity),
            ("content-encoding: \r\n", Identity),
            ("content-encoding: identity, gzip\r\n", Gzip),
            ("content-encoding: gzip ,identity\r\n", Gzip),
            ("content-encoding: br\r\n", Unsupported),
            ("content-encoding: deflate\r\n", Unsupported),
            ("content-encoding: zstd\r\n", Unsupported),
            ("content-encoding: gzip;q=1\r\n", Unsupported),
            ("content-encoding: gzip, gzip\r\n", Unsupported),
            ("content-encoding: br, gzip\r\n", Unsupported),
            (
                "content-encoding: gzip\r\ncontent-encoding: gzip\r\n",
                Unsupported,
            ),
            (
                "content-encoding: gzip\r\ncontent-encoding: br\r\n",
                Unsupported,
            ),
            (
                "content-encoding: identity\r\ncontent-encoding: gzip\r\n",
                Gzip,
            ),
            (
                "transfer-encoding: chunked\r\ncontent-encoding: gzip\r\n",
                Gzip,
            ),
        ] {
            let h = head(&format!(
                "HTTP/1.1 200 OK\r\n{headers}content-length: 0\r\n\r\n"
            ));
            assert_eq!(h.coding, want, "{headers:?}");
        }
    }

    #[test]
    fn request_heads_carry_the_headers_asked_for() {
        let text = |fields| {
            let head = RequestHead::post_with("/bid", "b.example", fields);
            String::from_utf8(head.0.to_vec()).unwrap()
        };
        let plain = text(HeadFields::default());
        assert_eq!(
            plain,
            "POST /bid HTTP/1.1\r\nhost: b.example\r\ncontent-type: application/json\r\n\
             x-openrtb-version: 2.6\r\ncontent-length: "
        );
        let all = text(HeadFields {
            token: Some("s3cret"),
            accept_gzip: true,
            gzip_body: true,
        });
        for line in [
            "\r\ncontent-encoding: gzip\r\n",
            "\r\naccept-encoding: gzip\r\n",
            "\r\nauthorization: Bearer s3cret\r\n",
        ] {
            assert!(all.contains(line), "{line:?} in {all:?}");
        }
        assert!(all.ends_with("\r\ncontent-length: "));
        let only_accept = text(HeadFields {
            accept_gzip: true,
            ..HeadFields::default()
        });
        assert!(
            only_accept.contains("accept-encoding: gzip")
                && !only_accept.contains("content-encoding")
        );
        let bad_token = text(HeadFields {
            token: Some("a\r\nx-injected: 1"),
            ..HeadFields::default()
        });
        assert_eq!(
            bad_token, plain,
            "a token that could break the head is left out"
        );
    }

    #[test]
    fn an_incomplete_head_asks_for_more_and_a_bad_one_is_refused() {
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
                .unwrap()
                .is_none()
        );
        assert!(parse_head(b"").unwrap().is_none());
        for bad in [
            "HTTTP/1.1 200 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
            "HTTP/1.1 999999 OK\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x{i}: y\r\n")).collect();
        let text = format!("HTTP/1.1 200 OK\r\n{many}\r\n");
        assert!(parse_head(text.as_bytes()).is_err());
    }

    #[test]
    fn chunks_and_the_last_chunk_with_trailers() {
        assert_eq!(
            parse_chunk(b"1a;ext=1\r\nxxx").unwrap(),
            Some(Chunk::Data {
                header: 10,
                size: 26
            })
        );
        assert_eq!(parse_chunk(b"1a").unwrap(), None);
        assert_eq!(
            parse_chunk(b"0\r\n\r\n").unwrap(),
            Some(Chunk::Last { len: 5 })
        );
        assert_eq!(
            parse_chunk(b"0\r\nx: y\r\n").unwrap(),
            None,
            "trailers still coming"
        );
        assert_eq!(
            parse_chunk(b"0\r\nx: y\r\n\r\nrest").unwrap(),
            Some(Chunk::Last { len: 11 })
        );
        assert!(parse_chunk(b"zz\r\n").is_err());
        assert!(parse_chunk(b"\r\n").is_err());
        assert!(parse_chunk(b"ffffffffffffffffff\r\n").is_err());
    }

    /// The client over an in-memory duplex: framing, keep-alive, limits.
    async fn exchange_with(
        answer: &'static [u8],
        max_body: usize,
    ) -> (Result<Response, H1Error>, Vec<u8>) {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let mut conn = Conn::new(Box::new(client));
        let serve = async move {
            let mut got = vec![0u8; 4096];
            let n = server.read(&mut got).await.unwrap();
            got.truncate(n);
            server.write_all(answer).await.unwrap();
            drop(server);
            got
        };
        let head = RequestHead::post_with("/bid", "b.example:80", HeadFields::default());
        let body = Bytes::from_static(b"{}");
        let (result, got) = tokio::join!(conn.post(&head, &body, max_body), serve);
        (result, got)
    }

    #[tokio::test]
    async fn a_call_writes_the_encoded_head_and_reads_each_framing() {
        let (r, sent) =
            exchange_with(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", 100).await;
        let sent = String::from_utf8(sent).unwrap();
        assert!(
            sent.starts_with("POST /bid HTTP/1.1\r\nhost: b.example:80\r\n"),
            "{sent}"
        );
        assert!(sent.ends_with("content-length: 2\r\n\r\n{}"), "{sent}");
        let r = r.unwrap();
        assert_eq!(
            (r.status, &r.body[..], r.keep_alive),
            (StatusCode::OK, &b"hello"[..], true)
        );

        let chunked = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let r = exchange_with(chunked, 100).await.0.unwrap();
        assert_eq!(&r.body[..], b"abcde");
        assert!(r.keep_alive);

        let r = exchange_with(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", 100)
            .await
            .0
            .unwrap();
        assert_eq!((&r.body[..], r.keep_alive), (&b"until the end"[..], false));

        let r = exchange_with(b"HTTP/1.1 204 No Content\r\n\r\n", 100)
            .await
            .0
            .unwrap();
        assert_eq!(
            (r.status, r.body.len(), r.keep_alive),
            (StatusCode::NO_CONTENT, 0, true)
        );
    }

    #[tokio::test]
    async fn pipelined_gets_go_out_in_one_write_and_their_answers_are_read_in_order() {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let mut conn = Conn::new(Box::new(client));
        conn.send_gets(&["/win?a=1", "/bill?a=1", "/win?a=2"], "n.example")
            .await
            .unwrap();
        let mut got = vec![0u8; 4096];
        let n = server.read(&mut got).await.unwrap();
        let text = String::from_utf8_lossy(&got[..n]).into_owned();
        assert_eq!(text.matches("GET /").count(), 3, "{text}");
        assert!(text.starts_with("GET /win?a=1 HTTP/1.1\r\nhost: n.example\r\n\r\nGET /bill?a=1"));
        server
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\naHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        let statuses: Vec<u16> = [
            conn.read_answer(100).await.unwrap(),
            conn.read_answer(100).await.unwrap(),
            conn.read_answer(100).await.unwrap(),
        ]
        .iter()
        .map(|r| r.status.as_u16())
        .collect();
        assert_eq!(statuses, [200, 204, 503]);
        assert!(conn.idle_clean());
        assert!(
            conn.send_gets(&["/a b"], "n.example").await.is_err(),
            "no spaces in a request line"
        );
    }

    #[tokio::test]
    async fn bodies_over_the_limit_and_broken_answers_are_errors() {
        let r = exchange_with(b"HTTP/1.1 200 OK\r\ncontent-length: 500\r\n\r\n", 100)
            .await
            .0;
        assert!(matches!(r, Err(H1Error::TooLarge(100))), "{r:?}");
        let r = exchange_with(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n65\r\n",
            100,
        )
        .await
        .0;
        assert!(matches!(r, Err(H1Error::TooLarge(100))), "{r:?}");
        let r = exchange_with(b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\nshort", 100)
            .await
            .0;
        assert!(matches!(r, Err(H1Error::Protocol(_))), "{r:?}");
        let r = exchange_with(b"", 100).await.0;
        assert!(matches!(r, Err(H1Error::ClosedBeforeAnswer)), "{r:?}");
        let r = exchange_with(b"HTTP/1.1 2", 100).await.0;
        assert!(matches!(r, Err(H1Error::Protocol(_))), "{r:?}");
        let (client, mut server) = tokio::io::duplex(4096);
        let mut conn = Conn::new(Box::new(client));
        server
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nabEXTRA")
            .await
            .unwrap();
        let r = conn.read_answer(100).await.unwrap();
        assert_eq!(&r.body[..], b"ab");
        assert!(
            !conn.idle_clean(),
            "bytes after the answer: the connection is not kept"
        );
    }
}
