//! Reading records back from files: the NDJSON files the file sink writes, completed
//! (`.ndjson.gz`) or current (`.ndjson`), and directories of them (read in name order, which
//! is the order they were written). A record met again (the same directory given twice, a
//! file and its copy) is dropped and counted (`ReadStats::duplicates`, `records::identity`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use records::identity::Distinct;
use records::{MAX_LINE_BYTES, Record, RecordError, from_line};
use thiserror::Error;

/// Why records could not be read.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} line {line}: {source}")]
    Record {
        path: PathBuf,
        line: u64,
        #[source]
        source: RecordError,
    },
}

/// What a read went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub files: u64,
    /// Records handed over, each once.
    pub records: u64,
    /// Records met again and dropped.
    pub duplicates: u64,
    /// Records without an id read past `records::identity::MAX_DIGESTS`, not checked for
    /// copies (only files written before ids were can hold them).
    pub unchecked: u64,
}

/// The record files under `paths`: each file as given, each directory's `*.ndjson` and
/// `*.ndjson.gz` files in name order.
pub fn record_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ReadError> {
    let mut files = Vec::new();
    for path in paths {
        let io = |source| ReadError::Io {
            path: path.clone(),
            source,
        };
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(io)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_record_file(p))
                .collect();
            // A plain file beside its completed `.gz` is one being completed right now: the
            // `.gz` holds the same records.
            let completed: std::collections::HashSet<PathBuf> = found
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "gz"))
                .cloned()
                .collect();
            found.retain(|p| {
                let mut gz = p.clone().into_os_string();
                gz.push(".gz");
                !completed.contains(&PathBuf::from(gz))
            });
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn is_record_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".ndjson") || name.ends_with(".ndjson.gz")
}

/// Calls `each` with every record of `paths` (see [`record_files`]), in order. A line that is
/// not a record stops the read with its file and line number: a billing record is never
/// skipped silently. A last line cut short (the file being written) is not an error.
pub fn read_paths(paths: &[PathBuf], each: impl FnMut(Record)) -> Result<ReadStats, ReadError> {
    read_paths_with(paths, &mut Distinct::new(), each)
}

/// [`read_paths`], the records already seen in `seen` (another read, a stream) dropped too.
pub fn read_paths_with(
    paths: &[PathBuf],
    seen: &mut Distinct,
    mut each: impl FnMut(Record),
) -> Result<ReadStats, ReadError> {
    let mut stats = ReadStats::default();
    for path in record_files(paths)? {
        let io = |source| ReadError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(MultiGzDecoder::new(file))
        } else {
            Box::new(file)
        };
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        let mut n = 0u64;
        loop {
            line.clear();
            let read = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 2)
                .read_until(b'\n', &mut line)
                .map_err(io)?;
            if read == 0 {
                break;
            }
            n += 1;
            let complete = line.last() == Some(&b'\n');
            if !complete && read <= MAX_LINE_BYTES {
                // The current file's last line, still being written.
                break;
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                continue;
            }
            let record = from_line(text).map_err(|source| ReadError::Record {
                path: path.clone(),
                line: n,
                source,
            })?;
            let unchecked = seen.unchecked;
            let first = seen.first(text);
            stats.unchecked += seen.unchecked - unchecked;
            if !first {
                stats.duplicates += 1;
                continue;
            }
            stats.records += 1;
            each(record);
        }
        stats.files += 1;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    const NOTICE: &str = r#"{"kind":"notice","v":1,"auction":"a","bidder":"b","notice":"win","outcome":"sent","at_ms":1}"#;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("journal-read-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_directory_reads_completed_and_current_files_in_order() {
        let dir = temp_dir("order");
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        writeln!(gz, "{}", NOTICE.replace("\"a\"", "\"first\"")).unwrap();
        std::fs::write(dir.join("r-0001.ndjson.gz"), gz.finish().unwrap()).unwrap();
        // The current file: its last line is still being written.
        let current = format!(
            "{}\n{}",
            NOTICE.replace("\"a\"", "\"second\""),
            &NOTICE[..20]
        );
        std::fs::write(dir.join("r-0002.ndjson"), current).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a record file").unwrap();
        let mut seen = Vec::new();
        let stats = read_paths(std::slice::from_ref(&dir), |r| {
            if let Record::Notice(n) = r {
                seen.push(n.auction);
            }
        })
        .unwrap();
        assert_eq!(seen, ["first", "second"]);
        assert_eq!(
            stats,
            ReadStats {
                files: 2,
                records: 2,
                duplicates: 0,
                unchecked: 0
            }
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_plain_file_beside_its_completed_gz_is_read_once() {
        // The file sink removes the plain file just after the rename: a reader in between
        // sees both.
        let dir = temp_dir("both");
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        writeln!(gz, "{NOTICE}").unwrap();
        std::fs::write(dir.join("r-0001.ndjson.gz"), gz.finish().unwrap()).unwrap();
        std::fs::write(dir.join("r-0001.ndjson"), format!("{NOTICE}\n")).unwrap();
        let stats = read_paths(std::slice::from_ref(&dir), |_| {}).unwrap();
        assert_eq!(
            stats,
            ReadStats {
                files: 1,
                records: 1,
                duplicates: 0,
                unchecked: 0
            }
        );
        // The file given again beside its directory: its record is read once.
        let twice = [dir.clone(), dir.join("r-0001.ndjson.gz")];
        let stats = read_paths(&twice, |_| {}).unwrap();
        assert_eq!((stats.records, stats.duplicates), (1, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_line() {
        let dir = temp_dir("bad");
        let path = dir.join("r.ndjson");
        std::fs::write(&path, format!("{NOTICE}\n\n{{\"kind\":\"nope\"}}\n")).unwrap();
        let err = read_paths(&[path], |_| {}).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("r.ndjson line 3"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
