//! [`parse_toml_with`]: a server's file with its `GAVEL_<SERVER>__...` variables laid over it
//! ([`EnvOverlay`]), read by the server's types; a refusal names the variable that caused it,
//! or reads as the file's own refusal would.

use serde::de::DeserializeOwned;

use crate::env_overlay::{Applied, EnvOverlay, Level};
use crate::{ConfigError, FileRules, parse_toml};

/// [`parse_toml`] with `overlay` laid over the file's table first: a refusal that a variable
/// caused (a key the layout does not have, a value of the wrong type, an entry it added that
/// lacks a required key) names the variable; one that the file caused reads as it would
/// without the overlay. Without variables this is [`parse_toml`].
pub fn parse_toml_with<T: DeserializeOwned>(
    text: &str,
    rules: &FileRules,
    overlay: &EnvOverlay,
) -> Result<T, ConfigError> {
    if overlay.is_empty() {
        return parse_toml(text, rules);
    }
    let mut table = crate::config_error::parse_table(text, rules)?;
    // Old names are read at their new places: the file's before the variables are laid over
    // it (so a variable under the new name still wins), a variable's after.
    crate::config_error::moved_keys(&mut table, rules)?;
    let applied = overlay.apply(&mut table)?;
    crate::config_error::moved_keys(&mut table, rules)?;
    let value = toml::Value::Table(table);
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let at = e.path().to_string();
        let message = e.into_inner().to_string();
        // toml adds `in <key>` lines below; the path above says where already.
        let message = message.lines().next().unwrap_or_default().trim_end();
        if let Some(var) = culprit(&applied, &at) {
            return ConfigError::Env {
                var: var.name.clone(),
                problem: if at == var.key() || at == "." {
                    message.to_owned()
                } else {
                    format!("{at}: {message}")
                },
            };
        }
        // The file's own fault: the message it gets without the overlay, when it has one.
        match parse_toml::<T>(text, rules) {
            Err(file_error) => file_error,
            Ok(_) => ConfigError::Parse {
                server: rules.server,
                message: format!("{at}: {message}"),
            },
        }
    })
}

/// The variable a refusal at `at` (serde's path: `http.listen`, `bidders[1]`) belongs to:
/// one whose key is `at` or above it, or one that created the section or entry `at` is in.
fn culprit<'a>(applied: &'a [Applied], at: &str) -> Option<&'a crate::EnvVar> {
    let within = |outer: &str| {
        at == outer
            || at
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    applied
        .iter()
        .find(|a| within(&a.var.key()))
        .or_else(|| {
            applied.iter().find(|a| {
                a.created
                    .as_deref()
                    .is_some_and(|c: &[Level]| within(&crate::env_overlay::key_of(c)))
            })
        })
        .map(|a| &a.var)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Server {
        #[serde(default)]
        node: String,
        #[serde(default)]
        http: Http,
        #[serde(default)]
        bidders: Vec<Bidder>,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Http {
        max_connections: u32,
        listen: String,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Bidder {
        name: String,
        url: String,
    }

    const SERVER: FileRules = FileRules {
        server: "the test",
        max_bytes: 1024,
        moved: &[("http.old", "http.max_connections")],
    };

    fn with_env(text: &str, vars: &[(&str, &str)]) -> Result<Server, String> {
        let overlay = EnvOverlay::from_vars(
            "EXCHANGE",
            vars.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
        )
        .map_err(|e| e.to_string())?;
        parse_toml_with(text, &SERVER, &overlay).map_err(|e| e.to_string())
    }

    #[test]
    fn a_variable_wins_over_the_file_and_meets_the_same_checks() {
        let file =
            "node = \"a\"\n[http]\nmax_connections = 10\n[[bidders]]\nname = \"x\"\nurl = \"u\"\n";
        let s = with_env(
            file,
            &[
                ("GAVEL_EXCHANGE__HTTP__MAX_CONNECTIONS", "20"),
                ("GAVEL_EXCHANGE__HTTP__LISTEN", "localhost:8080"),
                ("GAVEL_EXCHANGE__BIDDERS__0__URL", "http://b"),
                ("GAVEL_EXCHANGE__BIDDERS__1__NAME", "y"),
                ("GAVEL_EXCHANGE__BIDDERS__1__URL", "http://y"),
            ],
        )
        .unwrap();
        assert_eq!(s.node, "a");
        assert_eq!(s.http.max_connections, 20);
        assert_eq!(s.http.listen, "localhost:8080");
        assert_eq!(
            s.bidders,
            [
                Bidder {
                    name: "x".into(),
                    url: "http://b".into()
                },
                Bidder {
                    name: "y".into(),
                    url: "http://y".into()
                },
            ]
        );
        // Without a file: the defaults and the environment.
        let s = with_env("", &[("GAVEL_EXCHANGE__NODE", "n")]).unwrap();
        assert_eq!(s.node, "n");
    }

    #[test]
    fn a_refusal_the_environment_caused_names_the_variable() {
        let e = with_env("", &[("GAVEL_EXCHANGE__HTTP__LISTENN", "x")]).unwrap_err();
        assert!(
            e.starts_with("GAVEL_EXCHANGE__HTTP__LISTENN: unknown field `listenn`"),
            "{e}"
        );
        let e = with_env("", &[("GAVEL_EXCHANGE__HTTP__MAX_CONNECTIONS", "many")]).unwrap_err();
        assert!(
            e.starts_with("GAVEL_EXCHANGE__HTTP__MAX_CONNECTIONS: invalid type: string \"many\""),
            "{e}"
        );
        let e = with_env("", &[("GAVEL_EXCHANGE__HTTP", "5")]).unwrap_err();
        assert!(
            e.starts_with("GAVEL_EXCHANGE__HTTP: invalid type: integer"),
            "{e}"
        );
        let e = with_env("", &[("GAVEL_EXCHANGE__BIDDERS__0__NAME", "y")]).unwrap_err();
        assert_eq!(
            e,
            "GAVEL_EXCHANGE__BIDDERS__0__NAME: bidders[0]: missing field `url`"
        );
        let e = with_env("", &[("GAVEL_EXCHANGE__LEDGER__URL", "y")]).unwrap_err();
        assert!(
            e.starts_with("GAVEL_EXCHANGE__LEDGER__URL: ledger: unknown field `ledger`")
                || e.starts_with("GAVEL_EXCHANGE__LEDGER__URL: unknown field `ledger`"),
            "{e}"
        );
    }

    #[test]
    fn a_refusal_the_file_caused_reads_as_without_the_environment() {
        let vars = [("GAVEL_EXCHANGE__NODE", "n")];
        let e = with_env("[http]\nmax_connections = \"x\"\n", &vars).unwrap_err();
        let plain = parse_toml::<Server>("[http]\nmax_connections = \"x\"\n", &SERVER)
            .unwrap_err()
            .to_string();
        assert_eq!(e, plain);
        // An old name, the file's or a variable's, is read at its new place; both set is refused.
        assert!(with_env("", &[("GAVEL_EXCHANGE__HTTP__OLD", "1")]).is_ok());
        assert!(with_env("[http]\nold = 1\n", &vars).is_ok());
        // The file's old name under a variable's new one: the variable wins, as it always does.
        let won = with_env(
            "[http]\nold = 1\n",
            &[("GAVEL_EXCHANGE__HTTP__MAX_CONNECTIONS", "7")],
        );
        assert_eq!(won.map(|s| s.http.max_connections), Ok(7));
        let e = with_env(
            "[http]\nmax_connections = 2\n",
            &[("GAVEL_EXCHANGE__HTTP__OLD", "1")],
        )
        .unwrap_err();
        assert_eq!(
            e,
            "http.old has moved to http.max_connections, and both are set: keep http.max_connections only"
        );
        let e = with_env("[[[", &vars).unwrap_err();
        assert!(
            e.starts_with("config is not valid TOML for the test"),
            "{e}"
        );
        // A file entry without its required key stays the file's fault.
        let e = with_env("[[bidders]]\nname = \"x\"\n", &vars).unwrap_err();
        assert!(
            e.contains("missing field `url`") && !e.contains("GAVEL_"),
            "{e}"
        );
    }
}
