//! Request bodies, sent round robin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::{LoadError, generate};

/// The request bodies of a run. Request number `n` of the schedule (warm-up included) carries
/// body `n % len()`.
///
/// A body that is a JSON object with a positive integer `tmax` (an OpenRTB bid request) has a
/// deadline: `tmax` milliseconds after its scheduled send time, the auction it asks for is over,
/// and a request still waiting for a connection then is dropped unsent instead of being sent
/// dead (see [`crate::LoadSpec::timeout`] for bodies without one).
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    bodies: Vec<Bytes>,
    /// Index-aligned with `bodies`: each one's `tmax`, when it has one.
    tmax: Vec<Option<Duration>>,
}

/// The one field of a body the generator reads.
#[derive(serde::Deserialize)]
struct Tmax {
    tmax: Option<serde_json::Value>,
}

/// `tmax` of a JSON object body, when it is a positive whole number of milliseconds.
fn tmax_of(body: &[u8]) -> Option<Duration> {
    let ms = serde_json::from_slice::<Tmax>(body).ok()?.tmax?.as_u64()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

impl Corpus {
    /// Loads bodies from a file or a directory.
    ///
    /// * A file holding one JSON document (pretty-printed or not) is one body, sent as written.
    /// * Any other file is JSON lines: every non-blank line is one body; an invalid line fails
    ///   the whole load with an error naming the file and the line.
    /// * A directory: every `*.json` file directly in it, in name order, each read as above.
    ///
    /// Bodies are checked to be JSON, not to be valid OpenRTB: sending malformed requests on
    /// purpose is a legitimate load test.
    pub fn from_path(path: &Path) -> Result<Corpus, LoadError> {
        let io = |source| LoadError::Io {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        let mut bodies = Vec::new();
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = Vec::new();
            for entry in std::fs::read_dir(path).map_err(io)? {
                let entry = entry.map_err(io)?;
                let p = entry.path();
                if p.extension().is_some_and(|e| e == "json") && p.is_file() {
                    files.push(p);
                }
            }
            if files.is_empty() {
                return Err(LoadError::EmptyCorpus {
                    what: format!("no *.json file in {}", path.display()),
                });
            }
            files.sort();
            for file in &files {
                load_file(file, &mut bodies)?;
            }
            if bodies.is_empty() {
                return Err(LoadError::EmptyCorpus {
                    what: format!("every *.json file in {} is blank", path.display()),
                });
            }
        } else {
            load_file(path, &mut bodies)?;
            if bodies.is_empty() {
                return Err(LoadError::EmptyCorpus {
                    what: format!("{} holds no request", path.display()),
                });
            }
        }
        Ok(Corpus::from_bodies(bodies))
    }

    /// `count` requests from [`generate::request`], seeded: the same `(seed, count, tmax_ms)`
    /// gives the same bytes (for a given build; the PRNG is rand's `SmallRng`).
    pub fn generated(seed: u64, count: usize, tmax_ms: u32) -> Corpus {
        let mut rng = SmallRng::seed_from_u64(seed);
        let bodies = (0..count as u64)
            .map(|seq| {
                let req = generate::request(&mut rng, seq, tmax_ms);
                Bytes::from(req.to_string())
            })
            .collect();
        Corpus::from_bodies(bodies)
    }

    /// Bodies as given, not checked (beyond reading each one's `tmax`).
    pub fn from_bodies(bodies: Vec<Bytes>) -> Corpus {
        let tmax = bodies.iter().map(|b| tmax_of(b)).collect();
        Corpus { bodies, tmax }
    }

    /// Number of bodies.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// True when there is no body; [`crate::run`] refuses such a corpus.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// All bodies, in sending order.
    pub fn bodies(&self) -> &[Bytes] {
        &self.bodies
    }

    /// The body for request number `seq` of a run.
    pub(crate) fn body(&self, seq: u64) -> Bytes {
        // Callers check `!is_empty()` before a run starts.
        let i = (seq % self.bodies.len() as u64) as usize;
        self.bodies[i].clone()
    }

    /// The `tmax` of request number `seq`'s body, when it has one.
    pub fn tmax(&self, seq: u64) -> Option<Duration> {
        if self.tmax.is_empty() {
            return None;
        }
        let i = (seq % self.tmax.len() as u64) as usize;
        self.tmax.get(i).copied().flatten()
    }
}

fn load_file(path: &Path, out: &mut Vec<Bytes>) -> Result<(), LoadError> {
    let data = std::fs::read(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let text = data.trim_ascii();
    if text.is_empty() {
        return Ok(());
    }
    // One document, possibly spanning lines.
    let whole = serde_json::from_slice::<serde::de::IgnoredAny>(text);
    if whole.is_ok() {
        out.push(Bytes::copy_from_slice(text));
        return Ok(());
    }
    let lines: Vec<(usize, &[u8])> = data
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_ascii()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    // A multi-line file whose first line is not JSON on its own is a broken single document:
    // report the parser's position in the file, not "line 1".
    let first_line_ok = lines
        .first()
        .is_some_and(|(_, l)| serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok());
    if !first_line_ok
        && lines.len() > 1
        && let Err(e) = whole
    {
        return Err(json_error(path, e.line(), e.column(), &e));
    }
    for (n, line) in lines {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(line) {
            return Err(json_error(path, n, e.column(), &e));
        }
        out.push(Bytes::copy_from_slice(line));
    }
    Ok(())
}

fn json_error(path: &Path, line: usize, column: usize, e: &serde_json::Error) -> LoadError {
    let msg = e.to_string();
    // serde_json appends " at line L column C"; the position is reported separately.
    let reason = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg,
    };
    LoadError::InvalidJson {
        path: path.to_owned(),
        line,
        column,
        reason,
    }
}
