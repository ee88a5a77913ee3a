//! Reading a campaign file: JSON or TOML text to [`CampaignSpec`]s, with errors that give the
//! document path (through `serde_path_to_error`) and the line and column.
//!
//! Paths are rewritten so that both formats name a campaign the same way: the JSON array's
//! `[3].bid.cpm` and TOML's `campaign[3].bid.cpm` both read `campaigns[3].bid.cpm`, which is
//! also how validation errors name fields.

use std::path::Path;

use serde_path_to_error::Segment;

use crate::error::CampaignError;
use crate::limits::MAX_FILE_BYTES;
use crate::schema::{CampaignFile, CampaignSpec};

/// Which syntax a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Toml,
}

impl Format {
    /// By extension, case-insensitively: `.json` or `.toml`.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?;
        if ext.eq_ignore_ascii_case("json") {
            Some(Format::Json)
        } else if ext.eq_ignore_ascii_case("toml") {
            Some(Format::Toml)
        } else {
            None
        }
    }
}

/// Parses the bytes of a campaign file in `format` (at most [`MAX_FILE_BYTES`]).
pub fn parse_bytes(format: Format, bytes: &[u8]) -> Result<Vec<CampaignSpec>, CampaignError> {
    match format {
        Format::Json => parse_json(bytes),
        Format::Toml => {
            check_size(bytes.len())?;
            let text = std::str::from_utf8(bytes).map_err(|e| {
                let (line, column) = line_column(bytes, e.valid_up_to());
                CampaignError::Parse {
                    path: String::new(),
                    line,
                    column,
                    message: "file is not valid UTF-8".to_owned(),
                }
            })?;
            parse_toml(text)
        }
    }
}

fn check_size(len: usize) -> Result<(), CampaignError> {
    if u64::try_from(len).unwrap_or(u64::MAX) > MAX_FILE_BYTES {
        return Err(CampaignError::FileTooLarge {
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(())
}

/// Parses JSON: a top-level array of campaigns, or an object `{"campaign": [...]}`.
pub fn parse_json(bytes: &[u8]) -> Result<Vec<CampaignSpec>, CampaignError> {
    check_size(bytes.len())?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = if first == Some(&b'{') {
        serde_path_to_error::deserialize::<_, CampaignFile>(&mut de).map(|f| f.campaign)
    } else {
        serde_path_to_error::deserialize::<_, Vec<CampaignSpec>>(&mut de)
    };
    let specs = parsed.map_err(|e| {
        let path = campaign_path(e.path());
        let inner = e.into_inner();
        CampaignError::Parse {
            path,
            line: inner.line(),
            column: inner.column(),
            message: json_message(&inner),
        }
    })?;
    de.end().map_err(|e| CampaignError::Parse {
        path: String::new(),
        line: e.line(),
        column: e.column(),
        message: json_message(&e),
    })?;
    Ok(specs)
}

/// serde_json's message without its trailing " at line L column C" (reported separately).
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) if e.line() > 0 => text[..i].to_owned(),
        _ => text,
    }
}

/// Parses TOML: `[[campaign]]` tables.
pub fn parse_toml(text: &str) -> Result<Vec<CampaignSpec>, CampaignError> {
    check_size(text.len())?;
    let de = toml::Deserializer::new(text);
    let file: CampaignFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = campaign_path(e.path());
        let inner = e.into_inner();
        let start = inner.span().map(|span| span.start);
        let (line, column) = start.map_or((0, 0), |at| line_column(text.as_bytes(), at));
        let mut message = one_line(inner.message());
        if message.is_empty() {
            // toml gives no words for some syntax errors (a control character in a comment).
            message = unexplained_syntax_error(text, start);
        }
        CampaignError::Parse {
            path,
            line,
            column,
            message,
        }
    })?;
    Ok(file.campaign)
}

/// Words for a syntax error toml left without any: the offending character when there is one.
fn unexplained_syntax_error(text: &str, at: Option<usize>) -> String {
    let found = at
        .and_then(|at| text.get(at..))
        .and_then(|rest| rest.chars().next());
    match found {
        Some(c) if c.is_control() && c != '\n' => {
            format!("invalid TOML: control character {c:?} is not allowed here")
        }
        Some(c) => format!("invalid TOML at {c:?}"),
        None => "invalid TOML at the end of the file".to_owned(),
    }
}

/// toml's syntax messages span several lines ("invalid table header\nexpected `]]`").
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(": ")
}

/// 1-based line and column (in bytes) of `offset` in `text`.
fn line_column(text: &[u8], offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.len()
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, column)
}

/// Renders a document path with the campaign list named `campaigns` in both formats.
fn campaign_path(path: &serde_path_to_error::Path) -> String {
    let segments: Vec<&Segment> = path.iter().collect();
    let mut rest = segments.as_slice();
    let mut out = String::new();
    match rest {
        [Segment::Map { key }, tail @ ..] if key == "campaign" => {
            out.push_str("campaigns");
            rest = tail;
        }
        [Segment::Seq { .. }, ..] => out.push_str("campaigns"),
        _ => {}
    }
    for segment in rest {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Enum { variant } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(variant);
            }
            // A key serde could not name (e.g. the input ended inside it): say nothing.
            Segment::Unknown => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column(b"ab\ncd", 0), (1, 1));
        assert_eq!(line_column(b"ab\ncd", 4), (2, 2));
        assert_eq!(line_column(b"ab", 99), (1, 3));
    }

    #[test]
    fn a_syntax_error_always_has_words() {
        // Found by the campaigns_toml fuzz target (fuzz/regressions/campaigns_toml): toml
        // reports a NUL in a comment, or a lone CR, with an empty message.
        for text in ["\n#,\0,\n", "a = 1\r", "# \u{7f}\n"] {
            match parse_toml(text) {
                Err(CampaignError::Parse { message, .. }) => {
                    assert!(!message.is_empty(), "{text:?}")
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }
}
