//! An asset path as one canonical spelling, or refused. An origin behind the edge (a Tomcat, an
//! IIS, an S3 gateway) may decode what the edge passed on differently, and climb out of the
//! origin's prefix or reach what it should not. So the edge decodes each segment once, refuses
//! what could mean a climb or a separator anywhere, and sends the origin, and keys the cache
//! by, one encoding of what is left:
//!
//! | refused | why |
//! | --- | --- |
//! | `.` and `..` segments, plain or encoded (`%2e%2E`) | a climb |
//! | `..;x` and `.;x` (a dot segment with path parameters) | Tomcat and Jetty read it as `..` |
//! | `%2f`, `%5c`, `\`, and any control character, encoded or not | a separator, or a byte no asset name needs |
//! | `%25` (an encoded `%`) | an origin that decodes twice would see `%252e%252e` as `..` |
//! | an empty segment (`a//b`) | one name, one spelling |
//! | a `%` not followed by two hex digits | two servers would read it two ways |
//! | decoded bytes that are not UTF-8 (`%c0%ae`, an overlong `.`) | older decoders read overlong forms as the character |
//!
//! What is kept is re-encoded with every byte outside RFC 3986's `pchar` set percent-encoded in
//! upper case, so `%41`, `A` and `%61` (a) are each one spelling. A path already in that form
//! is borrowed, not copied. Pure.

use std::borrow::Cow;

/// Why a path was refused (400); safe to send back.
pub const REFUSED: &str = "asset path has an empty, '.' or '..' segment, a separator, '%' or control character (plain or encoded), or an encoding that is not exact UTF-8";

/// Whether `b` may stand as it is in a canonical path segment (RFC 3986 `pchar` without `%`).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b)
}

/// The canonical form of `path` (the part after `/assets/{origin}/`, without its query).
pub fn canonical(path: &str) -> Result<Cow<'_, str>, &'static str> {
    let mut out: Option<String> = None;
    for (i, segment) in path.split('/').enumerate() {
        let decoded = decode(segment).ok_or(REFUSED)?;
        let name = decoded.split(';').next().unwrap_or("");
        if name == "." || name == ".." {
            return Err(REFUSED);
        }
        if decoded.is_empty()
            || decoded
                .chars()
                .any(|c| c == '/' || c == '\\' || c == '%' || c.is_control())
        {
            return Err(REFUSED);
        }
        let exact = segment.bytes().all(plain);
        match (&mut out, exact) {
            (None, true) => {}
            (None, false) => {
                // The first segment that needs re-encoding: copy what came before it.
                let done: Vec<&str> = path.split('/').take(i).collect();
                let mut s = String::with_capacity(path.len() + 8);
                for d in done {
                    s.push_str(d);
                    s.push('/');
                }
                encode_into(&decoded, &mut s);
                out = Some(s);
            }
            (Some(s), _) => {
                s.push('/');
                encode_into(&decoded, s);
            }
        }
    }
    Ok(out.map_or(Cow::Borrowed(path), Cow::Owned))
}

/// A segment percent-decoded, if every `%` is followed by two hex digits and the bytes are
/// UTF-8; borrowed when it has no `%`.
fn decode(segment: &str) -> Option<Cow<'_, str>> {
    if !segment.contains('%') {
        return Some(Cow::Borrowed(segment));
    }
    openrtb::query::percent_decode_exact(segment).map(Cow::Owned)
}

fn encode_into(text: &str, out: &mut String) {
    for b in text.bytes() {
        if plain(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths_are_borrowed_and_others_get_one_spelling() {
        assert!(matches!(
            canonical("a/b-1_c~.png"),
            Ok(Cow::Borrowed("a/b-1_c~.png"))
        ));
        assert!(matches!(canonical("..a/b..png"), Ok(Cow::Borrowed(_))));
        for (given, want) in [
            ("a/%41b.png", "a/Ab.png"),
            ("a/%61b.png", "a/ab.png"),
            ("a/b%20c.png", "a/b%20c.png"),
            ("a/b%3Bc", "a/b;c"),
            ("a/b c", "a/b%20c"),
            ("%e2%82%ac/x", "%E2%82%AC/x"),
            ("a/b%2ec", "a/b.c"),
        ] {
            assert_eq!(canonical(given).as_deref(), Ok(want), "{given}");
        }
    }

    #[test]
    fn climbs_separators_and_ambiguous_encodings_are_refused() {
        for bad in [
            "..",
            "a/../b",
            "a/%2e%2E/b",
            "a/./b",
            "a/..;/b",
            "a/..;jsessionid=1/b",
            "a/.;x/b",
            "a/%2e%2e%3b/b",
            "a%2fb",
            "a%2Fb",
            "a%5cb",
            "a%5Cb",
            "a\\b",
            "a/%c0%ae%c0%ae/b",
            "a/%c0%af",
            "a/%e0%80%ae",
            "a/%00",
            "a/%0d%0a",
            "a/%zz",
            "a/%4",
            "a/%",
            "a/%+2e%+2e/b",
            "a/%252e%252e/b",
            "a/%25",
            "a//b",
            "/a",
            "a/",
        ] {
            assert_eq!(canonical(bad), Err(REFUSED), "{bad}");
        }
    }
}
