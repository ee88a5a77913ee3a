//! The spill: the records the NATS sink could not get acknowledged, in order, in one
//! append-only file (`spill_dir/records.spill`, lines of `id\tjson\n`, see `spill_line`), fsynced
//! per batch. The writer appends to its end; the replayer reads from a cursor and publishes;
//! once the cursor reaches the end the file is removed and direct publishing resumes.
//!
//! Blocking file I/O: the sink calls this from `spawn_blocking`, never on a runtime thread.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use records::MAX_LINE_BYTES;

use super::spill_line::{self, BadLine, MAX_ID_BYTES};
use crate::sink::Line;

/// The spill file's name inside `spill_dir`.
pub const SPILL_FILE: &str = "records.spill";

/// Longest spill line a replay accepts (id, tab, record, newline).
const MAX_SPILL_LINE: usize = MAX_LINE_BYTES + MAX_ID_BYTES + 2;

/// The spill file and where the replay has got to.
#[derive(Debug)]
pub struct Spill {
    path: PathBuf,
    /// Open for appending while the spill holds anything.
    file: Option<File>,
    /// Bytes in the file: complete lines only.
    len: u64,
    /// Bytes at the front already published and acknowledged.
    replayed: u64,
    /// Most bytes the file may hold.
    max_bytes: u64,
}

/// What an append did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    pub kept: u64,
    /// Refused: past `max_bytes` or not a line that can travel (`spill_line::check`).
    pub dropped_full: u64,
    pub dropped_bad: u64,
    pub bad: Option<BadLine>,
}

/// A run of lines read from the cursor, each with the bytes it takes in the file.
#[derive(Debug, Default)]
pub struct Chunk {
    pub lines: Vec<Line>,
    pub sizes: Vec<u64>,
    /// Lines at the cursor that are not spill lines (a damaged file): skipped, counted.
    pub skipped: u64,
    /// Bytes of the skipped lines.
    pub skipped_bytes: u64,
}

impl Spill {
    /// Opens the spill in `dir` (created if missing). A file left by an earlier run is kept to
    /// be replayed; a last line cut short by a crash is cut off.
    pub fn open(dir: &Path, max_bytes: u64) -> std::io::Result<Spill> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(SPILL_FILE);
        let mut spill = Spill {
            path,
            file: None,
            len: 0,
            replayed: 0,
            max_bytes,
        };
        if spill.path.exists() {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&spill.path)?;
            let complete = complete_len(&mut file)?;
            file.set_len(complete)?;
            file.sync_all()?;
            if complete == 0 {
                drop(file);
                std::fs::remove_file(&spill.path)?;
            } else {
                file.seek(SeekFrom::End(0))?;
                spill.file = Some(file);
                spill.len = complete;
            }
        }
        Ok(spill)
    }

    /// Whether records wait in the spill: new records must go behind them.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes waiting to be replayed.
    pub fn pending_bytes(&self) -> u64 {
        self.len.saturating_sub(self.replayed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `lines` in order and fsyncs. A line past `max_bytes` is dropped (counted); the
    /// lines after it that still fit are kept.
    pub fn append(&mut self, lines: &[Line]) -> std::io::Result<Appended> {
        let mut out = Vec::new();
        let mut appended = Appended::default();
        for line in lines {
            let size = spill_line::encoded_len(line);
            if self.len + out.len() as u64 + size > self.max_bytes {
                appended.dropped_full += 1;
                continue;
            }
            match spill_line::encode(line, &mut out) {
                Ok(()) => appended.kept += 1,
                Err(bad) => {
                    appended.dropped_bad += 1;
                    appended.bad = Some(bad);
                }
            }
        }
        if out.is_empty() {
            return Ok(appended);
        }
        let file = match self.file.take() {
            Some(file) => file,
            None => OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?,
        };
        let file = self.file.insert(file);
        if let Err(e) = file.write_all(&out).and_then(|()| file.sync_data()) {
            // A part of the batch may be on disk: cut back to the lines we know of, so the
            // file never holds a half line.
            let _ = file.set_len(self.len);
            return Err(e);
        }
        self.len += out.len() as u64;
        Ok(appended)
    }

    /// Up to `max_lines` lines (and about `max_bytes`, at least one line) from the cursor.
    pub fn read_chunk(&self, max_lines: usize, max_bytes: u64) -> std::io::Result<Chunk> {
        let mut chunk = Chunk::default();
        if self.pending_bytes() == 0 {
            return Ok(chunk);
        }
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(self.replayed))?;
        let mut reader = BufReader::new(file.take(self.pending_bytes()));
        let mut buf = Vec::new();
        let mut bytes = 0u64;
        while chunk.lines.len() < max_lines && bytes < max_bytes {
            buf.clear();
            let n = (&mut reader)
                .take(MAX_SPILL_LINE as u64 + 1)
                .read_until(b'\n', &mut buf)?;
            if n == 0 {
                break;
            }
            bytes += n as u64;
            let text = buf.strip_suffix(b"\n");
            match text.and_then(spill_line::decode) {
                Some(line) => {
                    chunk.lines.push(line);
                    chunk.sizes.push(n as u64);
                }
                None if chunk.lines.is_empty() => {
                    chunk.skipped += 1;
                    chunk.skipped_bytes += n as u64;
                }
                // Published first, skipped on the next read: the cursor moves line by line.
                None => break,
            }
        }
        Ok(chunk)
    }

    /// Moves the cursor past `bytes` published (or skipped) bytes. When it reaches the end the
    /// file is removed: the spill is empty and direct publishing may resume.
    pub fn advance(&mut self, bytes: u64) -> std::io::Result<()> {
        self.replayed = (self.replayed + bytes).min(self.len);
        if self.replayed == self.len && self.len > 0 {
            self.file = None;
            std::fs::remove_file(&self.path)?;
            self.len = 0;
            self.replayed = 0;
        }
        Ok(())
    }
}

/// The length of `file` up to and including its last newline.
fn complete_len(file: &mut File) -> std::io::Result<u64> {
    const STEP: u64 = 64 * 1024;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = vec![0u8; STEP as usize];
    while end > 0 {
        let start = end.saturating_sub(STEP);
        let window = buf.get_mut(..(end - start) as usize).unwrap_or_default();
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(window)?;
        if let Some(i) = window.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: u32) -> Line {
        Line {
            id: format!("t-{i}"),
            bytes: format!(r#"{{"n":{i}}}"#).into_bytes(),
        }
    }

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("journal-spill-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn lines_come_back_in_order_and_the_file_goes_when_all_are_replayed() {
        let dir = dir("order");
        let mut spill = Spill::open(&dir, 1 << 20).unwrap();
        assert!(spill.is_empty());
        let lines: Vec<Line> = (0..10).map(line).collect();
        assert_eq!(spill.append(&lines[..4]).unwrap().kept, 4);
        assert_eq!(spill.append(&lines[4..]).unwrap().kept, 6);
        let first = spill.read_chunk(3, u64::MAX).unwrap();
        assert_eq!(first.lines, lines[..3]);
        spill.advance(first.sizes.iter().sum()).unwrap();
        let rest = spill.read_chunk(100, u64::MAX).unwrap();
        assert_eq!(rest.lines, lines[3..]);
        assert!(spill.path().exists());
        spill.advance(rest.sizes.iter().sum()).unwrap();
        assert!(spill.is_empty());
        assert!(!spill.path().exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_spill_left_behind_is_reopened_without_its_torn_last_line() {
        let dir = dir("torn");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(SPILL_FILE),
            "a-1\t{\"n\":1}\na-2\t{\"n\":2}\na-3\t{\"n",
        )
        .unwrap();
        let spill = Spill::open(&dir, 1 << 20).unwrap();
        assert!(!spill.is_empty());
        let chunk = spill.read_chunk(100, u64::MAX).unwrap();
        let ids: Vec<&str> = chunk.lines.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["a-1", "a-2"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn past_the_bound_lines_are_dropped_and_counted() {
        let dir = dir("full");
        let one = spill_line::encoded_len(&line(0));
        let mut spill = Spill::open(&dir, one * 3).unwrap();
        let lines: Vec<Line> = (0..5).map(line).collect();
        let appended = spill.append(&lines).unwrap();
        assert_eq!((appended.kept, appended.dropped_full), (3, 2));
        assert_eq!(spill.pending_bytes(), one * 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_line_is_skipped_alone() {
        let dir = dir("damaged");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SPILL_FILE), "a-1\t{}\ngarbage\na-3\t{}\n").unwrap();
        let mut spill = Spill::open(&dir, 1 << 20).unwrap();
        let first = spill.read_chunk(100, u64::MAX).unwrap();
        assert_eq!(first.lines.len(), 1);
        spill.advance(first.sizes.iter().sum()).unwrap();
        let second = spill.read_chunk(100, u64::MAX).unwrap();
        assert_eq!((second.skipped, second.lines.len()), (1, 1));
        assert_eq!(second.lines.first().map(|l| l.id.as_str()), Some("a-3"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
