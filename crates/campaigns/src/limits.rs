//! Bounds on what one campaign file may hold. They keep a bad or hostile file from exhausting
//! memory at load, and keep every index and integer in range (campaign and creative indices are
//! `u32`, money stays far from `i64` overflow).

/// Largest campaign file read, in bytes (64 MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Most campaigns in one file.
pub const MAX_CAMPAIGNS: usize = 1_000_000;
/// Most creatives in one campaign.
pub const MAX_CREATIVES: usize = 100;
/// Most entries in one list (targeting lists, `adomain`, `cat`, video `mimes`...).
pub const MAX_LIST: usize = 10_000;
/// Longest `adm` markup, in bytes (64 KiB).
pub const MAX_ADM_BYTES: usize = 64 * 1024;
/// Longest id (campaign, creative), in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Longest string entry of a list (a domain name is at most 253 bytes; bundles and segment ids
/// get the same room), in bytes.
pub const MAX_ENTRY_BYTES: usize = 256;
/// Largest banner width or height, in pixels (large DOOH screens included).
pub const MAX_DIMENSION: u32 = 16_384;
/// Longest video creative, in seconds.
pub const MAX_VIDEO_SECONDS: u32 = 3_600;
