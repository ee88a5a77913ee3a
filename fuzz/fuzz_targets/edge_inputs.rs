//! The creative edge's parsers of client and origin input: `Range`, `If-None-Match`,
//! `If-Range`, `Cache-Control`/`Expires`, a Prebid Cache put request, and a disk record.
//! Never a panic; and:
//! - a partial range lies inside the object (`first <= last < len`);
//! - `*` matches any entity tag, and every tag matches itself;
//! - a stored lifetime is positive and never above the maximum;
//! - an accepted put request stores one entry per put, each readable until its TTL;
//! - a record either decodes for its key or is refused; what `encode` writes always decodes.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use creative_edge::conditional::{self, RangeAnswer};
use creative_edge::config::StoreSection;
use creative_edge::freshness::{Freshness, TtlBounds, freshness};
use creative_edge::object::{Meta, Object};
use creative_edge::{Metrics, record, store::MarkupStore};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let len = data.len() as u64;
    if let RangeAnswer::Partial { first, last } = conditional::range(&text, len) {
        assert!(first <= last && last < len, "{text:?} over {len}: {first}-{last}");
    }
    // An entity tag of the characters origins use (RFC 9110 etagc, without the comma that
    // would split a list).
    let opaque: String = text.chars().filter(|c| ('!'..='~').contains(c) && !matches!(c, '"' | ',')).collect();
    let tag = format!("\"{opaque}\"");
    assert!(conditional::none_match("*", &tag));
    assert!(conditional::none_match(&tag, &tag));
    let _ = conditional::if_range_holds(&text, &tag, Some(&text));

    let bounds = TtlBounds { default: Duration::from_secs(300), max: Duration::from_secs(3_600) };
    let now = UNIX_EPOCH + Duration::from_secs(1_795_564_800);
    let (cc, expires) = text.split_once('\n').unwrap_or((&text, ""));
    if let Freshness::Store(ttl) = freshness(Some(cc), Some(expires), Some(expires), now, bounds) {
        assert!(!ttl.is_zero() && ttl <= bounds.max, "{ttl:?}");
    }

    // The whole budget as the anonymous share (index 0 without writers).
    let store = MarkupStore::new(StoreSection {
        anonymous_puts: true,
        anonymous_share: 1.0,
        ..StoreSection::default()
    });
    let metrics = Metrics::default();
    if let Ok(ids) = store.put(data, 0, 0, &metrics) {
        assert!(!ids.is_empty());
        for id in &ids {
            assert!(store.get(id, 0, &metrics).is_some(), "stored {id} is not there");
        }
    }

    let _ = record::decode(Bytes::copy_from_slice(data), "cdn/x");
    let object = Object::new(
        Meta {
            content_type: text.chars().take(40).collect(),
            etag: tag.clone(),
            last_modified: None,
            cache_control: Some(text.to_string()),
            stored_at_ms: len,
            fresh_until_ms: len * 2,
        },
        Bytes::copy_from_slice(data),
    );
    let written = Bytes::from(record::encode(&text, &object));
    assert_eq!(record::decode(written, &text).as_ref(), Ok(&object));
});
