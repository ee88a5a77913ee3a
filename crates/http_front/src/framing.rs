//! Request framing read as strictly as RFC 9112 says, for every server, before any handler
//! sees the request. hyper parses the message; these are the ambiguities it tolerates and a
//! proxy in front of Gavel might read differently (request smuggling), each answered 400 with
//! `Connection: close`:
//!
//! | request | why it is refused |
//! | --- | --- |
//! | HTTP/1.1 without `Host` | RFC 9112 3.2: a server must answer 400 |
//! | two `Host` lines, equal or not | RFC 9112 3.2: the same |
//! | `Transfer-Encoding` other than exactly `chunked` (`identity, chunked`, `chunked, chunked`, two lines) | a coding this server does not apply, or a list a proxy may read otherwise |
//! | two `Content-Length` lines, even equal, or a list (`5, 5`) | RFC 9112 6.3: a length that is not one number is unrecoverable |
//! | anything after a length or chunk size padded past 128 bytes on the connection | what this reader cannot follow, a proxy may read another way |
//!
//! `Content-Length` with `Transfer-Encoding: chunked` is left to hyper, which reads the body as
//! chunked and closes the connection after the answer, as RFC 9112 6.3 asks.
//!
//! hyper folds a second `Content-Length` line equal to the first into one before any handler
//! sees the headers, so that case is counted on the bytes themselves: a [`HeadScanner`] follows
//! what a connection reads, request by request (heads, then bodies by their length or chunks),
//! and says of each head whether it held more than one `Content-Length` line. When it cannot
//! follow (a length or chunk size padded past what it reads, a chunk size it cannot parse), it
//! stops and every later request on the connection is refused: a framing this strict reader
//! cannot follow is one a proxy may read another way.
//!
//! Pure: it reads headers and bytes only.

use std::collections::VecDeque;

use http::{HeaderMap, Version, header};

/// Why a request's framing was refused; the message is safe to send back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("an HTTP/1.1 request needs a Host header")]
    NoHost,
    #[error("more than one Host header")]
    ManyHosts,
    #[error("Transfer-Encoding must be exactly \"chunked\"")]
    TransferEncoding,
    #[error("Content-Length must appear once, as one number")]
    ContentLength,
    #[error(
        "the request framing on this connection could not be followed (a padded length or chunk size)"
    )]
    Unfollowed,
}

/// Checks a request's framing headers.
pub fn check(version: Version, headers: &HeaderMap) -> Result<(), FramingError> {
    let hosts = headers.get_all(header::HOST).iter().count();
    if hosts > 1 {
        return Err(FramingError::ManyHosts);
    }
    if hosts == 0 && version == Version::HTTP_11 {
        return Err(FramingError::NoHost);
    }
    let mut codings = headers.get_all(header::TRANSFER_ENCODING).iter();
    if let Some(first) = codings.next() {
        let exact = first
            .to_str()
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("chunked"));
        if !exact || codings.next().is_some() {
            return Err(FramingError::TransferEncoding);
        }
    }
    let mut lengths = headers.get_all(header::CONTENT_LENGTH).iter();
    if let Some(first) = lengths.next() {
        let one_number = first
            .to_str()
            .is_ok_and(|v| !v.trim().is_empty() && v.trim().bytes().all(|b| b.is_ascii_digit()));
        if !one_number || lengths.next().is_some() {
            return Err(FramingError::ContentLength);
        }
    }
    Ok(())
}

/// Bytes of a line kept: a header's name and a length or a chunk size fit with room to spare;
/// a longer `Content-Length` or chunk-size line stops the scanner.
const LINE_KEPT: usize = 128;
/// Heads read ahead of their handling at most (pipelining); past it the scanner gives up.
const MAX_PENDING: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// In a request's head (or before its request line).
    Head,
    /// In a body with this many bytes left.
    Body(u64),
    ChunkSize,
    ChunkData(u64),
    /// The CRLF after a chunk's data: this many bytes left.
    ChunkEnd(u8),
    Trailer,
    /// Something it cannot follow: it stops, and every later head is [`Head::Unknown`].
    Lost,
}

/// What the scanner says of one request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// One `Content-Length` line at most.
    Clean,
    /// More than one `Content-Length` line (hyper kept one).
    RepeatedLength,
    /// The scanner lost the thread earlier on this connection: refuse.
    Unknown,
}

/// Follows a connection's bytes to tell, for each request head in order, whether it held more
/// than one `Content-Length` line. Fed by the connection's reads; asked by its service.
#[derive(Debug)]
pub struct HeadScanner {
    scan: Scan,
    line: Vec<u8>,
    line_len: usize,
    request_line_seen: bool,
    length_lines: u32,
    length: Option<u64>,
    chunked: bool,
    verdicts: VecDeque<bool>,
}

impl Default for HeadScanner {
    fn default() -> Self {
        HeadScanner {
            scan: Scan::Head,
            line: Vec::with_capacity(LINE_KEPT),
            line_len: 0,
            request_line_seen: false,
            length_lines: 0,
            length: None,
            chunked: false,
            verdicts: VecDeque::new(),
        }
    }
}

impl HeadScanner {
    /// The next head's verdict, in the order the heads were read. A head the service has but
    /// the scanner has not seen end means the scanner lost the thread: [`Head::Unknown`].
    pub fn next_head(&mut self) -> Head {
        match self.verdicts.pop_front() {
            Some(false) => Head::Clean,
            Some(true) => Head::RepeatedLength,
            None => Head::Unknown,
        }
    }

    /// Follows `bytes`, the next ones read from the connection.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            bytes = match self.scan {
                Scan::Lost => return,
                Scan::Body(left) | Scan::ChunkData(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(bytes.len());
                    let left = left - n as u64;
                    self.scan = match (self.scan, left) {
                        (Scan::Body(_), 0) => Scan::Head,
                        (Scan::Body(_), _) => Scan::Body(left),
                        (_, 0) => Scan::ChunkEnd(2),
                        _ => Scan::ChunkData(left),
                    };
                    &bytes[n..]
                }
                Scan::ChunkEnd(left) => {
                    let n = usize::from(left).min(bytes.len());
                    self.scan = match left as usize - n {
                        0 => Scan::ChunkSize,
                        rest => Scan::ChunkEnd(rest as u8),
                    };
                    &bytes[n..]
                }
                Scan::Head | Scan::ChunkSize | Scan::Trailer => {
                    match bytes.iter().position(|b| *b == b'\n') {
                        None => {
                            self.keep(bytes);
                            return;
                        }
                        Some(end) => {
                            self.keep(&bytes[..end]);
                            self.end_line();
                            &bytes[end + 1..]
                        }
                    }
                }
            };
        }
    }

    fn keep(&mut self, part: &[u8]) {
        let room = LINE_KEPT.saturating_sub(self.line.len());
        self.line.extend_from_slice(&part[..part.len().min(room)]);
        self.line_len = self.line_len.saturating_add(part.len());
    }

    fn end_line(&mut self) {
        let mut line = std::mem::take(&mut self.line);
        let whole = self.line_len <= LINE_KEPT;
        self.line_len = 0;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        match self.scan {
            Scan::Head => self.head_line(&line, whole),
            Scan::ChunkSize => {
                let size = line.split(|b| *b == b';').next().unwrap_or_default();
                let size = std::str::from_utf8(size.trim_ascii())
                    .ok()
                    .filter(|_| whole)
                    .and_then(|s| u64::from_str_radix(s, 16).ok());
                self.scan = match size {
                    Some(0) => Scan::Trailer,
                    Some(n) => Scan::ChunkData(n),
                    None => Scan::Lost,
                };
            }
            Scan::Trailer if line.is_empty() => self.scan = Scan::Head,
            _ => {}
        }
        line.clear();
        self.line = line;
    }

    fn head_line(&mut self, line: &[u8], whole: bool) {
        if line.is_empty() {
            if !self.request_line_seen {
                return; // empty lines before a request line are skipped, as hyper does
            }
            if self.verdicts.len() >= MAX_PENDING {
                self.scan = Scan::Lost;
                return;
            }
            self.verdicts.push_back(self.length_lines > 1);
            self.scan = match (self.chunked, self.length) {
                (true, _) => Scan::ChunkSize,
                (false, Some(n)) if n > 0 => Scan::Body(n),
                _ => Scan::Head,
            };
            self.request_line_seen = false;
            self.length_lines = 0;
            self.length = None;
            self.chunked = false;
            return;
        }
        if !self.request_line_seen {
            self.request_line_seen = true;
            return;
        }
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return;
        };
        let (name, value) = (line[..colon].trim_ascii(), line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            self.length_lines += 1;
            if !whole {
                // Padded past what is kept: a length hyper may read and this cannot.
                self.scan = Scan::Lost;
                return;
            }
            if self.length.is_none() {
                // hyper reads the first one; a bad one it refuses (and so the scan is moot).
                self.length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.chunked = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in lines {
            if let (Ok(n), Ok(v)) = (
                name.parse::<header::HeaderName>(),
                value.parse::<header::HeaderValue>(),
            ) {
                h.append(n, v);
            }
        }
        h
    }

    #[test]
    fn the_table_in_the_module_doc_holds() {
        let v11 = Version::HTTP_11;
        let ok = [
            vec![("host", "a")],
            vec![("host", "a"), ("content-length", "5")],
            vec![("host", "a"), ("transfer-encoding", "Chunked")],
            vec![("host", "a"), ("transfer-encoding", " chunked ")],
        ];
        for h in ok {
            assert_eq!(check(v11, &headers(&h)), Ok(()), "{h:?}");
        }
        // HTTP/1.0 may leave Host out.
        assert_eq!(check(Version::HTTP_10, &headers(&[])), Ok(()));
        let refused = [
            (vec![], FramingError::NoHost),
            (vec![("host", "a"), ("host", "a")], FramingError::ManyHosts),
            (vec![("host", "a"), ("host", "b")], FramingError::ManyHosts),
            (
                vec![("host", "a"), ("transfer-encoding", "identity, chunked")],
                FramingError::TransferEncoding,
            ),
            (
                vec![("host", "a"), ("transfer-encoding", "chunked, chunked")],
                FramingError::TransferEncoding,
            ),
            (
                vec![
                    ("host", "a"),
                    ("transfer-encoding", "chunked"),
                    ("transfer-encoding", "chunked"),
                ],
                FramingError::TransferEncoding,
            ),
            (
                vec![("host", "a"), ("transfer-encoding", "gzip")],
                FramingError::TransferEncoding,
            ),
            (
                vec![
                    ("host", "a"),
                    ("content-length", "5"),
                    ("content-length", "5"),
                ],
                FramingError::ContentLength,
            ),
            (
                vec![("host", "a"), ("content-length", "5, 5")],
                FramingError::ContentLength,
            ),
            (
                vec![("host", "a"), ("content-length", "+5")],
                FramingError::ContentLength,
            ),
        ];
        for (h, want) in refused {
            assert_eq!(check(v11, &headers(&h)), Err(want), "{h:?}");
        }
        assert_eq!(
            check(Version::HTTP_10, &headers(&[("host", "a"), ("host", "b")])),
            Err(FramingError::ManyHosts)
        );
    }

    /// The verdicts of every head seen, then one more: `Unknown` when it was lost.
    fn verdicts(scanner: &mut HeadScanner, heads: usize) -> Vec<Head> {
        (0..heads).map(|_| scanner.next_head()).collect()
    }

    #[test]
    fn the_scanner_follows_pipelined_requests_whatever_the_read_sizes() {
        let stream = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
                      \r\nPOST /b HTTP/1.1\r\nHost: x\r\ncontent-length: 3\r\nCONTENT-LENGTH: 3\r\n\r\nabc\
                      POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                      5;ext=1\r\nhe\r\nl\r\n0\r\nTrailer: y\r\n\r\n\
                      GET /d HTTP/1.1\r\nHost: x\r\n\r\n";
        // One read, then byte by byte: the same verdicts.
        for step in [stream.len(), 1, 3, 7] {
            let mut s = HeadScanner::default();
            for part in stream.as_bytes().chunks(step) {
                s.feed(part);
            }
            assert_eq!(
                verdicts(&mut s, 4),
                [Head::Clean, Head::RepeatedLength, Head::Clean, Head::Clean],
                "reads of {step}"
            );
        }
    }

    #[test]
    fn what_it_cannot_follow_makes_every_later_head_unknown() {
        let mut s = HeadScanner::default();
        s.feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        s.feed(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n");
        assert_eq!(verdicts(&mut s, 2), [Head::Clean, Head::Unknown]);
        // Found by review: a length padded past the kept bytes (hyper trims and reads it) once
        // made the scanner read the body as heads, and a fake clean head in the body passed a
        // later request with two lengths.
        let padded = format!(
            "POST / HTTP/1.1\r\nContent-Length:{}14\r\n\r\nX\r\n\r\nabcdefghi",
            " ".repeat(200)
        );
        let mut s = HeadScanner::default();
        s.feed(padded.as_bytes());
        s.feed(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx");
        assert_eq!(verdicts(&mut s, 2), [Head::Unknown, Head::Unknown]);
        // A chunk size padded past the kept bytes.
        let mut s = HeadScanner::default();
        s.feed(
            format!(
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{}5\r\n",
                "0".repeat(200)
            )
            .as_bytes(),
        );
        assert_eq!(verdicts(&mut s, 2), [Head::Clean, Head::Unknown]);
    }
}
