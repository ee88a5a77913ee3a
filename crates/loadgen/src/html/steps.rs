//! The rate-steps table of the HTML report: one row per step, so the knee of the curve is
//! visible at a glance.

use std::fmt::Write as _;

use super::{esc, fmt_num, ms_or_dash};
use crate::Report;

/// Writes the table when the run had rate steps; nothing otherwise.
pub(super) fn steps_table(out: &mut String, r: &Report) {
    if r.phases.is_empty() {
        return;
    }
    out.push_str("<h2>Rate steps</h2>\n<table><thead><tr>");
    for h in [
        "from s",
        "offered/s",
        "achieved/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "2xx %",
    ] {
        let _ = write!(out, "<th scope=\"col\" class=\"n\">{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for p in &r.phases {
        let pct = |q: f64| ms_or_dash((!p.latency.is_empty()).then(|| p.percentile_ms(q)));
        let _ = write!(
            out,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            fmt_num(p.start.as_secs_f64()),
            fmt_num(p.rate_offered),
            fmt_num((p.rate_achieved() * 10.0).round() / 10.0),
            pct(50.0),
            pct(99.0),
            pct(99.9),
            pct(100.0),
            fmt_num((p.success_share() * 10_000.0).round() / 100.0),
        );
    }
    out.push_str("</tbody></table>\n");
}
