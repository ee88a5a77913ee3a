//! One fill: the work behind a flight, run in its own task. It reads the disk tier, then asks
//! the origin (with the stale copy's validators, so an unchanged object costs a 304), streams
//! the answer into the flight, and stores the object in the tiers its policy names. When the
//! origin fails, a stale copy within `stale_if_error_s` answers instead; otherwise the failure
//! is remembered for `negative_ttl_s`.
//!
//! The flight lands (leaves the map of flights) only after the object is stored, so a client
//! arriving at any moment either joins the flight or finds the object in a tier: never a
//! second fetch.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::assets::Assets;
use crate::disk::DiskRead;
use crate::flight::{Failure, Flight, Landing, Source, Start, StreamHead};
use crate::freshness::{Freshness, freshness};
use crate::metrics::Fetch;
use crate::object::{Meta, Object, etag_of};
use crate::origin::{Fetched, Origin, Validators};
use crate::policy::place;

/// A fill to run.
#[derive(Debug)]
pub struct Fill {
    pub assets: Arc<Assets>,
    pub key: String,
    pub origin: Arc<Origin>,
    /// The path (and query) under the origin's prefix.
    pub path: String,
    /// The memory tier's expired copy, if it had one.
    pub stale: Option<Arc<Object>>,
    pub flight: Arc<Flight>,
}

impl Fill {
    /// Runs the fill to its end, then lands its flight: whatever happened, a panic included,
    /// a fill that published nothing fails its herd ([`Landing`]).
    pub async fn run(self) {
        {
            let _landing = Landing {
                flights: &self.assets.flights,
                key: &self.key,
                flight: &self.flight,
            };
            self.fill().await;
        }
        self.assets.common.metrics.herd(self.flight.clients());
    }

    async fn fill(&self) {
        let assets = &self.assets;
        let metrics = &assets.common.metrics;
        let now = assets.clock.now_ms();
        let mut stale = self.stale.clone().map(|o| (o, Source::StaleMemory));
        if let Some(disk) = &assets.disk
            && let DiskRead::Found(object) = disk.get(&self.key, metrics).await
        {
            if object.is_fresh(now) {
                if self.placement(&object).memory {
                    assets
                        .memory
                        .insert(&self.key, object.clone(), &metrics.memory);
                }
                self.flight.start(Start::Ready(object, Source::Disk));
                return;
            }
            // The newer of the two stale copies stands in if the origin fails.
            if stale
                .as_ref()
                .is_none_or(|(s, _)| s.meta.stored_at_ms < object.meta.stored_at_ms)
            {
                stale = Some((object, Source::StaleDisk));
            }
        }
        if let Some(failure) = assets.negative.get(&self.key, now) {
            // A recent failure: do not ask again yet.
            return self.fall_back(stale, failure, false);
        }
        let validators = stale
            .as_ref()
            .map_or_else(Validators::default, |(o, _)| Validators {
                etag: (!o.meta.etag.starts_with("\"g-")).then(|| o.meta.etag.clone()),
                last_modified: o.meta.last_modified.clone(),
            });
        let fetched = match self.origin.get(&self.path, &validators).await {
            Ok(f) => f,
            Err(why) => {
                self.origin.stats.fetched(why);
                return self.fall_back(stale, Failure::Origin(why), true);
            }
        };
        match fetched.head.status {
            StatusCode::OK => self.stream(fetched).await,
            StatusCode::NOT_MODIFIED if stale.is_some() => {
                if let Some((old, _)) = stale {
                    self.revalidated(fetched, &old).await;
                }
            }
            status @ (StatusCode::NOT_FOUND | StatusCode::GONE) => {
                self.origin.stats.fetched(Fetch::NotFound);
                self.remember(Failure::Missing(status));
                self.flight.start(Start::Failed {
                    failure: Failure::Missing(status),
                    remembered: false,
                });
            }
            _ => {
                self.origin.stats.fetched(Fetch::ErrorStatus);
                self.fall_back(stale, Failure::Origin(Fetch::ErrorStatus), true);
            }
        }
    }

    /// Streams a 200 into the flight, then stores it.
    async fn stream(&self, mut fetched: Fetched) {
        let assets = &self.assets;
        let metrics = &assets.common.metrics;
        let headers = &fetched.head.headers;
        let length = text(headers, header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
        if length.is_some_and(|n| n > assets.max_object_bytes) {
            self.origin.stats.fetched(Fetch::TooLarge);
            self.remember(Failure::TooLarge);
            self.flight.start(Start::Failed {
                failure: Failure::TooLarge,
                remembered: false,
            });
            return;
        }
        let now = assets.clock.now_ms();
        let lifetime_ms = self.lifetime_ms(headers, None, now);
        let value = |name| headers.get(name).cloned();
        let head = Arc::new(StreamHead {
            content_type: value(header::CONTENT_TYPE)
                .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream")),
            content_length: length,
            etag: value(header::ETAG),
            last_modified: value(header::LAST_MODIFIED),
            cache_control: value(header::CACHE_CONTROL),
        });
        self.flight.start(Start::Streaming(head.clone()));
        let mut received = 0u64;
        loop {
            match fetched.chunk().await {
                Ok(Some(chunk)) => {
                    received += chunk.len() as u64;
                    metrics.bytes_from_origin.add(chunk.len() as u64);
                    if received > assets.max_object_bytes {
                        self.origin.stats.fetched(Fetch::TooLarge);
                        self.remember(Failure::TooLarge);
                        self.flight.end(false);
                        return;
                    }
                    self.flight.push(chunk);
                }
                Ok(None) => break,
                Err(why) => {
                    self.origin.stats.fetched(why);
                    self.flight.end(false);
                    return;
                }
            }
        }
        self.origin.stats.fetched(Fetch::Ok);
        assets.negative.clear(&self.key);
        self.flight.end(true);
        if lifetime_ms == 0 {
            metrics.not_stored.inc();
            return;
        }
        let body = self.flight.body();
        // Origin values that are not text (obs-text) are not stored; the object then goes
        // without them, as it would through the checks of `Object::new`.
        let owned =
            |v: &Option<HeaderValue>| v.as_ref().and_then(|v| v.to_str().ok()).map(str::to_owned);
        let meta = Meta {
            content_type: head
                .content_type
                .to_str()
                .unwrap_or("application/octet-stream")
                .to_owned(),
            etag: owned(&head.etag).unwrap_or_else(|| etag_of(&body)),
            last_modified: owned(&head.last_modified),
            cache_control: owned(&head.cache_control),
            stored_at_ms: now,
            fresh_until_ms: now.saturating_add(lifetime_ms),
        };
        self.store(Arc::new(Object::new(meta, body))).await;
    }

    /// A 304 for the stale copy: it is fresh again, with the lifetime the 304 gives.
    async fn revalidated(&self, mut fetched: Fetched, old: &Arc<Object>) {
        let assets = &self.assets;
        // Reads the (empty) body so the connection goes back to the pool.
        let _ = fetched.chunk().await;
        self.origin.stats.fetched(Fetch::NotModified);
        let headers = &fetched.head.headers;
        let now = assets.clock.now_ms();
        // A 304 that says nothing of caching keeps the stored copy's `Cache-Control`.
        let ttl_ms = self.lifetime_ms(headers, old.meta.cache_control.as_deref(), now);
        let mut meta = old.meta.clone();
        meta.stored_at_ms = now;
        meta.fresh_until_ms = now.saturating_add(ttl_ms);
        if let Some(cc) = text(headers, header::CACHE_CONTROL) {
            meta.cache_control = Some(cc.to_owned());
        }
        let object = Arc::new(Object::new(meta, old.body.clone()));
        assets.negative.clear(&self.key);
        self.flight
            .start(Start::Ready(object.clone(), Source::Revalidated));
        if ttl_ms > 0 {
            self.store(object).await;
        }
    }

    /// The origin failed: a stale copy within its window answers, or the herd gets the failure.
    /// `remember` is false when the failure was itself remembered.
    fn fall_back(&self, stale: Option<(Arc<Object>, Source)>, failure: Failure, remember: bool) {
        if remember {
            self.remember(failure);
        }
        let now = self.assets.clock.now_ms();
        match stale {
            Some((object, source))
                if object.within_stale_window(now, self.assets.stale_if_error_ms) =>
            {
                self.flight.start(Start::Ready(object, source));
            }
            _ => self.flight.start(Start::Failed {
                failure,
                remembered: !remember,
            }),
        }
    }

    fn remember(&self, failure: Failure) {
        let assets = &self.assets;
        if assets.negative_ttl_ms > 0 {
            let now = assets.clock.now_ms();
            assets
                .negative
                .insert(&self.key, failure, now + assets.negative_ttl_ms, now);
        }
    }

    /// How long an answer with these headers stays fresh from `now_ms`, within the configured
    /// bounds; 0 when it may not be stored. `cache_control` stands in when the answer has none.
    fn lifetime_ms(&self, headers: &HeaderMap, cache_control: Option<&str>, now_ms: u64) -> u64 {
        let lifetime = freshness(
            text(headers, header::CACHE_CONTROL).or(cache_control),
            text(headers, header::EXPIRES),
            text(headers, header::DATE),
            UNIX_EPOCH + Duration::from_millis(now_ms),
            self.assets.ttl,
        );
        match lifetime {
            Freshness::Store(ttl) => u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            Freshness::NoStore => 0,
        }
    }

    fn placement(&self, object: &Object) -> crate::policy::Placement {
        place(
            object.body.len() as u64,
            &object.meta.content_type,
            &self.assets.memory_rule,
            self.assets.disk_rule.as_ref(),
        )
    }

    /// Stores a complete object in the tiers its policy names.
    async fn store(&self, object: Arc<Object>) {
        let assets = &self.assets;
        let metrics = &assets.common.metrics;
        let placement = self.placement(&object);
        if placement.nowhere() {
            metrics.not_stored.inc();
            return;
        }
        if placement.memory {
            assets
                .memory
                .insert(&self.key, object.clone(), &metrics.memory);
        }
        if placement.disk
            && let Some(disk) = &assets.disk
        {
            disk.put(&self.key, &object, metrics).await;
        }
    }
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
