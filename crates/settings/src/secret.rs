//! [`Secret`]: a key or token read from a file or an environment variable, never from a
//! configuration file itself (a config is copied, diffed and pasted into tickets; a key must not
//! be). Its `Debug` prints nothing of it.

use std::path::Path;

/// Longest accepted secret, in bytes.
pub const MAX_SECRET_BYTES: usize = 4096;

/// Fewest bytes a secret may have: 32 random bytes, e.g. `openssl rand -hex 32` (64 characters).
pub const MIN_SECRET_BYTES: usize = 32;

/// A secret's bytes (surrounding whitespace trimmed: files end in a newline).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl Secret {
    /// A secret from bytes already in hand (tests, the demo's generated keys); the same length
    /// rule as a file.
    pub fn new(bytes: &[u8], name: &str) -> Result<Secret, SecretError> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort {
                name: name.to_owned(),
                len: trimmed.len(),
            });
        }
        Ok(Secret(trimmed.to_vec()))
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

/// Why a secret could not be had. Messages name the setting and never contain the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("{name}: {reason}")]
    Read { name: String, reason: String },
    #[error(
        "{name} is {len} bytes; at least {MIN_SECRET_BYTES} are required (e.g. `openssl rand -hex 32`)"
    )]
    TooShort { name: String, len: usize },
    #[error("both {file_key} and the environment variable {env} are set; use one")]
    Both { file_key: String, env: String },
}

/// The same refusal as a configuration's, naming the setting.
impl From<SecretError> for crate::Invalid {
    fn from(e: SecretError) -> crate::Invalid {
        match e {
            SecretError::Read { name, reason } => crate::Invalid::new(name, reason),
            SecretError::TooShort { name, len } => crate::Invalid::new(
                name,
                format!(
                    "is {len} bytes; at least {MIN_SECRET_BYTES} are required (e.g. `openssl rand -hex 32`)"
                ),
            ),
            SecretError::Both { file_key, env } => crate::Invalid::new(
                file_key,
                format!("is set, and so is the environment variable {env}; use one"),
            ),
        }
    }
}

/// Reads the secret named by the setting `file_key` (its value `file`, if set) or by the
/// environment variable `env`: `Ok(None)` when neither is set, an error when both are.
pub fn load_secret(
    file_key: &str,
    file: Option<&Path>,
    env: &str,
) -> Result<Option<Secret>, SecretError> {
    let from_env = std::env::var_os(env).filter(|v| !v.is_empty());
    match (file, from_env) {
        (Some(_), Some(_)) => Err(SecretError::Both {
            file_key: file_key.to_owned(),
            env: env.to_owned(),
        }),
        (Some(path), None) => {
            let bytes = crate::read_bounded_bytes(path, MAX_SECRET_BYTES).map_err(|e| {
                SecretError::Read {
                    name: file_key.to_owned(),
                    reason: e.to_string(),
                }
            })?;
            warn_if_readable_by_others(file_key, path);
            Secret::new(&bytes, file_key).map(Some)
        }
        (None, Some(value)) => {
            let bytes = value.into_encoded_bytes();
            if bytes.len() > MAX_SECRET_BYTES {
                return Err(SecretError::Read {
                    name: env.to_owned(),
                    reason: format!("longer than {MAX_SECRET_BYTES} bytes"),
                });
            }
            Secret::new(&bytes, env).map(Some)
        }
        (None, None) => Ok(None),
    }
}

/// Whether every user of the machine may read the file at `path` (what a key file must not
/// allow); false when that cannot be told.
#[cfg(unix)]
pub fn readable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o004 != 0)
}

#[cfg(not(unix))]
pub fn readable_by_others(_: &Path) -> bool {
    false
}

/// Says on stderr, naming the setting, that a secret's file is readable by every user.
pub(crate) fn warn_if_readable_by_others(name: &str, path: &Path) {
    if readable_by_others(path) {
        eprintln!(
            "warning: {name} ({}) is readable by every user; chmod 600 it",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_secret_is_trimmed_and_must_be_long_enough() {
        let dir = testkit::TempDir::new("secret");
        let path = dir.join("k");
        std::fs::write(&path, format!("{}\n", "a".repeat(40))).unwrap_or_default();
        let s = load_secret("security.k", Some(&path), "GAVEL_TEST_UNSET_SECRET")
            .ok()
            .flatten();
        assert_eq!(s.map(|s| s.expose().len()), Some(40));
        std::fs::write(&path, "short\n").unwrap_or_default();
        let e = load_secret("security.k", Some(&path), "GAVEL_TEST_UNSET_SECRET");
        assert_eq!(
            e,
            Err(SecretError::TooShort {
                name: "security.k".into(),
                len: 5
            })
        );
        let missing = load_secret("security.k", Some(&dir.join("nope")), "GAVEL_TEST_UNSET");
        assert!(
            missing
                .as_ref()
                .is_err_and(|e| e.to_string().starts_with("security.k: cannot read")),
            "{missing:?}"
        );
        assert_eq!(
            load_secret("security.k", None, "GAVEL_TEST_UNSET"),
            Ok(None)
        );
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let s = Secret::new(&[b'z'; 32], "k").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{s:?}"), "Secret(32 bytes)");
    }
}
