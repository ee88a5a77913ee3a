//! The journal's metrics, one set per server (`gavel_exchange_records_*`,
//! `gavel_bidder_records_*`), declared once with `telemetry`'s primitives and rendered into the
//! server's `/metrics`.

use std::sync::OnceLock;

use telemetry::{Counter, Counters, Gauge, Render};

use crate::Server;
use crate::nats::NatsHandle;

telemetry::labelled_counters! {
    /// Why a record was not written: `queue_full`, the request path outran the writer (a slow
    /// or failing sink); `sink_error`, the sink refused the batch (disk full, an I/O error,
    /// NATS and its spill away); `encode_error`, never expected (the types always encode);
    /// `shutdown`, queued after the writer closed or still queued at the shutdown deadline.
    DropReason {
        QueueFull => "queue_full",
        SinkError => "sink_error",
        Encode => "encode_error",
        Shutdown => "shutdown",
    }
}

telemetry::labelled_counters! {
    /// Why a completed record file was removed: past `records.max_total_mb` (the oldest first)
    /// or `records.max_age_days`.
    RemovalReason {
        Size => "size",
        Age => "age",
    }
}

/// Every journal metric of one server.
#[derive(Debug)]
pub struct Metrics {
    pub written: Counter,
    pub dropped: Counters<DropReason>,
    /// Set when rendered, from the queue itself.
    pub queue_depth: Gauge,
    /// Encoded bytes written (the newline between records not counted).
    pub bytes: Counter,
    pub files_completed: Counter,
    /// File sink: completed files removed by retention.
    pub files_removed: Counters<RemovalReason>,
    /// Records spilled to disk while the NATS server was away, replayed from the spill since,
    /// and the bytes waiting in it (read from the NATS sink when rendered; zero for others).
    pub spilled: Counter,
    pub replayed: Counter,
    pub spill_bytes: Gauge,
    nats: OnceLock<NatsHandle>,
}

/// The names of one server's families, in `Metrics` field order.
struct Names {
    written: &'static str,
    dropped: &'static str,
    queue_depth: &'static str,
    bytes: &'static str,
    files_completed: &'static str,
    files_removed: &'static str,
    spilled: &'static str,
    replayed: &'static str,
    spill_bytes: &'static str,
}

const EXCHANGE: Names = Names {
    written: "gavel_exchange_records_written_total",
    dropped: "gavel_exchange_records_dropped_total",
    queue_depth: "gavel_exchange_records_queue_depth",
    bytes: "gavel_exchange_record_bytes_total",
    files_completed: "gavel_exchange_record_files_completed_total",
    files_removed: "gavel_exchange_record_files_removed_total",
    spilled: "gavel_exchange_records_spilled_total",
    replayed: "gavel_exchange_records_replayed_total",
    spill_bytes: "gavel_exchange_records_spill_bytes",
};

const BIDDER: Names = Names {
    written: "gavel_bidder_records_written_total",
    dropped: "gavel_bidder_records_dropped_total",
    queue_depth: "gavel_bidder_records_queue_depth",
    bytes: "gavel_bidder_record_bytes_total",
    files_completed: "gavel_bidder_record_files_completed_total",
    files_removed: "gavel_bidder_record_files_removed_total",
    spilled: "gavel_bidder_records_spilled_total",
    replayed: "gavel_bidder_records_replayed_total",
    spill_bytes: "gavel_bidder_records_spill_bytes",
};

impl Metrics {
    pub fn new(server: Server) -> Metrics {
        let n = match server {
            Server::Exchange => EXCHANGE,
            Server::Bidder => BIDDER,
        };
        Metrics {
            written: Counter::new(
                n.written,
                "Records written to the sink (kept: on disk, or acknowledged by NATS or spilled).",
            ),
            dropped: Counters::new(
                n.dropped,
                "Records not written, by reason; queue_full means the request path outran the writer.",
                "reason",
            ),
            queue_depth: Gauge::new(n.queue_depth, "Records waiting to be written."),
            bytes: Counter::new(n.bytes, "Encoded bytes of the records written."),
            files_completed: Counter::new(
                n.files_completed,
                "Record files completed (compressed, never written again).",
            ),
            files_removed: Counters::new(
                n.files_removed,
                "Completed record files removed by retention: past records.max_total_mb (the oldest first) or records.max_age_days.",
                "reason",
            ),
            spilled: Counter::new(
                n.spilled,
                "Records spilled to disk while the NATS server was away or slow to acknowledge.",
            ),
            replayed: Counter::new(
                n.replayed,
                "Records published from the spill once the NATS server was back.",
            ),
            spill_bytes: Gauge::new(n.spill_bytes, "Bytes in the spill waiting to be replayed."),
            nats: OnceLock::new(),
        }
    }

    /// The NATS sink these metrics report the spill of.
    pub(crate) fn watch_nats(&self, handle: NatsHandle) {
        let _ = self.nats.set(handle);
    }

    /// Every family, in the order `/metrics` shows them.
    pub fn render(&self, out: &mut String) {
        for metric in [
            &self.written as &dyn Render,
            &self.dropped,
            &self.queue_depth,
            &self.bytes,
            &self.files_completed,
            &self.files_removed,
        ] {
            metric.render(out);
        }
        // Rendered whatever the sink (zero but for NATS), so that alerts and dashboards find
        // the same families on every server.
        if let Some(nats) = self.nats.get() {
            let stats = nats.stats();
            self.spilled.set(stats.spilled);
            self.replayed.set(stats.replayed);
            self.spill_bytes.set(stats.spill_bytes);
        }
        for metric in [
            &self.spilled as &dyn Render,
            &self.replayed,
            &self.spill_bytes,
        ] {
            metric.render(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_renders_its_own_families() {
        for (server, other) in [
            (Server::Exchange, "gavel_bidder_"),
            (Server::Bidder, "gavel_exchange_"),
        ] {
            let m = Metrics::new(server);
            m.dropped.inc(DropReason::SinkError);
            let mut out = String::new();
            m.render(&mut out);
            let s = server.name();
            for family in [
                format!("gavel_{s}_records_written_total counter"),
                format!("gavel_{s}_records_dropped_total counter"),
                format!("gavel_{s}_records_queue_depth gauge"),
                format!("gavel_{s}_record_bytes_total counter"),
                format!("gavel_{s}_record_files_completed_total counter"),
            ] {
                assert!(
                    out.contains(&format!("# TYPE {family}\n")),
                    "{family}\n{out}"
                );
            }
            assert!(out.contains(&format!(
                "gavel_{s}_records_dropped_total{{reason=\"sink_error\"}} 1\n"
            )));
            assert!(!out.contains(other), "{out}");
        }
    }
}
