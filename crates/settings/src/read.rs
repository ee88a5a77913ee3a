//! [`read_bounded`]: a configuration file read whole, refused beyond a size limit.

use std::io::Read as _;
use std::path::Path;

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{path} is larger than the limit of {limit} bytes")]
    TooLarge { path: String, limit: usize },
    #[error("{path} is not UTF-8 text")]
    NotText { path: String },
}

impl ReadError {
    /// Bounded metric label.
    pub const fn label(&self) -> &'static str {
        match self {
            ReadError::Io { .. } => "io",
            ReadError::TooLarge { .. } => "too_large",
            ReadError::NotText { .. } => "not_text",
        }
    }
}

/// Reads the file at `path`, refusing it when it holds more than `limit` bytes. At most
/// `limit + 1` bytes are read, whatever the file's metadata says: a file may grow while it is
/// read, and a device or pipe has no size.
pub fn read_bounded_bytes(path: &Path, limit: usize) -> Result<Vec<u8>, ReadError> {
    let io = |e: std::io::Error| ReadError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > limit {
        return Err(ReadError::TooLarge {
            path: path.display().to_string(),
            limit,
        });
    }
    Ok(bytes)
}

/// `path` as a file named in a configuration means it: relative to the configuration file's
/// directory `dir` when there is one, as written otherwise.
pub fn relative_to(dir: Option<&Path>, path: &Path) -> std::path::PathBuf {
    match dir {
        Some(d) if path.is_relative() => d.join(path),
        _ => path.to_owned(),
    }
}

/// [`read_bounded_bytes`], as UTF-8 text.
pub fn read_bounded(path: &Path, limit: usize) -> Result<String, ReadError> {
    String::from_utf8(read_bounded_bytes(path, limit)?).map_err(|_| ReadError::NotText {
        path: path.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_are_read_and_large_missing_or_binary_ones_say_why() {
        let dir = testkit::TempDir::new("settings-read");
        let small = dir.file("a.toml", "x = 1\n");
        assert_eq!(read_bounded(&small, 6).as_deref(), Ok("x = 1\n"));
        let e = read_bounded(&small, 5).unwrap_err();
        assert_eq!(e.label(), "too_large");
        assert!(e.to_string().ends_with("the limit of 5 bytes"), "{e}");
        let e = read_bounded(&dir.join("missing.toml"), 5).unwrap_err();
        assert_eq!(e.label(), "io");
        assert!(e.to_string().starts_with("cannot read "), "{e}");
        let binary = dir.join("b.toml");
        std::fs::write(&binary, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_bounded(&binary, 5).map_err(|e| e.label()),
            Err("not_text")
        );
        assert_eq!(read_bounded_bytes(&binary, 5), Ok(vec![0xff, 0xfe]));
    }
}
