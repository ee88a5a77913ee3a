//! How each request is made beyond its body ([`HttpOptions`]): the method, extra headers, and
//! the roots an `https` target's certificate is checked against. Checked once before a run, so
//! that the workers copy prepared values and parse nothing per request.

use std::path::PathBuf;

use http::{HeaderName, HeaderValue, Method};

/// Most extra headers a run sends.
pub const MAX_HEADERS: usize = 32;
/// Longest extra header, name and value together, in bytes.
pub const MAX_HEADER_LEN: usize = 4096;

/// Headers the HTTP client sets itself from the URL and the body, or that would change how a
/// connection is framed or kept: sending them twice or differently would break the
/// measurement, not shape the request.
const RESERVED: [&str; 8] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// The method of every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpMethod {
    /// Without a body unless the corpus has one (the creative edge's asset path).
    Get,
    /// The corpus's bodies (bid requests by default).
    #[default]
    Post,
    /// Without a body; the answer has none either.
    Head,
}

impl HttpMethod {
    pub(crate) fn to_http(self) -> Method {
        match self {
            HttpMethod::Get => Method::GET,
            HttpMethod::Post => Method::POST,
            HttpMethod::Head => Method::HEAD,
        }
    }
}

/// Method, extra headers and TLS roots of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HttpOptions {
    pub method: HttpMethod,
    /// Extra headers of every request, `(name, value)`, at most [`MAX_HEADERS`] of at most
    /// [`MAX_HEADER_LEN`] bytes each; a valid token as the name, visible ASCII and spaces as
    /// the value; not `Host`, `Content-Length`, `Transfer-Encoding`, `Connection` or another
    /// header the client frames the connection by. `Content-Type` here replaces the
    /// `application/json` given to a body.
    pub headers: Vec<(String, String)>,
    /// An `https` target's certificate is checked against the PEM certificates in this file
    /// (a private CA) instead of the system's roots. Only with an `https` URL.
    pub ca_file: Option<PathBuf>,
}

impl HttpOptions {
    /// The extra headers, checked and made ready to copy into each request.
    ///
    /// # Errors
    /// Why the first bad header is refused, naming it.
    pub(crate) fn prepared_headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        if self.headers.len() > MAX_HEADERS {
            return Err(format!(
                "at most {MAX_HEADERS} headers, got {}",
                self.headers.len()
            ));
        }
        self.headers
            .iter()
            .map(|(name, value)| prepare(name, value).map_err(String::from))
            .collect()
    }
}

/// Why a `--header` was refused; each names the header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("`{0}`: expected `Name: value`")]
    NoColon(String),
    #[error("header `{0}`: longer than {MAX_HEADER_LEN} bytes")]
    TooLong(String),
    #[error("`{0}` is not a valid header name (a token: letters, digits, -)")]
    BadName(String),
    #[error(
        "header `{0}` is set by the client itself (from the URL, the body or the connection) and cannot be given"
    )]
    Reserved(String),
    #[error("header `{0}`: the value must be visible ASCII, spaces and tabs")]
    BadValue(String),
}

impl From<HeaderError> for String {
    fn from(e: HeaderError) -> String {
        e.to_string()
    }
}

/// Parses `Name: value` (as `--header` takes it) into its name and value, trimmed.
///
/// # Errors
/// Why it is refused.
pub fn parse_header(text: &str) -> Result<(String, String), HeaderError> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(HeaderError::NoColon(text.to_owned()));
    };
    let (name, value) = (name.trim(), value.trim());
    prepare(name, value)?;
    Ok((name.to_owned(), value.to_owned()))
}

fn prepare(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), HeaderError> {
    if name.len() + value.len() > MAX_HEADER_LEN {
        return Err(HeaderError::TooLong(
            name.get(..64).unwrap_or(name).to_owned(),
        ));
    }
    let parsed = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| HeaderError::BadName(name.to_owned()))?;
    if RESERVED.contains(&parsed.as_str()) {
        return Err(HeaderError::Reserved(name.to_owned()));
    }
    // Visible ASCII and spaces only: no control characters, no line breaks.
    if !value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    {
        return Err(HeaderError::BadValue(name.to_owned()));
    }
    let value = HeaderValue::from_str(value).map_err(|_| HeaderError::BadValue(name.to_owned()))?;
    Ok((parsed, value))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn headers_are_parsed_and_checked() {
        assert_eq!(
            parse_header("X-Seller:  abc 1 ").unwrap(),
            ("X-Seller".to_owned(), "abc 1".to_owned())
        );
        assert_eq!(
            parse_header("Accept-Encoding:").unwrap(),
            ("Accept-Encoding".to_owned(), String::new())
        );
        for (bad, why) in [
            ("X-Seller abc", "expected `Name: value`"),
            (": abc", "not a valid header name"),
            ("X Seller: abc", "not a valid header name"),
            ("Host: example.com", "set by the client"),
            ("content-length: 5", "set by the client"),
            ("Transfer-Encoding: chunked", "set by the client"),
            ("X-A: caf\u{e9}", "visible ASCII"),
            ("X-A: a\u{7f}", "visible ASCII"),
        ] {
            let e = parse_header(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let long = format!("X-Long: {}", "a".repeat(MAX_HEADER_LEN));
        assert!(matches!(
            parse_header(&long).unwrap_err(),
            HeaderError::TooLong(_)
        ));
    }

    #[test]
    fn too_many_headers_are_refused() {
        let mut o = HttpOptions {
            headers: (0..MAX_HEADERS)
                .map(|i| (format!("X-{i}"), "v".to_owned()))
                .collect(),
            ..HttpOptions::default()
        };
        assert_eq!(o.prepared_headers().unwrap().len(), MAX_HEADERS);
        o.headers.push(("X-More".to_owned(), "v".to_owned()));
        assert!(o.prepared_headers().unwrap_err().contains("at most 32"));
        // A header set in code rather than parsed is checked too.
        o.headers = vec![("Connection".to_owned(), "close".to_owned())];
        assert!(o.prepared_headers().unwrap_err().contains("Connection"));
    }
}
