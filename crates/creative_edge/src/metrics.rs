//! The edge's counters and their Prometheus text (`GET /metrics`). Labels are bounded: tiers
//! and outcomes are fixed lists, origins come from the configuration.

use telemetry::{Counter, Counters, Gauge, Render, labelled_counters, render_each};

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

/// One tier's figures; each a family over both tiers, labelled `tier`.
#[derive(Debug)]
pub struct TierStats {
    pub bytes: Gauge,
    pub objects: Gauge,
    pub inserts: Counter,
    pub evictions: Counter,
}

impl Default for TierStats {
    fn default() -> TierStats {
        TierStats {
            bytes: Gauge::new(
                "gavel_edge_tier_bytes",
                "Bytes held by each tier, counted against its budget.",
            ),
            objects: Gauge::new("gavel_edge_tier_objects", "Objects held by each tier."),
            inserts: Counter::new(
                "gavel_edge_tier_inserts_total",
                "Objects stored in each tier.",
            ),
            evictions: Counter::new(
                "gavel_edge_tier_evictions_total",
                "Objects evicted from each tier to keep it within its byte budget.",
            ),
        }
    }
}

impl TierStats {
    const FAMILIES: [fn(&TierStats) -> &dyn Render; 4] = [
        |t| &t.bytes,
        |t| &t.objects,
        |t| &t.inserts,
        |t| &t.evictions,
    ];
}

/// Every metric of the edge except the origins' (kept by each origin) and the connections',
/// each declared once (name, help, label key) as a `telemetry` family.
#[derive(Debug)]
pub struct Metrics {
    pub served: Counters<Served>,
    pub memory: TierStats,
    pub disk: TierStats,
    /// Disk entries refused on read (checksum, truncation, wrong key) and deleted.
    pub disk_corrupt: Counter,
    pub disk_write_failures: Counter,
    /// Fills run (one origin or disk read each) and the clients they served in total.
    pub fills: Counter,
    pub fill_clients: Counter,
    pub largest_herd: Gauge,
    /// Objects fetched but stored in no tier (policy, `no-store`, too big for every tier).
    pub not_stored: Counter,
    pub bytes_served: Counter,
    pub bytes_from_origin: Counter,
    pub store_bytes: Gauge,
    pub store_entries: Gauge,
    pub store: Counters<Store>,
    pub store_puts_refused: Counters<PutRefused>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            served: Counters::new(
                "gavel_edge_asset_requests_total",
                "Asset requests by how they were answered.",
                "result",
            ),
            memory: TierStats::default(),
            disk: TierStats::default(),
            disk_corrupt: Counter::new(
                "gavel_edge_disk_corrupt_total",
                "Disk entries that failed their checksum or shape on read, deleted and fetched again.",
            ),
            disk_write_failures: Counter::new(
                "gavel_edge_disk_write_failures_total",
                "Disk writes that failed (the object stays served from the fill and memory).",
            ),
            fills: Counter::new(
                "gavel_edge_fills_total",
                "Fills run: one disk read or origin fetch for every herd of clients that missed.",
            ),
            fill_clients: Counter::new(
                "gavel_edge_fill_clients_total",
                "Clients served by fills; divided by fills, the mean herd size.",
            ),
            largest_herd: Gauge::new(
                "gavel_edge_fill_largest_herd",
                "The most clients one fill has served.",
            ),
            not_stored: Counter::new(
                "gavel_edge_not_stored_total",
                "Objects fetched and passed on but stored in no tier (policy, no-store, size).",
            ),
            bytes_served: Counter::new(
                "gavel_edge_bytes_served_total",
                "Body bytes sent to clients.",
            ),
            bytes_from_origin: Counter::new(
                "gavel_edge_bytes_from_origin_total",
                "Body bytes received from origins.",
            ),
            store_bytes: Gauge::new("gavel_edge_store_bytes", "Bytes held by the markup store."),
            store_entries: Gauge::new(
                "gavel_edge_store_entries",
                "Entries held by the markup store.",
            ),
            store: Counters::new(
                "gavel_edge_store_operations_total",
                "Markup store puts and gets by outcome, and its evictions.",
                "outcome",
            ),
            store_puts_refused: Counters::new(
                "gavel_edge_store_puts_refused_total",
                "Put requests refused before the store: no writer key, an unknown key, a client over its rate.",
                "reason",
            ),
        }
    }
}

impl Metrics {
    /// Counts one asset answer.
    pub fn served(&self, how: Served) {
        self.served.inc(how);
    }

    /// Records the size of a herd once its fill is over.
    pub fn herd(&self, clients: u64) {
        self.fills.inc();
        self.fill_clients.add(clients);
        self.largest_herd.raise_to(clients);
    }

    /// Appends everything as `gavel_edge_*`.
    pub fn render(&self, out: &mut String) {
        self.served.render(out);
        let tiers = [("memory", &self.memory), ("disk", &self.disk)];
        render_each(
            out,
            "tier",
            &TierStats::default(),
            tiers.into_iter(),
            &TierStats::FAMILIES,
        );
        for metric in [
            &self.disk_corrupt as &dyn Render,
            &self.disk_write_failures,
            &self.fills,
            &self.fill_clients,
            &self.largest_herd,
            &self.not_stored,
            &self.bytes_served,
            &self.bytes_from_origin,
            &self.store_bytes,
            &self.store_entries,
            &self.store,
            &self.store_puts_refused,
        ] {
            metric.render(out);
        }
    }
}

/// One origin's fetch counters; each a family over every origin, labelled `origin`.
#[derive(Debug)]
pub struct OriginStats {
    pub fetches: Counters<Fetch>,
    pub connections_opened: Counter,
}

impl Default for OriginStats {
    fn default() -> OriginStats {
        OriginStats {
            fetches: Counters::new(
                "gavel_edge_origin_fetches_total",
                "Origin fetches by origin and outcome.",
                "outcome",
            ),
            connections_opened: Counter::new(
                "gavel_edge_origin_connections_opened_total",
                "Connections opened to each origin.",
            ),
        }
    }
}

impl OriginStats {
    /// The families, in the order `/metrics` shows them.
    pub const FAMILIES: [fn(&OriginStats) -> &dyn Render; 2] =
        [|o| &o.fetches, |o| &o.connections_opened];

    /// Counts one fetch's end.
    pub fn fetched(&self, how: Fetch) {
        self.fetches.inc(how);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_and_origins_render_as_labelled_families() {
        let m = Metrics::default();
        m.disk.inserts.add(2);
        m.herd(3);
        m.herd(2);
        let mut out = String::new();
        m.render(&mut out);
        assert!(
            out.contains("gavel_edge_tier_inserts_total{tier=\"disk\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("gavel_edge_tier_inserts_total{tier=\"memory\"} 0\n"));
        assert!(out.contains("gavel_edge_fill_largest_herd 3\n"));
        assert!(out.contains("gavel_edge_fill_clients_total 5\n"));
        assert_eq!(out.matches("# TYPE gavel_edge_tier_bytes gauge").count(), 1);
        let origin = OriginStats::default();
        origin.fetched(Fetch::Timeout);
        let mut out = String::new();
        render_each(
            &mut out,
            "origin",
            &OriginStats::default(),
            [("cdn", &origin)].into_iter(),
            &OriginStats::FAMILIES,
        );
        assert!(
            out.contains("gavel_edge_origin_fetches_total{origin=\"cdn\",outcome=\"timeout\"} 1\n")
        );
    }
}
