//! [`FileSink`]: records as rotating NDJSON files (`layout` names them and says when one is
//! complete). A completed file is gzipped beside the writer and never written again.
//!
//! Every batch is written to the OS in one `write` from a reused buffer (the batch is the write
//! buffer: no `BufWriter` is needed on top), on the blocking pool, so a slow disk stalls only
//! the writer task, never a runtime worker the request path needs. A batch that fails is cut
//! off the file again, so a file only ever holds whole records and the next batch can follow.
//!
//! Completing a file, on the blocking pool while the next file is written: `sync_data`, gzip
//! to `{name}.gz.tmp`, `fsync`, rename to `{name}.gz`, `fsync` the directory, remove the plain
//! file. A crash anywhere leaves the plain file (completed at the next start) or the whole
//! `.gz`, never a torn `.gz` under the completed name.
//!
//! Retention (`records.max_total_mb`, `records.max_age_days`): after each completion, at start
//! and once a minute, this server and node's oldest completed files are removed while its files
//! hold more than the size, and any last written longer ago than the age; each removal is
//! counted (`*_record_files_removed_total{reason}`) and logged. Other servers' and nodes' files
//! are theirs to bound.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flate2::Compression;
use flate2::write::GzEncoder;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use units::Timestamp;

use crate::layout::{self, Kept, Limits, Removal, Retention};
use crate::metrics::Metrics;
use crate::sink::{Line, Sink, SinkError};

/// The most files one run names (`seq` has six digits); past it the run takes a new start
/// stamp, so names keep sorting in write order.
const MAX_SEQ: u32 = 999_999;

/// Where and how the file sink writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileConfig {
    pub dir: PathBuf,
    /// `{server}-{node}` ([`layout::prefix`]).
    pub prefix: String,
    pub limits: Limits,
    pub retention: Retention,
}

/// How often retention runs while nothing completes (for the age).
const RETENTION_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Rotating NDJSON files in one directory.
#[derive(Debug)]
pub struct FileSink {
    config: FileConfig,
    /// The run's start stamp (`yyyymmddThhmmss`, UTC) and its next file's number.
    stamp: String,
    next_seq: u32,
    current: Option<Current>,
    /// Files being completed.
    completing: Vec<JoinHandle<()>>,
    /// The batch being written, reused.
    buf: Vec<u8>,
    metrics: Arc<Metrics>,
    /// When retention last ran from `tick`.
    retained_at: Instant,
}

/// The file being written.
#[derive(Debug)]
struct Current {
    path: PathBuf,
    file: File,
    /// Bytes in the file: whole records only.
    len: u64,
    opened: Instant,
}

fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> SinkError {
    let what = what.into();
    move |source| SinkError::Io { what, source }
}

/// The blocking pool's task failed to run to its end (it panicked or the runtime is going).
fn lost_task(what: &str, e: &tokio::task::JoinError) -> SinkError {
    SinkError::Other(format!("{what}: {e}"))
}

impl FileSink {
    /// Opens `config.dir` (made when missing) and completes the plain files a previous run of
    /// this server and node left there (a crash), before any new file is written. Files of
    /// other servers and nodes in the same directory are never touched.
    pub async fn open(config: FileConfig, metrics: Arc<Metrics>) -> Result<FileSink, SinkError> {
        let dir = config.dir.clone();
        let prefix = config.prefix.clone();
        let leftovers = tokio::task::spawn_blocking(move || complete_leftovers(&dir, &prefix))
            .await
            .map_err(|e| lost_task("completing leftover record files", &e))??;
        metrics.files_completed.add(leftovers);
        let (dir, prefix, retention) =
            (config.dir.clone(), config.prefix.clone(), config.retention);
        let m = metrics.clone();
        tokio::task::spawn_blocking(move || retain(&dir, &prefix, retention, 0, &m))
            .await
            .map_err(|e| lost_task("removing old record files", &e))?;
        Ok(FileSink {
            config,
            stamp: layout::stamp(Timestamp::now()),
            next_seq: 0,
            current: None,
            completing: Vec::new(),
            buf: Vec::new(),
            metrics,
            retained_at: Instant::now(),
        })
    }

    /// The file being written, if any.
    pub fn current_path(&self) -> Option<&Path> {
        self.current.as_ref().map(|c| c.path.as_path())
    }

    /// Opens the run's next file. A name already taken (a run started in the same second)
    /// is skipped, never appended to.
    async fn open_next(&mut self) -> Result<Current, SinkError> {
        loop {
            if self.next_seq > MAX_SEQ {
                self.stamp = layout::stamp(Timestamp::now());
                self.next_seq = 0;
            }
            let name = layout::file_name(&self.config.prefix, &self.stamp, self.next_seq);
            self.next_seq = self.next_seq.saturating_add(1);
            let path = self.config.dir.join(name);
            let open_path = path.clone();
            let opened = tokio::task::spawn_blocking(move || {
                OpenOptions::new()
                    .append(true)
                    .create_new(true)
                    .open(&open_path)
            })
            .await
            .map_err(|e| lost_task("opening a record file", &e))?;
            match opened {
                Ok(file) => {
                    return Ok(Current {
                        path,
                        file,
                        len: 0,
                        opened: Instant::now(),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    // Retry the same name with the next batch.
                    self.next_seq = self.next_seq.saturating_sub(1);
                    return Err(io_error(format!("creating {}", path.display()))(e));
                }
            }
        }
    }

    /// Completes the current file on the blocking pool, then applies retention; the next write
    /// opens a new one.
    fn complete_current(&mut self) {
        if let Some(current) = self.current.take() {
            let metrics = self.metrics.clone();
            let (dir, prefix, retention) = (
                self.config.dir.clone(),
                self.config.prefix.clone(),
                self.config.retention,
            );
            self.retained_at = Instant::now();
            self.completing.push(tokio::task::spawn_blocking(move || {
                let Current { path, file, .. } = current;
                let done = file.sync_data().and_then(|()| {
                    drop(file);
                    complete(&path)
                });
                match done {
                    Ok(()) => {
                        metrics.files_completed.inc();
                        // The next file holds nothing yet: the completed ones are the total.
                        retain(&dir, &prefix, retention, 0, &metrics);
                    }
                    Err(e) => tracing::warn!(
                        file = %path.display(),
                        error = %e,
                        "records: could not complete a record file; it stays plain and is completed at the next start"
                    ),
                }
            }));
        }
        self.completing.retain(|t| !t.is_finished());
    }

    /// Writes `lines` to `current` on the blocking pool; it stays current unless it may now
    /// end in part of a record.
    async fn append(&mut self, current: Current, lines: &[Line]) -> Result<(), SinkError> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for line in lines {
            buf.extend_from_slice(&line.bytes);
            buf.push(b'\n');
        }
        let (current, buf, written) = tokio::task::spawn_blocking(move || {
            let mut current = current;
            let written = append(&mut current, &buf);
            (current, buf, written)
        })
        .await
        .map_err(|e| lost_task("writing a record file", &e))?;
        self.buf = buf;
        let what = format!("writing {}", current.path.display());
        self.current = Some(current);
        match written {
            Ok(()) => Ok(()),
            Err(Failed { source, cut_back }) => {
                if !cut_back {
                    // Never written again; completed now (a reader skips a last line cut
                    // short).
                    self.complete_current();
                }
                Err(SinkError::Io { what, source })
            }
        }
    }

    /// Completes the current file if it is past its size or age.
    fn complete_if_old(&mut self) {
        if let Some(c) = &self.current
            && self
                .config
                .limits
                .complete(c.len, c.opened.elapsed())
                .is_some()
        {
            self.complete_current();
        }
    }
}

impl Sink for FileSink {
    /// Writes `lines` in order, completing a file as soon as it reaches its size (a batch may
    /// span files). A failure fails the whole call, though lines before it may be in a file:
    /// counted as dropped, they are read back all the same.
    async fn write(&mut self, lines: &[Line]) -> Result<(), SinkError> {
        let mut rest = lines;
        while !rest.is_empty() {
            self.complete_if_old();
            let current = match self.current.take() {
                Some(c) => c,
                None => self.open_next().await?,
            };
            // The lines that fit before the file reaches its size; at least one.
            let room = self.config.limits.max_bytes.saturating_sub(current.len);
            let mut size = 0u64;
            let fit = rest
                .iter()
                .take_while(|l| {
                    let fits = size < room;
                    size += l.bytes.len() as u64 + 1;
                    fits
                })
                .count()
                .max(1);
            let (now, later) = rest.split_at(fit.min(rest.len()));
            rest = later;
            self.append(current, now).await?;
            self.complete_if_old();
        }
        Ok(())
    }

    /// Nothing waits in memory between batches: every batch is in the OS when `write` returns.
    async fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    async fn tick(&mut self) -> Result<(), SinkError> {
        self.complete_if_old();
        self.completing.retain(|t| !t.is_finished());
        if self.retained_at.elapsed() >= RETENTION_EVERY {
            self.retained_at = Instant::now();
            let (dir, prefix, retention) = (
                self.config.dir.clone(),
                self.config.prefix.clone(),
                self.config.retention,
            );
            let current = self.current.as_ref().map_or(0, |c| c.len);
            let metrics = self.metrics.clone();
            self.completing.push(tokio::task::spawn_blocking(move || {
                retain(&dir, &prefix, retention, current, &metrics);
            }));
        }
        Ok(())
    }

    /// Completes the current file and waits for every file being completed.
    async fn close(&mut self) -> Result<(), SinkError> {
        self.complete_current();
        for task in std::mem::take(&mut self.completing) {
            task.await
                .map_err(|e| lost_task("completing a record file", &e))?;
        }
        Ok(())
    }
}

/// A batch that could not be written; `cut_back`: the file was cut back to its whole records.
struct Failed {
    source: io::Error,
    cut_back: bool,
}

fn append(current: &mut Current, bytes: &[u8]) -> Result<(), Failed> {
    match current.file.write_all(bytes) {
        Ok(()) => {
            current.len += bytes.len() as u64;
            Ok(())
        }
        Err(source) => {
            // Part of the batch may be in the file: cut it off (O_APPEND writes at the new end).
            let cut_back = current.file.set_len(current.len).is_ok();
            Err(Failed { source, cut_back })
        }
    }
}

/// Completes the plain file `plain`: gzipped beside it under a temporary name, made durable,
/// renamed to `{plain}.gz`, then the plain file removed. When the `.gz` exists already (a crash
/// after the rename), it is whole: only the plain file is removed.
pub fn complete(plain: &Path) -> io::Result<()> {
    let name = plain
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a record file name"))?;
    let gz = plain.with_file_name(layout::completed_name(name));
    if gz.exists() {
        return std::fs::remove_file(plain);
    }
    let tmp = plain.with_file_name(layout::temp_name(name));
    let compressed = (|| {
        let mut input = BufReader::new(File::open(plain)?);
        let out = BufWriter::new(File::create(&tmp)?);
        let mut encoder = GzEncoder::new(out, Compression::fast());
        io::copy(&mut input, &mut encoder)?;
        let file = encoder.finish()?.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    })();
    if let Err(e) = compressed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &gz)?;
    if let Some(dir) = gz.parent() {
        // The rename is durable before the plain file goes.
        File::open(dir)?.sync_all()?;
    }
    std::fs::remove_file(plain)
}

/// Removes `prefix`'s completed files in `dir` that `retention` lets go (`current`: bytes of the
/// file being written), counting and logging each. A file already gone (another removal ran
/// at once) is not counted; a directory that cannot be read is logged and tried next time.
fn retain(dir: &Path, prefix: &str, retention: Retention, current: u64, metrics: &Metrics) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "records: cannot list the record files to apply retention");
            return;
        }
    };
    let now = std::time::SystemTime::now();
    let kept: Vec<Kept> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !layout::is_completed_file_of(prefix, &name) {
                return None;
            }
            let meta = entry.metadata().ok()?;
            let age = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            Some(Kept {
                name,
                bytes: meta.len(),
                age,
            })
        })
        .collect();
    for (name, why) in retention.to_remove(&kept, current) {
        let path = dir.join(&name);
        let bytes = kept.iter().find(|k| k.name == name).map_or(0, |k| k.bytes);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                metrics.files_removed.inc(match why {
                    Removal::Size => crate::metrics::RemovalReason::Size,
                    Removal::Age => crate::metrics::RemovalReason::Age,
                });
                let limit = match why {
                    Removal::Size => "records.max_total_mb",
                    Removal::Age => "records.max_age_days",
                };
                tracing::warn!(file = %path.display(), bytes, "records: removed a completed record file, the oldest past {limit}");
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "records: could not remove an old record file")
            }
        }
    }
}

/// Completes the plain files of `prefix` in `dir` and removes its torn temporaries; returns
/// how many files it completed.
fn complete_leftovers(dir: &Path, prefix: &str) -> Result<u64, SinkError> {
    std::fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let entries = std::fs::read_dir(dir).map_err(io_error(format!("reading {}", dir.display())))?;
    let mut plain = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = name.strip_suffix(".gz.tmp")
            && layout::is_plain_file_of(prefix, base)
        {
            // A compression a crash cut short; its plain file is still there.
            let path = entry.path();
            std::fs::remove_file(&path)
                .map_err(io_error(format!("removing {}", path.display())))?;
        } else if layout::is_plain_file_of(prefix, name) {
            plain.push(entry.path());
        }
    }
    plain.sort();
    for path in &plain {
        complete(path).map_err(io_error(format!("completing {}", path.display())))?;
        tracing::info!(file = %path.display(), "records: completed a record file a previous run left");
    }
    Ok(plain.len() as u64)
}
