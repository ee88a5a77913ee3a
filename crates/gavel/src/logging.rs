//! The process's log: what is written (`--log` / `GAVEL_LOG`, a level and per-module levels in
//! the syntax of tracing-subscriber's `Targets`), how (`--log-format` / `GAVEL_LOG_FORMAT`,
//! text or one JSON object per line) and where (stderr, with ANSI colour only when stderr is a
//! terminal, so a log redirected to a file or a collector carries no escape codes).

use std::io::IsTerminal as _;

use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colour only when stderr is a terminal.
    Text,
    /// One JSON object per line: timestamp, level, target, fields (with the message).
    Json,
}

/// What is logged unless told: `info` carries the events an operator acts on (a breaker
/// opening, a bidder paused, a configuration applied or refused, the admin audit lines) and
/// nothing per request.
pub const DEFAULT_FILTER: &str = "info";

/// Longest `--log` value taken: a filter is a handful of module names, never a file.
const MAX_FILTER_BYTES: usize = 1024;

/// A parsed `--log` value.
#[derive(Debug, Clone)]
pub struct LogFilter {
    targets: Targets,
}

/// Parses `--log`: comma-separated directives, each a level (the default for every module)
/// or `module=level`. A bare word that is not a level is refused: `Targets` would read it as a
/// module enabled at `trace`, and a typo such as `--log verbose` would silently log nothing
/// else.
pub fn parse_filter(text: &str) -> Result<LogFilter, String> {
    if text.len() > MAX_FILTER_BYTES {
        return Err(format!("longer than {MAX_FILTER_BYTES} bytes"));
    }
    if text.trim().is_empty() {
        return Err("empty: give a level such as `info`".to_owned());
    }
    for directive in text.split(',') {
        let directive = directive.trim();
        // `LevelFilter` reads an empty string as `error`: `info,` would turn the default down.
        if directive.is_empty() {
            return Err(format!(
                "`{text}` has an empty directive (two commas, or one at an end)"
            ));
        }
        match directive.split_once('=') {
            None => {
                directive.parse::<LevelFilter>().map_err(|_| {
                    format!(
                        "`{directive}` is neither a level (off, error, warn, info, debug, trace) \
                         nor `module=level`"
                    )
                })?;
            }
            Some((module, level)) => {
                if level.trim().is_empty() {
                    return Err(format!("`{directive}` names no level after `=`"));
                }
                if module.trim().is_empty() {
                    return Err(format!("`{directive}` names no module before `=`"));
                }
                level.trim().parse::<LevelFilter>().map_err(|_| {
                    format!(
                        "`{directive}`: `{}` is not a level (off, error, warn, info, debug, trace)",
                        level.trim()
                    )
                })?;
            }
        }
    }
    let targets = text
        .parse::<Targets>()
        .map_err(|e| format!("`{text}`: {e}"))?;
    Ok(LogFilter { targets })
}

/// Installs the process's subscriber on stderr. Called once, before anything logs; a second
/// call (none is made) would leave the first in place.
pub fn init(filter: LogFilter, format: LogFormat) {
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let layer = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .with_filter(filter.targets)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(false)
            .with_span_list(false)
            .with_filter(filter.targets)
            .boxed(),
    };
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    fn enabled(filter: &str, target: &str, level: Level) -> bool {
        parse_filter(filter)
            .unwrap_or_else(|e| panic!("{filter}: {e}"))
            .targets
            .would_enable(target, &level)
    }

    #[test]
    fn a_plain_level_applies_to_every_module() {
        assert!(enabled("debug", "exchange::fanout", Level::DEBUG));
        assert!(!enabled("debug", "exchange::fanout", Level::TRACE));
        assert!(enabled("info", "gavel::audit", Level::INFO));
        assert!(!enabled("warn", "gavel::audit", Level::INFO));
        assert!(!enabled("off", "exchange", Level::ERROR));
    }

    #[test]
    fn per_module_levels_override_the_default_by_prefix() {
        let f = "info,exchange=debug,ledger=warn";
        assert!(enabled(f, "exchange::fanout", Level::DEBUG));
        assert!(!enabled(f, "ledger::leased::task", Level::INFO));
        assert!(enabled(f, "ledger::leased::task", Level::WARN));
        assert!(enabled(f, "bidder::reload", Level::INFO));
        assert!(!enabled(f, "bidder::reload", Level::DEBUG));
    }

    #[test]
    fn bad_filters_are_refused_naming_the_directive() {
        for (bad, named) in [
            ("verbose", "verbose"),
            ("info,exchange=loud", "loud"),
            ("=debug", "=debug"),
            ("", "empty"),
            ("info,,", "empty directive"),
            ("info,", "empty directive"),
            ("exchange=", "no level"),
        ] {
            let e = parse_filter(bad).expect_err(bad);
            assert!(e.contains(named), "{bad:?}: {e}");
        }
        assert!(parse_filter(&"a=info,".repeat(200)).is_err());
    }
}
