//! The disk tier: one checksummed file per object (`record.rs`) under `dir/objects`, named by
//! the SHA-256 of its key, with an in-memory index of names and sizes kept in LRU order within
//! `max_bytes`.
//!
//! The index is rebuilt from the directory at start (oldest modification first), so the tier
//! survives a restart without reading every file. Files are written to `dir/tmp` and renamed
//! into place, so a reader sees a whole old file or a whole new one. Every read checks the
//! checksum and the key; a file that fails is deleted and counted, and the caller fetches the
//! object again. File work runs on tokio's blocking pool, never on the request path's threads.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::lru::Lru;
use crate::metrics::{Metrics, TierStats};
use crate::object::Object;
use crate::record;

/// What a read found.
#[derive(Debug)]
pub enum DiskRead {
    Found(Arc<Object>),
    Missing,
    /// There was a file, and it was refused and deleted.
    Corrupt,
}

/// The tier.
#[derive(Debug)]
pub struct DiskTier {
    objects: PathBuf,
    tmp: PathBuf,
    /// File name to file size.
    index: Mutex<Lru<()>>,
    writes: AtomicU64,
}

impl DiskTier {
    /// Opens (creating) the tier under `dir` and indexes what a previous run left, evicting the
    /// oldest files beyond `max_bytes`. Blocking: called once, before serving.
    ///
    /// # Errors
    /// The directory cannot be created or read.
    pub fn open(dir: &Path, max_bytes: u64, stats: &TierStats) -> io::Result<DiskTier> {
        let objects = dir.join("objects");
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&objects)?;
        // Half-written files of a run that died: never renamed into place, so never indexed.
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        let mut found = Vec::new();
        for shard in std::fs::read_dir(&objects)? {
            let shard = shard?;
            if !shard.file_type()?.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(shard.path())? {
                let file = file?;
                let meta = file.metadata()?;
                let name = file.file_name().to_string_lossy().into_owned();
                if meta.is_file() && is_object_name(&name) {
                    found.push((meta.modified().ok(), name, meta.len()));
                }
            }
        }
        found.sort();
        let tier = DiskTier {
            objects,
            tmp,
            index: Mutex::new(Lru::new(max_bytes)),
            writes: AtomicU64::new(0),
        };
        let mut evicted = Vec::new();
        {
            let mut index = telemetry::locks::lock(&tier.index);
            for (_, name, size) in found {
                evicted.extend(index.insert(name, (), size));
            }
            stats.bytes.set(index.weight());
            stats.objects.set(index.len() as u64);
        }
        for (name, ()) in &evicted {
            let _ = std::fs::remove_file(tier.path_of(name));
        }
        stats.evictions.add(evicted.len() as u64);
        Ok(tier)
    }

    /// Reads the object under `key`.
    pub async fn get(self: &Arc<Self>, key: &str, metrics: &Metrics) -> DiskRead {
        let name = name_of(key);
        let present = telemetry::locks::lock(&self.index).get(&name).is_some();
        if !present {
            return DiskRead::Missing;
        }
        let path = self.path_of(&name);
        let key = key.to_owned();
        let read = tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&path)?;
            Ok::<_, io::Error>(record::decode(Bytes::from(bytes), &key))
        })
        .await;
        match read {
            Ok(Ok(Ok(object))) => DiskRead::Found(Arc::new(object)),
            Ok(Ok(Err(e))) => {
                tracing::warn!(file = %name, error = %e, "disk entry refused; fetching it again");
                metrics.disk_corrupt.inc();
                self.forget(&name, &metrics.disk).await;
                DiskRead::Corrupt
            }
            // Gone since indexed (deleted by hand, say), or the blocking pool is shutting down.
            Ok(Err(_)) | Err(_) => {
                self.forget(&name, &metrics.disk).await;
                DiskRead::Missing
            }
        }
    }

    /// Writes `object` under `key`, evicting the least recently used files beyond the budget.
    /// A failed write is counted; the object is then simply not on disk.
    pub async fn put(self: &Arc<Self>, key: &str, object: &Object, metrics: &Metrics) {
        let name = name_of(key);
        let bytes = record::encode(key, object);
        let size = bytes.len() as u64;
        // Unique among concurrent writers of the same name: the tmp directory is this run's.
        let serial = self.writes.fetch_add(1, Relaxed);
        let tmp = self.tmp.join(format!("{name}.{serial}"));
        let path = self.path_of(&name);
        let written = tokio::task::spawn_blocking(move || {
            if let Some(shard) = path.parent() {
                std::fs::create_dir_all(shard)?;
            }
            std::fs::write(&tmp, &bytes)?;
            std::fs::rename(&tmp, &path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
        })
        .await;
        if !matches!(written, Ok(Ok(()))) {
            metrics.disk_write_failures.inc();
            return;
        }
        let stats = &metrics.disk;
        let evicted = {
            let mut index = telemetry::locks::lock(&self.index);
            let evicted = index.insert(name.clone(), (), size);
            stats.bytes.set(index.weight());
            stats.objects.set(index.len() as u64);
            evicted
        };
        let refused = evicted.iter().any(|(n, ())| *n == name);
        if !refused {
            stats.inserts.inc();
        }
        stats
            .evictions
            .add((evicted.len() - usize::from(refused)) as u64);
        let paths: Vec<PathBuf> = evicted.iter().map(|(n, ())| self.path_of(n)).collect();
        if !paths.is_empty() {
            let _ = tokio::task::spawn_blocking(move || {
                for p in paths {
                    let _ = std::fs::remove_file(p);
                }
            })
            .await;
        }
    }

    /// Drops a file and its index entry.
    async fn forget(&self, name: &str, stats: &TierStats) {
        {
            let mut index = telemetry::locks::lock(&self.index);
            index.remove(name);
            stats.bytes.set(index.weight());
            stats.objects.set(index.len() as u64);
        }
        let _ = tokio::fs::remove_file(self.path_of(name)).await;
    }

    /// Where the file of `name` lives: sharded by its first two hex digits, so no directory
    /// grows past a few thousand entries.
    fn path_of(&self, name: &str) -> PathBuf {
        self.objects.join(&name[..2]).join(name)
    }

    /// The file of `key` (tests corrupt it on purpose).
    pub fn file_of(&self, key: &str) -> PathBuf {
        self.path_of(&name_of(key))
    }
}

/// The file name of a key: its SHA-256 in hex, so any key (any length, any byte) is a safe
/// fixed-length name.
fn name_of(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let mut name = String::with_capacity(64);
    for b in digest {
        name.push_str(&format!("{b:02x}"));
    }
    name
}

fn is_object_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_fixed_length_hex_whatever_the_key() {
        for key in ["", "cdn/a.png", "../../etc/passwd", &"x".repeat(10_000)] {
            let name = name_of(key);
            assert!(is_object_name(&name), "{name}");
        }
        assert_ne!(name_of("a"), name_of("b"));
    }
}
