//! The document an exchange fleet follows (docs/fleet.md): the bidder roster and the seller
//! list, TOML as `exchange.toml` writes them (`[[bidders]]`, `[[sellers]]`), nothing else.
//! It replaces those two lists of the node's own file, so every other section stays the
//! node's. Secrets do not travel: a seller names its keys by `key_file` or `key_env`, and a
//! bidder its price key likewise, resolved on each node when the document is validated, and
//! only among the files and variables the node's own `[fleet]` allows (`allowed_key_files`,
//! `allowed_key_env`): a document naming `PATH` as a seller's key is refused, not obeyed.
//!
//! Pure: parses bytes and edits a [`Config`]; the reload path validates the result.

use std::path::{Path, PathBuf};

use fleet::FleetSection;
use serde::Deserialize;

use crate::config::{BidderConfig, Config, ConfigError, MAX_CONFIG_BYTES};
use crate::sellers::SellerConfig;

/// The key an exchange follows unless `fleet.key` names another.
pub const DEFAULT_KEY: &str = "exchange.roster";

/// The pushed roster: every bidder and every seller of the fleet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterDocument {
    #[serde(default)]
    pub bidders: Vec<BidderConfig>,
    #[serde(default)]
    pub sellers: Vec<SellerConfig>,
}

impl RosterDocument {
    /// Parses a pushed document (UTF-8 TOML, at most [`MAX_CONFIG_BYTES`]); an error naming
    /// the problem otherwise. Only `[[bidders]]` and `[[sellers]]` are accepted: another
    /// section in a push is refused rather than silently ignored.
    pub fn parse(bytes: &[u8]) -> Result<RosterDocument, ConfigError> {
        if bytes.len() > MAX_CONFIG_BYTES {
            return Err(settings::invalid(
                "fleet document",
                format!("is {} bytes; at most {MAX_CONFIG_BYTES}", bytes.len()),
            ));
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| settings::invalid("fleet document", format!("is not UTF-8: {e}")))?;
        settings::parse_toml(
            text,
            &settings::FileRules {
                server: "the exchange's fleet document ([[bidders]] and [[sellers]] only)",
                max_bytes: MAX_CONFIG_BYTES,
                moved: &[],
            },
        )
    }

    /// Refuses a document that names a key file or variable the node's `[fleet]` does not
    /// allow; files are compared as the node resolves them (relative to `dir`, its
    /// configuration's directory). The error names the list entry and the key.
    pub fn check_secrets(
        &self,
        fleet: Option<&FleetSection>,
        dir: Option<&Path>,
    ) -> Result<(), ConfigError> {
        let (files, vars): (&[PathBuf], &[String]) = match fleet {
            Some(f) => (&f.allowed_key_files, &f.allowed_key_env),
            None => (&[], &[]),
        };
        let file_ok = |file: &Path| {
            let at = settings::relative_to(dir, file);
            files.contains(&at)
        };
        let var_ok = |var: &str| vars.iter().any(|allowed| allowed == var);
        let refuse = |field: String, what: String, list: &str| {
            settings::invalid(
                format!("fleet document: {field}"),
                format!(
                    "{what} is not in this node's fleet.{list}; a pushed document names only the secrets the node allows"
                ),
            )
        };
        let named = self
            .sellers
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("sellers[{i}]."), "", &s.key_file, &s.key_env))
            .chain(self.bidders.iter().enumerate().map(|(i, b)| {
                (
                    format!("bidders[{i}]."),
                    "price_",
                    &b.price_key_file,
                    &b.price_key_env,
                )
            }));
        for (at, prefix, file, var) in named {
            if let Some(file) = file.as_deref().filter(|f| !file_ok(f)) {
                return Err(refuse(
                    format!("{at}{prefix}key_file"),
                    format!("{:?}", file.display().to_string()),
                    "allowed_key_files",
                ));
            }
            if let Some(var) = var.as_deref().filter(|v| !var_ok(v)) {
                return Err(refuse(
                    format!("{at}{prefix}key_env"),
                    format!("{var:?}"),
                    "allowed_key_env",
                ));
            }
        }
        Ok(())
    }

    /// `config` with its bidders and sellers replaced by the document's.
    pub fn over(&self, mut config: Config) -> Config {
        config.live.bidders = self.bidders.clone();
        config.live.sellers = self.sellers.clone();
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROSTER: &str = "[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:9/\"\n\
        [[sellers]]\nname = \"s\"\nkey_env = \"SELLER_S_KEYS\"\n";

    #[test]
    fn a_roster_replaces_only_the_lists() {
        let doc = RosterDocument::parse(ROSTER.as_bytes()).unwrap();
        let base = settings::parse_text::<Config>(
            "node = \"n7\"\n[[bidders]]\nname = \"old\"\nendpoint = \"http://127.0.0.1:8/\"\n",
            &settings::EnvOverlay::default(),
        )
        .unwrap();
        let merged = doc.over(base);
        assert_eq!(merged.node(), "n7", "the node's own sections stay");
        let names: Vec<_> = merged
            .live
            .bidders
            .iter()
            .map(|b| b.name.as_str())
            .collect();
        assert_eq!(names, ["a"]);
        assert_eq!(merged.live.sellers.len(), 1);
        assert_eq!(
            merged.live.sellers[0].key_env.as_deref(),
            Some("SELLER_S_KEYS")
        );
    }

    #[test]
    fn only_the_secrets_the_node_allows_may_be_named() {
        let doc = RosterDocument::parse(
            b"[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:9/\"\nprice_key_file = \"keys/a.key\"\n\
              [[sellers]]\nname = \"s\"\nkey_env = \"SELLER_S_KEYS\"\n",
        )
        .unwrap();
        let dir = Path::new("/etc/gavel");
        let allowing = |files: &[&str], vars: &[&str]| FleetSection {
            allowed_key_files: files.iter().map(|f| dir.join(f)).collect(),
            allowed_key_env: vars.iter().map(|v| (*v).to_owned()).collect(),
            ..FleetSection::new("nats://127.0.0.1:4222")
        };
        let ok = allowing(&["keys/a.key"], &["SELLER_S_KEYS"]);
        assert!(doc.check_secrets(Some(&ok), Some(dir)).is_ok());
        let no_var = allowing(&["keys/a.key"], &[]);
        let e = doc
            .check_secrets(Some(&no_var), Some(dir))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("fleet document: sellers[0].key_env") && e.contains("SELLER_S_KEYS"),
            "{e}"
        );
        let no_file = allowing(&["keys/b.key"], &["SELLER_S_KEYS"]);
        let e = doc
            .check_secrets(Some(&no_file), Some(dir))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("fleet document: bidders[0].price_key_file"),
            "{e}"
        );
        // The same file by another spelling is another path: only the listed one is taken.
        let moved = RosterDocument::parse(
            b"[[sellers]]\nname = \"s\"\nkey_file = \"keys/../keys/a.key\"\n",
        )
        .unwrap();
        assert!(moved.check_secrets(Some(&ok), Some(dir)).is_err());
        let path =
            RosterDocument::parse(b"[[sellers]]\nname = \"s\"\nkey_env = \"PATH\"\n").unwrap();
        assert!(path.check_secrets(Some(&ok), Some(dir)).is_err());
        assert!(
            path.check_secrets(None, Some(dir)).is_err(),
            "no [fleet]: nothing allowed"
        );
    }

    #[test]
    fn anything_else_is_refused_naming_it() {
        let other = RosterDocument::parse(b"node = \"n2\"\n")
            .unwrap_err()
            .to_string();
        assert!(other.contains("node"), "{other}");
        let broken = RosterDocument::parse(b"[[bidders]\n")
            .unwrap_err()
            .to_string();
        assert!(!broken.is_empty());
        let binary = RosterDocument::parse(&[0xff, 0xfe])
            .unwrap_err()
            .to_string();
        assert!(binary.contains("UTF-8"), "{binary}");
        let huge = vec![b'#'; MAX_CONFIG_BYTES + 1];
        let e = RosterDocument::parse(&huge).unwrap_err().to_string();
        assert!(e.contains("at most"), "{e}");
        let empty = RosterDocument::parse(b"").unwrap();
        assert!(empty.bidders.is_empty() && empty.sellers.is_empty());
    }
}
