//! The edge's counters and their Prometheus text (`GET /metrics`). Labels are bounded: tiers
//! and outcomes are fixed lists, origins come from the configuration.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use telemetry::{ByLabel, family, labelled_counters, sample, single};

labelled_counters! {
    /// How an asset request was answered: from a tier; stale because the origin failed;
    /// `revalidated` (a stale copy the origin confirmed with 304); `miss` (streamed from a
    /// fill this client started or joined); `negative` (a failure remembered); `origin_error`
    /// (404/410 passed on, or 502/504); `too_large` (over `max_object_bytes`).
    Served {
        HitMemory => "hit_memory",
        HitDisk => "hit_disk",
        StaleMemory => "stale_memory",
        StaleDisk => "stale_disk",
        Revalidated => "revalidated",
        Miss => "miss",
        Negative => "negative",
        OriginError => "origin_error",
        TooLarge => "too_large",
    }
}

labelled_counters! {
    /// How one origin fetch ended.
    Fetch {
        Ok => "ok",
        NotModified => "not_modified",
        NotFound => "not_found",
        ErrorStatus => "error_status",
        ConnectFailed => "connect_failed",
        Timeout => "timeout",
        PoolFull => "pool_full",
        BrokenBody => "broken_body",
        TooLarge => "too_large",
    }
}

labelled_counters! {
    /// Outcomes of the markup store's puts and gets.
    Store {
        Stored => "stored",
        Refused => "refused",
        Found => "found",
        NotFound => "not_found",
        Evicted => "evicted",
    }
}

labelled_counters! {
    /// Why a put request was refused before the store saw it (`writers.rs`).
    PutRefused {
        NoKey => "no_key",
        UnknownKey => "unknown_key",
        RateLimited => "rate_limited",
    }
}

/// One tier's counters.
#[derive(Debug, Default)]
pub struct TierStats {
    pub bytes: AtomicU64,
    pub objects: AtomicU64,
    pub evictions: AtomicU64,
    pub inserts: AtomicU64,
}

/// Every counter of the edge except the origins' (kept by each origin) and the connections'.
#[derive(Debug, Default)]
pub struct Metrics {
    pub served: ByLabel<{ Served::COUNT }>,
    pub memory: TierStats,
    pub disk: TierStats,
    /// Disk entries refused on read (checksum, truncation, wrong key) and deleted.
    pub disk_corrupt: AtomicU64,
    pub disk_write_failures: AtomicU64,
    /// Fills started (one origin or disk read each) and the clients they served in total.
    pub fills: AtomicU64,
    pub fill_clients: AtomicU64,
    pub largest_herd: AtomicU64,
    /// Objects fetched but stored in no tier (policy, `no-store`, too big for every tier).
    pub not_stored: AtomicU64,
    pub bytes_served: AtomicU64,
    pub bytes_from_origin: AtomicU64,
    pub store: ByLabel<{ Store::COUNT }>,
    pub store_puts_refused: ByLabel<{ PutRefused::COUNT }>,
    pub store_bytes: AtomicU64,
    pub store_entries: AtomicU64,
}

impl Metrics {
    /// Counts one asset answer.
    pub fn served(&self, how: Served) {
        self.served.inc(how as usize);
    }

    /// Records the size of a herd once its fill is over.
    pub fn herd(&self, clients: u64) {
        self.fills.fetch_add(1, Relaxed);
        self.fill_clients.fetch_add(clients, Relaxed);
        self.largest_herd.fetch_max(clients, Relaxed);
    }

    /// Appends everything as `gavel_edge_*`.
    pub fn render(&self, out: &mut String) {
        let name = "gavel_edge_asset_requests_total";
        family(
            out,
            name,
            "counter",
            "Asset requests by how they were answered.",
        );
        for s in Served::ALL {
            sample(
                out,
                name,
                &[("result", s.label())],
                self.served.get(*s as usize),
            );
        }
        for (metric, kind, help, pick) in [
            (
                "gavel_edge_tier_bytes",
                "gauge",
                "Bytes held by each tier, counted against its budget.",
                (|t: &TierStats| t.bytes.load(Relaxed)) as fn(&TierStats) -> u64,
            ),
            (
                "gavel_edge_tier_objects",
                "gauge",
                "Objects held by each tier.",
                |t| t.objects.load(Relaxed),
            ),
            (
                "gavel_edge_tier_inserts_total",
                "counter",
                "Objects stored in each tier.",
                |t| t.inserts.load(Relaxed),
            ),
            (
                "gavel_edge_tier_evictions_total",
                "counter",
                "Objects evicted from each tier to keep it within its byte budget.",
                |t| t.evictions.load(Relaxed),
            ),
        ] {
            family(out, metric, kind, help);
            sample(out, metric, &[("tier", "memory")], pick(&self.memory));
            sample(out, metric, &[("tier", "disk")], pick(&self.disk));
        }
        let load = |c: &AtomicU64| c.load(Relaxed);
        for (metric, kind, help, value) in [
            (
                "gavel_edge_disk_corrupt_total",
                "counter",
                "Disk entries that failed their checksum or shape on read, deleted and fetched again.",
                load(&self.disk_corrupt),
            ),
            (
                "gavel_edge_disk_write_failures_total",
                "counter",
                "Disk writes that failed (the object stays served from the fill and memory).",
                load(&self.disk_write_failures),
            ),
            (
                "gavel_edge_fills_total",
                "counter",
                "Fills run: one disk read or origin fetch for every herd of clients that missed.",
                load(&self.fills),
            ),
            (
                "gavel_edge_fill_clients_total",
                "counter",
                "Clients served by fills; divided by fills, the mean herd size.",
                load(&self.fill_clients),
            ),
            (
                "gavel_edge_fill_largest_herd",
                "gauge",
                "The most clients one fill has served.",
                load(&self.largest_herd),
            ),
            (
                "gavel_edge_not_stored_total",
                "counter",
                "Objects fetched and passed on but stored in no tier (policy, no-store, size).",
                load(&self.not_stored),
            ),
            (
                "gavel_edge_bytes_served_total",
                "counter",
                "Body bytes sent to clients.",
                load(&self.bytes_served),
            ),
            (
                "gavel_edge_bytes_from_origin_total",
                "counter",
                "Body bytes received from origins.",
                load(&self.bytes_from_origin),
            ),
            (
                "gavel_edge_store_bytes",
                "gauge",
                "Bytes held by the markup store.",
                load(&self.store_bytes),
            ),
            (
                "gavel_edge_store_entries",
                "gauge",
                "Entries held by the markup store.",
                load(&self.store_entries),
            ),
        ] {
            single(out, metric, kind, help, value);
        }
        let name = "gavel_edge_store_operations_total";
        family(
            out,
            name,
            "counter",
            "Markup store puts and gets by outcome, and its evictions.",
        );
        for s in Store::ALL {
            sample(
                out,
                name,
                &[("outcome", s.label())],
                self.store.get(*s as usize),
            );
        }
        let name = "gavel_edge_store_puts_refused_total";
        family(
            out,
            name,
            "counter",
            "Put requests refused before the store: no writer key, an unknown key, a client over its rate.",
        );
        for r in PutRefused::ALL {
            sample(
                out,
                name,
                &[("reason", r.label())],
                self.store_puts_refused.get(*r as usize),
            );
        }
    }
}

/// The origin families' names, written once by the caller over every origin.
pub const ORIGIN_FETCHES: &str = "gavel_edge_origin_fetches_total";
pub const ORIGIN_CONNECTIONS: &str = "gavel_edge_origin_connections_opened_total";

/// One origin's fetch counters.
#[derive(Debug, Default)]
pub struct OriginStats {
    pub fetches: ByLabel<{ Fetch::COUNT }>,
    pub connections_opened: AtomicU64,
}

impl OriginStats {
    /// Appends this origin's fetch samples; the caller writes the family once for all origins.
    pub fn render_fetches(&self, origin: &str, out: &mut String) {
        for f in Fetch::ALL {
            sample(
                out,
                ORIGIN_FETCHES,
                &[("origin", origin), ("outcome", f.label())],
                self.fetches.get(*f as usize),
            );
        }
    }

    /// Appends this origin's connection count; the caller writes the family.
    pub fn render_connections(&self, origin: &str, out: &mut String) {
        sample(
            out,
            ORIGIN_CONNECTIONS,
            &[("origin", origin)],
            self.connections_opened.load(Relaxed),
        );
    }

    /// Counts one fetch's end.
    pub fn fetched(&self, how: Fetch) {
        self.fetches.inc(how as usize);
    }
}
