//! [`moved_key`]: a key an older file may still hold under its old name. A server refuses it
//! either way (unknown keys are errors); this finds which rename explains the refusal, so that
//! the message says where the key went instead of only that it is unknown.

/// The first `(old, new)` of `renames` whose `old` key (dotted: `section.key`) the TOML document
/// `text` sets; `None` when it sets none of them or is not TOML at all.
pub fn moved_key(
    text: &str,
    renames: &[(&'static str, &'static str)],
) -> Option<(&'static str, &'static str)> {
    let doc: toml::Table = text.parse().ok()?;
    renames.iter().copied().find(|(old, _)| {
        let mut path = old.split('.');
        let Some(first) = path.next() else {
            return false;
        };
        let mut node = doc.get(first);
        for part in path {
            node = node.and_then(|v| v.get(part));
        }
        node.is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENAMES: [(&str, &str); 2] = [
        ("auction.default_tmax_ms", "deadline.default_tmax_ms"),
        ("top", "section.top"),
    ];

    #[test]
    fn an_old_key_is_found_with_its_new_name() {
        assert_eq!(
            moved_key("[auction]\ndefault_tmax_ms = 80\n", &RENAMES),
            Some(("auction.default_tmax_ms", "deadline.default_tmax_ms"))
        );
        assert_eq!(
            moved_key("top = 1\n", &RENAMES),
            Some(("top", "section.top"))
        );
        assert_eq!(
            moved_key("[deadline]\ndefault_tmax_ms = 80\n", &RENAMES),
            None
        );
        assert_eq!(moved_key("[auction]\nother = 1\n", &RENAMES), None);
        assert_eq!(moved_key("[[[ not toml", &RENAMES), None);
    }
}
