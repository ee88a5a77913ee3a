//! Keys an older file may still hold under their old names. [`move_keys`] reads each at its
//! new place (the caller warns, naming the new key), so yesterday's file keeps loading; a file
//! that sets both names is refused, since the two may disagree. [`moved_key`] finds which rename
//! a document uses.

/// One old key read at its new place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub old: &'static str,
    pub new: &'static str,
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Moved { old, new } = self;
        write!(f, "{old} has moved: read as {new}; write it as {new}")
    }
}

/// Moves every `old` key of `renames` that `table` sets to its `new` place (dotted paths,
/// sections made as needed). Returns the moves made, or the first rename whose two names are
/// both set (or whose new place is inside a value that is not a table).
pub fn move_keys(
    table: &mut toml::Table,
    renames: &[(&'static str, &'static str)],
) -> Result<Vec<Moved>, Moved> {
    let mut moved = Vec::new();
    for &(old, new) in renames {
        let clash = Moved { old, new };
        let Some(value) = take(table, old) else {
            continue;
        };
        let (parents, leaf) = match new.rsplit_once('.') {
            Some((parents, leaf)) => (Some(parents), leaf),
            None => (None, new),
        };
        let mut node = &mut *table;
        for part in parents.into_iter().flat_map(|p| p.split('.')) {
            let entry = node
                .entry(part.to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            node = entry.as_table_mut().ok_or(clash)?;
        }
        if node.contains_key(leaf) {
            return Err(clash);
        }
        node.insert(leaf.to_owned(), value);
        moved.push(clash);
    }
    Ok(moved)
}

/// Removes and returns the value at the dotted `path`, when there is one.
fn take(table: &mut toml::Table, path: &str) -> Option<toml::Value> {
    match path.split_once('.') {
        None => table.remove(path),
        Some((head, rest)) => take(table.get_mut(head)?.as_table_mut()?, rest),
    }
}

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

    #[test]
    fn old_keys_are_read_at_their_new_place_and_both_names_are_refused() {
        let mut table: toml::Table = "top = 1\n[auction]\ndefault_tmax_ms = 80\nother = 2\n"
            .parse()
            .unwrap();
        let moved = move_keys(&mut table, &RENAMES).unwrap();
        assert_eq!(
            moved,
            [
                Moved {
                    old: "auction.default_tmax_ms",
                    new: "deadline.default_tmax_ms"
                },
                Moved {
                    old: "top",
                    new: "section.top"
                }
            ]
        );
        let expected: toml::Table =
            "[auction]\nother = 2\n[deadline]\ndefault_tmax_ms = 80\n[section]\ntop = 1\n"
                .parse()
                .unwrap();
        assert_eq!(table, expected);
        assert_eq!(
            moved[0].to_string(),
            "auction.default_tmax_ms has moved: read as deadline.default_tmax_ms; write it as deadline.default_tmax_ms"
        );

        let mut both: toml::Table =
            "[auction]\ndefault_tmax_ms = 80\n[deadline]\ndefault_tmax_ms = 90\n"
                .parse()
                .unwrap();
        assert_eq!(
            move_keys(&mut both, &RENAMES).unwrap_err().old,
            "auction.default_tmax_ms"
        );
        let mut none: toml::Table = "[deadline]\ndefault_tmax_ms = 90\n".parse().unwrap();
        assert_eq!(move_keys(&mut none, &RENAMES), Ok(Vec::new()));
    }
}
