//! The lexer of the direct decoder: a cursor over text that is already known to be UTF-8, with
//! one method per JSON token the object model needs.
//!
//! Every method accepts only what serde_json accepts and reads it to the same value; anything
//! else, including valid JSON this lexer does not bother with (escaped object keys, lone
//! surrogates), is a [`Reject`], and the caller falls back to the serde decoder. So this file
//! may be conservative but never lenient.

use serde_json::value::RawValue;

use crate::raw::RawJson;

/// The input does not take the direct path. Carries nothing: the serde decoder, run next,
/// either decodes the input after all or says what is wrong and where.
#[derive(Debug)]
pub(crate) struct Reject;

pub(crate) type Result<T> = std::result::Result<T, Reject>;

/// A position in the JSON text being decoded.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Reader { text, pos: 0 }
    }

    /// Skips JSON whitespace and returns the next byte without consuming it.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes `want` after optional whitespace.
    #[inline]
    fn eat(&mut self, want: u8) -> Result<()> {
        if self.peek() == Some(want) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Reject)
        }
    }

    /// Nothing but whitespace is left (serde_json's `Deserializer::end`).
    pub(crate) fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(Reject),
        }
    }

    /// Consumes `null` if that is the next value. Whatever follows it is checked by the caller's
    /// next structural token, as serde_json does.
    #[inline]
    pub(crate) fn null(&mut self) -> bool {
        if self.peek() == Some(b'n')
            && self.text.as_bytes().get(self.pos..self.pos + 4) == Some(b"null".as_slice())
        {
            self.pos += 4;
            true
        } else {
            false
        }
    }

    /// Consumes `{`; true when a member follows (the reader is then at its key's quote).
    #[inline]
    pub(crate) fn begin_object(&mut self) -> Result<bool> {
        self.eat(b'{')?;
        self.member_or_close()
    }

    /// After a member's value: consumes `,` (true, a key follows) or `}` (false).
    #[inline]
    pub(crate) fn next_member(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                // serde_json refuses a trailing comma: a key must follow.
                match self.peek() {
                    Some(b'"') => Ok(true),
                    _ => Err(Reject),
                }
            }
            Some(b'}') => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Reject),
        }
    }

    #[inline]
    fn member_or_close(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b'"') => Ok(true),
            Some(b'}') => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Reject),
        }
    }

    /// A member's key and the `:` after it, borrowed from the input. A key with an escape is
    /// refused (the serde decoder unescapes it before matching; no real traffic needs that).
    #[inline]
    pub(crate) fn key(&mut self) -> Result<&'a str> {
        self.eat(b'"')?;
        let start = self.pos;
        let end = scan_plain(self.text.as_bytes(), start);
        if self.text.as_bytes().get(end) != Some(&b'"') {
            return Err(Reject);
        }
        let key = self.text.get(start..end).ok_or(Reject)?;
        self.pos = end + 1;
        self.eat(b':')?;
        Ok(key)
    }

    /// Consumes `[`; true when an element follows.
    #[inline]
    pub(crate) fn begin_array(&mut self) -> Result<bool> {
        self.eat(b'[')?;
        match self.peek() {
            Some(b']') => {
                self.pos += 1;
                Ok(false)
            }
            Some(_) => Ok(true),
            None => Err(Reject),
        }
    }

    /// After an element: consumes `,` (true, another element follows) or `]` (false).
    #[inline]
    pub(crate) fn next_element(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                // serde_json refuses a trailing comma.
                match self.peek() {
                    Some(b']') | None => Err(Reject),
                    Some(_) => Ok(true),
                }
            }
            Some(b']') => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Reject),
        }
    }

    /// A JSON string, unescaped. Control characters are refused, as serde_json does; the
    /// input was checked to be UTF-8 as a whole, so any slice between quotes is valid text.
    #[inline]
    pub(crate) fn string(&mut self) -> Result<String> {
        self.eat(b'"')?;
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let end = scan_plain(bytes, start);
        match bytes.get(end) {
            Some(b'"') => {
                let s = self.text.get(start..end).ok_or(Reject)?;
                self.pos = end + 1;
                Ok(String::from(s))
            }
            Some(b'\\') => self.unescape(start, end),
            _ => Err(Reject),
        }
    }

    /// The rest of a string that has an escape at `at`; `text[start..at]` is plain.
    #[cold]
    fn unescape(&mut self, start: usize, mut at: usize) -> Result<String> {
        let bytes = self.text.as_bytes();
        let mut out = String::with_capacity(at - start + 16);
        out.push_str(self.text.get(start..at).ok_or(Reject)?);
        loop {
            match bytes.get(at) {
                Some(b'"') => {
                    self.pos = at + 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let (c, len) = escape(bytes, at + 1)?;
                    out.push(c);
                    at += 1 + len;
                }
                _ => return Err(Reject),
            }
            let end = scan_plain(bytes, at);
            out.push_str(self.text.get(at..end).ok_or(Reject)?);
            at = end;
        }
    }

    /// The text of one JSON number. The grammar is JSON's: no `+`, no leading zeros, digits on
    /// both sides of the point.
    fn number(&mut self) -> Result<&'a str> {
        self.peek();
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let mut i = start;
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(bytes, i + 1),
            _ => return Err(Reject),
        }
        if bytes.get(i) == Some(&b'.') {
            let after = digits(bytes, i + 1);
            if after == i + 1 {
                return Err(Reject);
            }
            i = after;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let after = digits(bytes, i);
            if after == i {
                return Err(Reject);
            }
            i = after;
        }
        let text = self.text.get(start..i).ok_or(Reject)?;
        self.pos = i;
        Ok(text)
    }

    /// An integer that fits `i32`. serde_json reads `-0` and anything with a fraction or an
    /// exponent as a float, which an `i32` refuses: so do we. Accumulated while scanning (the
    /// request's many small codes and sizes made `str::parse` show in the profile).
    #[inline]
    pub(crate) fn i32(&mut self) -> Result<i32> {
        self.peek();
        let bytes = self.text.as_bytes();
        let mut i = self.pos;
        let negative = bytes.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let first = i;
        let mut value = 0i64;
        while let Some(&d @ b'0'..=b'9') = bytes.get(i) {
            // Ten digits cover i32 and cannot overflow i64.
            if i - first == 10 {
                return Err(Reject);
            }
            value = value * 10 + i64::from(d - b'0');
            i += 1;
        }
        let leading_zero = i - first > 1 && bytes.get(first) == Some(&b'0');
        let float = matches!(bytes.get(i), Some(b'.' | b'e' | b'E')) || (negative && value == 0);
        if i == first || leading_zero || float {
            return Err(Reject);
        }
        self.pos = i;
        i32::try_from(if negative { -value } else { value }).map_err(|_| Reject)
    }

    /// A finite double, correctly rounded (as serde_json's `float_roundtrip` reads it; an
    /// integer literal read as `u64`/`i64` and converted rounds to the same double).
    #[inline]
    pub(crate) fn f64(&mut self) -> Result<f64> {
        match self.number()?.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(Reject),
        }
    }

    /// Any JSON value, kept as its text. serde_json validates and delimits it (the very code
    /// that reads a `RawJson` on the serde path), so what is kept is the same text.
    pub(crate) fn raw(&mut self) -> Result<RawJson> {
        let rest = self.text.get(self.pos..).ok_or(Reject)?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        let value = match values.next() {
            Some(Ok(value)) => value,
            _ => return Err(Reject),
        };
        self.pos += values.byte_offset();
        RawJson::from_borrowed(value).ok_or(Reject)
    }
}

/// Index of the first digit-free byte at or after `i`.
#[inline]
fn digits(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

/// Index of the first byte at or after `i` that ends a plain run of string content: `"`, `\`
/// or a control character (or the end of the input). Eight bytes at a time, since string
/// content is most of the bytes of a bid request.
#[inline]
fn scan_plain(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..i + 8) {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        if has_special(u64::from_le_bytes(word)) {
            break;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

/// True when some byte of `word` is `"`, `\` or below 0x20 (the classic has-zero-byte and
/// has-less-than tricks; exact for the word as a whole).
#[inline]
const fn has_special(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const fn has_zero(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGH
    }
    let quote = has_zero(word ^ (ONES * b'"' as u64));
    let backslash = has_zero(word ^ (ONES * b'\\' as u64));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    (quote | backslash | control) != 0
}

/// The character of the escape whose letter is at `bytes[at]` and how many bytes it took
/// after the backslash. A surrogate pair is one character; a lone surrogate is refused.
fn escape(bytes: &[u8], at: usize) -> Result<(char, usize)> {
    let c = match bytes.get(at) {
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => {
            let high = hex4(bytes, at + 1)?;
            return match high {
                0xD800..=0xDBFF => {
                    if bytes.get(at + 5..at + 7) != Some(b"\\u") {
                        return Err(Reject);
                    }
                    let low = hex4(bytes, at + 7)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(Reject);
                    }
                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    Ok((char::from_u32(code).ok_or(Reject)?, 11))
                }
                _ => Ok((char::from_u32(high).ok_or(Reject)?, 5)),
            };
        }
        _ => return Err(Reject),
    };
    Ok((c, 1))
}

/// Four hex digits at `at`.
fn hex4(bytes: &[u8], at: usize) -> Result<u32> {
    let digits = bytes.get(at..at + 4).ok_or(Reject)?;
    let mut value = 0;
    for &d in digits {
        let nibble = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(Reject),
        };
        value = value << 4 | u32::from(nibble);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(text: &str) -> Reader<'_> {
        Reader::new(text)
    }

    #[test]
    fn plain_scan_stops_at_quote_backslash_and_controls() {
        for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
            for at in 0..20 {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = special;
                assert_eq!(scan_plain(&bytes, 0), at, "{special:#x} at {at}");
            }
        }
        assert_eq!(scan_plain("é ~\u{7f}x".as_bytes(), 0), 6);
        for byte in 0u8..=0xff {
            let expected = byte == b'"' || byte == b'\\' || byte < 0x20;
            for at in 0..8 {
                let mut word = [b'a'; 8];
                word[at] = byte;
                let found = has_special(u64::from_le_bytes(word));
                assert_eq!(found, expected, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn strings_unescape_like_serde_json() {
        for json in [
            r#""plain""#,
            r#""""#,
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u00e9\u20AC\ud83d\ude00 end""#,
            r#""\u0000""#,
            "\"é and 🙂 and \u{7f}\"",
            r#""0123456789abcdef0123456789\n0123456789abcdef""#,
        ] {
            let expected: String = serde_json::from_str(json).unwrap();
            assert_eq!(reader(json).string().unwrap(), expected, "{json}");
        }
        for json in [
            "\"a\nb\"",
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\ud83d\u0041""#,
            r#""\x""#,
            r#""\u12""#,
            r#""open"#,
        ] {
            assert!(reader(json).string().is_err(), "{json}");
        }
    }

    #[test]
    fn numbers_follow_serde_json() {
        for (json, value) in [
            ("0", 0),
            ("-1", -1),
            ("2147483647", i32::MAX),
            ("-2147483648", i32::MIN),
        ] {
            assert_eq!(reader(json).i32().unwrap(), value, "{json}");
            assert_eq!(serde_json::from_str::<i32>(json).unwrap(), value, "{json}");
        }
        for json in [
            "-0",
            "1.0",
            "1e2",
            "2147483648",
            "01",
            "+1",
            "-",
            "1.",
            ".5",
            "1e",
        ] {
            let mut r = reader(json);
            assert!(r.i32().and_then(|_| r.end()).is_err(), "{json}");
            assert!(serde_json::from_str::<i32>(json).is_err(), "{json}");
        }
        for json in [
            "0.85",
            "-0",
            "-0.0",
            "48.8566",
            "1e-400",
            "-1e-400",
            "123456789012345678901234567890",
            "18446744073709551615",
            "-9223372036854775808",
            "9007199254740993",
            "2.2250738585072011e-308",
            "1.7976931348623157e308",
        ] {
            let ours = reader(json).f64().unwrap();
            let theirs: f64 = serde_json::from_str(json).unwrap();
            assert_eq!(ours.to_bits(), theirs.to_bits(), "{json}");
        }
        for json in [
            "1e400",
            "-1e400",
            "1e99999999999999999999",
            "NaN",
            "01.5",
            "1.e3",
        ] {
            let mut r = reader(json);
            assert!(r.f64().and_then(|_| r.end()).is_err(), "{json}");
        }
    }

    #[test]
    fn structure_refuses_trailing_commas_and_junk() {
        let mut r = reader(r#"{"a":1,}"#);
        assert!(r.begin_object().unwrap());
        assert_eq!(r.key().unwrap(), "a");
        r.i32().unwrap();
        assert!(r.next_member().is_err());

        let mut r = reader("[1,]");
        assert!(r.begin_array().unwrap());
        r.i32().unwrap();
        assert!(r.next_element().is_err());

        let mut r = reader(r#"{"\u0061":1}"#);
        assert!(r.begin_object().unwrap());
        assert!(r.key().is_err(), "escaped keys go to the serde decoder");

        let mut r = reader(" { } x");
        assert!(!r.begin_object().unwrap());
        assert!(r.end().is_err());
    }

    #[test]
    fn raw_values_end_where_serde_json_says() {
        let mut r = reader(r#"{"x":[1, {"y":"]"}] ,"z":true}"#);
        r.begin_object().unwrap();
        r.key().unwrap();
        assert_eq!(r.raw().unwrap().get(), r#"[1, {"y":"]"}]"#);
        assert!(r.next_member().unwrap());
        r.key().unwrap();
        assert_eq!(r.raw().unwrap().get(), "true");
        assert!(!r.next_member().unwrap());
        r.end().unwrap();

        let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
        assert!(reader(&deep).raw().is_err());
        assert!(reader("1x").raw().is_err());
        assert!(reader("").raw().is_err());
    }
}
