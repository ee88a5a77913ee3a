//! `[cache]`: each winning bid's markup stored in a Prebid-Cache-compatible store (`gavel edge`,
//! or Prebid Cache itself) before the answer goes out, and the id and URL put in the bid's
//! `ext.prebid.cache`, where Prebid.js and video players look for them.
//!
//! | markup | put | in the bid |
//! | --- | --- | --- |
//! | VAST (starts with `<VAST` or `<?xml`) | `xml`, the markup | `ext.prebid.cache.vastXml` `{url, cacheId}` |
//! | anything else | `json`, the whole bid | `ext.prebid.cache.bids` `{url, cacheId}` |
//!
//! One POST per auction carries every winner's put, over a capped keep-alive pool. The store is
//! given what is left of the deadline's margin, at most `timeout_ms`: a store that is slow,
//! down or answers nonsense costs the auction nothing but the counted failure, and the bids go
//! out without `ext.prebid.cache`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use openrtb::RawJson;
use serde::Deserialize;

use crate::cache_config::CacheConfig;
use serde_json::{Value, json};

use crate::config::Endpoint;
use crate::outcome::CacheOutcome;
use crate::settle::Won;
use upstream::pool::{BidderPool, CallError, PoolLimits};

/// Largest answer read from the store.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The store as the auction path uses it.
#[derive(Debug)]
pub struct MarkupCache {
    pool: Arc<BidderPool>,
    public_url: String,
    timeout: Duration,
    ttl_s: u64,
}

/// Which kind of put a winner's markup makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutKind {
    Vast,
    Bid,
}

impl PutKind {
    /// VAST goes as XML; everything else as the whole bid in JSON, as Prebid Server does.
    pub fn of(adm: &str) -> PutKind {
        let start = adm.trim_start();
        if start.starts_with("<VAST") || start.starts_with("<?xml") {
            PutKind::Vast
        } else {
            PutKind::Bid
        }
    }
}

#[derive(Deserialize)]
struct PutAnswer {
    responses: Vec<PutId>,
}

#[derive(Deserialize)]
struct PutId {
    uuid: String,
}

impl MarkupCache {
    /// The cache of a checked `[cache]` section, with its endpoint resolved at load.
    pub fn new(
        config: &CacheConfig,
        endpoint: Endpoint,
        key: Option<&settings::Secret>,
    ) -> MarkupCache {
        // A late answer is drained for up to a second so its connection is kept.
        let limits = PoolLimits {
            max_connections: config.max_connections,
            max_response_bytes: MAX_ANSWER_BYTES,
            drain: Duration::from_secs(1),
        };
        let mut pool = BidderPool::new(endpoint, limits, Arc::default());
        if let Some(key) = key.map(|k| String::from_utf8_lossy(k.expose()).into_owned()) {
            pool = pool.authorized(&key);
        }
        MarkupCache {
            pool: Arc::new(pool),
            public_url: config
                .public_url
                .clone()
                .unwrap_or_else(|| config.url.clone()),
            timeout: Duration::from_millis(config.timeout_ms),
            ttl_s: config.ttl_s,
        }
    }

    /// Stores the markup of every winner that has some, waiting until `by` at the latest, and
    /// marks the winners stored. One outcome per auction that had markup to store (`None`: it
    /// had none).
    pub async fn store(&self, won: &mut [Won], by: Instant) -> Option<CacheOutcome> {
        let by = by.min(Instant::now() + self.timeout);
        let mut puts = Vec::new();
        let mut kinds = Vec::new();
        for (i, w) in won.iter().enumerate() {
            let Some(adm) = w.bid.adm.as_deref() else {
                continue;
            };
            let kind = PutKind::of(adm);
            let value = match kind {
                PutKind::Vast => json!(adm),
                PutKind::Bid => match serde_json::to_value(&w.bid) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
            };
            let kind_name = if kind == PutKind::Vast { "xml" } else { "json" };
            puts.push(json!({ "type": kind_name, "value": value, "ttlseconds": self.ttl_s }));
            kinds.push((i, kind));
        }
        if puts.is_empty() {
            return None;
        }
        let body = Bytes::from(json!({ "puts": puts }).to_string());
        let mut call = match self.pool.start(body) {
            Ok(call) => call,
            Err(_) => return Some(CacheOutcome::PoolFull),
        };
        let answer = match tokio::time::timeout_at(by.into(), &mut call).await {
            Err(_) => {
                call.detach(by);
                return Some(CacheOutcome::Timeout);
            }
            Ok(Err(CallError::PoolExhausted(_))) => return Some(CacheOutcome::PoolFull),
            Ok(Err(_)) => return Some(CacheOutcome::Failed),
            Ok(Ok(answer)) => answer,
        };
        let ids = match serde_json::from_slice::<PutAnswer>(&answer.body) {
            Ok(a) if answer.status.is_success() && a.responses.len() == kinds.len() => a.responses,
            _ => return Some(CacheOutcome::Refused),
        };
        for ((i, kind), id) in kinds.into_iter().zip(ids) {
            let Some(w) = won.get_mut(i) else { continue };
            let url = format!("{}?uuid={}", self.public_url, id.uuid);
            if let Some(ext) = with_cache(w.bid.ext.as_ref(), kind, &url, &id.uuid) {
                w.bid.ext = Some(ext);
            }
        }
        Some(CacheOutcome::Stored)
    }
}

/// The bid's `ext` with `prebid.cache.{vastXml|bids} = {url, cacheId}` added, other members of
/// `ext` and of `ext.prebid` kept. `None` when `ext` is not an object (it is then left alone).
pub fn with_cache(ext: Option<&RawJson>, kind: PutKind, url: &str, id: &str) -> Option<RawJson> {
    let mut prebid = match ext {
        None => Value::Object(Default::default()),
        Some(raw) => {
            let parsed: Value = serde_json::from_str(raw.get()).ok()?;
            parsed.get("prebid").cloned().unwrap_or_else(|| json!({}))
        }
    };
    let slot = match kind {
        PutKind::Vast => "vastXml",
        PutKind::Bid => "bids",
    };
    let prebid_map = prebid.as_object_mut()?;
    let cache = prebid_map.entry("cache").or_insert_with(|| json!({}));
    cache
        .as_object_mut()?
        .insert(slot.to_owned(), json!({ "url": url, "cacheId": id }));
    RawJson::with_field(ext, "prebid", prebid).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vast_is_told_from_other_markup() {
        assert_eq!(PutKind::of("  <VAST version=\"4.2\">"), PutKind::Vast);
        assert_eq!(PutKind::of("<?xml version=\"1.0\"?><VAST/>"), PutKind::Vast);
        assert_eq!(PutKind::of("<div>ad</div>"), PutKind::Bid);
        assert_eq!(PutKind::of("{\"native\":{}}"), PutKind::Bid);
    }

    #[test]
    fn the_cache_member_joins_what_ext_and_ext_prebid_already_hold() {
        let ext: RawJson =
            serde_json::from_str(r#"{"origbidprice":1.5,"prebid":{"type":"video"}}"#).expect("raw");
        let out =
            with_cache(Some(&ext), PutKind::Vast, "http://e/cache?uuid=u1", "u1").expect("object");
        let v: Value = serde_json::from_str(out.get()).expect("json");
        assert_eq!(v["origbidprice"], json!(1.5));
        assert_eq!(v["prebid"]["type"], json!("video"));
        assert_eq!(
            v["prebid"]["cache"]["vastXml"],
            json!({"url": "http://e/cache?uuid=u1", "cacheId": "u1"})
        );
        let fresh = with_cache(None, PutKind::Bid, "u", "i").expect("object");
        assert_eq!(
            fresh.get(),
            r#"{"prebid":{"cache":{"bids":{"cacheId":"i","url":"u"}}}}"#
        );
        let odd: RawJson = serde_json::from_str("[1]").expect("raw");
        assert!(with_cache(Some(&odd), PutKind::Bid, "u", "i").is_none());
        let odd_prebid: RawJson = serde_json::from_str(r#"{"prebid":3}"#).expect("raw");
        assert!(with_cache(Some(&odd_prebid), PutKind::Bid, "u", "i").is_none());
    }
}
