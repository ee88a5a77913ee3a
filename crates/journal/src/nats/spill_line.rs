//! One line of the spill file, `id\tjson\n`, and back. Pure: the file itself is `spill.rs`'s.
//!
//! The id leads so a replay can publish with the same `Nats-Msg-Id` as the first attempt; the
//! tab separates it from the JSON, which never holds a raw tab or newline as Gavel writes it.

use crate::sink::Line;

/// Longest id a line may carry: ids are `{instance}-{seq}`, far shorter; a NATS header value
/// past this is not one Gavel made.
pub const MAX_ID_BYTES: usize = 256;

/// Why a line cannot be spilled or published (it would split or corrupt the spill file or the
/// message's headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadLine {
    /// The id is empty, longer than [`MAX_ID_BYTES`], or holds a tab, CR or LF.
    Id,
    /// The record holds a newline.
    Newline,
}

impl BadLine {
    pub fn label(self) -> &'static str {
        match self {
            BadLine::Id => "an id that is empty, too long, or holds a tab or line break",
            BadLine::Newline => "a line break inside the record",
        }
    }
}

/// Whether `line` can travel: as a spill line and as a message with its id header.
pub fn check(line: &Line) -> Result<(), BadLine> {
    let id = line.id.as_bytes();
    if id.is_empty()
        || id.len() > MAX_ID_BYTES
        || id.iter().any(|b| matches!(b, b'\t' | b'\r' | b'\n'))
    {
        return Err(BadLine::Id);
    }
    if line.bytes.iter().any(|&b| b == b'\n' || b == b'\r') {
        return Err(BadLine::Newline);
    }
    Ok(())
}

/// Appends `line` as `id\tjson\n` to `out`.
pub fn encode(line: &Line, out: &mut Vec<u8>) -> Result<(), BadLine> {
    check(line)?;
    out.reserve(line.id.len() + line.bytes.len() + 2);
    out.extend_from_slice(line.id.as_bytes());
    out.push(b'\t');
    out.extend_from_slice(&line.bytes);
    out.push(b'\n');
    Ok(())
}

/// The line in `text` (one spill line, its newline removed); `None` when it is not one.
pub fn decode(text: &[u8]) -> Option<Line> {
    let tab = text.iter().position(|&b| b == b'\t')?;
    let id = std::str::from_utf8(text.get(..tab)?).ok()?;
    let bytes = text.get(tab + 1..)?.to_vec();
    let line = Line {
        id: id.to_owned(),
        bytes,
    };
    check(&line).ok()?;
    Some(line)
}

/// The bytes `line` takes in the spill.
pub fn encoded_len(line: &Line) -> u64 {
    (line.id.len() + line.bytes.len() + 2) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, json: &str) -> Line {
        Line {
            id: id.to_owned(),
            bytes: json.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_line_round_trips_and_takes_its_encoded_length() {
        let l = line("exch-1-42", r#"{"kind":"notice","note":"a\tb"}"#);
        let mut out = Vec::new();
        encode(&l, &mut out).unwrap();
        assert_eq!(out.len() as u64, encoded_len(&l));
        assert_eq!(out.last(), Some(&b'\n'));
        let back = decode(out.strip_suffix(b"\n").unwrap()).unwrap();
        assert_eq!(back, l);
    }

    #[test]
    fn lines_that_would_corrupt_the_file_or_the_header_are_refused() {
        let mut out = Vec::new();
        assert_eq!(encode(&line("", "{}"), &mut out), Err(BadLine::Id));
        assert_eq!(encode(&line("a\tb", "{}"), &mut out), Err(BadLine::Id));
        assert_eq!(encode(&line("a\r", "{}"), &mut out), Err(BadLine::Id));
        assert_eq!(
            encode(&line(&"x".repeat(MAX_ID_BYTES + 1), "{}"), &mut out),
            Err(BadLine::Id)
        );
        assert_eq!(encode(&line("a", "{\n}"), &mut out), Err(BadLine::Newline));
        assert!(out.is_empty());
        assert_eq!(decode(b"no tab here"), None);
        assert_eq!(decode(b"\t{}"), None);
    }
}
