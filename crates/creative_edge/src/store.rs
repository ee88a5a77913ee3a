//! The markup store: ad markup and VAST kept for a while under a random id, with the API of
//! Prebid Cache, so Prebid Server, Prebid.js and video players use it unchanged.
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /cache` `{"puts":[{"type":"xml"\|"json","value":...,"ttlseconds":N}]}` | `{"responses":[{"uuid":"..."}]}`, one per put, in order |
//! | `GET /cache?uuid=ID` | the value: XML as `application/xml`, JSON as `application/json`; 404 once expired |
//!
//! A request is stored whole or not at all: one bad put refuses it with 400 naming the put.
//! `ttlseconds` above the maximum is cut to it, as Prebid Cache does; a negative one is refused.
//! Custom keys (`"key"`) are refused: ids are the store's, so one caller cannot overwrite
//! another's markup. Each writer's entries live in its own share of the byte budget
//! (`writers.rs` says who may put); beyond its share a writer's own least recently used
//! entries go, never another's.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rand::RngExt;
use rand::rngs::StdRng;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::config::StoreSection;
use crate::lru::Lru;
use crate::metrics::{Metrics, Store as Op};

/// A stored value.
#[derive(Debug)]
struct Entry {
    content_type: &'static str,
    value: Bytes,
    expires_ms: u64,
}

/// One writer's share of the budget.
#[derive(Debug)]
struct Share {
    /// The writer's name (`anonymous` for puts without a key).
    name: String,
    entries: Mutex<Lru<Arc<Entry>>>,
    /// Bytes and entries held, for the metrics (written under the lock, read without).
    bytes: std::sync::atomic::AtomicU64,
    count: std::sync::atomic::AtomicU64,
}

/// The store.
#[derive(Debug)]
pub struct MarkupStore {
    /// Index-aligned with `StoreSection::budgets`: the writers', then the anonymous share.
    shares: Vec<Share>,
    limits: StoreSection,
    /// Ids must be unguessable (they are the only key to a stored value): a CSPRNG seeded
    /// by the system.
    ids: Mutex<StdRng>,
}

/// Why a put request was refused (400); the message names the put and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PutError(pub String);

#[derive(Deserialize)]
struct PutRequest<'a> {
    #[serde(borrow)]
    puts: Vec<Put<'a>>,
}

#[derive(Deserialize)]
struct Put<'a> {
    #[serde(rename = "type")]
    kind: Option<&'a str>,
    #[serde(borrow)]
    value: Option<&'a RawValue>,
    ttlseconds: Option<i64>,
    #[serde(borrow)]
    key: Option<&'a RawValue>,
}

impl MarkupStore {
    /// An empty store within `limits`.
    pub fn new(limits: StoreSection) -> MarkupStore {
        let names = limits
            .writers
            .iter()
            .map(|w| w.name.clone())
            .chain(std::iter::once("anonymous".to_owned()));
        let shares = names
            .zip(limits.budgets())
            .map(|(name, budget)| Share {
                name,
                entries: Mutex::new(Lru::new(budget)),
                bytes: std::sync::atomic::AtomicU64::new(0),
                count: std::sync::atomic::AtomicU64::new(0),
            })
            .collect();
        MarkupStore {
            shares,
            limits,
            ids: Mutex::new(rand::make_rng::<StdRng>()),
        }
    }

    /// Stores every put of a request body in share `share` (`Writers::share_of`), at
    /// `now_ms`; the ids in order.
    ///
    /// # Errors
    /// The first put at fault, or the body's shape.
    pub fn put(
        &self,
        body: &[u8],
        share: usize,
        now_ms: u64,
        metrics: &Metrics,
    ) -> Result<Vec<String>, PutError> {
        let refuse = |why: String| {
            metrics.store.inc(Op::Refused);
            PutError(why)
        };
        let request: PutRequest<'_> = serde_json::from_slice(body)
            .map_err(|e| refuse(format!("body is not {{\"puts\":[...]}}: {e}")))?;
        if request.puts.is_empty() {
            return Err(refuse("puts: must hold at least one entry".into()));
        }
        if request.puts.len() > self.limits.max_puts {
            return Err(refuse(format!(
                "puts: {} entries; the limit is {}",
                request.puts.len(),
                self.limits.max_puts
            )));
        }
        let mut ready = Vec::with_capacity(request.puts.len());
        for (i, put) in request.puts.iter().enumerate() {
            ready.push(
                self.entry(put, now_ms)
                    .map_err(|why| refuse(format!("puts[{i}].{why}")))?,
            );
        }
        let mut ids = Vec::with_capacity(ready.len());
        let mut rng = telemetry::locks::lock(&self.ids);
        let fresh: Vec<String> = ready.iter().map(|_| new_id(&mut rng)).collect();
        drop(rng);
        let Some(share) = self.shares.get(share) else {
            return Err(PutError("store unavailable".into()));
        };
        let mut entries = telemetry::locks::lock(&share.entries);
        let mut evicted = Vec::new();
        for (entry, id) in ready.into_iter().zip(fresh) {
            let weight = entry.value.len() as u64 + 96;
            evicted.extend(entries.insert(id.clone(), Arc::new(entry), weight));
            ids.push(id);
        }
        share.bytes.store(entries.weight(), Relaxed);
        share.count.store(entries.len() as u64, Relaxed);
        drop(entries);
        self.publish(metrics);
        metrics.store.add(Op::Stored, ids.len() as u64);
        metrics.store.add(Op::Evicted, evicted.len() as u64);
        Ok(ids)
    }

    fn entry(&self, put: &Put<'_>, now_ms: u64) -> Result<Entry, String> {
        if put.key.is_some() {
            return Err("key: custom keys are not accepted; the store names entries".into());
        }
        let raw = put.value.ok_or("value: missing")?;
        let (content_type, value) = match put.kind {
            Some("xml") => {
                let text: String = serde_json::from_str(raw.get())
                    .map_err(|_| "value: an xml put's value must be a JSON string")?;
                if text.trim().is_empty() {
                    return Err("value: empty".into());
                }
                ("application/xml", Bytes::from(text))
            }
            Some("json") => (
                "application/json",
                Bytes::copy_from_slice(raw.get().as_bytes()),
            ),
            Some(other) => return Err(format!("type: {other:?} is not \"xml\" or \"json\"")),
            None => return Err("type: missing (\"xml\" or \"json\")".into()),
        };
        if value.len() > self.limits.max_value_bytes {
            return Err(format!(
                "value: {} bytes; the limit is {}",
                value.len(),
                self.limits.max_value_bytes
            ));
        }
        let ttl_s = match put.ttlseconds {
            None | Some(0) => self.limits.default_ttl_s,
            Some(n) if n < 0 => return Err("ttlseconds: must not be negative".into()),
            Some(n) => (n as u64).min(self.limits.max_ttl_s),
        };
        Ok(Entry {
            content_type,
            value,
            expires_ms: now_ms.saturating_add(ttl_s * 1_000),
        })
    }

    /// The value stored under `id` at `now_ms`, with its content type, from whichever share
    /// holds it.
    pub fn get(&self, id: &str, now_ms: u64, metrics: &Metrics) -> Option<(&'static str, Bytes)> {
        let found = self.shares.iter().find_map(|share| {
            let mut entries = telemetry::locks::lock(&share.entries);
            let entry = entries.get(id)?.clone();
            if entry.expires_ms <= now_ms {
                entries.remove(id);
                share.bytes.store(entries.weight(), Relaxed);
                share.count.store(entries.len() as u64, Relaxed);
                drop(entries);
                self.publish(metrics);
                return None;
            }
            Some(entry)
        });
        let op = if found.is_some() {
            Op::Found
        } else {
            Op::NotFound
        };
        metrics.store.inc(op);
        found.map(|e| (e.content_type, e.value.clone()))
    }
}

impl MarkupStore {
    /// The totals over every share, for `gavel_edge_store_bytes` and `_entries`.
    fn publish(&self, metrics: &Metrics) {
        let (bytes, count) = self.shares.iter().fold((0, 0), |(b, c), s| {
            (b + s.bytes.load(Relaxed), c + s.count.load(Relaxed))
        });
        metrics.store_bytes.set(bytes);
        metrics.store_entries.set(count);
    }

    /// Each share's name, budget and bytes held now: `gavel_edge_store_share_bytes{writer}`.
    pub fn shares(&self) -> Vec<(String, u64, u64)> {
        self.shares
            .iter()
            .zip(self.limits.budgets())
            .map(|(s, budget)| (s.name.clone(), budget, s.bytes.load(Relaxed)))
            .collect()
    }
}

/// A random (version 4) UUID, as Prebid Cache makes them.
fn new_id(rng: &mut StdRng) -> String {
    let mut n: u128 = rng.random();
    n = (n & !(0xF << 76)) | (0x4 << 76);
    n = (n & !(0x3 << 62)) | (0x2 << 62);
    let hex = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Whether `id` has the shape of an id this store makes (checked before any lookup).
pub fn is_id(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    /// A store whose whole budget is the anonymous share ([`ANON`]).
    fn store() -> MarkupStore {
        MarkupStore::new(StoreSection {
            max_bytes: 10_000,
            max_value_bytes: 1_000,
            max_puts: 3,
            default_ttl_s: 60,
            max_ttl_s: 600,
            anonymous_puts: true,
            anonymous_share: 1.0,
            ..StoreSection::default()
        })
    }

    const ANON: usize = 0;

    #[test]
    fn xml_and_json_puts_read_back_with_their_types_until_they_expire() {
        let (s, m) = (store(), Metrics::default());
        let body = br#"{"puts":[{"type":"xml","value":"<VAST version=\"4.2\"></VAST>","ttlseconds":5},{"type":"json","value":{"adm":"<div/>","w":300}}]}"#;
        let ids = s.put(body, ANON, 1_000, &m).expect("stored");
        assert_eq!(ids.len(), 2);
        assert!(ids.iter().all(|id| is_id(id)), "{ids:?}");
        assert_ne!(ids[0], ids[1]);
        let (ct, v) = s.get(&ids[0], 5_999, &m).expect("fresh");
        assert_eq!(
            (ct, &v[..]),
            ("application/xml", &b"<VAST version=\"4.2\"></VAST>"[..])
        );
        let (ct, v) = s.get(&ids[1], 60_999, &m).expect("default ttl");
        assert_eq!(
            (ct, &v[..]),
            ("application/json", &br#"{"adm":"<div/>","w":300}"#[..])
        );
        assert!(s.get(&ids[0], 6_000, &m).is_none(), "expired at its ttl");
        assert!(s.get(&ids[1], 61_000, &m).is_none());
    }

    #[test]
    fn ttls_above_the_maximum_are_cut_to_it() {
        let (s, m) = (store(), Metrics::default());
        let ids = s
            .put(
                br#"{"puts":[{"type":"xml","value":"<a/>","ttlseconds":99999}]}"#,
                ANON,
                0,
                &m,
            )
            .expect("stored");
        assert!(s.get(&ids[0], 599_999, &m).is_some());
        assert!(s.get(&ids[0], 600_000, &m).is_none());
    }

    #[test]
    fn a_bad_put_refuses_the_whole_request_naming_the_put() {
        let (s, m) = (store(), Metrics::default());
        for (body, want) in [
            (r#"{"puts":[]}"#, "puts: must hold"),
            (
                r#"{"puts":[{"type":"xml","value":"<a/>"},{"type":"xml","value":"<a/>"},{"type":"xml","value":"<a/>"},{"type":"xml","value":"<a/>"}]}"#,
                "puts: 4 entries",
            ),
            (
                r#"{"puts":[{"type":"xml","value":"<a/>"},{"type":"html","value":"x"}]}"#,
                "puts[1].type",
            ),
            (r#"{"puts":[{"value":"x"}]}"#, "puts[0].type"),
            (r#"{"puts":[{"type":"xml"}]}"#, "puts[0].value: missing"),
            (
                r#"{"puts":[{"type":"xml","value":{"a":1}}]}"#,
                "puts[0].value: an xml",
            ),
            (
                r#"{"puts":[{"type":"xml","value":"<a/>","ttlseconds":-1}]}"#,
                "puts[0].ttlseconds",
            ),
            (
                r#"{"puts":[{"type":"xml","value":"<a/>","key":"mine"}]}"#,
                "puts[0].key",
            ),
            (r#"{"puts":"no"}"#, "body is not"),
            ("not json", "body is not"),
        ] {
            let e = s.put(body.as_bytes(), ANON, 0, &m).expect_err(body);
            assert!(e.0.starts_with(want), "{body}: {e}");
        }
        let big = format!(
            r#"{{"puts":[{{"type":"xml","value":"{}"}}]}}"#,
            "x".repeat(1_001)
        );
        assert!(
            s.put(big.as_bytes(), ANON, 0, &m)
                .expect_err("big")
                .0
                .contains("the limit is 1000")
        );
        assert_eq!(
            m.store_entries.get(),
            0,
            "nothing of a refused request is kept"
        );
    }

    #[test]
    fn beyond_the_byte_budget_the_oldest_entries_go() {
        let (s, m) = (store(), Metrics::default());
        let put = format!(
            r#"{{"puts":[{{"type":"xml","value":"{}"}}]}}"#,
            "x".repeat(900)
        );
        let first = s.put(put.as_bytes(), ANON, 0, &m).expect("stored");
        for _ in 0..12 {
            s.put(put.as_bytes(), ANON, 0, &m).expect("stored");
        }
        assert!(s.get(&first[0], 0, &m).is_none());
        assert!(m.store.get(Op::Evicted) > 0);
        assert!(m.store_bytes.get() <= 10_000);
    }

    #[test]
    fn ids_are_version_4_uuids() {
        let id = new_id(&mut StdRng::seed_from_u64(19));
        assert!(is_id(&id), "{id}");
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        for bad in [
            "",
            "x",
            &"a".repeat(36),
            "../../../../../../../../../etc/pass",
        ] {
            assert!(!is_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_flood_into_one_share_evicts_nothing_of_another() {
        use crate::config::WriterConfig;
        let writer = |name: &str, share: f64| WriterConfig {
            name: name.into(),
            key_file: None,
            key_env: None,
            share: Some(share),
            max_puts_per_s: 0,
            max_bytes_per_s: 0,
        };
        let s = MarkupStore::new(StoreSection {
            max_bytes: 10_000,
            max_value_bytes: 1_000,
            writers: vec![writer("exchange", 0.5)],
            anonymous_puts: true,
            anonymous_share: 0.5,
            ..StoreSection::default()
        });
        let m = Metrics::default();
        let vast = r#"{"puts":[{"type":"xml","value":"<VAST/>","ttlseconds":3600}]}"#;
        let kept = s.put(vast.as_bytes(), 0, 0, &m).expect("stored");
        let flood = format!(
            r#"{{"puts":[{{"type":"xml","value":"{}"}}]}}"#,
            "x".repeat(900)
        );
        for _ in 0..100 {
            s.put(flood.as_bytes(), 1, 0, &m).expect("stored");
        }
        assert!(
            s.get(&kept[0], 1_000, &m).is_some(),
            "the exchange's VAST survives"
        );
        let shares = s.shares();
        assert_eq!(shares[0].0, "exchange");
        assert_eq!(shares[1].0, "anonymous");
        assert!(
            shares[1].2 <= shares[1].1 && shares[1].1 == 5_000,
            "{shares:?}"
        );
        assert_eq!(m.store_bytes.get(), shares[0].2 + shares[1].2);
    }
}
