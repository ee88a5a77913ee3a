//! The one error type of the crate: every message names what is wrong and where.

use std::path::PathBuf;

/// Why a load run could not start, or a corpus could not be loaded.
///
/// Failures of individual requests during a run are not errors: they are counted in
/// [`crate::StatusCounts`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A [`crate::LoadSpec`] field is out of range.
    #[error("invalid load spec: `{field}` {reason}")]
    InvalidSpec {
        /// The offending field of [`crate::LoadSpec`].
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The target URL cannot be used.
    #[error("bad URL `{url}`: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The target host name did not resolve to any address.
    #[error("cannot resolve host `{host}`: {source}")]
    Resolve {
        /// Host name from the URL.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// A corpus file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A corpus file holds something that is not JSON.
    #[error("invalid JSON in {}, line {line} column {column}: {reason}", path.display())]
    InvalidJson {
        /// The file.
        path: PathBuf,
        /// 1-based line in the file.
        line: usize,
        /// 1-based column in that line (0 when unknown).
        column: usize,
        /// The parser's message.
        reason: String,
    },
    /// The corpus holds no request at all.
    #[error("empty corpus: {what}")]
    EmptyCorpus {
        /// Where nothing was found, e.g. "no *.json file in /some/dir".
        what: String,
    },
    /// An `https` target's TLS client cannot be set up (no roots, a bad CA file, a host that
    /// is no TLS server name).
    #[error("TLS: {reason}")]
    Tls {
        /// What is wrong, naming the file or host.
        reason: String,
    },
    /// A task of the load engine failed (a bug: a panic in a worker or the scheduler).
    #[error("internal error in the load engine: {0}")]
    Internal(String),
}
