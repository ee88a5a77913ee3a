//! The document a bidder fleet follows (docs/fleet.md): one campaign set, JSON or TOML as the
//! campaign file is written, told apart by its first characters since a bucket value has no
//! file name. Price keys never travel: they stay in each node's `security.price_key_file`.
//!
//! Pure: bytes in, a validated and indexed [`CampaignSet`] or the reason out.

use campaigns::{CampaignError, CampaignSet, Format};

/// The key a bidder follows unless `fleet.key` names another.
pub const DEFAULT_KEY: &str = "bidder.campaigns";

/// The format of a pushed campaign set: JSON when it opens with `{`, or with `[` followed by
/// `{` or `]` (an array of campaigns); TOML otherwise (`[[campaign]]`, a comment, a key).
pub fn format_of(bytes: &[u8]) -> Format {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let mut rest = text.iter().copied().filter(|b| !b.is_ascii_whitespace());
    match (rest.next(), rest.next()) {
        (Some(b'{'), _) | (Some(b'['), Some(b'{' | b']')) => Format::Json,
        _ => Format::Toml,
    }
}

/// Parses, validates and indexes a pushed campaign set, as the bidder does a campaign file.
pub fn campaign_set(bytes: &[u8]) -> Result<CampaignSet, CampaignError> {
    CampaignSet::from_bytes(format_of(bytes), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#" [ {"id": "c1", "budget": {"total": 1}, "bid": {"cpm": 2},
        "creatives": [{"id": "cr", "w": 300, "h": 250, "adm": "x"}]}]"#;
    const TOML: &str = "[[campaign]]\nid = \"c1\"\nbudget = { total = 1 }\n\
        bid = { cpm = 2 }\ncreatives = [{ id = \"cr\", w = 300, h = 250, adm = \"x\" }]\n";

    #[test]
    fn both_formats_are_told_apart_and_read_alike() {
        assert_eq!(format_of(JSON.as_bytes()), Format::Json);
        assert_eq!(format_of(b"{\"campaign\": []}"), Format::Json);
        assert_eq!(format_of(b"[]"), Format::Json);
        assert_eq!(format_of(TOML.as_bytes()), Format::Toml);
        assert_eq!(format_of(b"# fleet\n[[campaign]]"), Format::Toml);
        let a = campaign_set(JSON.as_bytes()).unwrap();
        let b = campaign_set(TOML.as_bytes()).unwrap();
        assert_eq!(a.campaigns(), b.campaigns());
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn an_invalid_set_says_why() {
        let e = campaign_set(JSON.replace("\"c1\"", "\"\"").as_bytes())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("campaigns[0].id"), "{e}");
        assert!(campaign_set(b"[[campaign]\n").is_err());
        assert!(campaign_set(&[0xff, 0x00]).is_err());
    }
}
