//! Record text on a terminal. Ids, names and campaign labels in records come from whoever
//! sent them (a forged notice, a hostile bidder's seat): printed as they are, an escape
//! sequence clears the screen or rewrites a line, and a newline forges a report line
//! (`verdict: ok`). Text reports print every such field through [`shown`], and pass the whole
//! report through [`safe_lines`] last.
//!
//! Escaped: the C0 and C1 controls and DEL (`\n` as `\n`, others as `\x1b` or `\u{85}`), the
//! bidirectional overrides and isolates and the line and paragraph separators (`\u{202e}`), and
//! the backslash itself (`\\`), so an escape in the output always means one in the input.

use std::borrow::Cow;
use std::fmt::Write as _;

fn needs_escape(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn escape_into(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if u32::from(c) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `s` with every character a terminal would act on escaped; borrowed when there is none.
pub fn shown(s: &str) -> Cow<'_, str> {
    escaped(s, |_| true)
}

/// A whole report: as [`shown`], but its own line breaks and backslashes kept (its fields are
/// escaped already). The last guard: a field printed without [`shown`] can still break a line,
/// never move the cursor or clear the screen.
pub fn safe_lines(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c != '\n' && c != '\\')
}

fn escaped(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c) && escape(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) && escape(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_escapes_and_overrides_are_shown_never_obeyed() {
        assert!(matches!(shown("acme-shoes"), Cow::Borrowed(_)));
        assert_eq!(shown("\u{1b}[2J\nverdict: ok"), "\\x1b[2J\\nverdict: ok");
        assert_eq!(shown("a\rb\tc\u{7f}\u{85}"), "a\\rb\\tc\\x7f\\u{85}");
        assert_eq!(shown("evil\u{202e}gnp.exe"), "evil\\u{202e}gnp.exe");
        assert_eq!(shown("\u{2028}"), "\\u{2028}");
        // A backslash is doubled, so `\x1b` typed by a forger reads differently from ESC.
        assert_eq!(shown("\\x1b"), "\\\\x1b");
        assert_eq!(shown("café €"), "café €", "printable text is left alone");
        assert_eq!(
            safe_lines("line 1\nca\u{1b}[2Jmp\nverdict: FAILED\n"),
            "line 1\nca\\x1b[2Jmp\nverdict: FAILED\n"
        );
        // A report of fields already shown is left as it is.
        let report = format!("campaign {}\n", shown("a\u{1b}b"));
        assert_eq!(safe_lines(&report), report);
    }
}
