//! Test keys: a notice key and an admin token written into a test's directory, and the config
//! lines that point a server at them. Fixed values: tests are deterministic, and these files
//! never leave a temporary directory.

use std::path::Path;

/// The admin token every test server is given (send it as `Authorization: Bearer ...`).
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdef0123456789";
/// The notice key every test bidder signs with.
pub const NOTICE_KEY: &str = "test-notice-key-0123456789abcdef0123456789abcdef";

/// Writes `notice.key` and `admin.token` into `dir` (owner-only) and returns the TOML lines,
/// as dotted top-level keys, that use them: put them before any `[section]` of the config.
///
/// # Panics
/// When the files cannot be written.
pub fn security_toml(dir: &Path) -> String {
    write_private(&dir.join("notice.key"), NOTICE_KEY);
    write_private(&dir.join("admin.token"), ADMIN_TOKEN);
    "security.notice_key_file = \"notice.key\"\nsecurity.admin_token_file = \"admin.token\"\n"
        .to_owned()
}

/// [`security_toml`] for the exchange, which has no notice key.
///
/// # Panics
/// When the file cannot be written.
pub fn admin_toml(dir: &Path) -> String {
    write_private(&dir.join("admin.token"), ADMIN_TOKEN);
    "security.admin_token_file = \"admin.token\"\n".to_owned()
}

/// Writes a secret file only its owner can read (servers refuse world-readable secrets).
///
/// # Panics
/// When the file cannot be written.
pub fn write_private(path: &Path, content: &str) {
    std::fs::write(path, content)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
    }
}
