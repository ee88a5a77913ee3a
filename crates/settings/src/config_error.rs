//! Why a configuration was refused, in one shape for every server: the file could not be read,
//! was too large, set a key under both its old and its new name, was not TOML the server
//! understands, or held a value it may not ([`Invalid`], naming the key as written in the
//! file). A key under its old name alone is read at its new place, with a warning.

use serde::de::DeserializeOwned;

use crate::moved::{Moved, move_keys};
use crate::{ReadError, moved_key};

/// A value a configuration may not hold: its key as written in the file (`http.max_connections`,
/// `bidders[2].endpoint`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct Invalid {
    pub key: String,
    pub problem: String,
}

impl Invalid {
    pub fn new(key: impl Into<String>, problem: impl Into<String>) -> Invalid {
        Invalid {
            key: key.into(),
            problem: problem.into(),
        }
    }

    /// The same problem under the key `to` makes of this one: a helper that reads a field
    /// (`key_file`) names it alone, its caller knows the section (`sellers[2].key_file`).
    pub fn rekey(self, to: impl FnOnce(&str) -> String) -> Invalid {
        Invalid {
            key: to(&self.key),
            problem: self.problem,
        }
    }
}

/// Why a server's configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Read(#[from] ReadError),
    #[error("config is {size} bytes; the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    /// A key set under its old name and its new one: the two may disagree.
    #[error("{old} has moved to {new}, and both are set: keep {new} only")]
    MovedTwice {
        old: &'static str,
        new: &'static str,
    },
    /// Not TOML, or not the server's: `server` says whose ("the exchange").
    #[error("config is not valid TOML for {server}: {message}")]
    Parse {
        server: &'static str,
        message: String,
    },
    #[error("{0}")]
    Invalid(#[from] Invalid),
    /// A `GAVEL_<SERVER>__...` variable the server refuses: badly formed, naming a key the
    /// file layout does not have, or holding a value of the wrong type.
    #[error("{var}: {problem}")]
    Env { var: String, problem: String },
}

/// `value` within `range`, or an [`Invalid`] naming `key` and the range (`must be 1..=65536`):
/// the one wording of every range a configuration checks.
///
/// # Errors
/// `value` is outside `range`.
pub fn check_range<T: PartialOrd + std::fmt::Display>(
    key: impl Into<String>,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<(), Invalid> {
    if range.contains(&value) {
        return Ok(());
    }
    let (low, high) = range.into_inner();
    Err(Invalid::new(key, format!("must be {low}..={high}")))
}

/// [`ConfigError::Invalid`] for `key`.
pub fn invalid(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(Invalid::new(key, problem))
}

/// What a server's configuration file is, for [`parse_toml`].
#[derive(Debug, Clone, Copy)]
pub struct FileRules {
    /// Whose file it is, for the messages ("the exchange").
    pub server: &'static str,
    /// The largest file, in bytes.
    pub max_bytes: usize,
    /// Keys that moved, `(old, new)`: an old one is read at its new place, and a warning
    /// names the new key.
    pub moved: &'static [(&'static str, &'static str)],
}

/// Parses `text` as the server's TOML (not yet validated): too large, a key set under both
/// its old and new name, or anything serde refuses is a [`ConfigError`] saying which. A key
/// under its old name alone is read at its new place, and logged as a warning.
pub fn parse_toml<T: DeserializeOwned>(text: &str, rules: &FileRules) -> Result<T, ConfigError> {
    if text.len() > rules.max_bytes {
        return Err(ConfigError::TooLarge {
            size: text.len(),
            limit: rules.max_bytes,
        });
    }
    if moved_key(text, rules.moved).is_none() {
        return toml::from_str(text).map_err(|e| ConfigError::Parse {
            server: rules.server,
            message: e.to_string(),
        });
    }
    let mut table = parse_table(text, rules)?;
    moved_keys(&mut table, rules)?;
    from_table(table, rules)
}

/// `text` as a TOML table, within the server's size limit.
pub(crate) fn parse_table(text: &str, rules: &FileRules) -> Result<toml::Table, ConfigError> {
    if text.len() > rules.max_bytes {
        return Err(ConfigError::TooLarge {
            size: text.len(),
            limit: rules.max_bytes,
        });
    }
    text.parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            server: rules.server,
            message: e.to_string(),
        })
}

/// Moves the old keys of `table` to their new places (see [`move_keys`]) and warns of each.
pub(crate) fn moved_keys(table: &mut toml::Table, rules: &FileRules) -> Result<(), ConfigError> {
    let moved = move_keys(table, rules.moved)
        .map_err(|Moved { old, new }| ConfigError::MovedTwice { old, new })?;
    for m in moved {
        tracing::warn!(old = m.old, new = m.new, "{}: {m}", rules.server);
    }
    Ok(())
}

/// Deserializes the server's type from a table already parsed; a refusal names the path.
fn from_table<T: DeserializeOwned>(
    table: toml::Table,
    rules: &FileRules,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize::<_, T>(toml::Value::Table(table)).map_err(|e| {
        let at = e.path().to_string();
        let message = e.into_inner().to_string();
        let message = message.lines().next().unwrap_or_default().trim_end();
        ConfigError::Parse {
            server: rules.server,
            message: format!("{at}: {message}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        port: u16,
    }

    const RULES: FileRules = FileRules {
        server: "the test",
        max_bytes: 64,
        moved: &[("listen_port", "port")],
    };

    #[test]
    fn every_refusal_says_what_and_where() {
        assert!(parse_toml::<File>("port = 1", &RULES).is_ok());
        let e = parse_toml::<File>(&"#".repeat(65), &RULES).unwrap_err();
        assert_eq!(e.to_string(), "config is 65 bytes; the limit is 64");
        assert_eq!(
            parse_toml::<File>("listen_port = 1", &RULES).unwrap().port,
            1,
            "an old name is read at its new place"
        );
        let e = parse_toml::<File>("listen_port = 1\nport = 2", &RULES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "listen_port has moved to port, and both are set: keep port only"
        );
        let e = parse_toml::<File>("listen_port = \"x\"", &RULES).unwrap_err();
        assert!(e.to_string().contains("port"), "{e}");
        let e = parse_toml::<File>("port = \"x\"", &RULES).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("config is not valid TOML for the test: "),
            "{e}"
        );
        assert_eq!(
            invalid("http.port", "must be 1..=65535").to_string(),
            "http.port: must be 1..=65535"
        );
        assert_eq!(check_range("http.port", 80_u32, 1..=65_535), Ok(()));
        assert_eq!(
            check_range("http.port", 0_u32, 1..=65_535)
                .unwrap_err()
                .to_string(),
            "http.port: must be 1..=65535"
        );
        assert!(check_range("x", 65_536_u32, 1..=65_535).is_err());
    }
}
