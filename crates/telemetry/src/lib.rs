//! Metric primitives shared by Gavel's servers: lock-free counters and a fixed-bucket latency
//! histogram, rendered in the Prometheus text format. Label sets are bounded by construction:
//! outcomes are enums declared with [`labelled_counters!`], never strings from a request.
//! [`metric`] declares a metric once (name, help, label key) and renders it generically.

pub mod locks;
pub mod metric;

#[doc(hidden)]
pub use serde as __serde;

pub use metric::{Counter, Counters, Counters2, Gauge, Label, Latency, Render, Tally, render_each};

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram buckets: fine below 10 ms where a fast
/// auction lives, coarse up to the largest deadline.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0,
];

/// A fixed-bucket latency histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Appends the histogram in the Prometheus text format.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}"
            );
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Declares an enum of outcomes with a bounded metric label per variant, `ALL` and `COUNT`, and
/// implements [`Label`] for it.
#[macro_export]
macro_rules! labelled_counters {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $label:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant,)* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            // For arrays of counters; an enum counted through `Counters` needs none.
            #[allow(dead_code)]
            pub const COUNT: usize = [$($label,)*].len();
            pub fn label(self) -> &'static str {
                match self { $($name::$variant => $label,)* }
            }
        }

        // Serialized as its label: the value a record holds is the one the metrics show.
        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.label())
            }
        }

        impl $crate::Label for $name {
            fn all() -> &'static [$name] {
                $name::ALL
            }
            fn label(self) -> &'static str {
                $name::label(self)
            }
            fn index(self) -> usize {
                self as usize
            }
        }
    };
}

/// Writes the `# HELP` and `# TYPE` lines of a metric family.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Writes a family of one unlabelled sample: its `# HELP` and `# TYPE` lines, then the value.
pub fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    family(out, name, kind, help);
    sample(out, name, &[], value);
}

/// Writes one sample, `name{k="v",...} value`; label values are bounded strings from code.
pub fn sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{v}\"");
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value from outside the code (a campaign id from a file), escaped as the text format
/// requires: `\\`, `\"` and `\n`. Values from code need none and are passed as they are.
pub fn escape_label(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(7));
        h.observe(Duration::from_secs(5));
        let mut out = String::new();
        h.render(&mut out, "x", "");
        assert!(out.contains("x_bucket{le=\"0.0005\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.01\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count{} 3\n"), "{out}");
    }

    #[test]
    fn families_and_samples() {
        let mut out = String::new();
        family(&mut out, "x_total", "counter", "Things.");
        sample(&mut out, "x_total", &[("a", "1"), ("b", "2")], 7);
        sample(&mut out, "x_total", &[], 8);
        assert_eq!(
            out,
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"1\",b=\"2\"} 7\nx_total 8\n"
        );
        let mut out = String::new();
        single(&mut out, "y", "gauge", "One.", 1.5);
        assert_eq!(out, "# HELP y One.\n# TYPE y gauge\ny 1.5\n");
    }

    #[test]
    fn label_values_from_files_are_escaped() {
        assert_eq!(escape_label("plain-id_1"), "plain-id_1");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
