//! Why a configuration was refused, in one shape for every server: the file could not be read,
//! was too large, used a key that moved, was not TOML the server understands, or held a value
//! it may not ([`Invalid`], naming the key as written in the file).

use serde::de::DeserializeOwned;

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
    #[error("{old} has moved: write it as {new}")]
    Moved {
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
    /// Keys that moved, `(old, new)`: refused with the new name.
    pub moved: &'static [(&'static str, &'static str)],
}

/// Parses `text` as the server's TOML (not yet validated): too large, a key that moved, or
/// anything serde refuses is a [`ConfigError`] saying which.
pub fn parse_toml<T: DeserializeOwned>(text: &str, rules: &FileRules) -> Result<T, ConfigError> {
    if text.len() > rules.max_bytes {
        return Err(ConfigError::TooLarge {
            size: text.len(),
            limit: rules.max_bytes,
        });
    }
    toml::from_str(text).map_err(|e| match moved_key(text, rules.moved) {
        Some((old, new)) => ConfigError::Moved { old, new },
        None => ConfigError::Parse {
            server: rules.server,
            message: e.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[allow(dead_code)]
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
        let e = parse_toml::<File>("listen_port = 1", &RULES).unwrap_err();
        assert_eq!(e.to_string(), "listen_port has moved: write it as port");
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
    }
}
