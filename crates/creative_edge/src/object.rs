//! A stored object: the body and what is needed to answer for it (content type, validators,
//! lifetime). Shared by both tiers and the fills; immutable once built.

use bytes::Bytes;
use http::HeaderValue;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What is kept about an object besides its bytes. Stored as JSON in the disk record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub content_type: String,
    /// The origin's entity tag, or one made from the body's checksum when it sent none.
    pub etag: String,
    pub last_modified: Option<String>,
    /// The origin's `Cache-Control`, passed on to clients.
    pub cache_control: Option<String>,
    /// When the edge received it (ms since the epoch); `Age` is counted from here.
    pub stored_at_ms: u64,
    /// Fresh until then (ms since the epoch); stale after, usable only when the origin fails.
    pub fresh_until_ms: u64,
}

/// An object as the tiers hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub meta: Meta,
    pub body: Bytes,
    /// The metadata as header values, checked and copied once when the object is built, so a
    /// hit only clones them (a reference count) instead of validating and copying each.
    values: HeaderValues,
}

/// [`Meta`]'s headers, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderValues {
    pub content_type: HeaderValue,
    pub etag: Option<HeaderValue>,
    pub last_modified: Option<HeaderValue>,
    pub cache_control: Option<HeaderValue>,
}

impl Object {
    /// The object with its header values built. A value that is not a valid header (a disk
    /// record edited by hand, say) is left out; a bad content type becomes
    /// `application/octet-stream`.
    pub fn new(meta: Meta, body: Bytes) -> Object {
        let value = |text: &str| HeaderValue::from_str(text).ok();
        let values = HeaderValues {
            content_type: value(&meta.content_type)
                .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream")),
            etag: value(&meta.etag),
            last_modified: meta.last_modified.as_deref().and_then(value),
            cache_control: meta.cache_control.as_deref().and_then(value),
        };
        Object { meta, body, values }
    }

    /// The metadata as header values.
    pub fn values(&self) -> &HeaderValues {
        &self.values
    }

    /// Weight against a tier's byte budget: the body, the metadata and a fixed overhead, so
    /// that many tiny objects cannot exceed the budget unnoticed.
    pub fn weight(&self, key: &str) -> u64 {
        const OVERHEAD: u64 = 256;
        let meta = self.meta.content_type.len()
            + self.meta.etag.len()
            + self.meta.last_modified.as_ref().map_or(0, String::len)
            + self.meta.cache_control.as_ref().map_or(0, String::len);
        self.body.len() as u64 + (meta + key.len()) as u64 + OVERHEAD
    }

    /// Whether it is still fresh at `now_ms`.
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        now_ms < self.meta.fresh_until_ms
    }

    /// Whether, stale at `now_ms`, it may still stand in for an origin that fails.
    pub fn within_stale_window(&self, now_ms: u64, stale_if_error_ms: u64) -> bool {
        now_ms < self.meta.fresh_until_ms.saturating_add(stale_if_error_ms)
    }

    /// Whole seconds since it was stored (the `Age` header).
    pub fn age_s(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.meta.stored_at_ms) / 1_000
    }
}

/// A strong entity tag made from the body, for origins that send none: the first 16 bytes of
/// its SHA-256, so equal bodies get equal tags on every edge node.
pub fn etag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let mut tag = String::with_capacity(36);
    tag.push_str("\"g-");
    for b in &digest[..16] {
        tag.push_str(&format!("{b:02x}"));
    }
    tag.push('"');
    tag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_etags_are_quoted_strong_and_follow_the_body() {
        let a = etag_of(b"creative");
        assert!(
            a.starts_with("\"g-") && a.ends_with('"') && a.len() == 36,
            "{a}"
        );
        assert_eq!(a, etag_of(b"creative"));
        assert_ne!(a, etag_of(b"creative2"));
    }

    #[test]
    fn freshness_and_the_stale_window_are_half_open() {
        let o = Object::new(
            Meta {
                content_type: "image/png".into(),
                etag: "\"x\"".into(),
                last_modified: None,
                cache_control: None,
                stored_at_ms: 1_000,
                fresh_until_ms: 5_000,
            },
            Bytes::from_static(b"png"),
        );
        assert!(o.is_fresh(4_999));
        assert!(!o.is_fresh(5_000));
        assert!(o.within_stale_window(5_999, 1_000));
        assert!(!o.within_stale_window(6_000, 1_000));
        assert_eq!(o.age_s(3_999), 2);
        assert!(o.weight("k") > 3);
    }
}
