//! [`TempDir`]: a fresh, empty directory under the system's temporary directory, removed with
//! everything in it when dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A fresh directory, removed on drop. Names hold the process id and a counter, so parallel
/// tests and runs never share one.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `gavel-{name}-{pid}-{n}`.
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Relaxed);
        let dir = std::env::temp_dir().join(format!("gavel-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("cannot create {}: {e}", dir.display());
        }
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `content` to `name` inside the directory; returns its path.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Err(e) = std::fs::write(&path, content) {
            panic!("cannot write {}: {e}", path.display());
        }
        path
    }
}

/// A `&TempDir` is usable wherever a `&Path` is.
impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_directory_is_fresh_and_goes_away_on_drop() {
        let a = TempDir::new("kit");
        let b = TempDir::new("kit");
        assert_ne!(a.path(), b.path());
        let file = a.file("x.txt", "hello");
        assert_eq!(
            std::fs::read_to_string(&file).ok().as_deref(),
            Some("hello")
        );
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists());
    }
}
