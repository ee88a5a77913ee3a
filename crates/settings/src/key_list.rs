//! Key lists: several keys valid at once, from a file (one per line) or from an environment
//! variable (separated by commas or whitespace). A key is rotated by listing the new one beside
//! the old, moving its users over, then removing the old one, with no restart. Seller keys and
//! price keys are read this way; what makes a key acceptable (length, alphabet, how many) is
//! the caller's rule.

use std::path::Path;

use crate::Invalid;
use crate::read::{ReadError, read_bounded};

/// Largest key file read.
pub const MAX_KEY_FILE_BYTES: usize = 64 * 1024;

/// The keys in the file at `path`: one per line, `#` comments and blank lines ignored. Like
/// every secret file, one that every user may read is warned about, under the setting's name
/// `setting`.
pub fn read_key_file(setting: &str, path: &Path) -> Result<Vec<String>, ReadError> {
    let text = read_bounded(path, MAX_KEY_FILE_BYTES)?;
    crate::secret::warn_if_readable_by_others(setting, path);
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .flat_map(str::split_ascii_whitespace)
        .map(str::to_owned)
        .collect())
}

/// The field a list of keys came from (`key_file` or `key_env`), and the keys.
pub type KeySource = (&'static str, Vec<String>);

/// The keys a `key_file` / `key_env` pair names (at most one of them may be set): `Ok(None)`
/// when neither is, else the name of the field used and its keys. `file` is already resolved
/// against the configuration's directory; `env` reads a variable (`std::env::var` in
/// production, a table in tests); `owner` names whose keys they are in a permissions warning.
///
/// # Errors
/// [`Invalid`] naming the field alone (`key_file`, `key_env`; the caller knows the section):
/// both set, an unreadable file, a variable that is not set.
pub fn read_key_source(
    owner: &str,
    file: Option<&Path>,
    var: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<KeySource>, Invalid> {
    match (file, var) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(Invalid::new(
            "key_file",
            "give one of key_file and key_env, not both",
        )),
        (Some(path), None) => read_key_file(&format!("the key file of {owner}"), path)
            .map(|keys| Some(("key_file", keys)))
            .map_err(|e| Invalid::new("key_file", e.to_string())),
        (None, Some(var)) => env(var)
            .map(|value| Some(("key_env", split_key_list(&value))))
            .ok_or_else(|| {
                Invalid::new(
                    "key_env",
                    format!("environment variable {var} is not set (or not UTF-8)"),
                )
            }),
    }
}

/// The keys in an environment variable's value: separated by commas or whitespace.
pub fn split_key_list(value: &str) -> Vec<String> {
    value
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_hold_one_key_per_line_and_variables_a_list() {
        let dir = testkit::TempDir::new("key-list");
        let path = dir.join("k");
        std::fs::write(&path, "# rotated 2026-11\n\n  aaaa \nbbbb\n#cccc\n").unwrap_or_default();
        assert_eq!(
            read_key_file("s.key_file", &path),
            Ok(vec!["aaaa".to_owned(), "bbbb".to_owned()])
        );
        assert_eq!(split_key_list(" a,b  c,,\n"), ["a", "b", "c"]);
        assert!(split_key_list(" , ").is_empty());
        let missing = read_key_file("s.key_file", &dir.join("nope"));
        assert!(missing.is_err_and(|e| e.label() == "io"));
    }
}
