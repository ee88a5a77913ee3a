//! The disk tier's file format: one file per object, checksummed as a whole. Pure.
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `GVEDGE01` (format version in the last two) |
//! | 4 | key length, little endian |
//! | 4 | metadata length |
//! | 8 | body length |
//! | 32 | SHA-256 of everything after this field |
//! | key, metadata (JSON), body | |
//!
//! A file that is short, long, of another version, for another key, or whose checksum does not
//! match is refused: the disk tier deletes it and fetches the object again.

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::object::{Meta, Object};

const MAGIC: &[u8; 8] = b"GVEDGE01";
const HEADER: usize = 8 + 4 + 4 + 8 + 32;
/// Longest metadata accepted when reading, so a corrupt length cannot ask for gigabytes.
const MAX_META: usize = 64 * 1024;

/// Why a record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("shorter than its header")]
    Truncated,
    #[error("not a record of this format")]
    Magic,
    #[error("lengths do not add up to the file's size")]
    Length,
    #[error("checksum mismatch")]
    Checksum,
    #[error("stored for another key")]
    OtherKey,
    #[error("metadata unreadable: {0}")]
    Meta(String),
}

/// The file's bytes for an object stored under `key`.
pub fn encode(key: &str, object: &Object) -> Vec<u8> {
    // Serializing these plain fields cannot fail.
    let meta = serde_json::to_vec(&object.meta).unwrap_or_default();
    let body = &object.body;
    let mut out = Vec::with_capacity(HEADER + key.len() + meta.len() + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    let mut hash = Sha256::new();
    hash.update(key.as_bytes());
    hash.update(&meta);
    hash.update(body);
    out.extend_from_slice(&hash.finalize());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&meta);
    out.extend_from_slice(body);
    out
}

/// The object in a file read for `key`; the body shares the file's buffer.
pub fn decode(file: Bytes, key: &str) -> Result<Object, RecordError> {
    if file.len() < HEADER {
        return Err(RecordError::Truncated);
    }
    if &file[..8] != MAGIC {
        return Err(RecordError::Magic);
    }
    let u32_at = |at: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&file[at..at + 4]);
        u32::from_le_bytes(b) as usize
    };
    let key_len = u32_at(8);
    let meta_len = u32_at(12);
    let mut b = [0u8; 8];
    b.copy_from_slice(&file[16..24]);
    let body_len = u64::from_le_bytes(b);
    let total = (HEADER as u64)
        .checked_add(key_len as u64)
        .and_then(|n| n.checked_add(meta_len as u64))
        .and_then(|n| n.checked_add(body_len));
    if meta_len > MAX_META || total != Some(file.len() as u64) {
        return Err(RecordError::Length);
    }
    let rest = &file[HEADER..];
    if Sha256::digest(rest).as_slice() != &file[24..HEADER] {
        return Err(RecordError::Checksum);
    }
    if &rest[..key_len] != key.as_bytes() {
        return Err(RecordError::OtherKey);
    }
    let meta: Meta = serde_json::from_slice(&rest[key_len..key_len + meta_len])
        .map_err(|e| RecordError::Meta(e.to_string()))?;
    let body = file.slice(HEADER + key_len + meta_len..);
    Ok(Object::new(meta, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> Object {
        Object::new(
            Meta {
                content_type: "video/mp4".into(),
                etag: "\"v1\"".into(),
                last_modified: Some("Wed, 25 Nov 2026 10:00:00 GMT".into()),
                cache_control: Some("max-age=600".into()),
                stored_at_ms: 7,
                fresh_until_ms: 600_007,
            },
            Bytes::from(vec![0xAB; 5_000]),
        )
    }

    #[test]
    fn a_record_reads_back_as_it_was_written() {
        let bytes = Bytes::from(encode("cdn/a.mp4", &object()));
        assert_eq!(decode(bytes, "cdn/a.mp4"), Ok(object()));
    }

    #[test]
    fn every_single_byte_flip_is_refused() {
        let good = encode("cdn/a.mp4", &object());
        // Every position of the header and metadata, and a sample of the body.
        let positions = (0..HEADER + 200).chain((HEADER + 200..good.len()).step_by(97));
        for at in positions {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert!(
                decode(Bytes::from(bad), "cdn/a.mp4").is_err(),
                "a flip at byte {at} was accepted"
            );
        }
    }

    #[test]
    fn truncated_extended_and_misfiled_records_are_refused() {
        let good = encode("cdn/a.mp4", &object());
        for len in [0, 10, HEADER, good.len() - 1] {
            assert!(
                decode(Bytes::copy_from_slice(&good[..len]), "cdn/a.mp4").is_err(),
                "{len}"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(
            decode(Bytes::from(longer), "cdn/a.mp4"),
            Err(RecordError::Length)
        );
        assert_eq!(
            decode(Bytes::from(good), "cdn/b.mp4"),
            Err(RecordError::OtherKey)
        );
    }
}
