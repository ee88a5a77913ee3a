//! Every configuration key settable from the environment: `GAVEL_<SERVER>__<KEY>__<KEY>...`
//! (`GAVEL_BIDDER__LEDGER__REDIS_MODE=per_bid`, `GAVEL_EXCHANGE__BIDDERS__0__URL=...`), laid
//! over the file's TOML table before the server's types read it, so that a value from the
//! environment meets exactly the checks a value in the file meets.
//!
//! The server's name in the prefix keeps one process that runs several servers (`gavel demo`)
//! from giving one server's values to another, and the double underscore keeps these apart
//! from the older single-underscore secrets (`GAVEL_ADMIN_TOKEN`, `GAVEL_REDIS_URL`), which keep
//! their meaning. Levels are separated by `__`, names are lowercased, and a level of digits is
//! an index into an array of tables (the next index appends one). A value is read as a TOML
//! value when it is one (`5000`, `true`, `["a", "b"]`, `"quoted"`), else as a bare string
//! (`0.0.0.0:8080`): write `'"123"'` for a string of digits.
//!
//! Bounded: at most [`MAX_ENV_VARS`] variables, names of [`MAX_ENV_NAME_BYTES`], values of
//! [`MAX_ENV_VALUE_BYTES`], [`MAX_ENV_DEPTH`] levels.

use std::cmp::Ordering;
use std::fmt;

use crate::ConfigError;

/// Most variables of one server's prefix.
pub const MAX_ENV_VARS: usize = 256;
/// Longest variable name.
pub const MAX_ENV_NAME_BYTES: usize = 256;
/// Longest value (a PEM certificate fits, a campaign file does not).
pub const MAX_ENV_VALUE_BYTES: usize = 64 * 1024;
/// Most levels below the server (`BIDDERS__0__URL` is three).
pub const MAX_ENV_DEPTH: usize = 8;

/// One level of a variable's path: a key, or an index into an array of tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    Key(String),
    Index(usize),
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Key(k) => f.write_str(k),
            Level::Index(i) => write!(f, "{i}"),
        }
    }
}

/// One variable: its name, where it lands in the table, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// As set: `GAVEL_EXCHANGE__HTTP__LISTEN`.
    pub name: String,
    /// `[http, listen]`.
    pub path: Vec<Level>,
    pub value: String,
}

impl EnvVar {
    /// The key as the file would write it and errors name it: `bidders[0].url`.
    pub fn key(&self) -> String {
        key_of(&self.path)
    }
}

pub(crate) fn key_of(path: &[Level]) -> String {
    let mut key = String::new();
    for level in path {
        match level {
            Level::Key(k) => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(k);
            }
            Level::Index(i) => key.push_str(&format!("[{i}]")),
        }
    }
    key
}

/// The variables of one server, parsed and checked, in the order they are applied (arrays
/// by index, so that `__0__` exists before `__1__` appends).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvOverlay {
    vars: Vec<EnvVar>,
}

/// What applying one variable did to the table, for naming it in a later refusal.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub(crate) var: EnvVar,
    /// The shortest path the variable created (a section, an array element): a refusal
    /// inside it is the variable's even when it names another key (a missing field).
    pub(crate) created: Option<Vec<Level>>,
}

impl EnvOverlay {
    /// The prefix of `server`'s variables: `GAVEL_EXCHANGE__` for `"EXCHANGE"`.
    pub fn prefix(server: &str) -> String {
        format!("GAVEL_{}__", server.to_ascii_uppercase())
    }

    /// The process environment's variables for `server` (`EXCHANGE`, `BIDDER`, `EDGE`).
    ///
    /// # Errors
    /// [`ConfigError::Env`] naming a variable that is not UTF-8, too long, badly formed, or
    /// one too many.
    pub fn from_process(server: &str) -> Result<EnvOverlay, ConfigError> {
        let prefix = Self::prefix(server);
        let mut vars = Vec::new();
        for (name, value) in std::env::vars_os() {
            // A name that is not UTF-8 cannot spell the prefix.
            let Some(name) = name.to_str() else { continue };
            if !name.starts_with(&prefix) {
                continue;
            }
            let value = value.into_string().map_err(|_| ConfigError::Env {
                var: name.to_owned(),
                problem: "the value is not UTF-8".to_owned(),
            })?;
            vars.push((name.to_owned(), value));
            if vars.len() > MAX_ENV_VARS {
                break;
            }
        }
        Self::from_vars(server, vars)
    }

    /// The variables of `vars` for `server`; others are ignored.
    ///
    /// # Errors
    /// [`ConfigError::Env`] naming the first variable refused.
    pub fn from_vars(
        server: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<EnvOverlay, ConfigError> {
        let prefix = Self::prefix(server);
        let mut parsed = Vec::new();
        for (name, value) in vars {
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            if parsed.len() == MAX_ENV_VARS {
                return Err(ConfigError::Env {
                    var: name,
                    problem: format!("more than {MAX_ENV_VARS} variables start with {prefix}"),
                });
            }
            let refuse = |problem: String| ConfigError::Env {
                var: name.clone(),
                problem,
            };
            if name.len() > MAX_ENV_NAME_BYTES {
                return Err(refuse(format!(
                    "the name is longer than {MAX_ENV_NAME_BYTES} bytes"
                )));
            }
            if value.len() > MAX_ENV_VALUE_BYTES {
                return Err(refuse(format!(
                    "the value is longer than {MAX_ENV_VALUE_BYTES} bytes"
                )));
            }
            let path = parse_path(rest).map_err(refuse)?;
            parsed.push(EnvVar { name, path, value });
        }
        parsed.sort_by(|a, b| compare_paths(&a.path, &b.path));
        if let Some(twice) = parsed
            .windows(2)
            .find(|w| w.first().map(|a| &a.path) == w.get(1).map(|b| &b.path))
        {
            let (a, b) = (twice.first(), twice.get(1));
            if let (Some(a), Some(b)) = (a, b) {
                return Err(ConfigError::Env {
                    var: b.name.clone(),
                    problem: format!("sets {} as {} does", b.key(), a.name),
                });
            }
        }
        Ok(EnvOverlay { vars: parsed })
    }

    /// No variable for this server.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The variables, in the order they are applied.
    pub fn vars(&self) -> &[EnvVar] {
        &self.vars
    }

    /// Lays every variable over `table`.
    ///
    /// # Errors
    /// [`ConfigError::Env`] naming a variable whose path crosses a value (`HTTP__LISTEN__X`
    /// when `http.listen` is a string) or skips an array index.
    pub(crate) fn apply(&self, table: &mut toml::Table) -> Result<Vec<Applied>, ConfigError> {
        let mut applied = Vec::with_capacity(self.vars.len());
        for var in &self.vars {
            let created = set(table, &var.path, parse_value(&var.value)).map_err(|problem| {
                ConfigError::Env {
                    var: var.name.clone(),
                    problem,
                }
            })?;
            applied.push(Applied {
                var: var.clone(),
                created,
            });
        }
        Ok(applied)
    }
}

/// `HTTP__LISTEN` as `[http, listen]`; `BIDDERS__0__URL` with an index.
fn parse_path(rest: &str) -> Result<Vec<Level>, String> {
    let mut path = Vec::new();
    for part in rest.split("__") {
        if part.is_empty() {
            return Err(
                "an empty level (three or more underscores in a row, or a trailing `__`)"
                    .to_owned(),
            );
        }
        if !part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "level {part:?} holds a character other than letters, digits and `_`"
            ));
        }
        if part.bytes().all(|b| b.is_ascii_digit()) {
            let index = part
                .parse::<usize>()
                .ok()
                .filter(|i| *i < MAX_ENV_VARS)
                .ok_or_else(|| format!("index {part} is above {}", MAX_ENV_VARS - 1))?;
            if path.is_empty() {
                return Err("the first level must be a key, not an index".to_owned());
            }
            path.push(Level::Index(index));
        } else {
            path.push(Level::Key(part.to_ascii_lowercase()));
        }
        if path.len() > MAX_ENV_DEPTH {
            return Err(format!("more than {MAX_ENV_DEPTH} levels"));
        }
    }
    Ok(path)
}

/// Keys by name, indexes by number, so that `__2__` comes before `__10__`.
fn compare_paths(a: &[Level], b: &[Level]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x, y) {
            (Level::Index(x), Level::Index(y)) => x.cmp(y),
            (Level::Key(x), Level::Key(y)) => x.cmp(y),
            (Level::Index(_), Level::Key(_)) => Ordering::Less,
            (Level::Key(_), Level::Index(_)) => Ordering::Greater,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// A TOML value when the text is exactly one (`5000`, `true`, `[1, 2]`, `"x"`), else the text
/// as a string.
pub(crate) fn parse_value(text: &str) -> toml::Value {
    let doc = format!("v = {text}");
    if let Ok(mut table) = doc.parse::<toml::Table>()
        && table.len() == 1
        && let Some(value) = table.remove("v")
    {
        return value;
    }
    toml::Value::String(text.to_owned())
}

/// Sets `value` at `path` in `table`, creating sections and appending array elements on the
/// way; returns the shortest path it created.
fn set(
    table: &mut toml::Table,
    path: &[Level],
    value: toml::Value,
) -> Result<Option<Vec<Level>>, String> {
    let Some((Level::Key(first), rest)) = path.split_first() else {
        return Err("the first level must be a key".to_owned());
    };
    let mut created = None;
    let mut walked = vec![Level::Key(first.clone())];
    let Some((last, middle)) = rest.split_last() else {
        table.insert(first.clone(), value);
        return Ok(None);
    };
    // The container the next level goes into, made as that level needs it.
    let fresh = |next: &Level| match next {
        Level::Key(_) => toml::Value::Table(toml::Table::new()),
        Level::Index(_) => toml::Value::Array(Vec::new()),
    };
    let next_of = |i: usize| middle.get(i).unwrap_or(last);
    if !table.contains_key(first) {
        created = Some(walked.clone());
    }
    let mut node = table
        .entry(first.clone())
        .or_insert_with(|| fresh(next_of(0)));
    for (i, level) in middle.iter().enumerate() {
        let next = next_of(i + 1);
        let (child, made) = step(node, level, || fresh(next), &walked)?;
        walked.push(level.clone());
        if made && created.is_none() {
            created = Some(walked.clone());
        }
        node = child;
    }
    match (node, last) {
        (toml::Value::Table(t), Level::Key(k)) => {
            t.insert(k.clone(), value);
        }
        (toml::Value::Array(items), Level::Index(i)) => {
            if *i < items.len() {
                if let Some(slot) = items.get_mut(*i) {
                    *slot = value;
                }
            } else if *i == items.len() {
                items.push(value);
                if created.is_none() {
                    walked.push(last.clone());
                    created = Some(walked);
                }
            } else {
                return Err(skipped(&walked, *i, items.len()));
            }
        }
        (_, level) => return Err(crossed(&walked, level)),
    }
    Ok(created)
}

/// One level down from `node`: the child, and whether it was made now.
fn step<'a>(
    node: &'a mut toml::Value,
    level: &Level,
    fresh: impl FnOnce() -> toml::Value,
    walked: &[Level],
) -> Result<(&'a mut toml::Value, bool), String> {
    match (node, level) {
        (toml::Value::Table(t), Level::Key(k)) => {
            let made = !t.contains_key(k);
            Ok((t.entry(k.clone()).or_insert_with(fresh), made))
        }
        (toml::Value::Array(items), Level::Index(i)) => {
            let len = items.len();
            if *i == len {
                items.push(toml::Value::Table(toml::Table::new()));
            }
            match items.get_mut(*i) {
                Some(child) => Ok((child, *i == len)),
                None => Err(skipped(walked, *i, len)),
            }
        }
        (_, level) => Err(crossed(walked, level)),
    }
}

fn skipped(walked: &[Level], index: usize, len: usize) -> String {
    format!(
        "{} has {len} entries: index {index} would skip one (the next index appends)",
        key_of(walked)
    )
}

fn crossed(walked: &[Level], level: &Level) -> String {
    match level {
        Level::Key(k) => format!("{} is not a section, so it has no key {k}", key_of(walked)),
        Level::Index(i) => format!(
            "{} is not a list of tables, so it has no entry {i}",
            key_of(walked)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay(vars: &[(&str, &str)]) -> Result<EnvOverlay, ConfigError> {
        EnvOverlay::from_vars(
            "EXCHANGE",
            vars.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
        )
    }

    fn applied(base: &str, vars: &[(&str, &str)]) -> Result<toml::Table, String> {
        let mut table: toml::Table = base.parse().unwrap();
        overlay(vars)
            .and_then(|o| o.apply(&mut table))
            .map_err(|e| e.to_string())?;
        Ok(table)
    }

    #[test]
    fn names_become_paths_and_values_become_toml() {
        let t = applied(
            "node = \"a\"\n[http]\nmax_connections = 10\n",
            &[
                ("GAVEL_EXCHANGE__HTTP__MAX_CONNECTIONS", "20"),
                ("GAVEL_EXCHANGE__LISTEN", "0.0.0.0:8080"),
                ("GAVEL_EXCHANGE__NOTICES__FIRE_BURL", "true"),
                ("GAVEL_EXCHANGE__TAGS", "[\"a\", \"b\"]"),
                ("GAVEL_EXCHANGE__NODE", "\"123\""),
                ("GAVEL_BIDDER__NODE", "not this server's"),
                ("GAVEL_ADMIN_TOKEN", "an older secret variable"),
            ],
        )
        .unwrap();
        let want: toml::Table =
            "node = \"123\"\nlisten = \"0.0.0.0:8080\"\ntags = [\"a\", \"b\"]\n\
             [http]\nmax_connections = 20\n[notices]\nfire_burl = true\n"
                .parse()
                .unwrap();
        assert_eq!(t, want);
    }

    #[test]
    fn arrays_of_tables_by_index_in_numeric_order() {
        let t = applied(
            "[[bidders]]\nname = \"a\"\nurl = \"http://a\"\n",
            &[
                ("GAVEL_EXCHANGE__BIDDERS__0__URL", "http://a2"),
                ("GAVEL_EXCHANGE__BIDDERS__2__NAME", "c"),
                ("GAVEL_EXCHANGE__BIDDERS__1__NAME", "b"),
            ],
        )
        .unwrap();
        let names: Vec<_> = t["bidders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(t["bidders"][0]["url"].as_str(), Some("http://a2"));
        let e = applied("", &[("GAVEL_EXCHANGE__BIDDERS__1__NAME", "b")]).unwrap_err();
        assert_eq!(
            e,
            "GAVEL_EXCHANGE__BIDDERS__1__NAME: bidders has 0 entries: index 1 would skip one (the next index appends)"
        );
        // Ten entries sort as numbers: 2 is set before 10 appends.
        let mut vars: Vec<(String, String)> = (0..11)
            .map(|i| (format!("GAVEL_EXCHANGE__B__{i}__N"), i.to_string()))
            .collect();
        vars.reverse();
        let o = EnvOverlay::from_vars("EXCHANGE", vars).unwrap();
        let mut t = toml::Table::new();
        o.apply(&mut t).unwrap();
        assert_eq!(t["b"][10]["n"].as_integer(), Some(10));
    }

    #[test]
    fn malformed_names_and_crossed_paths_are_refused_naming_the_variable() {
        for (name, want) in [
            ("GAVEL_EXCHANGE__HTTP____X", "an empty level"),
            ("GAVEL_EXCHANGE__HTTP__", "an empty level"),
            ("GAVEL_EXCHANGE__HTTP__A-B", "holds a character"),
            ("GAVEL_EXCHANGE__0", "must be a key"),
            ("GAVEL_EXCHANGE__B__999", "index 999 is above 255"),
            (
                "GAVEL_EXCHANGE__A__B__C__D__E__F__G__H__I",
                "more than 8 levels",
            ),
        ] {
            let e = overlay(&[(name, "1")]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{name}: ")), "{e}");
            assert!(e.contains(want), "{name}: {e}");
        }
        let e = applied("listen = \"x\"\n", &[("GAVEL_EXCHANGE__LISTEN__PORT", "1")]).unwrap_err();
        assert_eq!(
            e,
            "GAVEL_EXCHANGE__LISTEN__PORT: listen is not a section, so it has no key port"
        );
        let e = overlay(&[
            ("GAVEL_EXCHANGE__http__x", "1"),
            ("GAVEL_EXCHANGE__HTTP__X", "2"),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("sets http.x as GAVEL_EXCHANGE__"), "{e}");
    }

    #[test]
    fn counts_and_lengths_are_bounded() {
        let many: Vec<(String, String)> = (0..=MAX_ENV_VARS)
            .map(|i| (format!("GAVEL_EXCHANGE__K{i}"), "1".to_owned()))
            .collect();
        let e = EnvOverlay::from_vars("EXCHANGE", many)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 256 variables"), "{e}");
        let long = "v".repeat(MAX_ENV_VALUE_BYTES + 1);
        let e = overlay(&[("GAVEL_EXCHANGE__K", &long)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("value is longer than 65536"), "{e}");
        let name = format!("GAVEL_EXCHANGE__{}", "K".repeat(MAX_ENV_NAME_BYTES));
        let e = overlay(&[(&name, "1")]).unwrap_err().to_string();
        assert!(e.contains("name is longer than 256"), "{e}");
    }

    #[test]
    fn a_value_is_toml_only_when_it_is_exactly_one_value() {
        assert_eq!(parse_value("5000"), toml::Value::Integer(5000));
        assert_eq!(parse_value("false"), toml::Value::Boolean(false));
        assert_eq!(parse_value("'x'"), toml::Value::String("x".into()));
        for bare in [
            "per_bid",
            "0.0.0.0:8080",
            "http://a/b?c=d",
            "1\nw = 2",
            "",
            "[1",
        ] {
            assert_eq!(
                parse_value(bare),
                toml::Value::String(bare.into()),
                "{bare:?}"
            );
        }
    }

    #[test]
    fn what_a_variable_created_is_remembered() {
        let mut table: toml::Table = "[http]\nx = 1\n[[bidders]]\nname = \"a\"\n"
            .parse()
            .unwrap();
        let o = overlay(&[
            ("GAVEL_EXCHANGE__HTTP__Y", "1"),
            ("GAVEL_EXCHANGE__LEDGER__REDIS__URL", "u"),
            ("GAVEL_EXCHANGE__BIDDERS__1__URL", "u"),
        ])
        .unwrap();
        let applied = o.apply(&mut table).unwrap();
        let created: Vec<Option<String>> = applied
            .iter()
            .map(|a| a.created.as_deref().map(key_of))
            .collect();
        assert_eq!(
            created,
            [
                Some("bidders[1]".to_owned()),
                None,
                Some("ledger".to_owned())
            ]
        );
    }
}
