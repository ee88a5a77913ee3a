//! Configuration files, the same way for every server: read within a size limit
//! ([`read_bounded`]), refuse a key that moved with a message that says where it went
//! ([`moved_key`]), follow the file while serving ([`follow`], over [`watch_file`]), and read
//! keys and tokens from their own files or the environment ([`load_secret`], and lists of keys
//! valid at once with [`read_key_file`]), and read CA
//! certificate files ([`read_certificates`]); and refuse a file in one shape for every server
//! ([`ConfigError`], [`Invalid`] naming the key, [`parse_toml`]); lay `GAVEL_<SERVER>__...`
//! variables over a file ([`EnvOverlay`], [`parse_toml_with`]); read the sections several servers
//! share from the same table as each server's own ([`Sections`], [`Whole`]); read `listen` addresses that
//! name a host ([`resolve_listen`]).
//!
//! What a file means is each server's business (its typed config, validated with errors
//! naming the key); how it is read and watched is written once here, so that the exchange's
//! configuration and the bidder's campaigns change under the same rules: a file is read only
//! once it has stopped changing, and a file that cannot be read or parsed never replaces the
//! last good one (the caller keeps serving what it has).

mod config_error;
mod env_overlay;
mod key_list;
mod listen;
mod moved;
mod overlaid;
mod pem;
mod read;
mod secret;
mod server_file;
mod shared;
mod watch;

pub use config_error::{ConfigError, FileRules, Invalid, check_range, invalid, parse_toml};
pub use env_overlay::{
    EnvOverlay, EnvVar, Level, MAX_ENV_DEPTH, MAX_ENV_NAME_BYTES, MAX_ENV_VALUE_BYTES, MAX_ENV_VARS,
};
pub use key_list::{KeySource, MAX_KEY_FILE_BYTES, read_key_file, read_key_source, split_key_list};
pub use listen::{ListenError, MAX_LISTEN_BYTES, deserialize_listen, resolve_listen};
pub use moved::{Moved, move_keys, moved_key};
pub use overlaid::parse_toml_with;
pub use pem::read_certificates;
pub use read::{ReadError, read_bounded, read_bounded_bytes, relative_to};
pub use secret::{
    MAX_SECRET_BYTES, MIN_SECRET_BYTES, Secret, SecretError, load_secret, readable_by_others,
};
pub use server_file::{ServerFile, load_env, load_file, parse_text};
pub use shared::{Sections, Whole, WithShared};
pub use watch::{POLL_INTERVAL, follow, follow_files, stamp, watch_file};
