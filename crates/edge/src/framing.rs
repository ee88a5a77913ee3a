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
//!
//! hyper folds a second `Content-Length` line equal to the first into one before any handler
//! sees the headers, so that case is counted on the bytes themselves: a [`HeadScanner`] follows
//! what a connection reads, request by request (heads, then bodies by their length or chunks),
//! and says of each head whether it held more than one `Content-Length` line.
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

/// Bytes of a line kept: enough for a header's name and a length or a chunk size.
const LINE_KEPT: usize = 64;
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
    /// Something it cannot follow (hyper refuses the message anyway): it stops.
    Lost,
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
    /// The next head's verdict, in the order the heads were read: `Some(true)` when it held
    /// more than one `Content-Length` line; `None` when the scanner could not follow.
    pub fn next_head(&mut self) -> Option<bool> {
        self.verdicts.pop_front()
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
            if self.length.is_none() {
                // hyper reads the first one; a bad one it refuses (and so the scan is moot).
                self.length = std::str::from_utf8(value)
                    .ok()
                    .filter(|_| whole)
                    .and_then(|v| v.parse().ok());
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

    fn verdicts(scanner: &mut HeadScanner) -> Vec<bool> {
        std::iter::from_fn(|| scanner.next_head()).collect()
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
                verdicts(&mut s),
                [false, true, false, false],
                "reads of {step}"
            );
        }
    }

    #[test]
    fn what_it_cannot_follow_stops_it_without_a_verdict() {
        let mut s = HeadScanner::default();
        s.feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        s.feed(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n");
        assert_eq!(verdicts(&mut s), [false]);
    }
}
