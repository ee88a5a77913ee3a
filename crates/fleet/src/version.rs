//! Which configuration a server serves now: from its local file or from the bucket, at which
//! revision, since when; and the pushed document in force, which a later file reload keeps
//! (the bucket wins over the file while it holds a value). Pure: no I/O, time passed in.

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest, Sha256};
use units::Timestamp;

/// Where the configuration in force came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The local file (the embedded default, and what serves without NATS).
    File,
    /// The fleet's bucket.
    Nats,
}

impl Source {
    /// The `source` label of `gavel_*_config_version`.
    pub fn label(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Nats => "nats",
        }
    }
}

/// What the admin pages show as `"config"` and `/metrics` as `*_config_version`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigVersion {
    pub source: Source,
    /// The bucket's revision of the key (`nats`), or how many times the file was applied
    /// since start (`file`: 1 at start).
    pub revision: u64,
    /// When it was applied (RFC 3339, UTC).
    pub applied_at: String,
    /// A pushed document's signed serial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    /// The id of the key that signed a pushed document (`ed25519:...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

/// A pushed document in force: its revision, its signed serial and signer, and its bytes
/// (the document, its signature checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    pub revision: u64,
    pub serial: u64,
    pub signer: String,
    pub value: Bytes,
}

#[derive(Debug)]
struct Inner {
    version: ConfigVersion,
    file_loads: u64,
    pushed: Option<Pushed>,
}

/// The configuration version a server serves, shared by its reload path, its follower, its
/// metrics and its admin page. Changes are rare (a reload), reads are a scrape: a short lock.
#[derive(Debug)]
pub struct Served(Mutex<Inner>);

impl Served {
    /// Served from the local file, loaded once at `now`.
    pub fn from_file(now: Timestamp) -> Served {
        Served(Mutex::new(Inner {
            version: ConfigVersion {
                source: Source::File,
                revision: 1,
                applied_at: now.to_rfc3339(),
                serial: None,
                signer: None,
            },
            file_loads: 1,
            pushed: None,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change below leaves the value whole before anything that could panic.
        telemetry::locks::lock(&self.0)
    }

    /// The version in force.
    pub fn version(&self) -> ConfigVersion {
        self.lock().version.clone()
    }

    /// The pushed document in force, if the bucket's value is what serves.
    pub fn pushed(&self) -> Option<Pushed> {
        self.lock().pushed.clone()
    }

    /// The local file was applied at `now` with no pushed document in force (or the bucket's
    /// value was removed).
    pub fn file_applied(&self, now: Timestamp) {
        let mut inner = self.lock();
        inner.file_loads = inner.file_loads.saturating_add(1);
        inner.pushed = None;
        inner.version = ConfigVersion {
            source: Source::File,
            revision: inner.file_loads,
            applied_at: now.to_rfc3339(),
            serial: None,
            signer: None,
        };
    }

    /// A pushed document was applied at `now`.
    pub fn push_applied(&self, pushed: Pushed, now: Timestamp) {
        let mut inner = self.lock();
        inner.version = ConfigVersion {
            source: Source::Nats,
            revision: pushed.revision,
            applied_at: now.to_rfc3339(),
            serial: Some(pushed.serial),
            signer: Some(pushed.signer.clone()),
        };
        inner.pushed = Some(pushed);
    }
}

/// `sha256:<hex>` of a document: what `gavel config show` prints to compare with a file.
pub fn digest(value: &[u8]) -> String {
    let hash = Sha256::digest(value);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_what_was_applied() {
        let served = Served::from_file(Timestamp(0));
        assert_eq!(served.version().source, Source::File);
        assert_eq!(served.version().revision, 1);
        assert_eq!(served.version().applied_at, "1970-01-01T00:00:00Z");
        let doc = Pushed {
            revision: 7,
            serial: 1_764_000_000_000,
            signer: "ed25519:0123456789abcdef".into(),
            value: Bytes::from_static(b"x"),
        };
        served.push_applied(doc.clone(), Timestamp(1_000));
        assert_eq!(served.version().source, Source::Nats);
        assert_eq!(served.version().revision, 7);
        assert_eq!(served.version().serial, Some(1_764_000_000_000));
        assert_eq!(served.pushed(), Some(doc));
        served.file_applied(Timestamp(2_000));
        assert_eq!(served.version().source.label(), "file");
        assert_eq!(served.version().revision, 2, "the file's second load");
        assert_eq!(served.pushed(), None);
    }

    #[test]
    fn digest_is_sha256_hex() {
        // The SHA-256 of the empty string, as every implementation gives it.
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
