//! [`Rtb`]: the sections the exchange's and the bidder's files share, beside the front door
//! every server has (`http_front::Front`): the node's name, how a request's `tmax` becomes its
//! deadline, who gets in, where records go and which fleet bucket it follows. Declared,
//! documented and checked once here.

use std::path::Path;

use admission::{AdmissionConfig, DeadlineConfig};
use serde::Serialize;
use serde::de::MapAccess;
use settings::{ConfigError, invalid};

/// The keys [`Rtb`] owns in a server's file.
pub const RTB_KEYS: [&str; 5] = ["node", "deadline", "admission", "records", "fleet"];

/// Longest node name.
pub const MAX_NODE_BYTES: usize = 64;

/// The sections of a server that answers bid requests.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Rtb {
    /// `node`: the name of this instance, the prefix of the ids it makes (auction ids,
    /// reservation ids), so ids from several instances differ; every instance sharing a ledger
    /// needs its own. 1-64 of `A-Z a-z 0-9 - _ .`: it goes into notice URLs. Default: the
    /// server's own (the exchange `gavel`, the bidder `bidder-<pid>-<start time>`).
    pub node: Option<String>,
    /// `[deadline]`: how a request's `tmax` becomes its deadline.
    pub deadline: DeadlineConfig,
    /// `[admission]`: who gets in (docs/config.md). Unset keys take the server's defaults.
    pub admission: AdmissionConfig,
    /// `[records]`: where the auction, notice and ledger records go (docs/records.md).
    /// Default: nowhere.
    pub records: journal::Config,
    /// `[fleet]`: follow a document pushed to a NATS key-value bucket (docs/fleet.md).
    /// Default: none, the file serves.
    pub fleet: Option<fleet::FleetSection>,
}

impl Rtb {
    /// The node's name, `default` when the file gives none.
    pub fn node_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.node.as_deref().unwrap_or(default)
    }

    /// Checks every section; the error names the key.
    ///
    /// # Errors
    /// The first value out of its range.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(node) = &self.node
            && !valid_node(node)
        {
            return Err(invalid(
                "node",
                "must be 1-64 characters among A-Z a-z 0-9 - _ . (it goes into notice URLs)",
            ));
        }
        self.deadline.validate()?;
        self.admission.validate()?;
        self.records.validate()?;
        if let Some(fleet) = &self.fleet {
            fleet.validate()?;
        }
        Ok(())
    }

    /// Makes the relative paths of `[fleet]` start at `dir`, the file's directory.
    pub fn resolve_paths(&mut self, dir: &Path) {
        if let Some(fleet) = &mut self.fleet {
            fleet.resolve_paths(dir);
        }
    }
}

/// Whether `node` may name an instance.
pub fn valid_node(node: &str) -> bool {
    !node.is_empty()
        && node.len() <= MAX_NODE_BYTES
        && node
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl settings::Sections for Rtb {
    fn owns(key: &str) -> bool {
        RTB_KEYS.contains(&key)
    }
    fn keys() -> Vec<&'static str> {
        RTB_KEYS.to_vec()
    }
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "node" => self.node = Some(map.next_value()?),
            "deadline" => self.deadline = map.next_value()?,
            "admission" => self.admission = map.next_value()?,
            "records" => self.records = map.next_value()?,
            _ => self.fleet = Some(map.next_value()?),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Server {
        #[serde(flatten, skip_deserializing)]
        rtb: Rtb,
    }

    impl settings::WithShared for Server {
        type Shared = Rtb;
        fn shared_defaults() -> Rtb {
            Rtb::default()
        }
        fn set_shared(&mut self, shared: Rtb) {
            self.rtb = shared;
        }
    }

    fn parse(text: &str) -> Result<Rtb, String> {
        let settings::Whole(server) =
            toml::from_str::<settings::Whole<Server>>(text).map_err(|e| e.to_string())?;
        server.rtb.check().map_err(|e| e.to_string())?;
        Ok(server.rtb)
    }

    #[test]
    fn every_section_is_read() {
        let rtb = parse(
            "node = \"eu-1.a\"\n[deadline]\ndefault_tmax_ms = 50\n[admission]\nmax_in_flight = 7\n\
             [records]\ndir = \"r\"\n[fleet]\nnats_url = \"nats://127.0.0.1:4222\"\ntrusted_keys_file = \"k\"",
        )
        .unwrap();
        assert_eq!(rtb.node_or("x"), "eu-1.a");
        assert_eq!(rtb.deadline.default_tmax_ms, 50);
        assert_eq!(rtb.admission.max_in_flight, 7);
        assert!(rtb.fleet.is_some());
        assert_eq!(parse("").unwrap(), Rtb::default());
        assert_eq!(Rtb::default().node_or("gavel"), "gavel");
    }

    #[test]
    fn each_refusal_names_its_key() {
        for (text, key) in [
            ("node = \"a b\"", "node"),
            ("node = \"\"", "node"),
            ("node = \"a/b\"", "node"),
            (
                "[deadline]\ndefault_tmax_ms = 0",
                "deadline.default_tmax_ms",
            ),
            ("[admission]\nmax_in_flight = 0", "admission.max_in_flight"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(key), "{text}: {e}");
        }
        assert!(valid_node(&"n".repeat(64)) && !valid_node(&"n".repeat(65)));
    }
}
