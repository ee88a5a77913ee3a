//! The document an exchange fleet follows (docs/fleet.md): the bidder roster and the seller
//! list, TOML as `exchange.toml` writes them (`[[bidders]]`, `[[sellers]]`), nothing else.
//! It replaces those two lists of the node's own file, so every other section stays the
//! node's. Secrets do not travel: a seller names its keys by `key_file` or `key_env`, and a
//! bidder its price key likewise, resolved on each node when the document is validated.
//!
//! Pure: parses bytes and edits a [`Config`]; the reload path validates the result.

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

    /// `config` with its bidders and sellers replaced by the document's.
    pub fn over(&self, mut config: Config) -> Config {
        config.bidders = self.bidders.clone();
        config.sellers = self.sellers.clone();
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
        let base = toml::from_str::<Config>(
            "node = \"n7\"\n[[bidders]]\nname = \"old\"\nendpoint = \"http://127.0.0.1:8/\"\n",
        )
        .unwrap();
        let merged = doc.over(base);
        assert_eq!(merged.node, "n7", "the node's own sections stay");
        let names: Vec<_> = merged.bidders.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["a"]);
        assert_eq!(merged.sellers.len(), 1);
        assert_eq!(merged.sellers[0].key_env.as_deref(), Some("SELLER_S_KEYS"));
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
