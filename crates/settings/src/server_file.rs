//! The one load path of every server's configuration file: its `GAVEL_<SERVER>__...` variables
//! read, the file read within its size limit, parsed with the variables laid over it (old key
//! names read at their new places), and the relative paths it names made to start at its
//! directory. What the values must be is the server's own check, after this.

use std::path::Path;

use crate::shared::{Whole, WithShared};
use crate::{ConfigError, EnvOverlay, FileRules, parse_toml_with, read_bounded};

/// A server's configuration file: its shared sections ([`WithShared`]) and its own.
pub trait ServerFile: WithShared {
    /// Whose it is, its size limit and its moved keys.
    const RULES: FileRules;
    /// Its variables' server name: `EXCHANGE` for `GAVEL_EXCHANGE__...`.
    const ENV_SERVER: &'static str;

    /// Makes the relative paths the file names start at `dir`, the file's directory.
    fn resolve_paths(&mut self, dir: &Path);
}

/// The file at `path` with the process's variables over it, its relative paths resolved.
///
/// # Errors
/// A variable badly formed, the file unreadable or too large, or not the server's TOML: the
/// error names the variable, the file or the key.
pub fn load_file<T: ServerFile>(path: &Path) -> Result<T, ConfigError> {
    let overlay = EnvOverlay::from_process(T::ENV_SERVER)?;
    let text = read_bounded(path, T::RULES.max_bytes)?;
    let Whole(mut file) = parse_toml_with::<Whole<T>>(&text, &T::RULES, &overlay)?;
    if let Some(dir) = path.parent() {
        file.resolve_paths(dir);
    }
    Ok(file)
}

/// The process's variables alone, over the defaults (no file: paths stay relative to the
/// working directory).
///
/// # Errors
/// As [`load_file`], naming the variable.
pub fn load_env<T: ServerFile>() -> Result<T, ConfigError> {
    parse_text("", &EnvOverlay::from_process(T::ENV_SERVER)?)
}

/// `text` with `overlay` laid over it (no file: paths stay as written).
///
/// # Errors
/// As [`load_file`].
pub fn parse_text<T: ServerFile>(text: &str, overlay: &EnvOverlay) -> Result<T, ConfigError> {
    parse_toml_with::<Whole<T>>(text, &T::RULES, overlay).map(|Whole(file)| file)
}
