//! The journal's metrics, one set per server (`gavel_exchange_records_*`,
//! `gavel_bidder_records_*`), declared once with `telemetry`'s primitives and rendered into the
//! server's `/metrics`.

use telemetry::{Counter, Counters, Gauge, Render};

use crate::Server;

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
}

/// The names of one server's families, in `Metrics` field order.
struct Names {
    written: &'static str,
    dropped: &'static str,
    queue_depth: &'static str,
    bytes: &'static str,
    files_completed: &'static str,
}

const EXCHANGE: Names = Names {
    written: "gavel_exchange_records_written_total",
    dropped: "gavel_exchange_records_dropped_total",
    queue_depth: "gavel_exchange_records_queue_depth",
    bytes: "gavel_exchange_record_bytes_total",
    files_completed: "gavel_exchange_record_files_completed_total",
};

const BIDDER: Names = Names {
    written: "gavel_bidder_records_written_total",
    dropped: "gavel_bidder_records_dropped_total",
    queue_depth: "gavel_bidder_records_queue_depth",
    bytes: "gavel_bidder_record_bytes_total",
    files_completed: "gavel_bidder_record_files_completed_total",
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
        }
    }

    /// Every family, in the order `/metrics` shows them.
    pub fn render(&self, out: &mut String) {
        for metric in [
            &self.written as &dyn Render,
            &self.dropped,
            &self.queue_depth,
            &self.bytes,
            &self.files_completed,
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
